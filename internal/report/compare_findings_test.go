package report

import (
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func fnd(k finding.Kind, variant, dir string, o verdict.Outcome) finding.Finding {
	return finding.Finding{Kind: k, Subject: finding.Subject{Network: "lan", Variant: variant, Direction: dir, Rows: []int{1}}, Outcome: o, Text: "x"}
}

// CompareFindings: a moved limit is one change, worse from the path to
// another limit and better back; a confirmed problem that appears is
// worse, one that goes better; an outcome that changes on another kind
// has no verdict; equal findings are no change.
func TestCompareFindings(t *testing.T) {
	t.Parallel()
	c := verdict.Confirmed
	type want struct {
		change  string
		kind    finding.Kind
		from    finding.Kind
		verdict string
	}
	for _, tc := range []struct {
		name     string
		old, new []finding.Finding
		want     []want
	}{
		{"same", []finding.Finding{fnd(finding.PathBound, "default", "up", c)}, []finding.Finding{fnd(finding.PathBound, "default", "up", c)}, nil},
		{"path to cpu", []finding.Finding{fnd(finding.PathBound, "default", "up", c)}, []finding.Finding{fnd(finding.CPUBound, "default", "up", c)},
			[]want{{LimitMoved, finding.CPUBound, finding.PathBound, Worse}}},
		{"cpu to path", []finding.Finding{fnd(finding.CPUBound, "default", "up", c)}, []finding.Finding{fnd(finding.PathBound, "default", "up", c)},
			[]want{{LimitMoved, finding.PathBound, finding.CPUBound, Better}}},
		{"cpu to window", []finding.Finding{fnd(finding.CPUBound, "default", "up", c)}, []finding.Finding{fnd(finding.WindowBound, "default", "up", c)},
			[]want{{LimitMoved, finding.WindowBound, finding.CPUBound, ""}}},
		{"other direction is no move", []finding.Finding{fnd(finding.PathBound, "default", "up", c)}, []finding.Finding{fnd(finding.PathBound, "default", "up", c), fnd(finding.CPUBound, "default", "down", c)},
			[]want{{FindingAppeared, finding.CPUBound, "", ""}}},
		{"drops appear", nil, []finding.Finding{fnd(finding.SocketDrops, "default", "up", c)},
			[]want{{FindingAppeared, finding.SocketDrops, "", Worse}}},
		{"fragmentation goes", []finding.Finding{fnd(finding.Fragmentation, "default", "down", c)}, nil,
			[]want{{FindingGone, finding.Fragmentation, "", Better}}},
		{"loss becomes confirmed", []finding.Finding{fnd(finding.Loss, "", "up", verdict.Noise)}, []finding.Finding{fnd(finding.Loss, "", "up", c)},
			[]want{{FindingOutcome, finding.Loss, "", Worse}}},
		{"cipher outcome", []finding.Finding{fnd(finding.CipherCost, "", "up", c)}, []finding.Finding{fnd(finding.CipherCost, "", "up", verdict.Noise)},
			[]want{{FindingOutcome, finding.CipherCost, "", ""}}},
		{"unconfirmed limit is no move", []finding.Finding{fnd(finding.PathBound, "default", "up", c)}, []finding.Finding{fnd(finding.PathBound, "default", "up", verdict.Noise)},
			[]want{{FindingOutcome, finding.PathBound, "", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CompareFindings(tc.old, tc.new, CompareOptions{})
			if len(got) != len(tc.want) {
				t.Fatalf("got %d changes %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Change != w.change || g.Kind != w.kind || g.From != w.from || g.Verdict != w.verdict {
					t.Errorf("change %d: %s %s from %q verdict %q, want %s %s from %q verdict %q", i, g.Change, g.Kind, g.From, g.Verdict, w.change, w.kind, w.from, w.verdict)
				}
				if g.Subject.Rows != nil || g.Reason == "" {
					t.Errorf("change %d: rows %v, reason %q", i, g.Subject.Rows, g.Reason)
				}
			}
		})
	}
	// Variants of one document: matched by network and direction.
	got := CompareFindings([]finding.Finding{fnd(finding.PathBound, "default", "up", c), fnd(finding.CPUBound, "jumbo", "up", c)},
		[]finding.Finding{fnd(finding.PathBound, "default", "up", c), fnd(finding.CPUBound, "jumbo", "up", c)},
		CompareOptions{OldVariant: "default", NewVariant: "jumbo"})
	if len(got) != 1 || got[0].Change != LimitMoved || got[0].From != finding.PathBound || got[0].To != finding.CPUBound || got[0].Verdict != Worse {
		t.Errorf("default → jumbo: %+v, want path-bound → cpu-bound, worse", got)
	}
}
