package hostnet_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// step is one change made on both hosts; wantErr says whether the kernel
// refuses it, and notExist whether for a missing object.
type step struct {
	name     string
	do       func(ctx context.Context, h hostnet.Host) error
	wantErr  bool
	notExist bool
}

var (
	addr4 = netip.MustParsePrefix("10.97.0.1/24")
	addr6 = netip.MustParsePrefix("fd00:97::1/64")
	gw4   = netip.MustParseAddr("10.97.0.2")
	gw6   = netip.MustParseAddr("fd00:97::2")
	pfx4  = netip.MustParsePrefix("10.99.0.0/24")
	pfx6  = netip.MustParsePrefix("fd00:99::/64")
	nat   = "ovpnperf-hostnettest-nat"
)

// sequence is what lab up, connect and clean do to a namespace, and a few
// things the kernel refuses.
var sequence = []step{
	{"veths", func(ctx context.Context, h hostnet.Host) error {
		if err := h.VethAdd(ctx, "d0", 1400, "p0", h.Netns()); err != nil {
			return err
		}
		return h.VethAdd(ctx, "d1", 1500, "p1", h.Netns())
	}, false, false},
	{"counters of a link that is down", func(ctx context.Context, h hostnet.Host) error {
		st, err := h.LinkStats(ctx, "d0")
		if err == nil && st != (hostnet.LinkStats{}) {
			return fmt.Errorf("counters of d0, never up: %+v", st)
		}
		return err
	}, false, false},
	{"counters of a missing link", func(ctx context.Context, h hostnet.Host) error {
		_, err := h.LinkStats(ctx, "d9")
		return err
	}, true, true},
	{"txqueuelen", func(ctx context.Context, h hostnet.Host) error {
		return h.LinkSetTxQLen(ctx, "d0", 50)
	}, false, false},
	{"txqueuelen of a missing link", func(ctx context.Context, h hostnet.Host) error {
		return h.LinkSetTxQLen(ctx, "d9", 50)
	}, true, true},
	{"a veth of a name taken", func(ctx context.Context, h hostnet.Host) error {
		return h.VethAdd(ctx, "d2", 1500, "p0", h.Netns())
	}, true, false},
	{"address on a missing link", func(ctx context.Context, h hostnet.Host) error {
		return h.AddrAdd(ctx, "d9", addr4)
	}, true, true},
	{"addresses", func(ctx context.Context, h hostnet.Host) error {
		if err := h.AddrAdd(ctx, "d0", addr4); err != nil {
			return err
		}
		return h.AddrAdd(ctx, "d0", addr6)
	}, false, false},
	{"an address twice", func(ctx context.Context, h hostnet.Host) error {
		return h.AddrAdd(ctx, "d0", addr4)
	}, true, false},
	{"gateway on a link that is down", func(ctx context.Context, h hostnet.Host) error {
		return h.RouteReplace(ctx, hostnet.Route{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Gw: gw4})
	}, true, false},
	{"up", func(ctx context.Context, h hostnet.Host) error {
		ls, err := h.Links(ctx)
		if err != nil {
			return err
		}
		for _, l := range ls {
			if err := h.LinkSetUp(ctx, l); err != nil {
				return err
			}
		}
		return nil
	}, false, false},
	{"set a missing link up", func(ctx context.Context, h hostnet.Host) error {
		return h.LinkSetUp(ctx, "d9")
	}, true, true},
	{"default routes", func(ctx context.Context, h hostnet.Host) error {
		if err := h.RouteReplace(ctx, hostnet.Route{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Gw: gw4}); err != nil {
			return err
		}
		return h.RouteReplace(ctx, hostnet.Route{Dst: netip.PrefixFrom(netip.IPv6Unspecified(), 0), Gw: gw6})
	}, false, false},
	{"gateway outside every subnet", func(ctx context.Context, h hostnet.Host) error {
		return h.RouteReplace(ctx, hostnet.Route{Dst: netip.MustParsePrefix("10.96.0.0/24"), Gw: netip.MustParseAddr("10.95.0.1")})
	}, true, false},
	{"neighbours", func(ctx context.Context, h hostnet.Host) error {
		hw, err := h.LinkMAC(ctx, "p0")
		if err != nil {
			return err
		}
		if err := h.NeighAdd(ctx, "d0", gw4, hw); err != nil {
			return err
		}
		return h.NeighAdd(ctx, "d0", gw6, hw)
	}, false, false},
	{"a neighbour twice", func(ctx context.Context, h hostnet.Host) error {
		hw, err := h.LinkMAC(ctx, "p0")
		if err != nil {
			return err
		}
		return h.NeighAdd(ctx, "d0", gw4, hw)
	}, true, false},
	{"a neighbour on a missing link", func(ctx context.Context, h hostnet.Host) error {
		return h.NeighAdd(ctx, "d9", gw4, net.HardwareAddr{2, 0, 0, 0, 0, 9})
	}, true, true},
	{"qdiscs", func(ctx context.Context, h hostnet.Host) error {
		if err := h.QdiscAdd(ctx, "d0", hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 2, Rate: 125000, Burst: 16 << 10, Limit: 30000}); err != nil {
			return err
		}
		return h.QdiscAdd(ctx, "d0", hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 3, Parent: 2, Rate: 250000, Burst: 16 << 10, Limit: 30000})
	}, false, false},
	{"a second root qdisc", func(ctx context.Context, h hostnet.Host) error {
		return h.QdiscAdd(ctx, "d0", hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 4, Rate: 125000, Burst: 16 << 10, Limit: 30000})
	}, true, false},
	{"a qdisc under a missing one", func(ctx context.Context, h hostnet.Host) error {
		return h.QdiscAdd(ctx, "d0", hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 4, Parent: 7, Rate: 125000, Burst: 16 << 10, Limit: 30000})
	}, true, true},
	{"replace where there is no qdisc", func(ctx context.Context, h hostnet.Host) error {
		if err := h.QdiscReplace(ctx, "p0", hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 1, Rate: 100000, Burst: 5000, Limit: 20000}); err != nil {
			return err
		}
		return h.QdiscAdd(ctx, "p0", hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 2, Parent: 1, Rate: 250000, Burst: 16 << 10, Limit: 30000})
	}, false, false},
	{"replace a qdisc's parameters", func(ctx context.Context, h hostnet.Host) error {
		return h.QdiscReplace(ctx, "p0", hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 1, Rate: 50000, Burst: 5000, Limit: 20000})
	}, false, false},
	{"replace a qdisc by another kind", func(ctx context.Context, h hostnet.Host) error {
		return h.QdiscReplace(ctx, "p0", hostnet.Qdisc{Kind: hostnet.Netem, Handle: 1, Delay: time.Millisecond, Limit: 1000})
	}, true, false},
	{"replace a qdisc under a missing one", func(ctx context.Context, h hostnet.Host) error {
		return h.QdiscReplace(ctx, "p0", hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 4, Parent: 7, Rate: 125000, Burst: 16 << 10, Limit: 30000})
	}, true, true},
	{"replace a qdisc on a missing link", func(ctx context.Context, h hostnet.Host) error {
		return h.QdiscReplace(ctx, "d9", hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 1, Rate: 125000, Burst: 16 << 10, Limit: 30000})
	}, true, true},
	{"replace a root by another handle", func(ctx context.Context, h hostnet.Host) error {
		return h.QdiscReplace(ctx, "p0", hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 5, Rate: 100000, Burst: 5000, Limit: 20000})
	}, false, false},
	{"members", func(ctx context.Context, h hostnet.Host) error {
		for _, n := range []hostnet.Nexthop{{ID: 1, Family: hostnet.IPv4, Dev: "d0"}, {ID: 2, Family: hostnet.IPv4, Dev: "d1"},
			{ID: 3, Family: hostnet.IPv6, Dev: "d0"}, {ID: 4, Family: hostnet.IPv6, Dev: "d1"}} {
			if err := h.NexthopReplace(ctx, n); err != nil {
				return err
			}
		}
		return nil
	}, false, false},
	{"groups", func(ctx context.Context, h hostnet.Host) error {
		if err := h.NexthopReplace(ctx, hostnet.Nexthop{ID: 10, Group: []uint32{1, 2}}); err != nil {
			return err
		}
		return h.NexthopReplace(ctx, hostnet.Nexthop{ID: 11, Group: []uint32{3, 4}})
	}, false, false},
	{"routes", func(ctx context.Context, h hostnet.Host) error {
		if err := h.RouteReplace(ctx, hostnet.Route{Dst: pfx4, NHID: 10}); err != nil {
			return err
		}
		return h.RouteReplace(ctx, hostnet.Route{Dst: pfx6, NHID: 11})
	}, false, false},
	{"group with a family", func(ctx context.Context, h hostnet.Host) error {
		return h.NexthopReplace(ctx, hostnet.Nexthop{ID: 12, Family: hostnet.IPv6, Group: []uint32{3}})
	}, true, false},
	{"group of a missing member", func(ctx context.Context, h hostnet.Host) error {
		return h.NexthopReplace(ctx, hostnet.Nexthop{ID: 12, Group: []uint32{1, 99}})
	}, true, false},
	{"IPv6 route over IPv4 nexthop", func(ctx context.Context, h hostnet.Host) error {
		return h.RouteReplace(ctx, hostnet.Route{Dst: netip.MustParsePrefix("fd00:98::/64"), NHID: 1})
	}, true, false},
	{"route over a missing nexthop", func(ctx context.Context, h hostnet.Host) error {
		return h.RouteReplace(ctx, hostnet.Route{Dst: netip.MustParsePrefix("10.98.0.0/24"), NHID: 99})
	}, true, false},
	{"delete another's route", func(ctx context.Context, h hostnet.Host) error {
		return h.RouteDel(ctx, hostnet.Route{Dst: pfx4, NHID: 11})
	}, true, true},
	{"shrink group", func(ctx context.Context, h hostnet.Host) error {
		return h.NexthopReplace(ctx, hostnet.Nexthop{ID: 10, Group: []uint32{2}})
	}, false, false},
	{"delete a member", func(ctx context.Context, h hostnet.Host) error { return h.NexthopDel(ctx, 3) }, false, false},
	{"delete a link", func(ctx context.Context, h hostnet.Host) error { return h.LinkDel(ctx, "d1") }, false, false},
	{"delete a missing link", func(ctx context.Context, h hostnet.Host) error { return h.LinkDel(ctx, "d1") }, true, true},
	{"delete a missing nexthop", func(ctx context.Context, h hostnet.Host) error { return h.NexthopDel(ctx, 10) }, true, true},
	{"sysctl", func(ctx context.Context, h hostnet.Host) error {
		old, err := h.SetSysctl(ctx, "net.ipv4.fib_multipath_hash_policy", "1")
		if err != nil {
			return err
		}
		v, err := h.Sysctl(ctx, "net.ipv4.fib_multipath_hash_policy")
		if old != "0" || v != "1" || err != nil {
			return fmt.Errorf("sysctl: old %q, now %q, %v", old, v, err)
		}
		return nil
	}, false, false},
	{"chain", func(ctx context.Context, h hostnet.Host) error {
		return h.Restore(ctx, hostnet.IPv4, "nat", []string{":" + nat + " - [0:0]", "-I POSTROUTING -j " + nat,
			"-A " + nat + " -o d0 -s 10.8.0.6/32 -j MASQUERADE"})
	}, false, false},
	{"rewrite chain", func(ctx context.Context, h hostnet.Host) error {
		return h.Restore(ctx, hostnet.IPv4, "nat", []string{":" + nat + " - [0:0]", "-A " + nat + " -o d0 -s 10.8.0.10/32 -j MASQUERADE"})
	}, false, false},
	{"make a chain that exists", func(ctx context.Context, h hostnet.Host) error {
		// -N refuses it, and the batch leaves the chain and its jumps as
		// they were (":CH - [0:0]" would have emptied it).
		return h.Restore(ctx, hostnet.IPv4, "nat", []string{"-N " + nat, "-I POSTROUTING -j " + nat})
	}, true, false},
	{"a rule of two lines", func(ctx context.Context, h hostnet.Host) error {
		return h.Restore(ctx, hostnet.IPv4, "nat", []string{"-A " + nat + " -j ACCEPT\n-A POSTROUTING -j ACCEPT"})
	}, true, false},
	{"delete a chain jumped to", func(ctx context.Context, h hostnet.Host) error {
		return h.Restore(ctx, hostnet.IPv4, "nat", []string{"-F " + nat, "-X " + nat})
	}, true, false},
	{"a batch fails whole", func(ctx context.Context, h hostnet.Host) error {
		return h.Restore(ctx, hostnet.IPv4, "nat", []string{":ovpnperf-hostnettest-2 - [0:0]", "-A nosuchchain -j ACCEPT"})
	}, true, false},
	{"IPv6 chain", func(ctx context.Context, h hostnet.Host) error {
		return h.Restore(ctx, hostnet.IPv6, "nat", []string{":" + nat + " - [0:0]", "-I POSTROUTING -j " + nat,
			"-A " + nat + " -o d0 -s fd00:8::1000/128 -j MASQUERADE"})
	}, false, false},
	{"remove chain", func(ctx context.Context, h hostnet.Host) error {
		return h.RemoveChain(ctx, hostnet.IPv4, "nat", nat)
	}, false, false},
	{"remove IPv6 chain", func(ctx context.Context, h hostnet.Host) error {
		return h.RemoveChain(ctx, hostnet.IPv6, "nat", nat)
	}, false, false},
	{"remove a missing chain", func(ctx context.Context, h hostnet.Host) error {
		return h.RemoveChain(ctx, hostnet.IPv4, "nat", nat)
	}, true, true},
}

