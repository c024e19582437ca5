package measure

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func findingRow(network, variant, path, dir string, cpu float64, samples ...float64) Row {
	r := Row{Network: network, Variant: variant, Path: path, Direction: dir, Valid: true, Proto: "udp",
		CPUSecondsPerGB: map[string]float64{"server": cpu, "client": cpu / 2}}
	if path == PathRouted {
		r.Proto, r.CPUSecondsPerGB = "tcp", map[string]float64{}
	}
	for _, s := range samples {
		r.AddSample(s * 1e6)
	}
	return r
}

// findingOf returns the one finding of kind about network, variant and
// direction, failing the test when there is none or more than one.
func findingOf(t *testing.T, fs []finding.Finding, kind finding.Kind, network, variant, dir string) finding.Finding {
	t.Helper()
	var got []finding.Finding
	for _, f := range fs {
		if f.Kind == kind && f.Subject.Network == network && f.Subject.Variant == variant && f.Subject.Direction == dir {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d %s findings about %s/%s/%s, want 1; findings:\n%s", len(got), kind, network, variant, dir, kindsOf(fs))
	}
	return got[0]
}

// kindsOf lists the findings' keys, for messages.
func kindsOf(fs []finding.Finding) string {
	var ks []string
	for _, f := range fs {
		ks = append(ks, f.Key()+" "+string(f.Outcome))
	}
	return strings.Join(ks, "\n")
}

// wellFormed checks every finding: Check passes, its rows exist, its
// sentence is the renderer's for its fields, and each cite names a
// heading of the repository's docs.
func wellFormed(t *testing.T, rep *Report, fs []finding.Finding) {
	t.Helper()
	for _, f := range fs {
		if err := f.Check(); err != nil {
			t.Errorf("%s: %v", f.Key(), err)
		}
		if len(f.Subject.Rows) == 0 {
			t.Errorf("%s: no rows", f.Key())
		}
		for _, r := range f.Subject.Rows {
			if r < 0 || r >= len(rep.Rows) {
				t.Errorf("%s: row %d of %d", f.Key(), r, len(rep.Rows))
			}
		}
		if FindingText(f) != f.Text {
			t.Errorf("%s: text is not the renderer's:\n%s\n%s", f.Key(), f.Text, FindingText(f))
		}
		if len(f.Cites) == 0 {
			t.Errorf("%s: cites nothing", f.Key())
		}
		for _, c := range f.Cites {
			if !citeResolves(t, c) {
				t.Errorf("%s: cite %s names no heading", f.Key(), c)
			}
		}
		switch f.Outcome {
		case verdict.Noise, verdict.NotTested:
			if f.Why == "" || f.Decide == "" {
				t.Errorf("%s (%s): no why or decide", f.Key(), f.Outcome)
			}
		case verdict.Confirmed:
			if f.RefutedBy == "" {
				t.Errorf("%s (confirmed): nothing would refute it", f.Key())
			}
		}
	}
}

var slugDrop = regexp.MustCompile(`[^a-z0-9 _-]`)

// citeResolves reports whether "docs/x.md#anchor" names a heading of that
// file, by GitHub's rule for anchors (lower case, punctuation dropped,
// spaces to dashes).
func citeResolves(t *testing.T, cite string) bool {
	t.Helper()
	file, anchor, ok := strings.Cut(cite, "#")
	if !ok {
		return false
	}
	fh, err := os.Open(filepath.Join("..", "..", file))
	if err != nil {
		t.Errorf("cite %s: %v", cite, err)
		return false
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	fence := false
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if slug == anchor {
			return true
		}
	}
	return false
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// The findings are computed from the rows: a CPU-bound LAN where cipher none
// is no faster, and a WAN where the tunnel keeps 96 %.
func TestFindings(t *testing.T) {
	t.Parallel()
	mk := findingRow
	rep := &Report{Scenario: Scenario{Repeat: 3, Networks: []Network{{Name: "lan"}, {Name: "wan"}, {Name: "wan2"}, {Name: "lossy"}}}}
	rep.Rows = []Row{
		mk("lan", "routed", PathRouted, "up", 0, 16000, 17000, 18000),
		mk("lan", "routed", PathRouted, "down", 0, 16000, 17000, 18000),
		mk("lan", "default", PathTunnel, "up", 10, 500, 520, 540),
		mk("lan", "none", PathTunnel, "up", 9, 480, 530, 560),
		// One sample each, or spreads that overlap widely, were read as
		// "the cost is per packet, not the encryption".
		mk("lan", "default", PathTunnel, "down", 10, 520),
		mk("lan", "none", PathTunnel, "down", 9, 500),
		mk("wan2", "routed", PathRouted, "up", 0, 80, 81, 82),
		mk("wan2", "default", PathTunnel, "up", 10, 40, 41, 42),
		mk("wan2", "none", PathTunnel, "up", 9, 20, 41, 80),
		mk("wan", "routed", PathRouted, "up", 0, 48, 48, 48),
		mk("wan", "default", PathTunnel, "up", 26, 46, 46.1, 46.2),
		// A lossy path (5 Mbit/s, 300 ms, 2 % loss, measured here): jumbo
		// at 80 % of routed used 1 % of a core. OpenVPN is not the limit.
		mk("lossy", "routed", PathRouted, "up", 0, 4.2, 4.25, 4.3),
		mk("lossy", "jumbo", PathTunnel, "up", 21.1, 3.34, 3.41, 3.58),
	}
	fs := Findings(rep)
	wellFormed(t, rep, fs)

	cpu := findingOf(t, fs, finding.CPUBound, "lan", "default", "up")
	if cpu.Outcome != verdict.Confirmed || cpu.Figures[FigBusiestCPUSecondsPerGB] != 10 || !near(cpu.Figures[FigOneCoreBps], 8e8) ||
		cpu.Figures[FigPairs] != 3 || cpu.Figures[FigHighRatio] >= 0.9 {
		t.Errorf("lan default up: %+v", cpu)
	}
	if got := cpu.Subject.Rows; len(got) != 2 || got[0] != 2 || got[1] != 0 {
		t.Errorf("lan default up rests on rows %v, want [2 0]", got)
	}
	pc := findingOf(t, fs, finding.CipherCost, "lan", "none", "up")
	if pc.Outcome != verdict.Confirmed || pc.Settings[SettingCost] != CostPerPacket {
		t.Errorf("lan up cipher: %+v", pc)
	}
	pb := findingOf(t, fs, finding.PathBound, "wan", "default", "up")
	if pb.Outcome != verdict.Confirmed || pb.Figures[FigDefaultOverheadBytes] != float64(defaultGCMOverhead()) || pb.Figures[FigLowRatio] < 0.9 || pb.Figures[FigWindowLowRatio] != 0.9 {
		t.Errorf("wan default up: %+v", pb)
	}
	lossy := findingOf(t, fs, finding.BelowPath, "lossy", "jumbo", "up")
	if lossy.Outcome != verdict.Confirmed || lossy.Figures[FigBusiestCPUSecondsPerGB] != 21.1 {
		t.Errorf("lossy jumbo up: %+v", lossy)
	}
	// One sample each, or spreads that overlap widely, decide nothing;
	// --repeat was 3, so "use --repeat 3 or more" would be no help: the
	// LAN's down rows lost samples; wan2's spread is too wide.
	lanDown := findingOf(t, fs, finding.CipherCost, "lan", "none", "down")
	if lanDown.Outcome != verdict.Noise || lanDown.Settings[SettingCost] != "" || lanDown.Decide != resolution(verdict.Judgement{Outcome: verdict.Noise}, 3, 1) {
		t.Errorf("lan down cipher: %+v", lanDown)
	}
	wan2 := findingOf(t, fs, finding.CipherCost, "wan2", "none", "up")
	if wan2.Outcome != verdict.Noise || wan2.Figures[FigLowRatio] != 0.5 || !near(wan2.Figures[FigHighRatio], 80.0/42) ||
		wan2.Decide != resolution(verdict.Judgement{Outcome: verdict.Noise}, 3, 3) {
		t.Errorf("wan2 up cipher: %+v", wan2)
	}
	for _, f := range fs {
		if f.Kind == finding.CPUBound && f.Subject.Network != "lan" {
			t.Errorf("OpenVPN named as the limit where it used a small share of a core: %+v", f)
		}
		if f.Kind == finding.CipherCost && f.Settings[SettingCost] == CostPerPacket && f.Subject.Direction != "up" {
			t.Errorf("per-packet finding without the evidence: %+v", f)
		}
		if f.Decide == resolution(verdict.Judgement{Outcome: verdict.Noise}, 1, 1) {
			t.Errorf("a run with --repeat 3 is told to use more: %+v", f)
		}
	}
}

// A limit is named only from a comparison that decides: one sample a side
// at 96 % or at 3 % of the routed path names nothing (before, one median
// gave "the path is the limit" and "OpenVPN is the limit"), and a run with
// --repeat 1 is told what would decide it.
func TestFindingsNeedTheVerdictRules(t *testing.T) {
	t.Parallel()
	mk := findingRow
	rep := &Report{Scenario: Scenario{Repeat: 1, Networks: []Network{{Name: "wan"}, {Name: "lan"}}}}
	rep.Rows = []Row{
		mk("wan", "routed", PathRouted, "up", 0, 48),
		mk("wan", "default", PathTunnel, "up", 26, 46.1),
		mk("lan", "routed", PathRouted, "up", 0, 17000),
		mk("lan", "default", PathTunnel, "up", 10, 520),
	}
	fs := Findings(rep)
	wellFormed(t, rep, fs)
	if len(fs) != 2 {
		t.Fatalf("findings:\n%s", kindsOf(fs))
	}
	for _, f := range fs {
		if f.Kind != finding.LimitUnknown || f.Outcome != verdict.Noise || f.Decide != resolution(verdict.Judgement{Outcome: verdict.Noise}, 1, 1) {
			t.Errorf("a limit named from one sample a side, or not what would decide it: %+v", f)
		}
	}
}

// A recipe's document is judged by its verdicts: it has findings [] (not
// absent), and a document's findings survive a JSON round trip.
func TestFindingsInTheDocument(t *testing.T) {
	t.Parallel()
	rep := &Report{Schema: Schema, Scenario: Scenario{Command: "lab run", Repeat: 3, Networks: []Network{{Name: "wan"}}}}
	rep.Rows = []Row{findingRow("wan", "routed", PathRouted, "up", 0, 48, 48, 48), findingRow("wan", "default", PathTunnel, "up", 26, 46, 46.1, 46.2)}
	var b strings.Builder
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if back.JudgedOnReading || len(back.Findings) != 1 || back.Findings[0].Kind != finding.PathBound || back.Findings[0].Text != FindingText(back.Findings[0]) {
		t.Errorf("round trip: judged on reading %v, %+v", back.JudgedOnReading, back.Findings)
	}
	// Without the key: judged on reading, and it says so.
	old := strings.Replace(b.String(), `"findings"`, `"findings_not"`, 1)
	back, err = ReadJSON(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	if !back.JudgedOnReading || len(back.Findings) != 1 || back.Findings[0].Kind != finding.PathBound {
		t.Errorf("old document: judged on reading %v, %+v", back.JudgedOnReading, back.Findings)
	}
	rep.Verdicts = []Verdict{{Claim: "c", Outcome: verdict.Confirmed, Reason: "r"}}
	b.Reset()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"findings": []`) {
		t.Errorf("a recipe document without \"findings\": []:\n%s", b.String())
	}
	// A finding that is not well formed, or names a row the document does
	// not have, is refused.
	for _, spoil := range []string{`"kind": "path-bound"`, `"rows": [`} {
		bad := strings.Replace(strings.Replace(old, `"findings_not"`, `"findings"`, 1), spoil, map[string]string{`"kind": "path-bound"`: `"kind": "slow"`, `"rows": [`: `"rows": [7, `}[spoil], 1)
		if _, err := ReadJSON(strings.NewReader(bad)); err == nil {
			t.Errorf("a document with a spoilt finding (%s) was read", spoil)
		}
	}
}
