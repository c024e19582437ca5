package emulate

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/safchain/ethtool"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// xdpConfig is the AF_XDP emulator across n's wire: queue 0 up (A → B),
// queue 1 down.
func xdpConfig(mode string, up, down QueueConfig) Config {
	up.Num, down.Num = queueUp, queueDown
	return Config{
		Queues: []QueueConfig{up, down},
		XDP:    &XDPConfig{PortA: wirePortA, PortB: wirePortB, XDPMode: mode},
	}
}

// TestWireXDP sends probe streams both ways across the AF_XDP wire and
// checks the link it made: up 10 ms ± 2 ms with 10 % loss, down 10 ms. Per
// direction no probe is reordered and none arrives before the shortest
// delay (a forwarder that passes frames undelayed fails here); the up
// direction's loss lies within 5 standard deviations of the binomial
// expectation and its delays spread over at least half the jitter. The
// emulator's own counters (lateness, kernel drops) are logged, not judged:
// they depend on the host's load.
func TestWireXDP(t *testing.T) {
	for _, mode := range []string{XDPModeNative, XDPModeGeneric} {
		t.Run(mode, func(t *testing.T) {
			const (
				delay, jitter = 10 * time.Millisecond, 2 * time.Millisecond
				loss          = 10.0 // percent
				probes        = 2000
				rate          = 1000 // per second and direction
			)
			n := newWireNet(t)
			stop := startEmulatorProcess(t, n.W, xdpConfig(mode,
				QueueConfig{Delay: delay, Jitter: jitter, LossPercent: loss},
				QueueConfig{Delay: delay})).stop
			var down FlowResult
			var derr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				down, derr = SendFlow(Flow{From: n.B, To: n.A, ToAddr: wireAddrA, Rate: rate, Count: probes / 2, PayloadBytes: probeBytes, Drain: time.Second})
			}()
			up, err := SendFlow(Flow{From: n.A, To: n.B, ToAddr: wireAddrB, Rate: rate, Count: probes, PayloadBytes: probeBytes, Drain: time.Second})
			<-done
			p := stop()
			if err != nil || derr != nil {
				t.Fatalf("probes: up %v, down %v", err, derr)
			}
			if p.XDPMode != mode || p.Backend != BackendAFXDP || len(p.Queues) != 2 {
				t.Fatalf("emulator stats: %+v", p.Stats)
			}
			for i, q := range p.Queues {
				t.Logf("queue %d: received %d, released %d, lost on purpose %d, late %d (max %v, p99 %v), late on arrival %d, stamped %d, kernel drops %d, tx errors %d",
					q.Num, q.Received, q.Released, q.DroppedLoss, q.Late, q.MaxLateness, q.LatenessP99, q.LateOnArrival, q.KernelStamped, q.KernelQueueDrops, q.VerdictErrors)
				if !q.KernelRead || q.LatenessSamples == 0 || q.KernelStamped == 0 {
					t.Errorf("queue %d: socket counters read %v, %d lateness samples, %d stamped frames", i, q.KernelRead, q.LatenessSamples, q.KernelStamped)
				}
				// Every released frame's lateness counted, once, when its
				// send returned.
				if q.LatenessSamples != int(min(q.Released, reservoirSize)) {
					t.Errorf("queue %d: %d lateness samples for %d released frames", i, q.LatenessSamples, q.Released)
				}
			}
			for _, c := range []struct {
				name       string
				r          FlowResult
				min        time.Duration
				lossPct    float64
				jitterWant time.Duration
			}{
				{"up", up, delay - jitter, loss, jitter / 2},
				{"down", down, delay, 0, 0},
			} {
				r := c.r
				slices.Sort(r.Delays)
				if r.Reordered != 0 {
					t.Errorf("%s: %d probes reordered", c.name, r.Reordered)
				}
				if len(r.Delays) == 0 {
					t.Errorf("%s: no probe crossed (%d sent)", c.name, r.Sent)
					continue
				}
				if r.Delays[0] < c.min {
					t.Errorf("%s: a probe took %v, less than the shortest delay %v", c.name, r.Delays[0], c.min)
				}
				lost := float64(r.Sent - r.Received)
				p := c.lossPct / 100
				mean, sd := float64(r.Sent)*p, math.Sqrt(float64(r.Sent)*p*(1-p))
				if math.Abs(lost-mean) > 5*sd {
					t.Errorf("%s: %v of %d probes lost, want %.0f ± %.0f (5 σ)", c.name, lost, r.Sent, mean, 5*sd)
				}
				spread := quantile(r.Delays, 0.9) - quantile(r.Delays, 0.1)
				if spread < c.jitterWant {
					t.Errorf("%s: delays p10–p90 spread %v, want at least %v from ± %v jitter", c.name, spread, c.jitterWant, jitter)
				}
				t.Logf("%s: %d sent, %d received, delay min %v p10 %v p50 %v p90 %v max %v", c.name, r.Sent, r.Received,
					r.Delays[0], quantile(r.Delays, 0.1), quantile(r.Delays, 0.5), quantile(r.Delays, 0.9), r.Delays[len(r.Delays)-1])
			}
		})
	}
}

