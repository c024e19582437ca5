package pps

import (
	"context"
	"math"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// inNetns opens sockets inside the lab node's namespace.
func inNetns(l *lab.Lab, n lab.Node) func(func() error) error {
	return func(open func() error) error { return netns.Do(l.Namespace(n), open) }
}

// labServer runs a pps server in the lab's server namespace on addr and
// returns the port it listens on.
func labServer(t testing.TB, l *lab.Lab, addr netip.Addr) int {
	t.Helper()
	s := &Server{Addr: net.JoinHostPort(addr.String(), "0"), OpenIn: inNetns(l, lab.Server)}
	return serveForTest(t, s).(*net.UDPAddr).Port
}

func labRun(t testing.TB, l *lab.Lab, to netip.Addr, port int, p Params) *Result {
	t.Helper()
	res, err := Run(context.Background(), Config{
		Server: net.JoinHostPort(to.String(), strconv.Itoa(port)),
		Params: p,
		OpenIn: inNetns(l, lab.Client),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkEmulator fails the test if the lab's userspace emulator dropped
// packets other than on purpose (a full queue, a socket overrun), which would
// add to the loss it emulates, and returns the packets it dropped on purpose.
// Late releases (a busy host) do not change loss and are only logged.
func checkEmulator(t *testing.T, l *lab.Lab) (droppedOnPurpose uint64) {
	t.Helper()
	if l.Backend() == labpath.BackendNone {
		return 0
	}
	st, err := l.Stats()
	if err != nil {
		t.Logf("emulator stats: %v", err)
		return 0
	}
	for _, q := range st.Queues {
		droppedOnPurpose += q.DroppedLoss
		if q.KernelQueueDrops+q.KernelUserDropped+q.ENOBUFS+q.VerdictErrors > 0 {
			t.Fatalf("the lab's %s emulator lost packets it should have passed (queue %d: %+v): the measured loss is not the emulated loss", l.Backend(), q.Num, q)
		}
		if q.Late > 0 {
			t.Logf("emulator queue %d released %d packets late (max %v): the host is busy, RTT figures suffer", q.Num, q.Late, q.MaxLateness)
		}
	}
	return droppedOnPurpose
}

// Loss is counted per round trip: a probe is lost when it or its echo is
// dropped. With loss p on the way up only, pps reports p; with the lab's
// symmetric --loss p, it reports 1−(1−p)², 9.75 % for 5 %. The issue's
// "--loss 5% must show 5 ± 1.5 %" holds for one lossy direction
// (--up-loss 5%); the symmetric case is checked against 9.75 ± 2 %.
func TestLabLoss(t *testing.T) {
	testenv.Exclusive(t)
	for _, tc := range []struct {
		name     string
		up, down float64
		want     float64
		tol      float64
	}{
		{"up 5%", 5, 0, 5, 1.5},
		{"both 5%", 5, 5, 100 * (1 - 0.95*0.95), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := labtest.New(t, labpath.Path{Up: labpath.Link{LossPercent: tc.up}, Down: labpath.Link{LossPercent: tc.down}})
			port := labServer(t, l, lab.ServerV4())
			// 2000 pps × 5 s = 10 000 probes: the binomial spread of a
			// 5 % loss is 0.2 %, far inside the tolerance.
			res := labRun(t, l, lab.ServerV4(), port, Params{RatePPS: 2000, Size: MinSize, Duration: 5 * time.Second, Flows: 2, Timeout: time.Second})
			dropped := checkEmulator(t, l)
			t.Logf("sent %d received %d lost %d (%.2f%%), late %d dup %d, rtt p50 %.0fus p99 %.0fus, server received %+v",
				res.Sent, res.Received, res.Lost, res.LossPercent, res.Late, res.Duplicates, res.RTTP50Us, res.RTTP99Us, res.ServerReport)
			if res.Sent < 5000 {
				t.Fatalf("sent only %d probes", res.Sent)
			}
			if math.Abs(res.LossPercent-tc.want) > tc.tol {
				t.Errorf("loss %.2f%%, want %.2f ± %.1f %%", res.LossPercent, tc.want, tc.tol)
			}
			if l.Backend() != labpath.BackendNone && (dropped < res.Lost || dropped > res.Lost+8) {
				// The emulator counts what it dropped: every lost probe
				// is one drop, and a few more drops may have hit the
				// handshake (hello, accept, finish, report), which the
				// client retransmits.
				t.Errorf("the emulator dropped %d packets, pps counted %d lost", dropped, res.Lost)
			}
			if res.Received+res.Lost != res.Sent {
				t.Errorf("received %d + lost %d != sent %d", res.Received, res.Lost, res.Sent)
			}
			if r := res.ServerReport; r != nil && tc.down == 0 {
				// Without loss on the way back every echo arrives, so the
				// server's count equals the client's.
				if r.Received != res.Received {
					t.Errorf("server received %d, client got %d echoes, with no loss downstream", r.Received, res.Received)
				}
			}
		})
	}
}

// TestLabDelayAndIPv6 runs over IPv6 through a 20 ms round trip: the RTTs
// must show the delay, and nothing may be lost.
func TestLabDelayAndIPv6(t *testing.T) {
	l := labtest.New(t, labpath.Path{Up: labpath.Link{Delay: 10 * time.Millisecond}, Down: labpath.Link{Delay: 10 * time.Millisecond}})
	port := labServer(t, l, lab.ServerV6())
	res := labRun(t, l, lab.ServerV6(), port, Params{RatePPS: 1000, Size: 512, Duration: 2 * time.Second, Flows: 1, Timeout: time.Second})
	checkEmulator(t, l)
	t.Logf("sent %d received %d lost %d, rtt p50 %.0fus p99 %.0fus", res.Sent, res.Received, res.Lost, res.RTTP50Us, res.RTTP99Us)
	if res.Lost != 0 || res.Received != res.Sent {
		t.Errorf("lost %d of %d on a lossless path", res.Lost, res.Sent)
	}
	// The path's 20 ms is a floor no echo can beat; above it a busy host
	// (the emulator releases late) may add a lot, so the ceiling is loose.
	if res.RTTMinUs < 20000 || res.RTTP50Us > 1e6 {
		t.Errorf("rtt min %.0f us, p50 %.0f us: want at least the path's 20 000", res.RTTMinUs, res.RTTP50Us)
	}
}

// TestLabUnreachable: a host behind the lab's router that does not exist.
func TestLabUnreachable(t *testing.T) {
	l := labtest.New(t, labpath.Path{})
	start := time.Now()
	_, err := Run(context.Background(), Config{
		Server: net.JoinHostPort(lab.RouterServerV4().Next().Next().String(), "7007"), // 198.51.100.3: no such host
		Params: Params{RatePPS: 100, Size: MinSize, Duration: time.Second, Flows: 1, Timeout: time.Second},
		OpenIn: inNetns(l, lab.Client),
	})
	if err == nil {
		t.Fatal("a run against a host that does not exist succeeded")
	}
	t.Logf("%v (after %v)", err, time.Since(start))
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %v to give up", time.Since(start))
	}
}
