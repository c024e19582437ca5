package main

import (
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// refusedForSteal takes the emulator's late or stall refusal for the
// host's doing only with the host's steal at 2 % or more, from the row's
// typed refusal (never its sentence).
func TestRefusedForSteal(t *testing.T) {
	refused := func(kind string, figs measure.Figures) measure.Row {
		r := measure.NewRow("wan", "default", measure.PathTunnel, measure.DirectionUp, "udp")
		r.Refuse(measure.Refusal{Kind: kind, Figures: figs, Tries: 3, Sample: 1, Samples: 1})
		return r
	}
	late := measure.Figures{measure.FigureReleasedPackets: 5966, measure.FigureLatePackets: 66, measure.FigureLatePercent: 1.1, measure.FigureLateMeanSeconds: 0.00275}
	host := func(f measure.Figures, busy, steal float64) measure.Figures {
		g := measure.Figures{measure.FigureHostBusyPercent: busy, measure.FigureHostStealPercent: steal}
		for k, v := range f {
			g[k] = v
		}
		return g
	}
	stall := measure.Figures{measure.FigureStalledPackets: 1, measure.FigureStallSeconds: 0.05}
	valid := measure.NewRow("wan", "default", measure.PathTunnel, measure.DirectionUp, "udp")
	valid.Refusal = &measure.Refusal{Kind: measure.RefusalEmulatorLate, Figures: host(late, 30, 13.3)} // a valid row is never refused
	for _, c := range []struct {
		name string
		row  measure.Row
		want bool
	}{
		{"late, 13.3 % steal", refused(measure.RefusalEmulatorLate, host(late, 30, 13.3)), true},
		{"stall, 2.0 % steal", refused(measure.RefusalEmulatorStall, host(stall, 91, 2.0)), true},
		{"late, 0.4 % steal", refused(measure.RefusalEmulatorLate, host(late, 97, 0.4)), false},
		{"late, host not read", refused(measure.RefusalEmulatorLate, late), false},
		{"lost, 13.3 % steal", refused(measure.RefusalEmulatorLost, host(measure.Figures{measure.FigureLostPackets: 3}, 30, 13.3)), false},
		{"iperf3's error", refused(measure.RefusalIperfError, nil), false},
		{"a row written before refusals were typed", measure.Row{Error: "the link emulator fell behind during the sample; the host's CPUs were 30 % busy during it, 13.3 % of their time taken by the hypervisor (steal)"}, false},
		{"valid", valid, false},
	} {
		if got := refusedForSteal(c.row); got != c.want {
			t.Errorf("%s: refusedForSteal = %v, want %v", c.name, got, c.want)
		}
	}
}
