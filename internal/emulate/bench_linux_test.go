package emulate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// The benchmarks below measure the emulator end to end, as root:
//
//	go test -run '^$' -bench 'HostWakeup|DelayError' -benchtime 5000x -count 5 ./internal/emulate
//	go test -run '^$' -bench 'Rate|TCP' -benchtime 2s -count 3 ./internal/emulate
//	go test -run '^$' -bench RateLoaded -benchtime 90000x -count 5 ./internal/emulate
//
// The emulator runs as its own process in the router namespace, as in the
// lab. A UDP probe stream goes from namespace A through the router, where
// queue 0 delays it by benchDelay, to namespace B. Each probe carries its
// send time (taken just before sendmmsg); B's kernel stamps its receipt
// (SO_TIMESTAMPNS), so "err-p50-µs" and "err-p99-µs" are (one-way delay −
// benchDelay): the emulator's error plus the host's forwarding latency and
// the sender's batching (up to 64 probes share one send time). "late-*" are
// the emulator's own release lateness from its stats, "behind" is 1 when
// it reported falling behind (a release late beyond its tolerance, kernel
// queue drops, socket overruns), "kdrops" the kernel's drops of queued
// packets, and "emu-cpu-µs/pkt" the emulator process's CPU time (user and
// system, which includes the forwarding done inside its verdict calls) per
// packet: 1e6 divided by it is the rate one queue thread can hold at most.
//
// BenchmarkRate offers fixed packet rates; the sender, on the same host, is
// often the limit ("sent-pps"). On a host with stalls (BenchmarkHostWakeup
// shows them without the emulator) "behind" reports them too; kdrops and
// recv-% say whether the emulator lost anything.

const (
	benchDelay   = 20 * time.Millisecond
	probeBytes   = 64 // UDP payload: 92-byte IPv4 packets
	probeDrainTo = time.Second
)

// runProbe sends count probes from A to B at rate packets per second
// (SendFlow), timing the sending as the benchmark's op.
func runProbe(b *testing.B, n *testNet, rate float64, count int) FlowResult {
	b.Helper()
	return runFlow(b, benchFlow(n.A, n.B, testAddrB, rate, count, probeBytes), true)
}

// benchFlow is a flow through benchDelay whose receiver waits probeDrainTo
// beyond it for the last packets.
func benchFlow(from, to, toAddr string, rate float64, count, size int) Flow {
	return Flow{From: from, To: to, ToAddr: toAddr, Rate: rate, Count: count, PayloadBytes: size, Drain: benchDelay + probeDrainTo}
}

// runFlow runs one flow and fails the benchmark on an error. With timer,
// it resets the benchmark's timer when sending starts and stops it when
// sending ends.
func runFlow(b *testing.B, f Flow, timer bool) FlowResult {
	b.Helper()
	if timer {
		f.OnStart, f.OnSent = b.ResetTimer, b.StopTimer
	}
	res, err := SendFlow(f)
	if err != nil {
		b.Fatal(err)
	}
	return res
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[int(q*float64(len(d)-1)+0.5)]
}

// reportProbe reports the probe stream's and the emulator's figures.
func reportProbe(b *testing.B, r FlowResult, p processResult) {
	st := p.Stats
	b.Helper()
	slices.Sort(r.Delays)
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	b.ReportMetric(r.SentRate(), "sent-pps")
	b.ReportMetric(100*float64(r.Received)/float64(max(r.Sent, 1)), "recv-%")
	b.ReportMetric(us(quantile(r.Delays, 0.5)-benchDelay), "err-p50-µs")
	b.ReportMetric(us(quantile(r.Delays, 0.99)-benchDelay), "err-p99-µs")
	up := st.Queues[0]
	b.ReportMetric(us(up.LatenessMedian), "late-p50-µs")
	b.ReportMetric(us(up.LatenessP99), "late-p99-µs")
	b.ReportMetric(us(up.MaxLateness), "late-max-µs")
	if up.Released > 0 {
		b.ReportMetric(100*float64(up.Late)/float64(up.Released), "late-%")
	}
	b.ReportMetric(float64(up.Stalled), "stalled")
	behind := 0.0
	if up.Behind {
		behind = 1
	}
	b.ReportMetric(behind, "behind")
	b.ReportMetric(float64(up.KernelQueueDrops+up.KernelUserDropped), "kdrops")
	b.ReportMetric(float64(r.RcvbufDrops), "rcvbuf-drops")
	// The emulator's CPU time per packet bounds the rate one queue thread
	// can hold however quiet the host: 1e6 / µs-per-packet.
	if up.Received > 0 {
		b.ReportMetric(us(p.CPU)/float64(up.Received), "emu-cpu-µs/pkt")
	}
	if up.Behind {
		b.Logf("behind: late %d (tolerance %v, max %v), kernel queue drops %d, user drops %d, enobufs %d",
			up.Late, up.Tolerance, up.MaxLateness, up.KernelQueueDrops, up.KernelUserDropped, up.ENOBUFS)
	}
}

