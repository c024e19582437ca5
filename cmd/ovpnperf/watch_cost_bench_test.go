package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/watch"
	"github.com/ovpnperf/ovpnperf/internal/watch/watchdoc"
)

// echoIPBytes is one ICMP echo request of `ping -c 1` (56 data bytes, 8
// of ICMP header, 20 of IPv4 header); its reply is as large.
const echoIPBytes = 84

// BenchmarkWatchCost measures what watch itself costs a host, and
// extrapolates it to an hour at the default --every 15m and
// --probe-interval 5s: its process's CPU time (its own and its waited-for
// children's: iperf3, ping, tcpdump; /proc/PID/stat through cpuacct) and
// the bytes it makes cross the path.
//
//	go test -run '^$' -bench WatchCost -benchtime 1x -timeout 20m ./cmd/ovpnperf
//
// watch runs for OVPNPERF_WATCH_COST_SECONDS (270) on a real tunnel across
// a 20 Mbit/s lab path with --every 90s (about three rounds of the default
// sample sizes) and --probe-interval 1s, and the benchmark reads its CPU
// time every 250 ms. An interval that overlaps a round (from its start to
// its end plus a second, as the history has them) is the round's; the
// others are the passive loop's. The hour is then
//
//	CPU   = 4 × (round CPU ÷ rounds) + 720 × (passive CPU ÷ passive probes)
//	bytes = 4 × (round bytes ÷ rounds) + 720 × 2 echoes × 84 bytes
//
// with the CPU counted up to the end of the last round the history holds;
// a passive probe is one second of passive time (one counter read and two
// echoes at --probe-interval 1s) and a round's bytes are the
// iperf3 bytes of its run document (each interval's rate × its length,
// the warm-up included), up (sent by this host) and down (sent to it).
// No Prometheus scrapes it here.
func BenchmarkWatchCost(b *testing.B) {
	testenv.Exclusive(b)
	total := 270 * time.Second
	if s, err := strconv.Atoi(os.Getenv("OVPNPERF_WATCH_COST_SECONDS")); err == nil && s >= 60 {
		total = time.Duration(s) * time.Second
	}
	for i := 0; i < b.N; i++ {
		mb := newMeasureBench(b, labpath.Path{Up: labpath.Link{RateBitsPerSec: 20e6}, Down: labpath.Link{RateBitsPerSec: 20e6}}, true, nil)
		hist := filepath.Join(b.TempDir(), "watch.jsonl")
		listen := netipPort(lab.ClientV4().String(), 9480)
		ctx, cancel := context.WithTimeout(context.Background(), total+5*time.Minute)
		w := exec.CommandContext(ctx, "ip", "netns", "exec", mb.lab.Namespace(lab.Client), binary, "watch", lab.ServerV4().String(),
			"--tunnel", mb.tun.ServerAddr.String(), "--listen", listen, "--every", "90s", "--probe-interval", "1s", "--history", hist)
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		load0, _ := hostinfo.LoadAvg()
		// `ip netns exec` execs watch in its own process: the pid is
		// watch's.
		type tick struct {
			at  time.Time
			cpu time.Duration
		}
		var ticks []tick
		start := time.Now()
		for time.Since(start) < total {
			t, err := cpuacct.Read(w.Process.Pid)
			if err != nil {
				b.Fatalf("watch's CPU time: %v", err)
			}
			ticks = append(ticks, tick{time.Now(), t.TotalWithChildren()})
			time.Sleep(250 * time.Millisecond)
		}
		w.Process.Signal(os.Interrupt)
		w.Wait()
		cancel()
		load1, _ := hostinfo.LoadAvg()
		data, err := os.ReadFile(hist)
		if err != nil {
			b.Fatal(err)
		}
		rounds, _, err := watchdoc.Read(data)
		if err != nil {
			b.Fatalf("history: %v", err)
		}
		var windows [][2]time.Time
		var roundBytesUp, roundBytesDown float64
		ran := 0
		for _, r := range rounds {
			if r.Result != watchdoc.ResultOK {
				continue
			}
			ran++
			windows = append(windows, [2]time.Time{r.Started, r.Started.Add(time.Duration((r.DurationSeconds + 1) * float64(time.Second)))})
			for _, row := range r.Run.Rows {
				for _, s := range row.Samples {
					for _, iv := range s.Intervals {
						n := iv.Bps / 8 * (iv.EndSeconds - iv.StartSeconds)
						if row.Direction == measure.DirectionUp {
							roundBytesUp += n
						} else {
							roundBytesDown += n
						}
					}
				}
			}
		}
		if ran < 2 {
			b.Fatalf("%d rounds measured in %v, want at least 2:\n%s", ran, total, data)
		}
		// Up to the end of the last recorded round: a round cut short by
		// the end is not in the history, and its CPU must not count as
		// passive.
		last := windows[len(windows)-1][1]
		var roundCPU, passiveCPU, passiveTime time.Duration
		for k := 1; k < len(ticks) && !ticks[k].at.After(last); k++ {
			a, z := ticks[k-1], ticks[k]
			inRound := false
			for _, win := range windows {
				inRound = inRound || a.at.Before(win[1]) && z.at.After(win[0])
			}
			if inRound {
				roundCPU += z.cpu - a.cpu
			} else {
				passiveCPU += z.cpu - a.cpu
				passiveTime += z.at.Sub(a.at)
			}
		}
		perRound := roundCPU.Seconds() / float64(ran)
		probes := passiveTime.Seconds() // --probe-interval 1s
		perProbe := passiveCPU.Seconds() / probes
		probesPerHour := float64(time.Hour / watch.DefaultProbeInterval)
		cpuHour := 4*perRound + probesPerHour*perProbe
		bytesRound := (roundBytesUp + roundBytesDown) / float64(ran)
		echoHour := probesPerHour * 2 * echoIPBytes
		b.ReportMetric(cpuHour, "cpu-s/h")
		b.ReportMetric((4*bytesRound+echoHour)/1e6, "MB/h")
		b.ReportMetric(perRound, "cpu-s/round")
		b.ReportMetric(perProbe*1e3, "cpu-ms/probe")
		b.ReportMetric(bytesRound/1e6, "MB/round")
		b.Logf("%d rounds measured in %v; rounds %.2f CPU-s each, %.1f MB each (up %.1f MB sent, down %.1f MB received); passive %.0f s at --probe-interval 1s, %.2f CPU-ms a probe; an hour at --every 15m: %.1f CPU-s (rounds %.1f, passive %.1f), %.0f MB (rounds %.0f, echoes %.2f MB each way); load %.2f → %.2f",
			ran, total, perRound, bytesRound/1e6, roundBytesUp/float64(ran)/1e6, roundBytesDown/float64(ran)/1e6, probes, perProbe*1e3,
			cpuHour, 4*perRound, probesPerHour*perProbe, (4*bytesRound+echoHour)/1e6, 4*bytesRound/1e6, echoHour/1e6, load0[0], load1[0])
	}
}
