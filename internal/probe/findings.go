package probe

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Findings are the judgements a probe's fields carry, as records about the
// path to the probed host (network "real", as measure's; the variant of a
// path-MTU finding names the address family):
//   - loss: the echoes lost packets (confirmed), or no echo measured the
//     loss (not tested); either way the path's rate is not known from one
//     TCP flow, whose goodput loss holds;
//   - pmtu-blackhole: a family's path MTU search met a black hole;
//   - dco-off: the host cannot offload (with why), or the given config
//     would not be offloaded here (with every reason).
//
// They are a function of the fields alone, so a document written without
// them is judged the same on reading.
func Findings(rep *Report) []finding.Finding {
	p := rep.Path
	out := []finding.Finding{}
	subject := func(variant string) finding.Subject {
		return finding.Subject{Network: measure.NetworkReal, Variant: variant, Direction: measure.DirectionUp}
	}
	host := map[string]string{"host": rep.Host}
	switch l := p.LossPercent; {
	case l.Known() && l.Value > 0:
		f := finding.Finding{Kind: finding.Loss, Subject: subject(""), Outcome: verdict.Confirmed,
			Figures: finding.Figures{"loss_percent": l.Value}, Settings: map[string]string{"host": rep.Host, "method": l.Method},
			Advice:    "the path's rate is not known from one TCP flow on a lossy path (its goodput is loss-bound): give advise --rate",
			RefutedBy: "echoes that all come back"}
		for name, fl := range map[string]Field[float64]{"loss_up_percent": p.LossUpPercent, "loss_down_percent": p.LossDownPercent} {
			if fl.Known() {
				f.Figures[name] = fl.Value
			}
		}
		f.Text = fmt.Sprintf("loss: %.2f %% of the echoes to %s were lost (%s); the path's rate is not known from one TCP flow, whose goodput loss holds: give advise --rate.", l.Value, rep.Host, l.Note)
		out = append(out, f)
	case !l.Known() && l.Source != "":
		out = append(out, finding.Finding{Kind: finding.Loss, Subject: subject(""), Outcome: verdict.NotTested, Settings: host,
			Decide: "echoes that come back (ICMP, or an ovpnperf pps server with --pps-port)",
			Text:   fmt.Sprintf("loss to %s is not known (%s), so neither is the path's rate from one TCP flow: give advise --rate.", rep.Host, l.Note)})
	}
	for _, fam := range []struct {
		name string
		f    Field[PMTU]
	}{{"ipv4", p.PMTUIPv4}, {"ipv6", p.PMTUIPv6}} {
		if !fam.f.Known() || !fam.f.Value.Blackhole {
			continue
		}
		out = append(out, finding.Finding{Kind: finding.PMTUBlackhole, Subject: subject(fam.name), Outcome: verdict.Confirmed,
			Figures: finding.Figures{"path_mtu_bytes": float64(fam.f.Value.Bytes)}, Settings: host,
			Advice:    "keep OpenVPN's packets under the path MTU with tun-mtu or mssfix: ovpnperf advise --probe gives the lines",
			RefutedBy: "an ICMP too-big answer to a packet above the path MTU",
			Cites:     []string{openvpn.Fact("mssfix")},
			Text: fmt.Sprintf("%s path MTU black hole: packets above %d bytes to %s vanish without an ICMP too-big answer, so path MTU discovery cannot find the limit; OpenVPN's packets must stay under it (tun-mtu or mssfix, as advise --probe says).",
				fam.name, fam.f.Value.Bytes, rep.Host)})
	}
	if d := p.DCO; d.Known() && !d.Value {
		out = append(out, finding.Finding{Kind: finding.DCOOff, Subject: subject("host"), Outcome: verdict.Confirmed,
			Settings: map[string]string{"host": rep.Host, "reasons": d.Note},
			Text:     "DCO: this host cannot offload OpenVPN's data channel: " + d.Note + "."})
	}
	if d := p.DCOWithConfig; d.Known() && !d.Value {
		reasons := ""
		if p.DCOOffReasons.Known() {
			reasons = strings.Join(p.DCOOffReasons.Value, "; ")
		}
		out = append(out, finding.Finding{Kind: finding.DCOOff, Subject: subject("config"), Outcome: verdict.Confirmed,
			Settings: map[string]string{"host": rep.Host, "reasons": reasons, "rules": d.Note},
			Text:     "DCO would not be used with the given config here: " + reasons + "."})
	}
	return out
}
