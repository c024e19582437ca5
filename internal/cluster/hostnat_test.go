package cluster

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
)

// The host nat chain rewrites on each tunnel exactly the other tunnels'
// addresses (never a site's), is written again only when an address
// changes, and leaves out a tunnel without an address.
func TestHostNATRules(t *testing.T) {
	ctx := context.Background()
	fake := hostnet.NewFake("")
	rec := &recordingHost{Fake: fake}
	const chain = "ovpnperf-abcd-hostnat"
	h := &hostNAT{h: rec, chain: chain, cur: map[hostnet.Family]string{}}
	for _, f := range natFamilies {
		if err := h.create(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	devs := []string{"ovpnperfabcdt0", "ovpnperfabcdt1", "ovpnperfabcdt2"}
	a := netip.MustParseAddr
	v4 := []netip.Addr{a("10.8.0.2"), a("10.8.0.130"), {}}
	v6 := []netip.Addr{a("fd00:8::1000"), a("fd00:8:0:1::1000"), {}}
	changed, err := h.sync(ctx, devs, v4, v6)
	if err != nil || !changed {
		t.Fatalf("first sync: changed %v, %v", changed, err)
	}
	for _, c := range []struct {
		f    hostnet.Family
		want []string
	}{
		{hostnet.IPv4, []string{"-o ovpnperfabcdt0 -s 10.8.0.130/32 -j MASQUERADE", "-o ovpnperfabcdt1 -s 10.8.0.2/32 -j MASQUERADE"}},
		{hostnet.IPv6, []string{"-o ovpnperfabcdt0 -s fd00:8:0:1::1000/128 -j MASQUERADE", "-o ovpnperfabcdt1 -s fd00:8::1000/128 -j MASQUERADE"}},
	} {
		if got := fake.Rules(c.f, "nat", chain); !slices.Equal(got, c.want) {
			t.Errorf("%s chain after the first sync: %q; want %q", c.f, got, c.want)
		}
		if got := fake.Rules(c.f, "nat", "POSTROUTING"); !slices.Equal(got, []string{"-j " + chain}) {
			t.Errorf("%s POSTROUTING: %q; want the one jump", c.f, got)
		}
	}
	rec.lines = nil
	if changed, err := h.sync(ctx, devs, v4, v6); err != nil || changed || len(rec.lines) > 0 {
		t.Errorf("same addresses: changed %v, %v, ran %q", changed, err, rec.lines)
	}
	// t2 comes up: each tunnel now rewrites the two others'; the IPv6
	// chain (t2 has no IPv6 address) is not written.
	v4[2] = a("10.8.0.66")
	rec.lines = nil
	if changed, err := h.sync(ctx, devs, v4, v6); err != nil || !changed {
		t.Fatalf("t2 up: changed %v, %v", changed, err)
	}
	got := fake.Rules(hostnet.IPv4, "nat", chain)
	if len(got) != 6 || !slices.Contains(got, "-o ovpnperfabcdt2 -s 10.8.0.130/32 -j MASQUERADE") || strings.Contains(strings.Join(rec.lines, "\n"), "ip6tables") {
		t.Errorf("t2 up: IPv4 chain %q, batches\n%s\nwant the IPv4 chain rewritten with 6 rules and no IPv6 batch", got, strings.Join(rec.lines, "\n"))
	}
	// Clean removes the chains and their jumps, twice without error.
	for i := 0; i < 2; i++ {
		for _, f := range natFamilies {
			if err := deleteNATChain(ctx, fake, Resource{Kind: KindNATChain, Name: chain, Detail: f.String()}); err != nil {
				t.Fatalf("clean %d: %v", i, err)
			}
			if ok, _ := hostnet.HasChain(ctx, fake, f, "nat", chain); ok || len(fake.Rules(f, "nat", "POSTROUTING")) != 0 {
				t.Errorf("after clean %d: %s", i, fake)
			}
		}
	}
}
