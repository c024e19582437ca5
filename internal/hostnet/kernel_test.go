package hostnet_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/vishvananda/netlink"
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
	pfx4 = netip.MustParsePrefix("10.99.0.0/24")
	pfx6 = netip.MustParsePrefix("fd00:99::/64")
	nat  = "ovpnperf-hostnettest-nat"
)

// sequence is what connect and clean do to a namespace, and a few things
// the kernel refuses.
var sequence = []step{
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
	D1    bool
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
			if r.Dst == pfx4 || r.Dst == pfx6 || r.NHID != 0 {
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
	if v.D1, err = h.LinkExists(ctx, "d1"); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestKernelAndFake runs one sequence of changes on a fresh namespace and
// on a Fake, and compares what each refuses and what each lists after
// every step: the fake the unit tests of cluster and connect use cannot
// drift from the kernel unnoticed.
func TestKernelAndFake(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "ip", "iptables-restore", "iptables-save", "ip6tables-restore", "ip6tables-save")
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
	nh, err := netns.Handle(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	fake := hostnet.NewFake(ns)
	for _, pair := range [][2]string{{"d0", "p0"}, {"d1", "p1"}} {
		// Equivalent to: ip -n NS link add D type veth peer name P; ip -n NS link set D up
		if err := nh.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: pair[0]}, PeerName: pair[1]}); err != nil {
			t.Fatal(err)
		}
		for _, n := range pair {
			l, err := nh.LinkByName(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := nh.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
			fake.AddLink(n, true)
		}
	}
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
	// the link and went, its route with it; the nexthop on d0 stays.
	end := look(t, ctx, fake)
	if want := []hostnet.Nexthop{{ID: 1, Family: hostnet.IPv4, Dev: "d0"}}; !reflect.DeepEqual(end.Nexthops, want) || len(end.Routes) != 0 {
		t.Errorf("at the end: %+v; want nexthops %+v and no route", end, want)
	}
}
