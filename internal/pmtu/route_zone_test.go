package pmtu

import (
	"net/netip"
	"strings"
	"testing"
)

// A zone names the interface of a link-local address: the route lookup
// leaves through it (lo, or no route where lo has none for fe80::/10, as
// `ip route get fe80::1 oif lo` says), never through the interface that
// holds fe80::/64 (eth0).
func TestRouteToZone(t *testing.T) {
	r, err := RouteTo(netip.MustParseAddr("fe80::1%lo"))
	if err != nil {
		if !strings.Contains(err.Error(), "fe80::1%lo") {
			t.Errorf("error %q does not name fe80::1%%lo", err)
		}
		return
	}
	if r.Dev != "lo" {
		t.Errorf("fe80::1%%lo routed through %q, want lo", r.Dev)
	}
}
