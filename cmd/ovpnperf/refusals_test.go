package main

import (
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// refusalFigures are figures of each refusal kind, with the keys
// docs/schemas.md lists for it (the host's shares and the load where the
// kind carries them).
var refusalFigures = map[string]measure.Figures{
	measure.RefusalEmulatorLate: {measure.FigureReleasedPackets: 5966, measure.FigureLatePackets: 66, measure.FigureLatePercent: 1.1,
		measure.FigureLateMeanSeconds: 0.00275, measure.FigureHostBusyPercent: 30, measure.FigureHostStealPercent: 13.3},
	measure.RefusalEmulatorStall:    {measure.FigureStalledPackets: 3, measure.FigureStallSeconds: 0.25},
	measure.RefusalEmulatorLost:     {measure.FigureLostPackets: 12},
	measure.RefusalWindowEndedEarly: {measure.FigureWindowSeconds: 1.2, measure.FigureRequestedSeconds: 5, measure.FigurePathSlackSeconds: 0.04, measure.FigureTolerancePercent: 10, measure.FigureLoad1m: 2.5, measure.FigureCPUs: 2},
	measure.RefusalWindowShort:      {measure.FigureWindowSeconds: 4.1, measure.FigureRequestedSeconds: 5, measure.FigureLimitSeconds: 4.5},
	measure.RefusalWindowLong:       {measure.FigureWindowSeconds: 6.1, measure.FigureRequestedSeconds: 5, measure.FigureLimitSeconds: 5.6},
	measure.RefusalReceiverAboveSender: {measure.FigureReceivedBps: 52e6, measure.FigureSentBps: 48e6, measure.FigureAbovePercent: 8.3,
		measure.FigureRequestedSeconds: 5, measure.FigurePathSlackSeconds: 0.04, measure.FigureTolerancePercent: 5},
	measure.RefusalPayloadShort: {measure.FigureSentBytes: 1e6, measure.FigureRequestedBytes: 4e6},
	measure.RefusalNoEcho:       {measure.FigureSentProbePackets: 100},
}

var refusalSpan = regexp.MustCompile(`<span class="invalid" data-refusal="([^"]*)"(?: data-figures="([^"]*)")?>invalid: ([^<]*)</span>`)

// Each kind of refusal, as a given-up row of a run document, goes through
// the binary as data: the document follows its schema, `report` reads it
// back, and its page carries the row's kind and figures beside the
// refusal's one sentence (Refusal.Text); the test reads the kind and the
// figures, not the sentence.
func TestReportRefusalsEveryKind(t *testing.T) {
	t.Parallel()
	rep := measure.NewReport(hostinfo.Host{}, measure.Scenario{Command: "lab run", Repeat: 3, Networks: []measure.Network{{Name: "wan"}}})
	want := map[string]measure.Refusal{}
	for i, k := range measure.RefusalKinds() {
		r := findingsRow("wan", "v"+strings.Repeat("x", i), measure.PathTunnel, "up", 0)
		rf := measure.Refusal{Kind: k, Figures: refusalFigures[k], Tries: 3, Sample: 1, Samples: 3, NotMeasured: 2}
		switch k {
		case measure.RefusalIperfError, measure.RefusalNotMeasured, measure.RefusalError:
			rf.Detail = "what " + k + " says"
		case measure.RefusalWindowEndedEarly, measure.RefusalWindowShort, measure.RefusalWindowLong:
			rf.Side = "receiver"
		}
		r.Refuse(rf)
		rep.Rows = append(rep.Rows, r)
		want[k] = rf
	}
	var b strings.Builder
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	checkSchema(t, "a run document with every refusal kind", b.String(), false)
	file := filepath.Join(t.TempDir(), "refusals.json")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	back := readRunDoc(t, file)
	seen := map[string]bool{}
	for _, r := range back.Rows {
		if r.Refusal == nil || r.Valid {
			t.Errorf("row %s read back valid or without its refusal", r.Variant)
			continue
		}
		seen[r.Refusal.Kind] = true
	}
	page := reportPage(t, file)
	shown := map[string]bool{}
	for _, m := range refusalSpan.FindAllStringSubmatch(page, -1) {
		k, text := m[1], html.UnescapeString(m[3])
		rf, ok := want[k]
		if !ok {
			t.Errorf("the page shows refusal kind %q, which is no row's", k)
			continue
		}
		shown[k] = true
		var figs measure.Figures
		if m[2] != "" {
			if err := json.Unmarshal([]byte(html.UnescapeString(m[2])), &figs); err != nil {
				t.Fatalf("%s: figures %q: %v", k, m[2], err)
			}
		}
		if len(figs) != len(rf.Figures) {
			t.Errorf("%s: the page carries %d figures, the row %d", k, len(figs), len(rf.Figures))
		}
		for key, v := range rf.Figures {
			if figs[key] != v {
				t.Errorf("%s: figure %s is %v on the page, %v in the row", k, key, figs[key], v)
			}
		}
		if text != rf.Text() {
			t.Errorf("%s: the page says %q, the refusal's sentence is %q", k, text, rf.Text())
		}
	}
	for _, k := range measure.RefusalKinds() {
		if !seen[k] || !shown[k] {
			t.Errorf("refusal kind %s: read back %v, on the page %v", k, seen[k], shown[k])
		}
	}
}