// benchNet builds the path and starts the emulator as its own process;
// stop ends it and returns its final stats.
func benchNet(b *testing.B) (n *testNet, stop func() processResult) {
	n = newTestNet(b)
	stop = startEmulatorProcess(b, n.R, Config{Queues: []QueueConfig{
		{Num: queueUp, Delay: benchDelay},
		{Num: queueDown},
	}}).stop
	return n, stop
}

// BenchmarkDelayError sends 1000 probes per second through benchDelay; one
// op is one probe.
func BenchmarkDelayError(b *testing.B) {
	n, stop := benchNet(b)
	r := runProbe(b, n, 1000, b.N)
	reportProbe(b, r, stop())
}

// BenchmarkRate offers fixed probe rates; one op is one probe.
func BenchmarkRate(b *testing.B) {
	for _, pps := range []float64{10e3, 25e3, 50e3, 100e3, 200e3} {
		b.Run(fmt.Sprintf("pps=%.0f", pps), func(b *testing.B) {
			n, stop := benchNet(b)
			r := runProbe(b, n, pps, b.N)
			reportProbe(b, r, stop())
		})
	}
}

// BenchmarkRateLoaded offers 9000 probes per second (the packet rate of a
// 100 Mbit/s path of full-size packets) while two busy processes keep
// both CPUs of a 2-CPU host occupied, as OpenVPN and iperf3 do in a lab
// run. late-% is the share of packets released beyond the tolerance (lab
// run refuses a sample above 1 %), stalled those more than StallLateness
// late. One op is one probe.
func BenchmarkRateLoaded(b *testing.B) {
	n, stop := benchNet(b)
	for range runtime.NumCPU() {
		hog := exec.Command("sh", "-c", "while :; do :; done")
		if err := hog.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { hog.Process.Kill(); hog.Wait() }()
	}
	r := runProbe(b, n, 9000, b.N)
	reportProbe(b, r, stop())
}

// BenchmarkTCP runs one iperf3 TCP stream for 5 s from A to B through 25 ms
// each way (no rate limit: the emulator, the host and TCP's window set the
// pace) and reports its throughput and whether the emulator kept up. One
// op is one iperf3 run.
func BenchmarkTCP(b *testing.B) {
	testenv.RequirePrograms(b, "iperf3")
	for _, loss := range []float64{0, 0.1} {
		b.Run(fmt.Sprintf("loss=%g%%", loss), func(b *testing.B) {
			for range b.N {
				n := newTestNet(b)
				stop := startEmulatorProcess(b, n.R, Config{Queues: []QueueConfig{
					{Num: queueUp, Delay: 25 * time.Millisecond, LossPercent: loss},
					{Num: queueDown, Delay: 25 * time.Millisecond},
				}}).stop
				ctx, cancel := context.WithCancel(context.Background())
				srv := runner.InNetns(ctx, n.B, "iperf3", "-s", "-1", "-B", testAddrB)
				if err := srv.Start(); err != nil {
					b.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond)
				out, err := runner.RunIn(ctx, n.A, "iperf3", "-c", testAddrB, "-t", "5", "-J")
				cancel()
				srv.Wait()
				if err != nil {
					b.Fatal(err)
				}
				var res struct {
					End struct {
						SumReceived struct {
							BitsPerSecond float64 `json:"bits_per_second"`
						} `json:"sum_received"`
						SumSent struct {
							Retransmits int `json:"retransmits"`
						} `json:"sum_sent"`
					} `json:"end"`
				}
				if err := json.Unmarshal(out, &res); err != nil {
					b.Fatal(err)
				}
				p := stop()
				behind := 0.0
				for _, q := range p.Queues {
					if q.Behind {
						behind = 1
						b.Logf("queue %d behind: late %d (max %v), kernel drops %d/%d, enobufs %d", q.Num, q.Late, q.MaxLateness, q.KernelQueueDrops, q.KernelUserDropped, q.ENOBUFS)
					}
				}
				b.ReportMetric(res.End.SumReceived.BitsPerSecond/1e6, "Mbit/s")
				b.ReportMetric(float64(res.End.SumSent.Retransmits), "retrans")
				b.ReportMetric(behind, "behind")
				b.ReportMetric(float64(p.Queues[0].Received), "up-pkts")
				b.ReportMetric(p.CPU.Seconds()*100/5, "emu-cpu-%")
			}
		})
	}
}

