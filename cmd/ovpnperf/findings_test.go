package main

import (
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// The findings are computed from the rows: a CPU-bound LAN where cipher none
// is no faster, and a WAN where the tunnel keeps 96 %.
func TestFindings(t *testing.T) {
	mk := func(network, variant, path, dir string, ratio float64, cpu float64, samples ...float64) measure.Row {
		r := measure.Row{Network: network, Variant: variant, Path: path, Direction: dir, Valid: true, RatioToRouted: ratio,
			CPUSecondsPerGB: map[string]float64{"server": cpu, "client": cpu / 2}}
		for _, s := range samples {
			r.AddSample(s * 1e6)
		}
		r.Summarize()
		return r
	}
	rep := &measure.Report{Scenario: measure.Scenario{Networks: []measure.Network{{Name: "lan"}, {Name: "wan"}}}}
	rep.Rows = []measure.Row{
		mk("lan", "default", measure.PathTunnel, "up", 0.03, 10, 500, 520, 540),
		mk("lan", "none", measure.PathTunnel, "up", 0.03, 9, 480, 530, 560),
		mk("wan", "default", measure.PathTunnel, "up", 0.96, 26, 46, 46.1, 46.2),
	}
	got := strings.Join(findings(rep), "\n")
	for _, want := range []string{
		"lan: default up: 520 Mbit/s, 3% of the routed path: OpenVPN is the limit; its busier process spends 10.0 CPU-s per GB, so one core carries at most about 800 Mbit/s",
		"lan up: cipher none is not faster than the defaults beyond the spread",
		"wan: default up: 46.1 Mbit/s, 96% of the routed path: the tunnel costs about its header overhead",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("findings lack %q:\n%s", want, got)
		}
	}
}
