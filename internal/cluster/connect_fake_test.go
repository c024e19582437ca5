package cluster

// Connect's changes to its namespace, and their undo, on a hostnet.Fake:
// no root, no openvpn. hostnet's TestKernelAndFake keeps the fake in line
// with the kernel.

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func nexthopsOf(t *testing.T, h hostnet.Host) []hostnet.Nexthop {
	t.Helper()
	ns, err := h.Nexthops(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func routesOf(t *testing.T, h hostnet.Host, f hostnet.Family) []hostnet.Route {
	t.Helper()
	rs, err := h.Routes(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// The multipath route follows the tunnels that are up: a tunnel that goes
// down leaves the group and the route stays on the others; one whose
// device the kernel took (its openvpn exited) is out of the group before
// connect notices; none up, nothing of the run is left.
func TestMultipathTunnelsComeAndGo(t *testing.T) {
	ctx := context.Background()
	fake := hostnet.NewFake("")
	devs := []string{"ovpnperfab12t0", "ovpnperfab12t1", "ovpnperfab12t2"}
	for _, d := range devs {
		fake.AddLink(d, true)
	}
	fake.AddLink("eth0", true)
	g := connectGroup("ab12")
	p1, p2 := netip.MustParsePrefix("10.99.0.0/24"), netip.MustParsePrefix("10.98.0.0/16")
	mp := &Multipath{Host: fake, Prefixes: []netip.Prefix{p1, p2}, Group: g, Devs: devs}
	member := func(i int, dev string) hostnet.Nexthop {
		return hostnet.Nexthop{ID: g + 1 + uint32(i), Family: hostnet.IPv4, Dev: dev}
	}
	routes := []hostnet.Route{{Dst: p2, NHID: g}, {Dst: p1, NHID: g}}
	check := func(step string, wantNH []hostnet.Nexthop, wantRoutes []hostnet.Route) {
		t.Helper()
		if got := nexthopsOf(t, fake); !slices.EqualFunc(got, wantNH, func(a, b hostnet.Nexthop) bool {
			return a.ID == b.ID && a.Family == b.Family && a.Dev == b.Dev && slices.Equal(a.Group, b.Group)
		}) {
			t.Errorf("%s: nexthops %+v\nwant %+v", step, got, wantNH)
		}
		if got := routesOf(t, fake, hostnet.IPv4); !slices.Equal(got, wantRoutes) {
			t.Errorf("%s: routes %+v\nwant %+v", step, got, wantRoutes)
		}
	}
	set := func(step string, up []int, wantChanged bool) {
		t.Helper()
		changed, err := mp.Set(ctx, up)
		if err != nil || changed != wantChanged {
			t.Fatalf("%s: Set(%v): changed %v, %v; want changed %v", step, up, changed, err, wantChanged)
		}
	}

	set("all up", []int{0, 1, 2}, true)
	check("all up", []hostnet.Nexthop{{ID: g, Group: []uint32{g + 1, g + 2, g + 3}}, member(0, devs[0]), member(1, devs[1]), member(2, devs[2])}, routes)
	set("all up again", []int{0, 1, 2}, false)

	set("t1 down", []int{0, 2}, true)
	check("t1 down", []hostnet.Nexthop{{ID: g, Group: []uint32{g + 1, g + 3}}, member(0, devs[0]), member(2, devs[2])}, routes)

	set("t1 back", []int{0, 1, 2}, true)
	check("t1 back", []hostnet.Nexthop{{ID: g, Group: []uint32{g + 1, g + 2, g + 3}}, member(0, devs[0]), member(1, devs[1]), member(2, devs[2])}, routes)

	// t0's openvpn exits and its device goes: the kernel takes the
	// member out of the group at once; the next check follows.
	if err := fake.LinkDel(ctx, devs[0]); err != nil {
		t.Fatal(err)
	}
	check("t0's device gone", []hostnet.Nexthop{{ID: g, Group: []uint32{g + 2, g + 3}}, member(1, devs[1]), member(2, devs[2])}, routes)
	set("t0 out", []int{1, 2}, true)
	check("t0 out", []hostnet.Nexthop{{ID: g, Group: []uint32{g + 2, g + 3}}, member(1, devs[1]), member(2, devs[2])}, routes)

	set("none up", nil, true)
	check("none up", nil, nil)
	if got := mp.Members(); got != "" {
		t.Errorf("none up: members %q", got)
	}

	// IPv6 prefixes take IPv6 members: the kernel refuses an IPv6 route
	// over IPv4 nexthops, and so does the fake.
	p6 := netip.MustParsePrefix("fd00:99::/64")
	bad := &Multipath{Host: fake, Prefixes: []netip.Prefix{p6}, Group: g + 0x80, Devs: devs[1:]}
	if _, err := bad.Set(ctx, []int{0}); err == nil {
		t.Error("an IPv6 route over IPv4 nexthops was taken")
	}
	_ = bad.Remove(ctx)
	six := &Multipath{Host: fake, Prefixes: []netip.Prefix{p6}, Group: g + 0x80, Devs: devs[1:], V6: true}
	if _, err := six.Set(ctx, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	if got := routesOf(t, fake, hostnet.IPv6); !slices.Equal(got, []hostnet.Route{{Dst: p6, NHID: g + 0x80}}) {
		t.Errorf("IPv6 routes %+v", got)
	}
	if err := six.Remove(ctx); err != nil {
		t.Error(err)
	}
	if ns := nexthopsOf(t, fake); len(ns) != 0 {
		t.Errorf("after Remove: %+v", ns)
	}
}

// checkRoutesFree refuses a prefix the namespace routes already, whoever
// made the route, and takes one it does not.
func TestCheckRoutesFree(t *testing.T) {
	ctx := context.Background()
	fake := hostnet.NewFake("")
	fake.AddLink("eth0", true)
	taken := netip.MustParsePrefix("10.97.0.0/24")
	if err := fake.RouteReplace(ctx, hostnet.Route{Dst: taken, Dev: "eth0"}); err != nil {
		t.Fatal(err)
	}
	var u *usage.Error
	if err := checkRoutesFree(ctx, fake, []netip.Prefix{taken}); !errors.As(err, &u) {
		t.Errorf("a routed prefix: %v; want a usage error", err)
	}
	if err := checkRoutesFree(ctx, fake, []netip.Prefix{netip.MustParsePrefix("10.97.0.0/16"), netip.MustParsePrefix("fd00::/64")}); err != nil {
		t.Errorf("free prefixes: %v", err)
	}
}

// A connect run's journal undone (by connect on its way out, or by clean
// after a kill) removes the run's own route, nexthops, nat chains and
// devices and restores its sysctls; it leaves alone a route to one of its
// prefixes that another nexthop now carries, another's nexthop, chain and
// device; and undone again it changes nothing.
func TestConnectUndoOnFake(t *testing.T) {
	ctx := context.Background()
	fake := hostnet.NewFake("")
	p := Paths{State: t.TempDir(), Connect: t.TempDir(), Hosts: func(string) hostnet.Host { return fake }}
	for _, k := range MultipathHashSysctls() {
		fake.SetSysctlValue(k, "0")
	}
	fake.AddLink("eth0", true)
	st, err := p.newConnectRun()
	if err != nil {
		t.Fatal(err)
	}
	id := st.get().ID
	devs := []string{"ovpnperf" + id + "t0", "ovpnperf" + id + "t1"}

	// What RunTunnels does, in its order, each change recorded first.
	for _, key := range MultipathHashSysctls() {
		if err := recordHere(st, Resource{Kind: KindSysctl, Name: key, Detail: "0", Set: "1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := fake.SetSysctl(ctx, key, "1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range devs {
		if err := recordHere(st, Resource{Kind: KindLink, Name: d}); err != nil {
			t.Fatal(err)
		}
		fake.AddLink(d, true, netip.MustParsePrefix("10.8.0.2/24"))
	}
	fake.SetLinkAddrs(devs[1], netip.MustParsePrefix("10.8.1.2/24"))
	nat := &hostNAT{h: fake, chain: hostNATChain(id), cur: map[hostnet.Family]string{}}
	for _, f := range natFamilies {
		if err := ProbeNAT(ctx, fake, f); err != nil {
			t.Fatal(err)
		}
		if err := recordHere(st, Resource{Kind: KindNATChain, Name: nat.chain, Detail: f.String()}); err != nil {
			t.Fatal(err)
		}
		if err := nat.create(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	a4, a6 := tunAddrs(ctx, fake, devs)
	if changed, err := nat.sync(ctx, devs, a4, a6); err != nil || !changed {
		t.Fatalf("nat sync: %v %v", changed, err)
	}
	if len(fake.Rules(hostnet.IPv4, "nat", nat.chain)) != 2 {
		t.Fatalf("the run's IPv4 nat chain: %q", fake.Rules(hostnet.IPv4, "nat", nat.chain))
	}
	ours, theirs := netip.MustParsePrefix("10.99.0.0/24"), netip.MustParsePrefix("10.98.0.0/16")
	mp := &Multipath{Host: fake, Prefixes: []netip.Prefix{ours, theirs}, Group: connectGroup(id), Devs: devs}
	if err := recordHere(st, mp.Resource()); err != nil {
		t.Fatal(err)
	}
	if _, err := mp.Set(ctx, []int{0, 1}); err != nil {
		t.Fatal(err)
	}

	// Another's objects: a nexthop that now carries one of the run's
	// prefixes (someone replaced the route), a route, a chain with its
	// jump, a device.
	foreign := []func() error{
		func() error {
			return fake.NexthopReplace(ctx, hostnet.Nexthop{ID: 7, Family: hostnet.IPv4, Dev: "eth0"})
		},
		func() error { return fake.RouteReplace(ctx, hostnet.Route{Dst: theirs, NHID: 7}) },
		func() error {
			return fake.RouteReplace(ctx, hostnet.Route{Dst: netip.MustParsePrefix("192.0.2.0/24"), Dev: "eth0"})
		},
		func() error {
			return fake.Restore(ctx, hostnet.IPv4, "nat", []string{":someone-nat - [0:0]", "-A POSTROUTING -j someone-nat"})
		},
	}
	for _, f := range foreign {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	before := fake.String()

	st2, err := p.ReadConnectState(id)
	if err != nil {
		t.Fatal(err)
	}
	st.j.Close()
	if err := p.undoConnect(ctx, st2); err != nil {
		t.Fatalf("undo: %v", err)
	}
	want := []hostnet.Nexthop{{ID: 7, Family: hostnet.IPv4, Dev: "eth0"}}
	if got := nexthopsOf(t, fake); !slices.EqualFunc(got, want, func(a, b hostnet.Nexthop) bool { return a.ID == b.ID && a.Dev == b.Dev }) {
		t.Errorf("nexthops after undo %+v; want only another's %+v", got, want)
	}
	wantRoutes := []hostnet.Route{{Dst: theirs, NHID: 7}, {Dst: netip.MustParsePrefix("192.0.2.0/24"), Dev: "eth0"}}
	if got := routesOf(t, fake, hostnet.IPv4); !slices.Equal(got, wantRoutes) {
		t.Errorf("routes after undo %+v; want only another's %+v", got, wantRoutes)
	}
	for _, f := range natFamilies {
		if ok, _ := hostnet.HasChain(ctx, fake, f, "nat", nat.chain); ok {
			t.Errorf("%s: the run's nat chain is left", f)
		}
	}
	if ok, _ := hostnet.HasChain(ctx, fake, hostnet.IPv4, "nat", "someone-nat"); !ok || !slices.Equal(fake.Rules(hostnet.IPv4, "nat", "POSTROUTING"), []string{"-j someone-nat"}) {
		t.Errorf("another's chain or jump went: %s", fake)
	}
	for _, d := range devs {
		if ok, _ := fake.LinkExists(ctx, d); ok {
			t.Errorf("device %s left", d)
		}
	}
	if ok, _ := fake.LinkExists(ctx, "eth0"); !ok {
		t.Error("another's device went")
	}
	for _, k := range MultipathHashSysctls() {
		if v, _ := fake.Sysctl(ctx, k); v != "0" {
			t.Errorf("%s = %q after undo; want 0", k, v)
		}
	}
	if _, err := os.Stat(p.ConnectRunDir(id)); !os.IsNotExist(err) {
		t.Errorf("run directory: %v; want it gone", err)
	}
	if before == fake.String() {
		t.Fatal("the undo changed nothing")
	}

	// Undone again (a clean after connect's own undo was cut short):
	// nothing changes, no error.
	after := fake.String()
	if err := p.undoConnect(ctx, st2); err != nil {
		t.Errorf("second undo: %v", err)
	}
	if got := fake.String(); got != after {
		t.Errorf("second undo changed the namespace:\n%s\nwas\n%s", got, after)
	}
	for _, k := range MultipathHashSysctls() {
		if v, _ := fake.Sysctl(ctx, k); v != "0" {
			t.Errorf("%s = %q after the second undo", k, v)
		}
	}
}

// `cluster clean` of a serve's journal on the fake: the one-port chains
// (both tables, every jump), the site routes and their nexthops, the
// sysctls go; another cluster's chain of the same protocol, another's
// route to a site prefix and a sysctl changed since the run stay. Twice
// the same as once.
func TestClusterCleanOnFake(t *testing.T) {
	ctx := context.Background()
	fake := hostnet.NewFake("")
	p := Paths{State: t.TempDir(), Connect: t.TempDir(), Hosts: func(string) hostnet.Host { return fake }}
	fake.SetSysctlValue("net.ipv4.ip_forward", "0")
	fake.SetSysctlValue("net.ipv6.conf.all.forwarding", "0")
	const id, other = "ab12", "cd34"
	devs := []string{"ovpnperfab12u0", "ovpnperfab12u1"}
	for _, d := range append(devs, "eth0") {
		fake.AddLink(d, true)
	}
	st, err := p.newStateFile(State{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
		if err := st.record(Resource{Kind: KindSysctl, Name: key, Detail: "0", Set: "1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := fake.SetSysctl(ctx, key, "1"); err != nil {
			t.Fatal(err)
		}
	}
	// Someone else sets IPv6 forwarding to their own value since.
	fake.SetSysctlValue("net.ipv6.conf.all.forwarding", "2")
	for _, c := range []struct{ id, port string }{{id, "1194"}, {other, "1294"}} {
		if c.id == id {
			if err := st.record(Resource{Kind: KindChain, Name: chainName(id, "udp"), Detail: "udp " + c.port}); err != nil {
				t.Fatal(err)
			}
		}
		if err := addOnePort(ctx, fake, c.id, "udp", 1194, []uint16{1195, 1196}, BackendHMARK, 7); err != nil {
			t.Fatal(err)
		}
	}
	site, taken := netip.MustParsePrefix("192.168.50.0/24"), netip.MustParsePrefix("192.168.60.0/24")
	mp := &Multipath{Host: fake, Prefixes: []netip.Prefix{site, taken}, Group: siteGroup(id, 0), Devs: devs}
	if err := st.record(mp.Resource()); err != nil {
		t.Fatal(err)
	}
	if _, err := mp.Set(ctx, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	if err := fake.RouteReplace(ctx, hostnet.Route{Dst: taken, Dev: "eth0"}); err != nil {
		t.Fatal(err)
	}
	st.j.Close()

	for round := 1; round <= 2; round++ {
		if err := p.Clean(ctx, id); err != nil {
			t.Fatalf("clean %d: %v", round, err)
		}
		for _, table := range []string{"mangle", "nat"} {
			if ok, _ := hostnet.HasChain(ctx, fake, hostnet.IPv4, table, chainName(id, "udp")); ok {
				t.Errorf("clean %d: the cluster's %s chain is left", round, table)
			}
			if ok, _ := hostnet.HasChain(ctx, fake, hostnet.IPv4, table, chainName(other, "udp")); !ok {
				t.Errorf("clean %d: another cluster's %s chain went", round, table)
			}
			if got := fake.Rules(hostnet.IPv4, table, "PREROUTING"); !slices.Equal(got, []string{"-p udp --dport 1194 -j " + chainName(other, "udp")}) {
				t.Errorf("clean %d: %s PREROUTING %q; want only the other cluster's jump", round, table, got)
			}
		}
		if ns := nexthopsOf(t, fake); len(ns) != 0 {
			t.Errorf("clean %d: nexthops left %+v", round, ns)
		}
		if got := routesOf(t, fake, hostnet.IPv4); !slices.Equal(got, []hostnet.Route{{Dst: taken, Dev: "eth0"}}) {
			t.Errorf("clean %d: routes %+v; want only another's", round, got)
		}
		for key, want := range map[string]string{"net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "2"} {
			if v, _ := fake.Sysctl(ctx, key); v != want {
				t.Errorf("clean %d: %s = %q, want %q", round, key, v, want)
			}
		}
	}
}