// BenchmarkHostWakeup is the control for the figures above: a thread set
// up exactly like a queue thread (locked, SCHED_FIFO, 1 µs timer slack,
// raw ppoll) sleeps 100 µs b.N times with no network work at all. Its
// oversleep is the host's own wake-up latency, a floor under the
// emulator's lateness; on a loaded VM its max shows stalls that no
// userspace emulator can hide.
func BenchmarkHostWakeup(b *testing.B) {
	testenv.RequireRoot(b)
	late := make([]time.Duration, 0, b.N)
	// The process's other threads at the same priority, as in the
	// emulator's own process (RunProcess): the runtime's
	// preemption of the sleeping thread then costs microseconds.
	rt := newRTThreads()
	defer rt.restore()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(timerSlack), 0, 0, 0)
		attr := queueAttr()
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			b.Error(err)
			return
		}
		const d = 100 * time.Microsecond
		for range b.N {
			ts := unix.NsecToTimespec(int64(d))
			t0 := monotime()
			// Raw, as the queue threads call it: through the runtime's
			// syscall path the figure would include sysmon's spin in
			// exitsyscall (rtprocess_linux.go), not only the host.
			rawPpoll(nil, &ts)
			late = append(late, time.Duration(monotime()-t0)-d)
		}
	}()
	rt.sweep()
	<-done
	slices.Sort(late)
	b.ReportMetric(float64(quantile(late, 0.5))/1e3, "late-p50-µs")
	b.ReportMetric(float64(quantile(late, 0.99))/1e3, "late-p99-µs")
	b.ReportMetric(float64(quantile(late, 1))/1e3, "late-max-µs")
}

// fullSizePayload makes 1400-byte IPv4 packets (20 bytes IP, 8 UDP).
const fullSizePayload = 1400 - 28

