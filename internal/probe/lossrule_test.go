package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/docs/schemas"
	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// probe and measure judge "the path loses packets" by one rule: the same
// paced echoes sent and answered give the same outcome in probe's loss
// finding (probe.Findings) and in measure's (measure.Findings, where the
// outside flow's retransmits raise the question).
func TestLossRuleAgreesWithMeasure(t *testing.T) {
	t.Parallel()
	seen := map[verdict.Outcome]bool{}
	for _, c := range []struct{ sent, answered int }{
		{300, 0}, {300, 300}, {300, 299}, {300, 298}, {300, 297}, {300, 296}, {300, 285},
		{150, 150}, {149, 149}, {10, 10}, {10, 9}, {1000, 995}, {1000, 994}, {10000, 9950},
	} {
		t.Run(fmt.Sprintf("%d of %d", c.answered, c.sent), func(t *testing.T) {
			p := probeLoss(t, c.sent, c.answered)
			m := measureLoss(t, c.sent, c.answered)
			want := verdict.JudgeEchoLoss(c.sent, c.answered).Outcome
			if p.Outcome != m.Outcome || p.Outcome != want {
				t.Errorf("probe %q, measure %q, the rule %q", p.Outcome, m.Outcome, want)
			}
			if p.Outcome != verdict.NotTested && (p.Figures[measure.FigEchoesSentPackets] != m.Figures[measure.FigEchoesSentPackets] ||
				p.Figures[measure.FigEchoesLostPackets] != m.Figures[measure.FigEchoesLostPackets] ||
				p.Figures[measure.FigLossRulePercent] != m.Figures[measure.FigLossRulePercent]) {
				t.Errorf("figures: probe %v, measure %v", p.Figures, m.Figures)
			}
			seen[p.Outcome] = true
		})
	}
	for _, o := range []verdict.Outcome{verdict.Confirmed, verdict.Refuted, verdict.Noise, verdict.NotTested} {
		if !seen[o] {
			t.Errorf("no case gave %q", o)
		}
	}
}

func lossOf(t *testing.T, fs []finding.Finding) finding.Finding {
	t.Helper()
	var out []finding.Finding
	for _, f := range fs {
		if err := f.Check(); err != nil {
			t.Error(err)
		}
		if f.Kind == finding.Loss {
			out = append(out, f)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d loss findings, want 1: %+v", len(out), fs)
	}
	return out[0]
}

// probeLoss is probe's loss finding for an ICMP probe of sent echoes of
// which answered came back.
func probeLoss(t *testing.T, sent, answered int) finding.Finding {
	lost := 100 * float64(sent-answered) / float64(sent)
	rep := &Report{Schema: Schema, Host: "198.51.100.2", Path: Path{
		LossPercent: measured(lost, "ICMP echo").by(MethodICMPEcho),
		LossEchoes:  measured(Echoes{Sent: sent, Answered: answered}, "ICMP echo").by(MethodICMPEcho)}}
	return lossOf(t, Findings(rep))
}

// measureLoss is measure's loss finding for a measure document whose
// outside flow retransmitted 2 % of its segments in each of 3 samples
// and whose paced echoes were sent and answered so.
func measureLoss(t *testing.T, sent, answered int) finding.Finding {
	rep := &measure.Report{Schema: measure.Schema, Scenario: measure.Scenario{Command: measure.CommandMeasure, Repeat: 3,
		Networks: []measure.Network{{Name: measure.NetworkReal}},
		Real: &measure.RealPath{Host: "198.51.100.2", Tunnel: "10.8.0.1", TunDevice: "tun0", Proto: "udp",
			LossEchoes: &measure.EchoCount{Sent: sent, Answered: answered, IntervalSeconds: measure.LossEchoInterval.Seconds()}}}}
	tun := measure.NewRow(measure.NetworkReal, measure.VariantTunnel, measure.PathTunnel, measure.DirectionUp, "udp")
	out := measure.NewRow(measure.NetworkReal, measure.VariantOutside, measure.PathRouted, measure.DirectionUp, "tcp")
	for range 3 {
		tun.AddSample(40e6)
		tun.OpenVPN = append(tun.OpenVPN, measure.OpenVPNCounters{BusiestThreadShare: 0.3})
		out.AddSample(50e6)
		// 50 Mbit/s for 2 s is 8633 segments of 1448 bytes; 173 is 2 %.
		out.Samples = append(out.Samples, measure.Sample{Bps: 50e6, Intervals: []measure.Interval{{StartSeconds: 0, EndSeconds: 2, Bps: 50e6, Retransmits: 173}}})
		out.OpenVPN = append(out.OpenVPN, measure.OpenVPNCounters{})
	}
	rep.Rows = []measure.Row{out, tun}
	return lossOf(t, measure.Findings(rep))
}

// A document with the echoes' counts (ICMP, and pps with each way's)
// follows docs/schemas/probe.v1.json, and its loss finding reads back the
// same; the schema refuses a count that is not a number.
func TestEchoCountsFollowSchema(t *testing.T) {
	t.Parallel()
	one := func(e Field[Echoes], lost float64) []byte {
		rep := &Report{Schema: Schema, Host: "198.51.100.2", Time: time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC), Path: Path{
			LossPercent: measured(lost, "x").by(e.Method), LossEchoes: e}}
		rep.Findings = Findings(rep)
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schemas.Check(b); err != nil {
			t.Errorf("%s: %v", b, err)
		}
		back, err := Decode(bytes.NewReader(b))
		if err != nil || back.Path.LossEchoes.Value.Sent != e.Value.Sent || len(back.Findings) != 1 || back.Findings[0].Outcome != rep.Findings[0].Outcome {
			t.Errorf("read back: %v %+v", err, back)
		}
		return b
	}
	one(measured(Echoes{Sent: 300, Answered: 290}, "x").by(MethodICMPEcho), 100*10.0/300)
	b := one(measured(Echoes{Sent: 300, Answered: 299, Up: &OneWay{Sent: 300, Arrived: 300}, Down: &OneWay{Sent: 300, Arrived: 299}}, "x").by(MethodPPSEcho), 100.0/300)
	bad := strings.Replace(string(b), `"arrived":299`, `"arrived":"299"`, 1)
	if bad == string(b) {
		t.Fatalf("no down count in %s", b)
	}
	if _, err := schemas.Check([]byte(bad)); err == nil {
		t.Errorf("the schema accepted a count that is a string: %s", bad)
	}
}
