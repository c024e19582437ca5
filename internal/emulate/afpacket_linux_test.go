package emulate

import (
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/netns"
)

// afpacketConfig is the AF_PACKET emulator between W's ports: queue 0 up,
// queue 1 down.
func afpacketConfig(tx string, up, down QueueConfig) Config {
	up.Num, down.Num = queueUp, queueDown
	return Config{
		Queues:   []QueueConfig{up, down},
		AFPacket: &AFPacketConfig{PortA: wirePortA, PortB: wirePortB, TX: tx},
	}
}

// warmNeighbours pings across the wire both ways, so that A and B know
// each other's MAC address before a flow starts. Otherwise the flow's
// first packets wait for ARP, which crosses the emulator with its delay
// like any frame: the kernel queues at most unres_qlen_bytes (about 100
// full-size packets) meanwhile and drops the rest, and the queued ones
// leave in a burst beside new ones (reordered).
func (n *wireNet) warmNeighbours(tb testing.TB) {
	tb.Helper()
	for _, e := range []struct{ from, to string }{{n.A, wireAddrB}, {n.B, wireAddrA}} {
		// Ten tries within 5 s: a link with loss may drop some (and an
		// ARP request, retried after a second).
		if r := ping(tb, e.from, e.to, "-c", "10", "-i", "0.05", "-w", "5"); r.received == 0 {
			tb.Fatalf("ping %s from %s across the wire: %+v", e.to, e.from, r)
		}
	}
}

// TestAFPacketWire runs the AF_PACKET emulator as its own process between
// W's ports and sends a UDP flow each way at once: up with delay, jitter
// and loss, down with a plain delay. It checks what the receivers saw,
// against the configuration and against the emulator's own counters:
//
//   - nothing early: every datagram's one-way delay (receiver's kernel
//     stamp − send time, one host clock) is at least delay − jitter. A
//     frame that crossed undelayed, or a copy the kernel forwarded on its
//     own, fails this; such a copy would also make the delayed one arrive
//     out of order and count twice.
//   - order: no datagram arrives after one sent later, within a flow.
//   - loss: every datagram the emulator did not drop on purpose arrives,
//     and the drops lie within 5 standard deviations of the binomial mean
//     (a false failure about once in 1.7 million runs).
//   - jitter: the up delays spread over the jitter range: some below
//     delay − jitter/4, some above delay + jitter/2 (without jitter both
//     are impossible: nothing is early, and this test asserts no upper
//     bound on lateness, which the host sets).
//   - lateness is counted: every release is in the emulator's counters
//     and its lateness sample.
//
// It runs once for each way of sending (TXSendmmsg, TXRing).
func TestAFPacketWire(t *testing.T) {
	n := newWireNet(t)
	for _, tx := range []string{TXSendmmsg, TXRing} {
		t.Run("tx="+tx, func(t *testing.T) { testAFPacketWire(t, n, tx) })
	}
}