// BenchmarkRateBoth offers 1400-byte packets both ways at once, through
// benchDelay each way, at fixed rates per direction, and counts a release
// more than 1 ms late as late. One op is one packet each way.
//
// Per direction (the worse of the two where one figure is given):
// "up-sent-pps"/"down-sent-pps" what the senders managed, "recv-%",
// "late-p99-µs" (the emulator's release lateness), "late-%" (share of
// releases more than 1 ms late), "kdrops" (kernel queue drops and socket
// overruns), "reordered" (probes received after one sent later, within a
// direction), "msgs/pkt" (queue messages per packet: below 1 when the
// kernel hands aggregates over whole). "held" is 1 when both directions
// got every packet with no kernel drop, p99 lateness below 1 ms and at
// most 0.01 % of releases late, and the senders kept 98 % of the rate
// (Held, which `lab calibrate` judges by too).
// "emu-cpu-µs/pkt" is the emulator process's CPU time (user and system:
// the system part includes the kernel's forwarding of released packets,
// done inside the verdict call) per packet carried, both directions
// together; "host-cpu-µs/pkt" is the whole host's busy time (/proc/stat)
// per packet carried: senders, receivers, router and emulator.
// "emulator=none" runs the same path without the queue rules: the host's
// own cost and ceiling, which the emulator's add to. "emulator=afpacket"
// is the AF_PACKET data path on the wire topology (benchWireBoth),
// sending with sendmmsg, "emulator=afpacket-txring" the same sending
// through a TX ring, and "emulator=bridge" that topology with the
// kernel's bridge in W instead: the layer-2 path's host-alone floor.
// "emulator=afxdp" is the AF_XDP data path on the same topology (native
// XDP on the veth ports where the kernel has it), "emulator=afxdp-generic"
// the same with generic XDP, "emulator=afxdp-napi" native XDP with A's
// and B's ports receiving in a threaded NAPI as in a lab (benchXDPBoth).
// "gen-cpu-µs/pkt" is this process's CPU time per packet carried (the
// load generator's senders and receivers, with the kernel work done in
// their system calls), "host-busy-%" the share of all CPUs busy while
// the senders sent, "gen-behind-max" the most packets a sender was
// behind its schedule (FlowResult.MaxBehind) and then sent in a burst.
//
//	go test ./internal/emulate -run '^$' -bench RateBoth -benchtime 250000x -count 3
func BenchmarkRateBoth(b *testing.B) {
	for _, pps := range []float64{25e3, 50e3} {
		for _, mode := range []string{"nfqueue", "afxdp", "afxdp-napi", "afxdp-generic", "afpacket", "afpacket-txring", "none", "bridge"} {
			b.Run(fmt.Sprintf("pps=%.0f/emulator=%s", pps, mode), func(b *testing.B) {
				switch mode {
				case "afxdp":
					benchXDPBoth(b, pps, "", false)
					return
				case "afxdp-napi":
					benchXDPBoth(b, pps, "", true)
					return
				case "afxdp-generic":
					benchXDPBoth(b, pps, XDPModeGeneric, false)
					return
				case "afpacket", "bridge":
					benchWireBoth(b, pps, mode == "bridge", TXSendmmsg)
					return
				case "afpacket-txring":
					benchWireBoth(b, pps, false, TXRing)
					return
				}
				n := newTestNet(b)
				stop := func() processResult { return processResult{} }
				if mode == "none" {
					// The host alone: the same path without the queue rules,
					// the floor under what the emulator adds.
					for _, prog := range []string{"iptables", "ip6tables"} {
						if _, err := runner.Run(context.Background(), "ip", "netns", "exec", n.R, prog, "-F", "FORWARD"); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					stop = startEmulatorProcess(b, n.R, Config{Queues: []QueueConfig{
						{Num: queueUp, Delay: benchDelay, Tolerance: time.Millisecond},
						{Num: queueDown, Delay: benchDelay, Tolerance: time.Millisecond},
					}}).stop
				}
				up, down, load, p := bothWays(b, n.A, n.B, testAddrA, testAddrB, pps, stop)
				if mode != "none" && len(p.Queues) != 2 {
					b.Fatalf("emulator stats: %+v", p.Stats)
				}
				reportBoth(b, pps, [2]FlowResult{up, down}, p, load)
			})
		}
	}
}

// bothWays sends pps full-size packets each way at once, b.N in each
// direction, from namespace a to bAddr and from b's namespace nb to
// aAddr, then stops the emulator: the body of every BenchmarkRateBoth row.
func bothWays(b *testing.B, na, nb, aAddr, bAddr string, pps float64, stop func() processResult) (up, down FlowResult, load hostLoad, p processResult) {
	load0 := readHostLoad(b)
	var derr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		down, derr = SendFlow(benchFlow(nb, na, aAddr, pps, b.N, fullSizePayload))
	}()
	// The host's busy share while both senders run, apart from the
	// whole row's (which has the receivers' drain at its end).
	f := benchFlow(na, nb, bAddr, pps, b.N, fullSizePayload)
	var sendStart, sendEnd hostLoad
	f.OnStart = func() { b.ResetTimer(); sendStart = readHostLoad(b) }
	f.OnSent = func() { b.StopTimer(); sendEnd = readHostLoad(b) }
	up = runFlow(b, f, false)
	<-done
	load = readHostLoad(b).sub(load0)
	if s := sendEnd.sub(sendStart); s.wall > 0 {
		load.sendBusyPct = 100 * float64(s.busy) / float64(s.wall) / float64(runtime.NumCPU())
	}
	p = stop()
	if derr != nil {
		b.Fatal(derr)
	}
	return up, down, load, p
}

