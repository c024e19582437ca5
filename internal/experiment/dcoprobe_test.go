package experiment

import (
	"context"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// The DCO probe is the spec's (Spec.ProbeDCO): it is asked once when a
// variant allows DCO, and a host it reports without OpenVPN leaves that
// variant not tested; variants without DCO never ask it.
func TestDCOProbeIsTheSpecs(t *testing.T) {
	t.Parallel()
	withDCO, err := openvpn.ParseVariant("withdco=dco")
	if err != nil {
		t.Fatal(err)
	}
	if !withDCO.DCO() {
		t.Fatalf("variant %+v does not allow DCO", withDCO)
	}
	plain, err := openvpn.ParseVariant("plain=")
	if err != nil {
		t.Fatal(err)
	}
	probes := 0
	probe := func(context.Context) dco.Host { probes++; return dco.Host{OpenVPNErr: "not found"} }

	spec := Spec{Networks: []Network{{Name: "a"}, {Name: "b"}}, Variants: []openvpn.Variant{plain, withDCO}, ProbeDCO: probe}
	why, offered := dcoNotTested(context.Background(), spec)
	if probes != 1 {
		t.Errorf("the spec's probe was asked %d times, want once", probes)
	}
	if len(why) != 1 || why["withdco"] == "" || offered != "" {
		t.Errorf("not tested %v, offered %q; want only withdco not tested, nothing offered", why, offered)
	}

	probes = 0
	spec.Variants = []openvpn.Variant{plain}
	if why, _ := dcoNotTested(context.Background(), spec); probes != 0 || len(why) != 0 {
		t.Errorf("without a DCO variant: probe asked %d times, not tested %v; want neither", probes, why)
	}
}