// view is what a Host lists of the objects the sequence touches.
type view struct {
	Nexthops []hostnet.Nexthop
	Routes   []hostnet.Route
	Chains   []string
	Chains6  []string
	// Rules counts the rules of each chain of the nat table (their text
	// is iptables-save's own on the kernel's side).
	Rules map[string]int
	Links []string
	// Addrs are d0's addresses but the link-local ones.
	Addrs []netip.Prefix
	// Qdiscs are d0's, P0Qdiscs p0's: kind, handles and a tbf's rate.
	Qdiscs, P0Qdiscs []hostnet.Qdisc
	// TxQLen is d0's transmit queue.
	TxQLen int
	// Neighbours are d0's permanent ones, each with whether its
	// hardware address is p0's.
	Neighbours map[netip.Addr]bool
}

func look(t *testing.T, ctx context.Context, h hostnet.Host) view {
	t.Helper()
	var v view
	var err error
	if v.Nexthops, err = h.Nexthops(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range []hostnet.Family{hostnet.IPv4, hostnet.IPv6} {
		rs, err := h.Routes(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Dst == pfx4 || r.Dst == pfx6 || r.NHID != 0 || r.Gw.IsValid() {
				v.Routes = append(v.Routes, r)
			}
		}
	}
	if v.Chains, err = h.Chains(ctx, hostnet.IPv4, "nat"); err != nil {
		t.Fatal(err)
	}
	slices.Sort(v.Chains)
	if v.Chains6, err = h.Chains(ctx, hostnet.IPv6, "nat"); err != nil {
		t.Fatal(err)
	}
	slices.Sort(v.Chains6)
	v.Rules = map[string]int{}
	switch h := h.(type) {
	case *hostnet.Fake:
		for _, c := range v.Chains {
			v.Rules[c] = len(h.Rules(hostnet.IPv4, "nat", c))
		}
	default:
		out, err := exec.Command("ip", "netns", "exec", h.Netns(), "iptables-save", "-t", "nat").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range v.Chains {
			v.Rules[c] = 0
		}
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "-A" {
				v.Rules[f[1]]++
			}
		}
	}
	if v.Links, err = h.Links(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"d0", "d1"} {
		ok, err := h.LinkExists(ctx, l)
		if err != nil || ok != slices.Contains(v.Links, l) {
			t.Fatalf("link %s exists %v (%v); listed in %v", l, ok, err, v.Links)
		}
	}
	if slices.Contains(v.Links, "d0") {
		as, err := h.LinkAddrs(ctx, "d0")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if !a.Addr().IsLinkLocalUnicast() {
				v.Addrs = append(v.Addrs, a)
			}
		}
		slices.SortFunc(v.Addrs, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	}
	var neighs map[netip.Addr]net.HardwareAddr
	switch h := h.(type) {
	case *hostnet.Fake:
		neighs = h.Neighbours("d0")
		for _, q := range h.Qdiscs("d0") {
			v.Qdiscs = append(v.Qdiscs, hostnet.Qdisc{Kind: q.Kind, Handle: q.Handle, Parent: q.Parent, Rate: q.Rate})
		}
		for _, q := range h.Qdiscs("p0") {
			v.P0Qdiscs = append(v.P0Qdiscs, hostnet.Qdisc{Kind: q.Kind, Handle: q.Handle, Parent: q.Parent, Rate: q.Rate})
		}
		v.TxQLen = h.TxQLen("d0")
	default:
		if slices.Contains(v.Links, "d0") {
			v.Qdiscs = kernelQdiscs(t, h.Netns(), "d0")
			v.P0Qdiscs = kernelQdiscs(t, h.Netns(), "p0")
			neighs = kernelNeighbours(t, h.Netns(), "d0")
			v.TxQLen = kernelTxQLen(t, h.Netns(), "d0")
		}
	}
	if len(neighs) > 0 {
		p0, err := h.LinkMAC(ctx, "p0")
		if err != nil {
			t.Fatal(err)
		}
		v.Neighbours = map[netip.Addr]bool{}
		for a, hw := range neighs {
			v.Neighbours[a] = hw.String() == p0.String()
		}
	}
	return v
}