func testAFPacketWire(t *testing.T, n *wireNet, tx string) {
	up := QueueConfig{Num: 0, Delay: 10 * time.Millisecond, Jitter: 4 * time.Millisecond, LossPercent: 10, Seed: 1}
	down := QueueConfig{Num: 1, Delay: 5 * time.Millisecond}
	wp := startEmulatorProcess(t, n.W, afpacketConfig(tx, up, down))
	n.warmNeighbours(t)

	const upCount, upRate, downCount, downRate = 900, 300, 6000, 2000
	var dres FlowResult
	var derr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		dres, derr = SendFlow(Flow{From: n.B, To: n.A, ToAddr: wireAddrA, Rate: downRate, Count: downCount, PayloadBytes: 1000, Drain: time.Second})
	}()
	ures, uerr := SendFlow(Flow{From: n.A, To: n.B, ToAddr: wireAddrB, Rate: upRate, Count: upCount, PayloadBytes: 100, Drain: time.Second})
	<-done
	if uerr != nil || derr != nil {
		t.Fatal(uerr, derr)
	}
	st := wp.stop()
	if st.Backend != BackendAFPacket || len(st.Queues) != 2 || st.Running || !st.RealtimeProcess {
		t.Fatalf("final stats %+v", st.Stats)
	}
	for i, c := range []struct {
		name string
		q    QueueConfig
		r    FlowResult
	}{{"up", up, ures}, {"down", down, dres}} {
		s := st.Queues[i]
		d := slices.Clone(c.r.Delays)
		slices.Sort(d)
		t.Logf("%s: sent %d, received %d, emulator received %d, dropped %d, released %d, late %d (max %v, p99 %v), ring drops %d, delays min %v p5 %v p50 %v p95 %v max %v",
			c.name, c.r.Sent, c.r.Received, s.Received, s.DroppedLoss, s.Released, s.Late, s.MaxLateness, s.LatenessP99,
			s.KernelQueueDrops, d[0], quantile(d, 0.05), quantile(d, 0.5), quantile(d, 0.95), d[len(d)-1])
		if min := c.q.Delay - c.q.Jitter; d[0] < min {
			t.Errorf("%s: a datagram crossed in %v, before the least delay %v", c.name, d[0], min)
		}
		if c.r.Reordered != 0 {
			t.Errorf("%s: %d datagrams reordered", c.name, c.r.Reordered)
		}
		// Every frame the sender sent reached the emulator (ARP and
		// other frames may add a few) and nothing was lost but on
		// purpose.
		if s.Received < uint64(c.r.Sent) || s.KernelQueueDrops+s.ENOBUFS+s.Truncated+s.VerdictErrors != 0 {
			t.Errorf("%s: emulator received %d of %d frames, losses %+v", c.name, s.Received, c.r.Sent, s)
		}
		if s.Released+s.DroppedLoss != s.Received || s.Pending != 0 {
			t.Errorf("%s: received %d = released %d + dropped %d + pending %d does not add up", c.name, s.Received, s.Released, s.DroppedLoss, s.Pending)
		}
		if got := uint64(c.r.Received); got+s.DroppedLoss < uint64(c.r.Sent) {
			t.Errorf("%s: %d of %d datagrams arrived with %d dropped on purpose: %d lost elsewhere", c.name, got, c.r.Sent, s.DroppedLoss, uint64(c.r.Sent)-got-s.DroppedLoss)
		}
		if s.LatenessSamples != int(min(s.Released, reservoirSize)) || s.Late > s.Released {
			t.Errorf("%s: lateness not counted: %d samples, late %d of %d", c.name, s.LatenessSamples, s.Late, s.Released)
		}
		// Loss: binomial over the frames the emulator received.
		p := c.q.LossPercent / 100
		mean := float64(s.Received) * p
		sd := math.Sqrt(float64(s.Received) * p * (1 - p))
		if dl := float64(s.DroppedLoss); math.Abs(dl-mean) > 5*sd || (p == 0 && dl != 0) {
			t.Errorf("%s: dropped %v of %d at %v%% loss: expected %.0f ± %.0f (5 σ)", c.name, dl, s.Received, c.q.LossPercent, mean, 5*sd)
		}
	}
	// Jitter: the up delays spread; the down ones (no jitter) cannot go
	// below the delay, which the loop above checked.
	d := slices.Clone(ures.Delays)
	slices.Sort(d)
	if lo, hi := quantile(d, 0.05), quantile(d, 0.95); lo >= up.Delay-up.Jitter/4 || hi <= up.Delay+up.Jitter/2 {
		t.Errorf("up: delays p5 %v, p95 %v do not spread over %v ± %v", lo, hi, up.Delay, up.Jitter)
	}
}

