package main

import (
	"encoding/json"
	"html"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// findingsOf returns the findings of kind that the document carried: a
// document this version wrote holds them, so one judged on reading fails.
func findingsOf(t *testing.T, rep *measure.Report, kind finding.Kind) []finding.Finding {
	t.Helper()
	if rep.JudgedOnReading {
		t.Fatalf("the document carries no findings: they were judged on reading")
	}
	var out []finding.Finding
	for _, f := range rep.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

// findingKeys lists a document's findings by key and outcome, for messages.
func findingKeys(fs []finding.Finding) string {
	var ks []string
	for _, f := range fs {
		ks = append(ks, f.Key()+" ("+string(f.Outcome)+")")
	}
	return strings.Join(ks, "\n")
}

// pageFinding is one finding as report's page carries it: the item's
// data-* attributes and its sentence.
type pageFinding struct {
	Kind, Outcome, Key string
	Figures            finding.Figures
	Text               string
}

var findingItem = regexp.MustCompile(`<li data-kind="([^"]*)" data-outcome="([^"]*)" data-key="([^"]*)" data-figures="([^"]*)">([^<]*)</li>`)

// pageFindings reads the findings items of a report page.
func pageFindings(t *testing.T, page string) []pageFinding {
	t.Helper()
	var out []pageFinding
	for _, m := range findingItem.FindAllStringSubmatch(page, -1) {
		p := pageFinding{Kind: m[1], Outcome: html.UnescapeString(m[2]), Key: html.UnescapeString(m[3]), Text: html.UnescapeString(m[5])}
		if err := json.Unmarshal([]byte(html.UnescapeString(m[4])), &p.Figures); err != nil {
			t.Fatalf("item %s: figures %q: %v", p.Key, m[4], err)
		}
		out = append(out, p)
	}
	return out
}

// checkFindingsShown checks that every finding of rep is a line of the
// text output (when text is not "") and an item of the report page, both
// the renderer's sentence for the record, the item with the record's kind,
// outcome and figures.
func checkFindingsShown(t *testing.T, rep *measure.Report, text, page string) {
	t.Helper()
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[l] = true
	}
	items := map[string]pageFinding{}
	for _, p := range pageFindings(t, page) {
		items[p.Key] = p
	}
	if len(items) != len(rep.Findings) {
		t.Errorf("the page shows %d findings, the document holds %d:\n%s", len(items), len(rep.Findings), findingKeys(rep.Findings))
	}
	for _, f := range rep.Findings {
		want := measure.FindingText(f)
		if want != f.Text {
			t.Errorf("%s: the document's text is not the renderer's:\n%s\n%s", f.Key(), f.Text, want)
		}
		if text != "" && !lines[want] {
			t.Errorf("%s: the text output lacks the line\n%s\noutput:\n%s", f.Key(), want, text)
		}
		p, ok := items[f.Key()]
		if !ok {
			t.Errorf("%s: not on the page", f.Key())
			continue
		}
		if p.Kind != string(f.Kind) || p.Outcome != string(f.Outcome) || p.Text != want || len(p.Figures) != len(f.Figures) {
			t.Errorf("%s: the page shows %+v, the document %+v", f.Key(), p, f)
		}
		for k, v := range f.Figures {
			if p.Figures[k] != v {
				t.Errorf("%s: figure %s is %v on the page, %v in the document", f.Key(), k, p.Figures[k], v)
			}
		}
	}
}

// reportPage runs `ovpnperf report` on the documents and returns the page.
func reportPage(t *testing.T, docs ...string) string {
	t.Helper()
	out := t.TempDir() + "/page.html"
	ovpnperf(t, append(append([]string{"report"}, docs...), "-o", out)...).mustSucceed(t)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