// kernelNeighbours lists a device's permanent neighbour entries as ip
// shows them.
func kernelNeighbours(t *testing.T, ns, dev string) map[netip.Addr]net.HardwareAddr {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-json", "neigh", "show", "dev", dev, "nud", "permanent").Output()
	if err != nil {
		t.Fatalf("ip -n %s -json neigh show dev %s: %v", ns, dev, err)
	}
	var js []struct {
		Dst    string `json:"dst"`
		Lladdr string `json:"lladdr"`
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		if err := json.Unmarshal(out, &js); err != nil {
			t.Fatalf("ip -json neigh show: %v: %s", err, out)
		}
	}
	m := map[netip.Addr]net.HardwareAddr{}
	for _, j := range js {
		a, err1 := netip.ParseAddr(j.Dst)
		hw, err2 := net.ParseMAC(j.Lladdr)
		if err1 != nil || err2 != nil {
			t.Fatalf("ip -json neigh show: entry %+v", j)
		}
		m[a] = hw
	}
	return m
}

// kernelTxQLen is a device's transmit queue as ip shows it.
func kernelTxQLen(t *testing.T, ns, dev string) int {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-json", "link", "show", "dev", dev).Output()
	if err != nil {
		t.Fatalf("ip -n %s -json link show dev %s: %v", ns, dev, err)
	}
	var js []struct {
		TxQLen int `json:"txqlen"`
	}
	if err := json.Unmarshal(out, &js); err != nil || len(js) != 1 {
		t.Fatalf("ip -json link show: %v: %s", err, out)
	}
	return js[0].TxQLen
}