// TestAFPacketWireDeath kills the emulator process (SIGKILL) while it holds
// frames and checks that none of them, and nothing sent afterwards, crosses
// W undelayed: W's kernel drops what no socket takes.
func TestAFPacketWireDeath(t *testing.T) {
	n := newWireNet(t)
	const delay = 300 * time.Millisecond
	wp := startEmulatorProcess(t, n.W, afpacketConfig(TXRing, QueueConfig{Delay: delay}, QueueConfig{Delay: delay}))
	if r := ping(t, n.A, wireAddrB, "-c", "1", "-W", "3"); r.received != 1 || r.min < 2*delay {
		t.Fatalf("ping through the running emulator (2 × %v): %+v", delay, r)
	}
	var res FlowResult
	var ferr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, ferr = SendFlow(Flow{From: n.A, To: n.B, ToAddr: wireAddrB, Rate: 1000, Count: 500, PayloadBytes: 100, Drain: time.Second})
	}()
	time.Sleep(250 * time.Millisecond) // frames held, none due yet
	wp.kill(t)
	<-done
	wp.stop()
	if ferr != nil {
		t.Fatal(ferr)
	}
	if !killed(wp.cmd) {
		t.Fatalf("emulator process ended by %v, not SIGKILL", wp.cmd.ProcessState)
	}
	for _, dl := range res.Delays {
		if dl < delay {
			t.Fatalf("a datagram crossed in %v after the emulator died (delay %v); %d of %d arrived", dl, delay, res.Received, res.Sent)
		}
	}
	t.Logf("%d of %d datagrams arrived (sent while the emulator ran and released before it died)", res.Received, res.Sent)
	if res.Received == res.Sent {
		t.Errorf("every datagram arrived: the emulator was not killed while it held frames")
	}
	if r := ping(t, n.A, wireAddrB, "-c", "3", "-i", "0.2", "-W", "1"); r.received != 0 {
		t.Errorf("ping crossed W after the emulator died: %+v", r)
	}
}

// TestAFPacketWireRefuses checks the probes: a namespace whose kernel
// would carry frames across on its own is refused with one clear error,
// and so is a port that does not exist.
func TestAFPacketWireRefuses(t *testing.T) {
	n := newWireNet(t)
	cfg := afpacketConfig("", QueueConfig{Delay: time.Millisecond}, QueueConfig{})
	open := func(c Config) error {
		return netns.Do(n.W, func() error {
			e, err := Open(c)
			if err == nil {
				e.Close()
			}
			return err
		})
	}
	if err := open(cfg); err != nil {
		t.Fatalf("a proper wire namespace: %v", err)
	}
	bad := cfg
	bad.AFPacket = &AFPacketConfig{PortA: wirePortA, PortB: "nosuchport"}
	if err := open(bad); err == nil {
		t.Error("a missing port was accepted")
	} else {
		t.Log(err)
	}
	if err := netns.Do(n.W, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	if err := open(cfg); err == nil {
		t.Error("a namespace that forwards was accepted")
	} else {
		t.Log(err)
	}
}

// benchWireBoth is BenchmarkRateBoth on the wire topology: the same
// generator, counters and CPU accounting, with the AF_PACKET emulator as
// its own process in W (or, with bridge, the kernel's bridge in W and no
// emulator: the host alone on a layer-2 path).
func benchWireBoth(b *testing.B, pps float64, bridge bool, tx string) {
	n := newWireNet(b)
	stop := func() processResult { return processResult{} }
	if bridge {
		n.bridge(b)
	} else {
		q := QueueConfig{Delay: benchDelay, Tolerance: time.Millisecond}
		stop = startEmulatorProcess(b, n.W, afpacketConfig(tx, q, q)).stop
	}
	n.warmNeighbours(b)
	up, down, load, p := bothWays(b, n.A, n.B, wireAddrA, wireAddrB, pps, stop)
	if !bridge && len(p.Queues) != 2 {
		b.Fatalf("emulator stats: %+v", p.Stats)
	}
	for _, q := range p.Queues {
		b.Logf("direction %d: late on arrival %d, kernel-stamped %d of %d, %d release batches", q.Num, q.LateOnArrival, q.KernelStamped, q.Received, q.Batches)
	}
	reportBoth(b, pps, [2]FlowResult{up, down}, p, load)
}
