package pmtu

import (
	"context"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// newLab builds the case's path: the MTU on the router–server segment, the
// round trip split over both directions, and the black hole at the router.
func newLab(t *testing.T, c pathCase) *lab.Lab {
	t.Helper()
	half := c.rtt / 2
	return labtest.New(t, labpath.Path{
		MTU:           c.mtu,
		ICMPBlackhole: c.blackhole,
		NoIPv6:        c.mtu < 1280,
		Up:            labpath.Link{Delay: half},
		Down:          labpath.Link{Delay: half},
	})
}

func serverAddr(f Family) netip.Addr {
	if f == IPv6 {
		return lab.ServerV6()
	}
	return lab.ServerV4()
}

// newRealProber opens the raw-socket prober in a namespace.
func newRealProber(t *testing.T, ns string, dst netip.Addr) Prober {
	t.Helper()
	before := runtime.NumGoroutine()
	var p Prober
	err := netns.Do(ns, func() error {
		var err error
		p, err = NewProber(dst)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("closing the prober: %v", err)
		}
		// Close waits for the reader; nothing of the prober may remain.
		for deadline := time.Now().Add(time.Second); runtime.NumGoroutine() > before; {
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines after closing the prober, %d before", runtime.NumGoroutine(), before)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	return p
}

// TestSearchReal runs the path cases of the fake over real labs. The cases
// with an RTT are the must-show cases; their times are logged
// (grep "path MTU") and bounded only loosely, as the machine is shared.
func TestSearchReal(t *testing.T) {
	for _, c := range pathCases {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t, c)
			p := newRealProber(t, l.Namespace(lab.Client), serverAddr(c.family))
			start := time.Now()
			res := testSearch(t, c, p)
			el := time.Since(start)
			t.Logf("path MTU %d black hole %v hop %v (%d) in %v at RTT %v: %d rounds, %d probes, measured rtt %v",
				res.PathMTU, res.Blackhole, res.Hop, res.HopMTU, el.Round(time.Millisecond), c.rtt, res.Rounds, res.Probes, res.RTT)
			if el > 10*time.Second {
				t.Errorf("search took %v, want well under 10 s", el)
			}
		})
	}
}

func TestProberErrors(t *testing.T) {
	l := newLab(t, pathCase{mtu: 1500})
	// The router has no route to 203.0.113.0/24: the client's probes get
	// ICMP "network unreachable" back, and the error names the router.
	p := newRealProber(t, l.Namespace(lab.Client), netip.MustParseAddr("203.0.113.99"))
	_, err := Search(context.Background(), p, Options{Timeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), lab.RouterClientV4().String()) {
		t.Errorf("Search to an unrouted address: %v, want 'network unreachable' from the router", err)
	}
	// In the router itself there is no route at all: the error comes
	// before any probe.
	err = netns.Do(l.Namespace(lab.Router), func() error {
		_, err := NewProber(netip.MustParseAddr("203.0.113.99"))
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "no route") {
		t.Errorf("NewProber without a route: %v, want a 'no route' error", err)
	}
	// A silent host behind the router: a clear error once the rounds time out.
	p = newRealProber(t, l.Namespace(lab.Client), netip.MustParseAddr("198.51.100.77"))
	_, err = Search(context.Background(), p, Options{Timeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("Search to an absent host succeeded")
	}
	t.Log(err)
}