// kernelQdiscs lists a device's qdiscs as tc shows them, but the default
// ones (handle 0:): kind, handles and a tbf's rate (bytes per second).
func kernelQdiscs(t *testing.T, ns, dev string) []hostnet.Qdisc {
	t.Helper()
	out, err := exec.Command("tc", "-n", ns, "-json", "qdisc", "show", "dev", dev).Output()
	if err != nil {
		t.Fatalf("tc -n %s -json qdisc show dev %s: %v", ns, dev, err)
	}
	var js []struct {
		Kind    string `json:"kind"`
		Handle  string `json:"handle"`
		Parent  string `json:"parent"`
		Options struct {
			Rate uint64 `json:"rate"`
		} `json:"options"`
	}
	if err := json.Unmarshal(out, &js); err != nil {
		t.Fatalf("tc -json qdisc show: %v: %s", err, out)
	}
	major := func(s string) uint16 {
		m, _, _ := strings.Cut(s, ":")
		n, err := strconv.ParseUint(m, 16, 16)
		if err != nil {
			t.Fatalf("qdisc handle %q: %v", s, err)
		}
		return uint16(n)
	}
	var qs []hostnet.Qdisc
	for _, j := range js {
		if j.Handle == "0:" {
			continue
		}
		q := hostnet.Qdisc{Kind: j.Kind, Handle: major(j.Handle)}
		if j.Kind == hostnet.Tbf {
			q.Rate = j.Options.Rate
		}
		if j.Parent != "" {
			q.Parent = major(j.Parent)
		}
		qs = append(qs, q)
	}
	return qs
}

