package report

import (
	"fmt"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/probe"
)

// probeDoc writes a `probe --json` document: the figures advise reads,
// each with where it came from, and the findings.
func (p *page) probeDoc(d *Document) {
	r := d.Probe
	p.section("probe "+r.Host, fmt.Sprintf(" — %d findings", len(r.Findings)))
	p.command(nil, "ovpnperf probe "+r.Host+" --json")
	field := func(known bool, v, source, note string) string {
		if !known {
			return "not available: " + note
		}
		return v + " (" + source + ")"
	}
	x := r.Path
	pmtu := func(f probe.Field[probe.PMTU]) string {
		v := fmt.Sprintf("%d bytes", f.Value.Bytes)
		if f.Value.Blackhole {
			v += ", black hole"
		}
		return field(f.Known(), v, f.Source, f.Note)
	}
	p.facts("Host", r.Host, "Time", r.Time.UTC().Format("2006-01-02 15:04 MST"),
		"Path MTU IPv4", pmtu(x.PMTUIPv4), "Path MTU IPv6", pmtu(x.PMTUIPv6),
		"RTT", field(x.RTTMillis.Known(), fmt.Sprintf("%.1f ms", x.RTTMillis.Value), x.RTTMillis.Source, x.RTTMillis.Note),
		"Loss", field(x.LossPercent.Known(), fmt.Sprintf("%.2f %%", x.LossPercent.Value), x.LossPercent.Source, x.LossPercent.Note),
		"Throughput", field(x.ThroughputBitsPerSec.Known(), measure.FormatRate(x.ThroughputBitsPerSec.Value), x.ThroughputBitsPerSec.Source, x.ThroughputBitsPerSec.Note),
		"OpenVPN", field(x.OpenVPNVersion.Known(), x.OpenVPNVersion.Value, x.OpenVPNVersion.Source, x.OpenVPNVersion.Note),
		"File", d.File+" (schema "+d.Schema+")")
	p.findings(r.Findings)
}

// findings writes the findings of a tune or probe document as a list:
// each record's sentence, rendered by the package that judged it, with its
// kind, outcome, key and figures as data-* attributes (as a run's).
func (p *page) findings(fs []finding.Finding) {
	if len(fs) == 0 {
		return
	}
	p.h(`<h3>Findings</h3><ul class="findings">{{range .}}<li data-kind="{{.Kind}}" data-outcome="{{.Outcome}}" data-key="{{.Key}}" data-figures="{{.Figures}}">{{.Text}}</li>{{end}}</ul>`, recordFindings(fs))
}

// recordFindings are findings as the page shows them, each with the
// sentence its record carries (measure.FindingText renders a run's kinds
// only).
func recordFindings(fs []finding.Finding) []pageFinding {
	var out []pageFinding
	for _, f := range fs {
		pf := newPageFinding(f)
		pf.Text = f.Text
		out = append(out, pf)
	}
	return out
}
