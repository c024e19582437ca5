package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/cryptobench"
	"github.com/ovpnperf/ovpnperf/internal/emulate"
	"github.com/ovpnperf/ovpnperf/internal/emulate/ceilingdoc"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	"github.com/ovpnperf/ovpnperf/internal/pps"
)

// Documents are told apart by their schema key; an unknown or missing one
// is refused with ErrUnknownSchema naming it and the known ones.
func TestParseDispatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc string
		want      string // schema, or "" for an error
		errHas    string
	}{
		{"run v2", `{"schema":"ovpnperf/run/v2","rows":[]}`, measure.Schema, ""},
		{"run v1", `{"schema":"ovpnperf/run/v1","rows":[]}`, measure.SchemaV1, ""},
		{"pps", `{"schema":"ovpnperf/pps/v1","series":[]}`, pps.Schema, ""},
		{"pmtu", `{"schema":"ovpnperf/pmtu/v1","path_mtu":1400}`, pmtu.Schema, ""},
		{"crypto", `{"schema":"ovpnperf/crypto/v1","ciphers":[]}`, cryptobench.Schema, ""},
		{"old pps without schema", `{"pps_median":1,"series":[],"flows":[]}`, pps.Schema, ""},
		{"old pmtu without schema", `{"path_mtu":1400,"blackhole":false,"explanation":"x"}`, pmtu.Schema, ""},
		{"tune (not yet)", `{"schema":"ovpnperf/tune/v1"}`, "", `unknown schema "ovpnperf/tune/v1" (report reads ovpnperf/run/v2`},
		{"no schema", `{"hello":1}`, "", `no "schema" key`},
		{"not json", `hello`, "", "not an ovpnperf JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := Parse("x.json", []byte(tc.doc))
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.HasPrefix(err.Error(), "x.json: ") {
					t.Fatalf("error %v, want one starting with the file and containing %q", err, tc.errHas)
				}
				if tc.errHas != "not an ovpnperf JSON document" && !errors.Is(err, ErrUnknownSchema) {
					t.Errorf("%v is not ErrUnknownSchema", err)
				}
				return
			}
			if err != nil || len(docs) != 1 || docs[0].Schema != tc.want {
				t.Fatalf("got %+v, %v; want one document of %s", docs, err, tc.want)
			}
			d := docs[0]
			set := 0
			for _, p := range []bool{d.Run != nil, d.PPS != nil, d.PMTU != nil, d.Crypto != nil} {
				if p {
					set++
				}
			}
			if set != 1 {
				t.Errorf("%d document fields set, want 1", set)
			}
		})
	}
}

// `recipe all --out` writes a list; each element is a document, and a bad
// element is named by its index.
func TestParseList(t *testing.T) {
	t.Parallel()
	docs, err := Parse("all.json", []byte(`[{"schema":"ovpnperf/run/v2","scenario":{"command":"recipe mtu"}},{"schema":"ovpnperf/run/v2","scenario":{"command":"recipe tcp"}}]`))
	if err != nil || len(docs) != 2 || docs[1].Run.Scenario.Command != "recipe tcp" || docs[1].File != "all.json[1]" {
		t.Fatalf("%+v, %v", docs, err)
	}
	_, err = Parse("all.json", []byte(`[{"schema":"ovpnperf/run/v2"},{"schema":"what"}]`))
	if err == nil || !strings.HasPrefix(err.Error(), `all.json[1]: unknown schema "what"`) {
		t.Errorf("got %v", err)
	}
	if _, err := Parse("e.json", []byte(`[]`)); err == nil {
		t.Error("an empty list was accepted")
	}
}

