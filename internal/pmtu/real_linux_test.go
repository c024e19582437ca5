package pmtu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// netPath is a minimal client — router — server path in three fresh
// namespaces, with the lab's addresses:
//
//	c: c0 192.0.2.2 ── rc 192.0.2.1 :r: rs 198.51.100.1 ── s0 198.51.100.2 :s
//	   2001:db8:c::2    2001:db8:c::1    2001:db8:5::1      2001:db8:5::2
//	                                     └─── MTU mtu ───┘
//
// With blackhole, the router's OUTPUT chain drops its own "fragmentation
// needed" and "packet too big" errors.
type netPath struct {
	client, router, server string
}

func newNetPath(t *testing.T, mtu int, blackhole bool) *netPath {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "ip", "iptables", "ip6tables", "sysctl")
	var id [3]byte
	_, _ = rand.Read(id[:])
	base := "ovpnperf-pm" + hex.EncodeToString(id[:])
	p := &netPath{client: base + "-c", router: base + "-r", server: base + "-s"}
	ctx := context.Background()
	for _, ns := range []string{p.client, p.router, p.server} {
		if err := netns.Create(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := netns.Delete(ns); err != nil {
				t.Error(err)
			}
		})
	}
	run := func(argv ...string) {
		t.Helper()
		if _, err := runner.Run(ctx, argv...); err != nil {
			t.Fatal(err)
		}
	}
	in := func(ns string, argv ...string) {
		t.Helper()
		if _, err := runner.RunIn(ctx, ns, argv...); err != nil {
			t.Fatal(err)
		}
	}
	// No duplicate address detection: a fresh namespace would otherwise
	// hold its link-local addresses tentative for a second and lose the
	// first probes to neighbour discovery.
	for _, ns := range []string{p.client, p.router, p.server} {
		in(ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	}
	run("ip", "-n", p.client, "link", "add", "c0", "type", "veth", "peer", "name", "rc", "netns", p.router)
	run("ip", "-n", p.server, "link", "add", "s0", "mtu", fmt.Sprint(mtu), "type", "veth", "peer", "name", "rs", "mtu", fmt.Sprint(mtu), "netns", p.router)
	in(p.router, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	addrs := map[string][][2]string{
		p.client: {{"c0", "192.0.2.2/24"}, {"c0", "2001:db8:c::2/64"}},
		p.router: {{"rc", "192.0.2.1/24"}, {"rc", "2001:db8:c::1/64"}, {"rs", "198.51.100.1/24"}, {"rs", "2001:db8:5::1/64"}},
		p.server: {{"s0", "198.51.100.2/24"}, {"s0", "2001:db8:5::2/64"}},
	}
	for ns, list := range addrs {
		run("ip", "-n", ns, "link", "set", "lo", "up")
		for _, a := range list {
			argv := []string{"ip", "-n", ns, "addr", "add", a[1], "dev", a[0]}
			if strings.Contains(a[1], ":") {
				if mtu < 1280 {
					continue // IPv6 needs links of 1280 bytes or more
				}
				argv = append(argv, "nodad")
			}
			run(argv...)
			run("ip", "-n", ns, "link", "set", a[0], "up")
		}
	}
	run("ip", "-n", p.client, "route", "add", "default", "via", "192.0.2.1")
	run("ip", "-n", p.server, "route", "add", "default", "via", "198.51.100.1")
	if mtu >= 1280 {
		run("ip", "-n", p.client, "-6", "route", "add", "default", "via", "2001:db8:c::1")
		run("ip", "-n", p.server, "-6", "route", "add", "default", "via", "2001:db8:5::1")
	}
	if blackhole {
		in(p.router, "iptables", "-A", "OUTPUT", "-p", "icmp", "--icmp-type", "fragmentation-needed", "-j", "DROP")
		in(p.router, "ip6tables", "-A", "OUTPUT", "-p", "icmpv6", "--icmpv6-type", "packet-too-big", "-j", "DROP")
	}
	return p
}

func serverAddr(f Family) netip.Addr {
	if f == IPv6 {
		return netip.MustParseAddr("2001:db8:5::2")
	}
	return netip.MustParseAddr("198.51.100.2")
}

// newRealProber opens the raw-socket prober in the client namespace.
func newRealProber(t *testing.T, ns string, dst netip.Addr) Prober {
	t.Helper()
	var p Prober
	err := netns.Do(ns, func() error {
		var err error
		p, err = NewProber(dst)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestSearchReal(t *testing.T) {
	for _, c := range pathCases {
		if c.mtu < 1280 && c.family == IPv6 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			np := newNetPath(t, c.mtu, c.blackhole)
			p := newRealProber(t, np.client, serverAddr(c.family))
			start := time.Now()
			res := testSearch(t, c, p)
			el := time.Since(start)
			t.Logf("path MTU %d black hole %v hop %v (%d) in %v: %d rounds, %d probes, rtt %v",
				res.PathMTU, res.Blackhole, res.Hop, res.HopMTU, el.Round(time.Millisecond), res.Rounds, res.Probes, res.RTT)
			if el > 10*time.Second {
				t.Errorf("search took %v, want well under 10 s", el)
			}
		})
	}
}

func TestProberUnreachable(t *testing.T) {
	np := newNetPath(t, 1500, false)
	// No route at all: the error says so before any probe.
	err := netns.Do(np.server, func() error {
		_, err := runner.Run(context.Background(), "ip", "route", "del", "default")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = netns.Do(np.server, func() error {
		_, err := NewProber(netip.MustParseAddr("192.0.2.2"))
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("NewProber without a route: %v, want a 'network unreachable' error", err)
	}
	// A silent host (nothing answers 198.51.100.77 behind the router): a
	// clear error after the rounds time out.
	p := newRealProber(t, np.client, netip.MustParseAddr("198.51.100.77"))
	_, err = Search(context.Background(), p, Options{Timeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("Search to an absent host succeeded")
	}
	t.Log(err)
}