// hostLoad is where the CPU went while a BenchmarkRateBoth row ran: the
// whole host's busy time, the wall time, and this process's own CPU
// time (the load generator: senders and receivers, with the kernel work
// done inside their system calls); sendBusyPct is the host's busy share
// of its CPUs while the up sender sent.
type hostLoad struct {
	busy, wall, gen time.Duration
	sendBusyPct     float64
}

func readHostLoad(tb testing.TB) hostLoad {
	tb.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return hostLoad{
		busy: hostBusy(tb),
		wall: time.Duration(monotime()),
		gen:  time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
	}
}

func (l hostLoad) sub(o hostLoad) hostLoad {
	return hostLoad{busy: l.busy - o.busy, wall: l.wall - o.wall, gen: l.gen - o.gen}
}

func reportBoth(b *testing.B, pps float64, r [2]FlowResult, p processResult, load hostLoad) {
	b.Helper()
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	held := true
	var recvPct, lateP99, latePct, kdrops, reordered, msgs, carried, behind float64 = 100, 0, 0, 0, 0, 0, 0, 0
	for i := range r {
		var q QueueStats // zero without an emulator
		if i < len(p.Queues) {
			q = p.Queues[i]
		}
		sent := r[i].SentRate()
		b.ReportMetric(sent, []string{"up", "down"}[i]+"-sent-pps")
		recv := 100 * float64(r[i].Received) / float64(max(r[i].Sent, 1))
		late := 0.0
		if q.Released > 0 {
			late = 100 * float64(q.Late) / float64(q.Released)
		}
		drops := float64(q.KernelQueueDrops + q.KernelUserDropped + q.ENOBUFS)
		recvPct = min(recvPct, recv)
		lateP99 = max(lateP99, us(q.LatenessP99))
		latePct = max(latePct, late)
		kdrops += drops
		reordered += float64(r[i].Reordered)
		msgs += float64(q.Received)
		carried += float64(r[i].Received)
		// The same judgement as lab calibrate's (ceiling.go).
		ok, why := Held(OutcomeFromStats(r[i], q), pps)
		held = held && ok
		if ok {
			why = "held"
		}
		behind = max(behind, float64(r[i].MaxBehind))
		b.Logf("queue %d: %d probes sent at %.0f pps (at most %d behind), %d received, %d messages, late %d (max %v), p99 %v, kernel drops %d/%d, enobufs %d, reordered %d: %s",
			i, r[i].Sent, sent, r[i].MaxBehind, r[i].Received, q.Received, q.Late, q.MaxLateness, q.LatenessP99, q.KernelQueueDrops, q.KernelUserDropped, q.ENOBUFS, r[i].Reordered, why)
	}
	b.ReportMetric(recvPct, "recv-%")
	b.ReportMetric(lateP99, "late-p99-µs")
	b.ReportMetric(latePct, "late-%")
	b.ReportMetric(kdrops, "kdrops")
	b.ReportMetric(reordered, "reordered")
	if len(p.Queues) > 0 {
		b.ReportMetric(msgs/max(carried, 1), "msgs/pkt")
		b.ReportMetric(us(p.CPU)/max(carried, 1), "emu-cpu-µs/pkt")
	}
	b.ReportMetric(us(load.busy)/max(carried, 1), "host-cpu-µs/pkt")
	b.ReportMetric(us(load.gen)/max(carried, 1), "gen-cpu-µs/pkt")
	// How busy the host's CPUs were while the senders sent (100 % is
	// every CPU busy): near 100 the senders, receivers and emulator
	// compete for the CPUs, and the generator can fall short of the rate.
	b.ReportMetric(load.sendBusyPct, "host-busy-%")
	b.ReportMetric(behind, "gen-behind-max")
	v := 0.0
	if held {
		v = 1
	}
	b.ReportMetric(v, "held")
}

// hostBusy is the CPU time all CPUs of the host have spent busy (not idle,
// not waiting for I/O) since boot, from /proc/stat.
func hostBusy(tb testing.TB) time.Duration {
	tb.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		tb.Fatalf("/proc/stat: first line %q", line)
	}
	var ticks int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 7 { // idle, iowait; guest time is in user already
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			tb.Fatalf("/proc/stat: %q: %v", line, err)
		}
		ticks += n
	}
	// USER_HZ is 100 on Linux for every architecture Go supports here.
	return time.Duration(ticks) * 10 * time.Millisecond
}
