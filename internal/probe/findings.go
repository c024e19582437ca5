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
//   - loss: the paced echoes judged by verdict.JudgeEchoLoss, the rule
//     measure's loss finding uses too (more than 1 % lost confirms, at
//     most half of it of at least 150 echoes refutes, in between noise,
//     none answered or no echo measured not tested); a document without
//     the echoes' counts is judged from its percent where the rule needs
//     no count (lossFinding);
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
	if f, ok := lossFinding(rep); ok {
		f.Subject = subject("")
		out = append(out, f)
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

// lossFinding judges the paced echoes: from their counts (LossEchoes), or
// in a document written before them from the lost percent alone, by
// verdict.JudgeEchoLossPercent, which decides only where the rule needs
// no count and assumes none. The advice (the path's rate is not known
// from one TCP flow, whose goodput loss holds) goes with a confirmed
// finding, and as a caution with an undecided one.
func lossFinding(rep *Report) (finding.Finding, bool) {
	p := rep.Path
	l := p.LossPercent
	if !l.Known() {
		if l.Source == "" {
			return finding.Finding{}, false
		}
		return finding.Finding{Kind: finding.Loss, Outcome: verdict.NotTested, Settings: map[string]string{"host": rep.Host},
			Why:    "no echo measured the loss: " + l.Note,
			Decide: "echoes that come back (ICMP, or an ovpnperf pps server with --pps-port)",
			Text:   fmt.Sprintf("loss to %s is not known (%s), so neither is the path's rate from one TCP flow: give advise --rate.", rep.Host, l.Note)}, true
	}
	var j verdict.EchoLoss
	if e := p.LossEchoes; e.Known() {
		j = verdict.JudgeEchoLoss(e.Value.Sent, e.Value.Answered)
	} else {
		j = verdict.JudgeEchoLossPercent(l.Value)
	}
	f := finding.Finding{Kind: finding.Loss, Outcome: j.Outcome,
		Figures:  finding.Figures{"loss_percent": l.Value, measure.FigLossRulePercent: 100 * verdict.LossShare},
		Settings: map[string]string{"host": rep.Host}}
	if l.Method != "" {
		f.Settings["method"] = l.Method
	}
	how := ""
	if l.Note != "" {
		how = " (" + l.Note + ")"
	}
	for name, fl := range map[string]Field[float64]{"loss_up_percent": p.LossUpPercent, "loss_down_percent": p.LossDownPercent} {
		if fl.Known() {
			f.Figures[name] = fl.Value
		}
	}
	lost := fmt.Sprintf("%.2f %%", l.Value)
	if j.Counted {
		f.Figures[measure.FigEchoesSentPackets] = float64(j.Sent)
		f.Figures[measure.FigEchoesLostPackets] = float64(j.Lost)
		lost = fmt.Sprintf("%d of %d (%.2f %%)", j.Lost, j.Sent, l.Value)
	}
	rule := 100 * verdict.LossShare
	switch j.Outcome {
	case verdict.Confirmed:
		f.Advice = "the path's rate is not known from one TCP flow on a lossy path (its goodput is loss-bound): give advise --rate"
		f.RefutedBy = fmt.Sprintf("paced echoes losing %.0f %% or less", rule)
		f.Text = fmt.Sprintf("loss: %s of the echoes to %s were lost%s, more than the %.0f %% rule; the path's rate is not known from one TCP flow, whose goodput loss holds: give advise --rate.", lost, rep.Host, how, rule)
	case verdict.Refuted:
		f.Text = fmt.Sprintf("loss to %s refuted: %s of the paced echoes were lost%s, at most half the %.0f %% rule.", rep.Host, lost, how, rule)
	default:
		f.Advice = "if the path loses packets, one TCP flow's goodput is loss-bound, not the path's rate: give advise --rate to be sure"
		switch j.Reason {
		case verdict.EchoesNoneAnswered:
			f.Why = "no echo came back: the host may not answer, or something on the way drops the echoes, so they cannot tell loss"
			f.Decide = "echoes that come back (ICMP, or an ovpnperf pps server with --pps-port)"
		case verdict.EchoesNotCounted:
			f.Why = fmt.Sprintf("the document gives the loss as a percent without the count of echoes, and refuting loss needs at least %d of them", verdict.LossMinEchoes)
			f.Decide = "a probe written with the echoes' counts (ovpnperf probe again)"
		case verdict.EchoesTooFew:
			f.Why = fmt.Sprintf("%d echoes are too few to refute loss (at least %d)", j.Sent, verdict.LossMinEchoes)
			f.Decide = fmt.Sprintf("more echoes: --pings %d or more", verdict.LossEchoes)
		default:
			f.Why = fmt.Sprintf("%.2f %% lost is near the %.0f %% rule", l.Value, rule)
			f.Decide = fmt.Sprintf("more echoes: --pings %d or more", 2*verdict.LossEchoes)
		}
		f.Text = fmt.Sprintf("loss to %s undecided (%s): %s of the echoes were lost%s; %s; to decide: %s; %s.", rep.Host, j.Outcome, lost, how, f.Why, f.Decide, f.Advice)
	}
	return f, true
}