// TestKernelAndFake runs one sequence of changes on a fresh namespace and
// on a Fake, and compares what each refuses and what each lists after
// every step: the fake the unit tests of cluster and connect use cannot
// drift from the kernel unnoticed.
func TestKernelAndFake(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "ip", "tc", "iptables-restore", "iptables-save", "ip6tables-restore", "ip6tables-save")
	ctx := context.Background()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "ovpnperf-hostnet-" + hex.EncodeToString(b[:])
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(ns); err != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	})
	fake := hostnet.NewFake(ns)
	real := hostnet.Open(ns)
	def, err := real.Sysctl(ctx, "net.ipv4.fib_multipath_hash_policy")
	if err != nil {
		t.Fatal(err)
	}
	fake.SetSysctlValue("net.ipv4.fib_multipath_hash_policy", def)
	for _, s := range sequence {
		rerr, ferr := s.do(ctx, real), s.do(ctx, fake)
		for _, h := range []struct {
			name string
			err  error
		}{{"kernel", rerr}, {"fake", ferr}} {
			if (h.err != nil) != s.wantErr || (h.err != nil && hostnet.IsNotExist(h.err) != s.notExist) {
				t.Errorf("%s: %s: error %v; want an error %v (missing object %v)", s.name, h.name, h.err, s.wantErr, s.notExist)
			}
		}
		rv, fv := look(t, ctx, real), look(t, ctx, fake)
		if !reflect.DeepEqual(rv, fv) {
			t.Fatalf("after %s:\nkernel %+v\nfake   %+v", s.name, rv, fv)
		}
	}
	// The sequence did what it says: each group lost its last member with
	// the link and went, its route with it; the nexthop on d0 stays, and
	// so do d0's default routes, addresses and qdiscs; d1's peer went with it.
	end := look(t, ctx, fake)
	if want := []hostnet.Nexthop{{ID: 1, Family: hostnet.IPv4, Dev: "d0"}}; !reflect.DeepEqual(end.Nexthops, want) {
		t.Errorf("at the end: %+v; want nexthops %+v", end, want)
	}
	wantRoutes := []hostnet.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: gw4, Dev: "d0"}, {Dst: netip.MustParsePrefix("::/0"), Gw: gw6, Dev: "d0"}}
	if !reflect.DeepEqual(end.Routes, wantRoutes) {
		t.Errorf("at the end: routes %v; want %v", end.Routes, wantRoutes)
	}
	if want := []string{"d0", "lo", "p0"}; !reflect.DeepEqual(end.Links, want) || len(end.Addrs) != 2 || len(end.Qdiscs) != 2 ||
		!reflect.DeepEqual(end.Neighbours, map[netip.Addr]bool{gw4: true, gw6: true}) {
		t.Errorf("at the end: links %v, d0's addresses %v, qdiscs %v; neighbours %v; want links %v, 2 addresses, 2 qdiscs, gateways at p0's address", end.Links, end.Addrs, end.Qdiscs, end.Neighbours, want)
	}
}