// The page stands alone: no script, no external reference of any kind, a
// CSP that forbids fetching, dark and print styles; every chart has a title
// and description; text from the documents is escaped.
func TestPageSelfContained(t *testing.T) {
	t.Parallel()
	docs := load(t, "labrun-default.json")
	docs[0].Run.Rows[2].Variant = `<script>alert(1)</script>`
	var buf bytes.Buffer
	if err := Write(&buf, docs, Options{Argv: []string{"/usr/bin/ovpnperf", "report", "it's.json"}}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{"<script", "http://", "https://", "src=", "@import", "url("} {
		if i := strings.Index(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), bad); i >= 0 {
			t.Errorf("page contains %q: …%s…", bad, page[max(0, i-60):min(len(page), i+60)])
		}
	}
	for _, want := range []string{"default-src 'none'", "prefers-color-scheme:dark", "@media print", "&lt;script&gt;", `ovpnperf report &#39;it&#39;\&#39;&#39;s.json&#39;`, "<title", "<desc"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n, m := strings.Count(page, "<svg"), strings.Count(page, "<desc"); n == 0 || n != m {
		t.Errorf("%d charts, %d descriptions", n, m)
	}
}

// A v1 document (no per-interval figures) still renders, and says why the
// series are missing.
func TestV1Renders(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "labrun-default.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := measure.ReadJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	rep.Schema = measure.SchemaV1
	for i := range rep.Rows {
		rep.Rows[i].Samples = nil
	}
	rep.Scenario.Argv = nil
	var buf bytes.Buffer
	if err := Write(&buf, []Document{{File: "old.json", Schema: rep.Schema, Run: rep}}, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"No per-interval figures", "does not record its exact command line", "Throughput on lan"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// The crypto document measured on this project's machine renders its
// cipher bars; pps and pmtu documents render their charts.
func TestBenchmarkSections(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "cryptobench", "testdata", "report-epyc.json"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Parse("crypto.json", data)
	if err != nil {
		t.Fatal(err)
	}
	ppsDoc := `{"schema":"ovpnperf/pps/v1","server":"10.0.0.2:9000","params":{"size_bytes":18,"flows":1},"sent":3000,"received":2990,"lost":10,"loss_percent":0.33,"pps_median":1000,
	"series":[{"end_s":1,"sent_pps":1000,"pps":1000},{"end_s":2,"sent_pps":1000,"pps":990,"loss_percent":1}],"flows":[]}`
	pmtuDoc := `{"schema":"ovpnperf/pmtu/v1","host":"h","address":"192.0.2.1","family":"ipv4","path_mtu":1400,"hop":"198.51.100.1","hop_mtu":1400,"local_mtu":1500,"explanation":"a router said 1400","rounds":2,"probes_tried":[{"round":1,"size_bytes":1400,"outcome":"reply"},{"round":1,"size_bytes":1401,"outcome":"too-big","mtu":1400},{"round":2,"size_bytes":9000,"outcome":"lost"}],
	"openvpn":{"cipher":"AES-256-GCM","translations":[{"transport":"udp","outer_family":"ipv4","measured":true,"path_mtu":1400,"overhead_bytes":52,"max_tun_mtu":1348,"mssfix":"mssfix 1400 mtu"}]}}`
	for _, d := range []string{ppsDoc, pmtuDoc} {
		more, err := Parse("b.json", []byte(d))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, more...)
	}
	var buf bytes.Buffer
	if err := Write(&buf, docs, Options{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{"Encryption speed (MB/s)", `data-aesni="masked" data-cipher="AES-256-GCM"`, "Packets per second (pps)", "Loss (%)", "Whole IP packet (bytes)", "max tun-mtu udp/ipv4", "Probe sizes tried, round by round", `data-series="too-big"`, "3 documents"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func row(network, variant, dir string, samples ...float64) measure.Row {
	r := measure.NewRow(network, variant, measure.PathTunnel, dir, "udp")
	for _, s := range samples {
		r.AddSample(s * 1e6)
	}
	return r
}

// The verdict rule: apart and beyond the threshold → better or worse by
// the medians; every ratio the samples allow within ± the threshold → no
// change (overlapping or not); spreads wide enough to hide a change of the
// threshold's size → cannot tell (before, overlapping spreads were called
// "no change" however wide); rows missing or invalid on a side are not
// comparable.
func TestCompareRule(t *testing.T) {
	t.Parallel()
	old := &measure.Report{Rows: []measure.Row{
		row("lan", "a", "up", 100, 110, 120),
		row("lan", "tight", "up", 100, 101, 102),
		row("lan", "b", "up", 100, 101, 102),
		row("lan", "c", "up", 100, 110, 120),
		row("lan", "d", "up", 100, 110, 120),
		row("lan", "gone", "up", 100),
		row("lan", "bad", "up", 100),
	}}
	old.Rows[6].Refuse(measure.Refusal{Kind: measure.RefusalError, Detail: "emulator fell behind"})
	new := &measure.Report{Rows: []measure.Row{
		row("lan", "a", "up", 115, 125, 130),     // overlaps a's 100–120, ×0.96–×1.30
		row("lan", "tight", "up", 101, 102, 103), // overlaps, ×0.99–×1.03
		row("lan", "b", "up", 103, 104, 105),     // apart, +3 %
		row("lan", "c", "up", 130, 140, 150),     // apart, +27 %
		row("lan", "d", "up", 80, 85, 90),        // apart, −23 %
		row("lan", "bad", "up", 100),
		row("lan", "new", "up", 100),
	}}
	old.Rows = append(old.Rows, measure.NewRow("lan", "empty", measure.PathTunnel, "up", "udp"))
	new.Rows = append(new.Rows, row("lan", "empty", "up", 100))
	want := map[string]string{"a": CannotTell, "tight": NoChange, "b": NoChange, "c": Better, "d": Worse, "gone": Incomparable, "bad": Incomparable, "new": Incomparable, "empty": Incomparable}
	cmp := NewComparison("o", old, "n", new, CompareOptions{})
	if len(cmp.Changes) != len(want) || !cmp.Worse {
		t.Fatalf("%d changes, worse %v: %+v", len(cmp.Changes), cmp.Worse, cmp.Changes)
	}
	for _, c := range cmp.Changes {
		if c.Verdict != want[c.Variant] {
			t.Errorf("%s: %s (%s), want %s", c.Variant, c.Verdict, c.Reason, want[c.Variant])
		}
		// An invalid row decides nothing (a sample failed or the
		// emulator fell behind), and the reason carries the row's own
		// refusal.
		if c.Variant == "bad" && !strings.Contains(c.Reason, old.Rows[6].Error) {
			t.Errorf("bad: reason %q does not carry the row's refusal %q", c.Reason, old.Rows[6].Error)
		}
	}
	// A lower threshold turns b's +3 % into better.
	if c := Compare(old, new, CompareOptions{Threshold: 0.01})[2]; c.Verdict != Better {
		t.Errorf("b at 1%%: %s", c.Verdict)
	}
}

// One sample a side decides nothing: below verdict.MinSamples a side the
// row is "not enough samples", whatever the medians, and the comparison is
// not worse (before, 100 → 50 with one sample each was "worse", exit 1).
func TestCompareNeedsMinSamples(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		old, new []float64
		want     string
	}{
		{[]float64{100}, []float64{50}, TooFew},
		{[]float64{100}, []float64{150}, TooFew},
		{[]float64{100, 101}, []float64{50, 51}, TooFew},
		{[]float64{100, 101, 102}, []float64{50, 51}, TooFew},
		{[]float64{100, 101, 102}, []float64{50, 51, 52}, Worse},
	} {
		old := &measure.Report{Rows: []measure.Row{row("lan", "a", "up", c.old...)}}
		new := &measure.Report{Rows: []measure.Row{row("lan", "a", "up", c.new...)}}
		cmp := NewComparison("o", old, "n", new, CompareOptions{})
		got := cmp.Changes[0]
		if got.Verdict != c.want || cmp.Worse != (c.want == Worse) {
			t.Errorf("%v → %v: %s (%s), worse %v; want %s", c.old, c.new, got.Verdict, got.Reason, cmp.Worse, c.want)
		}
	}
}

// On real runs here: jumbo against default on the unshaped LAN is better
// in both directions; two runs of the same WAN configuration have no row
// better or worse, and a row is "no change" only where its samples are
// tight enough to show a 5 % change (in these recorded runs one is, routed
// down at ×0.96–×1.02; the others spread up to ×0.31–×1.51 and cannot
// tell).
func TestCompareRecorded(t *testing.T) {
	t.Parallel()
	lan := load(t, "labrun-lan-jumbo.json")[0].Run
	for _, c := range Compare(lan, lan, CompareOptions{OldVariant: "default", NewVariant: "jumbo"}) {
		if c.Verdict != Better || c.New.Min <= c.Old.Max {
			t.Errorf("%s %s: %s (%s), want better", c.Network, c.Direction, c.Verdict, c.Reason)
		}
	}
	a, b := load(t, "labrun-wan-1.json")[0].Run, load(t, "labrun-wan-2.json")[0].Run
	cmp := NewComparison("1", a, "2", b, CompareOptions{})
	if len(cmp.Changes) != 8 || cmp.Worse {
		t.Errorf("%d rows, worse %v", len(cmp.Changes), cmp.Worse)
	}
	// Rows marked invalid in either run (late timers, a backlog across
	// the warm-up) are not comparable; every other row is no change or
	// cannot tell, as its spread allows.
	invalid := map[string]bool{}
	for _, r := range append(append([]measure.Row{}, a.Rows...), b.Rows...) {
		if !r.Valid {
			invalid[r.Network+"/"+r.Variant+"/"+r.Direction] = true
		}
	}
	judged := 0
	for _, c := range cmp.Changes {
		lo, hi := c.New.Min/c.Old.Max, c.New.Max/c.Old.Min
		tight := lo >= 0.95 && hi <= 1.05
		want := CannotTell
		switch {
		case invalid[c.Network+"/"+c.Variant+"/"+c.Direction]:
			want = Incomparable
		case tight:
			want = NoChange
		}
		if want != Incomparable {
			judged++
		}
		if c.Verdict != want {
			t.Errorf("%s %s %s: %s (%s), want %s", c.Network, c.Variant, c.Direction, c.Verdict, c.Reason, want)
		}
	}
	if judged == 0 {
		t.Error("no valid row pair to compare in the recorded runs")
	}
	if n := counts(cmp.Changes); n[NoChange] != 1 || n[CannotTell] != 5 {
		t.Errorf("recorded WAN runs: %v, want 1 no change and 5 cannot tell", n)
	}
}

func counts(cs []Change) map[string]int {
	n := map[string]int{}
	for _, c := range cs {
		n[c.Verdict]++
	}
	return n
}

// A run document that carries the host's emulator ceiling shows it beside
// the link emulation, escaped; one without shows no such fact.
func TestEmulatorCeilingFact(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "labrun-default.json"))
	if err != nil {
		t.Fatal(err)
	}
	render := func(c *ceilingdoc.Report) string {
		rep, err := measure.ReadJSON(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		rep.Host.EmulationCeiling = c
		var buf bytes.Buffer
		if err := Write(&buf, []Document{{File: "run.json", Schema: rep.Schema, Run: rep}}, Options{}); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if page := render(nil); strings.Contains(page, "Emulator ceiling") {
		t.Errorf("a document without a ceiling shows one")
	}
	page := render(&ceilingdoc.Report{Backend: "nfqueue", Status: emulate.CeilingMeasured,
		Summary: "emulator: nfqueue, at most 1 % late up to 40 000 pps <b>"})
	if !strings.Contains(page, "<dt>Emulator ceiling</dt><dd>emulator: nfqueue, at most 1 % late up to 40 000 pps &lt;b&gt;</dd>") {
		t.Errorf("page lacks the ceiling fact")
	}
}