// TestWireXDPProcessDeath kills the AF_XDP emulator's process (SIGKILL: no
// clean-up of its own) and checks that the wire then drops frames instead
// of passing them undelayed, and that no XDP program is left on its ports.
// Before, it checks that ARP crosses the wire (A's neighbour entry for B is
// deleted first).
func TestWireXDPProcessDeath(t *testing.T) {
	n := newWireNet(t)
	if _, err := runner.Run(context.Background(), "ip", "-n", n.A, "neigh", "del", wireAddrB, "dev", "a0"); err != nil {
		t.Fatal(err)
	}
	p := startEmulatorProcess(t, n.W, xdpConfig("", QueueConfig{Delay: 10 * time.Millisecond}, QueueConfig{Delay: 10 * time.Millisecond}))
	if r := ping(t, n.A, wireAddrB, "-c", "3", "-i", "0.1", "-W", "2"); r.received != r.sent || r.min < 20*time.Millisecond {
		t.Fatalf("ping across the running wire (2 × 10 ms): %+v", r)
	}
	p.kill(t)
	p.stop()
	for _, port := range []string{wirePortA, wirePortB} {
		o, err := runner.Run(context.Background(), "ip", "-n", n.W, "link", "show", port)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(o), "xdp") {
			t.Errorf("an XDP program is left on %s after the emulator died:\n%s", port, o)
		}
	}
	if r := ping(t, n.A, wireAddrB, "-c", "3", "-i", "0.1", "-W", "1"); r.received != 0 {
		t.Fatalf("ping crossed the wire after the emulator died: %+v", r)
	}
}

// TestWireXDPStatsDuringStop reads the AF_XDP emulator's Stats from
// another goroutine, without a pause, while Run stops it and closes its
// sockets, as a caller holding the Emulator may. Stats reads the
// sockets' drop counters (getsockopt on their descriptors) and Close
// closes them; without a lock between the two, the race detector
// reports the descriptor's read and write (go test -race), and a read
// after the close would ask whatever socket took the number over. After
// Run has returned, Stats must still answer from the last counters.
func TestWireXDPStatsDuringStop(t *testing.T) {
	n := newWireNet(t)
	var e *Emulator
	q := QueueConfig{Delay: 2 * time.Millisecond}
	if err := netns.Do(n.W, func() error {
		var err error
		e, err = Open(xdpConfig("", q, q))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, "") }()
	stopReading, reads := make(chan struct{}), make(chan int)
	go func() {
		k := 0
		defer func() { reads <- k }()
		for {
			select {
			case <-stopReading:
				return
			default:
			}
			if st := e.Stats(); len(st.Queues) != 2 {
				t.Errorf("stats while stopping: %+v", st)
				return
			}
			k++
		}
	}()
	ping(t, n.A, wireAddrB, "-c", "5", "-i", "0.01", "-W", "1")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(stopReading)
	k := <-reads
	st := e.Stats()
	if len(st.Queues) != 2 || st.Queues[0].Received == 0 || !st.Queues[0].KernelRead {
		t.Errorf("stats after Run returned: %+v", st)
	}
	t.Logf("%d Stats calls while running and stopping", k)
}

// benchXDPBoth is BenchmarkRateBoth on the wire topology with the AF_XDP
// emulator as its own process in W, in the given XDP mode ("" tries
// native first): the same generator, counters and CPU accounting as the
// other backends' rows.
//
// With napiReceive, A's and B's ports receive in a threaded NAPI with GRO
// and W's ports have TSO off, as the lab's AF_XDP paths do (lab's
// wireReceive): the receiving namespace's stack then runs in its NAPI
// thread, not inside the emulator's sendto. The work moves; the host
// figure says whether any is saved.
func benchXDPBoth(b *testing.B, pps float64, mode string, napiReceive bool) {
	n := newWireNet(b)
	if napiReceive {
		n.napiReceive(b)
	}
	q := QueueConfig{Delay: benchDelay, Tolerance: time.Millisecond}
	stop := startEmulatorProcess(b, n.W, xdpConfig(mode, q, q)).stop
	up, down, load, p := bothWays(b, n.A, n.B, wireAddrA, wireAddrB, pps, stop)
	if len(p.Queues) != 2 || (mode != "" && p.XDPMode != mode) {
		b.Fatalf("emulator stats: %+v", p.Stats)
	}
	b.Logf("XDP mode %s", p.XDPMode)
	reportBoth(b, pps, [2]FlowResult{up, down}, p, load)
}

// napiReceive has a0 and b0, the ports the wire sends into, receive in a
// threaded NAPI with GRO, and wa and wb send with TSO off (a veth hands a
// frame to its peer's NAPI only when the sending port could not have
// segmented it itself).
//
// Equivalent to:
//
//	ip netns exec W ethtool -K wa tso off; ip netns exec W ethtool -K wb tso off
//	ip netns exec A ethtool -K a0 gro on; echo 1 > /sys/class/net/a0/threaded
//	ip netns exec B ethtool -K b0 gro on; echo 1 > /sys/class/net/b0/threaded
func (n *wireNet) napiReceive(tb testing.TB) {
	tb.Helper()
	tso := map[string]bool{"tx-tcp-segmentation": false, "tx-tcp6-segmentation": false,
		"tx-tcp-ecn-segmentation": false, "tx-tcp-mangleid-segmentation": false}
	gro := map[string]bool{"rx-gro": true}
	for _, e := range []struct {
		ns, dev  string
		features map[string]bool
		threaded bool
	}{
		{n.W, wirePortA, tso, false}, {n.W, wirePortB, tso, false},
		{n.A, "a0", gro, true}, {n.B, "b0", gro, true},
	} {
		if err := netns.Do(e.ns, func() error {
			et, err := ethtool.NewEthtool()
			if err != nil {
				return err
			}
			defer et.Close()
			return et.Change(e.dev, e.features)
		}); err != nil {
			tb.Fatalf("%s %s: %v", e.ns, e.dev, err)
		}
		if e.threaded {
			if err := netns.WriteSys(e.ns, "class/net/"+e.dev+"/threaded", "1"); err != nil {
				tb.Fatal(err)
			}
		}
	}
}
