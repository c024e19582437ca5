package main

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
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

// findingsRow is a row of a constructed run document: rates in Mbit/s,
// cpu the server's CPU-s per GB (the client's half of it).
func findingsRow(network, variant, path, dir string, cpu float64, mbps ...float64) measure.Row {
	proto := "udp"
	if path == measure.PathRouted {
		proto = "tcp"
	}
	r := measure.NewRow(network, variant, path, dir, proto)
	r.CPUSecondsPerGB = map[string]float64{}
	if path == measure.PathTunnel && network != measure.NetworkReal {
		r.CPUSecondsPerGB["server"], r.CPUSecondsPerGB["client"] = cpu, cpu/2
	}
	for _, m := range mbps {
		r.AddSample(m * 1e6)
	}
	return r
}

// findingsDocs are a lab run and a measure document whose rows make every
// kind of finding (the figures are constructed, not measured).
func findingsDocs() []*measure.Report {
	row := findingsRow
	lab := measure.NewReport(hostinfo.Host{}, measure.Scenario{Command: "lab run", Repeat: 3,
		Networks: []measure.Network{{Name: "lan"}, {Name: "wan"}, {Name: "lossy"}, {Name: "one"}}})
	lab.Rows = []measure.Row{
		// A LAN where OpenVPN's CPU binds, and cipher none is no faster.
		row("lan", "routed", measure.PathRouted, "up", 0, 16000, 17000, 18000),
		row("lan", "default", measure.PathTunnel, "up", 10, 500, 520, 540),
		row("lan", "none", measure.PathTunnel, "up", 9, 480, 530, 560),
		// A WAN whose path is the limit.
		row("wan", "routed", measure.PathRouted, "up", 0, 48, 48, 48),
		row("wan", "default", measure.PathTunnel, "up", 26, 46, 46.1, 46.2),
		// Below the path, OpenVPN at a small share of a core.
		row("lossy", "routed", measure.PathRouted, "up", 0, 4.2, 4.25, 4.3),
		row("lossy", "jumbo", measure.PathTunnel, "up", 21.1, 3.34, 3.41, 3.58),
		// One sample a side decides nothing.
		row("one", "routed", measure.PathRouted, "up", 0, 48),
		row("one", "default", measure.PathTunnel, "up", 26, 46.1),
	}
	real := measure.NewReport(hostinfo.Host{}, measure.Scenario{Command: measure.CommandMeasure, Repeat: 3,
		Networks: []measure.Network{{Name: measure.NetworkReal}},
		Real: &measure.RealPath{Host: "198.51.100.2", Tunnel: "10.8.0.1", TunDevice: "tun0", Proto: "udp", TunMTU: 1500, PathMTU: 1400, PathMTULearnt: true,
			PredictedRatio: 0.964, PredictionBasis: "model", MTUAdvice: "For a path MTU of 1400: set mssfix 1400 mtu", BufferAdvice: "Set `rcvbuf 4194304`."}})
	// Down: OpenVPN's busiest thread at 95 % of a core, its socket
	// dropping 10 datagrams a sample, 1000 fragments and 7 tun drops a
	// sample, one counter unread.
	to, tt := row(measure.NetworkReal, measure.VariantOutside, measure.PathRouted, "down", 0, 47.5, 48, 47.6), row(measure.NetworkReal, measure.VariantTunnel, measure.PathTunnel, "down", 0, 20, 21, 19)
	tt.CPUSecondsPerGB["openvpn"] = 12
	for range 3 {
		to.OpenVPN = append(to.OpenVPN, measure.OpenVPNCounters{})
		tt.OpenVPN = append(tt.OpenVPN, measure.OpenVPNCounters{BusiestThreadShare: 0.95, SocketDrops: 10, RcvbufBytes: 32768, FragCreates: 1000,
			TunTxDropped: 7, TxQueueLen: 500, Unread: []string{"socket buffers (sock_diag): EPERM"}})
	}
	// Up: the tunnel's flow at its window over the RTT (4 MB over 100 ms),
	// the outside flow retransmitting 2 % of its segments.
	uo, ut := row(measure.NetworkReal, measure.VariantOutside, measure.PathRouted, "up", 0, 330, 330, 330), row(measure.NetworkReal, measure.VariantTunnel, measure.PathTunnel, "up", 0, 318, 318, 318)
	for range 3 {
		ut.Samples = append(ut.Samples, measure.Sample{Bps: 318e6, SenderMeanRTTMicros: 100000, SenderMaxSndWndBytes: 4e6})
		ut.OpenVPN = append(ut.OpenVPN, measure.OpenVPNCounters{BusiestThreadShare: 0.3})
		uo.Samples = append(uo.Samples, measure.Sample{Bps: 330e6, Intervals: []measure.Interval{{StartSeconds: 0, EndSeconds: 2, Bps: 330e6, Retransmits: 1140}}})
		uo.OpenVPN = append(uo.OpenVPN, measure.OpenVPNCounters{})
	}
	real.Rows = []measure.Row{uo, ut, to, tt}
	return []*measure.Report{lab, real}
}

