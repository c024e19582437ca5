package cluster

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

// The host nat chain rewrites on each tunnel exactly the other tunnels'
// addresses (never a site's), is written again only when an address
// changes, and leaves out a tunnel without an address.
func TestHostNATRules(t *testing.T) {
	var ran []string
	h := &hostNAT{chain: "ovpnperf-abcd-hostnat", cur: map[string]string{}, tools: []string{"iptables", "ip6tables"},
		run: func(_ context.Context, ns string, argv ...string) ([]byte, error) {
			ran = append(ran, strings.Join(argv, " "))
			return nil, nil
		}}
	devs := []string{"ovpnperfabcdt0", "ovpnperfabcdt1", "ovpnperfabcdt2"}
	a := netip.MustParseAddr
	v4 := []netip.Addr{a("10.8.0.2"), a("10.8.0.130"), {}}
	v6 := []netip.Addr{a("fd00:8::1000"), a("fd00:8:0:1::1000"), {}}
	changed, err := h.sync(context.Background(), devs, v4, v6)
	if err != nil || !changed {
		t.Fatalf("first sync: changed %v, %v", changed, err)
	}
	want := []string{
		"iptables -w -t nat -F ovpnperf-abcd-hostnat",
		"iptables -w -t nat -A ovpnperf-abcd-hostnat -o ovpnperfabcdt0 -s 10.8.0.130/32 -j MASQUERADE",
		"iptables -w -t nat -A ovpnperf-abcd-hostnat -o ovpnperfabcdt1 -s 10.8.0.2/32 -j MASQUERADE",
		"ip6tables -w -t nat -F ovpnperf-abcd-hostnat",
		"ip6tables -w -t nat -A ovpnperf-abcd-hostnat -o ovpnperfabcdt0 -s fd00:8:0:1::1000/128 -j MASQUERADE",
		"ip6tables -w -t nat -A ovpnperf-abcd-hostnat -o ovpnperfabcdt1 -s fd00:8::1000/128 -j MASQUERADE",
	}
	if got := strings.Join(ran, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("first sync ran\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	ran = nil
	if changed, err := h.sync(context.Background(), devs, v4, v6); err != nil || changed || len(ran) > 0 {
		t.Errorf("same addresses: changed %v, %v, ran %q", changed, err, ran)
	}
	// t2 comes up: each tunnel now rewrites the two others'.
	v4[2] = a("10.8.0.66")
	ran = nil
	if changed, err := h.sync(context.Background(), devs, v4, v6); err != nil || !changed {
		t.Fatalf("t2 up: changed %v, %v", changed, err)
	}
	if n := len(ran); n != 7 || !strings.Contains(strings.Join(ran, "\n"), "-o ovpnperfabcdt2 -s 10.8.0.130/32") || strings.Contains(strings.Join(ran, "\n"), "ip6tables") {
		t.Errorf("t2 up: ran\n%s\nwant the IPv4 chain rewritten with 6 rules", strings.Join(ran, "\n"))
	}
}