// Every kind of finding, through the binary: report reads a document
// holding its findings and draws each with its kind, outcome and figures
// and the renderer's sentence; a document written before findings were
// kept (no "findings" key) is judged on reading, and the page says so.
func TestReportFindingsEveryKind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kinds := map[string]pageFinding{}
	for i, rep := range findingsDocs() {
		var b strings.Builder
		if err := rep.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		var old map[string]any
		if err := json.Unmarshal([]byte(b.String()), &old); err != nil {
			t.Fatal(err)
		}
		if _, ok := old["findings"]; !ok {
			t.Fatalf("a written document without findings")
		}
		delete(old, "findings")
		oldJSON, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		newFile, oldFile := fmt.Sprintf("%s/new%d.json", dir, i), fmt.Sprintf("%s/old%d.json", dir, i)
		if err := os.WriteFile(newFile, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(oldFile, oldJSON, 0o600); err != nil {
			t.Fatal(err)
		}
		// Both follow the schema: findings are documented in it.
		checkSchema(t, "a run document with findings", b.String(), false)
		checkSchema(t, "a run document without findings", string(oldJSON), false)
		fresh, old2 := readRunDoc(t, newFile), readRunDoc(t, oldFile)
		if fresh.JudgedOnReading || !old2.JudgedOnReading {
			t.Errorf("judged on reading: %v for a document with findings, %v for one without", fresh.JudgedOnReading, old2.JudgedOnReading)
		}
		page := reportPage(t, newFile)
		checkFindingsShown(t, fresh, "", page)
		if strings.Contains(page, judgedOnReading) {
			t.Errorf("the page of a document with findings says they were judged on reading")
		}
		oldPage := reportPage(t, oldFile)
		checkFindingsShown(t, old2, "", oldPage)
		if !strings.Contains(oldPage, judgedOnReading) {
			t.Errorf("the page of a document without findings does not say they were judged on reading")
		}
		for _, p := range pageFindings(t, page) {
			kinds[p.Kind+" "+p.Key] = p
		}
	}
	// What each kind must show, as the page carries it.
	want := map[finding.Kind]func(p pageFinding) bool{
		finding.PathBound: func(p pageFinding) bool {
			return p.Outcome == "confirmed" && (p.Figures[measure.FigTunnelMedianBps] == 46.1e6 || p.Figures[measure.FigTunnelMedianBps] == 318e6) &&
				p.Figures[measure.FigPairs] == 3 && p.Figures[measure.FigLowRatio] >= p.Figures[measure.FigWindowLowRatio]
		},
		finding.BelowPath: func(p pageFinding) bool {
			return p.Outcome == "confirmed" && p.Figures[measure.FigHighRatio] < 0.9 && (p.Figures[measure.FigBusiestCPUSecondsPerGB] == 21.1 || p.Figures[measure.FigPredictedRatio] == 0.964)
		},
		finding.CPUBound: func(p pageFinding) bool {
			return p.Outcome == "confirmed" && ((p.Figures[measure.FigBusiestCPUSecondsPerGB] == 10 || p.Figures[measure.FigBusiestCPUSecondsPerGB] == 9) && p.Figures[measure.FigOneCoreBps] == 8e9/p.Figures[measure.FigBusiestCPUSecondsPerGB] ||
				p.Figures[measure.FigBusiestThreadMinPercent] == 95 && p.Figures[measure.FigOpenVPNCPUSecondsPerGB] == 12)
		},
		finding.SocketDrops: func(p pageFinding) bool {
			return p.Figures[measure.FigDroppedDatagrams] == 30 && p.Figures[measure.FigRcvbufBytes] == 32768 && p.Figures[measure.FigShownSamples] == 3
		},
		finding.Fragmentation: func(p pageFinding) bool {
			return p.Figures[measure.FigFragmentsMadePackets] == 3000 && p.Figures[measure.FigPathMTUBytes] == 1400 && p.Figures[measure.FigTunMTUBytes] == 1500
		},
		finding.WindowBound: func(p pageFinding) bool {
			return p.Figures[measure.FigWindowBytes] == 4e6 && p.Figures[measure.FigRTTSeconds] == 0.1 && p.Figures[measure.FigWindowBps] == 320e6
		},
		finding.Loss: func(p pageFinding) bool {
			return p.Figures[measure.FigRetransmitMinPercent] > 1.9 && p.Figures[measure.FigRetransmitMinPercent] < 2.1
		},
		finding.CipherCost: func(p pageFinding) bool {
			return p.Outcome == "confirmed" && p.Figures[measure.FigWindowHighRatio] == 1.1 && p.Figures[measure.FigPairs] == 3
		},
		finding.TunDrops: func(p pageFinding) bool {
			return p.Figures[measure.FigTunDroppedPackets] == 21 && p.Figures[measure.FigTxQueueLenPackets] == 500
		},
		finding.LimitUnknown: func(p pageFinding) bool {
			return p.Outcome == "noise" && p.Figures[measure.FigTunnelMedianBps] == 46.1e6 && p.Figures[measure.FigPairs] == 1
		},
		finding.NotRead: func(p pageFinding) bool { return p.Outcome == "not tested here" },
	}
	if len(want) != len(finding.RunKinds()) {
		t.Errorf("%d kinds checked, %d kinds exist", len(want), len(finding.RunKinds()))
	}
	for _, k := range finding.RunKinds() {
		ok := false
		for _, p := range kinds {
			if p.Kind == string(k) {
				if !want[k](p) {
					t.Errorf("%s: %+v", p.Key, p)
				}
				ok = true
			}
		}
		if !ok {
			t.Errorf("no %s finding on the pages", k)
		}
	}
}

// judgedOnReading marks the note of a page whose document carried no
// findings.
const judgedOnReading = `data-findings="judged-on-reading"`
