package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/report"
)

// testdata of internal/report: documents real runs wrote on this project's
// machine.
func recorded(name string) string {
	return filepath.Join("..", "..", "internal", "report", "testdata", name)
}

func TestReportCommand(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "r.html")
	ovpnperf(t, "report", recorded("labrun-default.json"), recorded("labrun-lan-jumbo.json"), "-o", out).mustSucceed(t)
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ovpnperf report: 2 documents", "Network wan: 50 Mbit/s, 60 ms RTT", "jumbo ↑ up"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// tune and cluster status documents, recorded from real runs.
	out2 := filepath.Join(t.TempDir(), "tc.html")
	ovpnperf(t, "report", recorded("tune-lossy.json"), recorded("cluster-status.json"), "-o", out2).mustSucceed(t)
	page, err = os.ReadFile(out2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ovpnperf report: 2 documents", "Search path, up", "Clients per instance", "4 of 4 instances up, 4 clients"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("tune/cluster page lacks %q", want)
		}
	}
	// Bad input: one line, exit 2, no page written.
	bad := filepath.Join(t.TempDir(), "tune.json")
	if err := os.WriteFile(bad, []byte(`{"schema":"ovpnperf/tune/v1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	none := filepath.Join(t.TempDir(), "none.html")
	ovpnperf(t, "report", bad, "-o", none).mustBeUsageError(t, `unknown schema "ovpnperf/tune/v1"`)
	ovpnperf(t, "report", filepath.Join(t.TempDir(), "missing.json"), "-o", none).mustBeUsageError(t, "no such file")
	ovpnperf(t, "report").mustBeUsageError(t, "requires at least 1 arg")
	if _, err := os.Stat(none); err == nil {
		t.Error("a page was written for bad input")
	}
}

func TestCompareCommand(t *testing.T) {
	t.Parallel()
	lan := recorded("labrun-lan-jumbo.json")
	// default → jumbo on the LAN: better, exit 0; the reverse is worse, exit 1.
	r := ovpnperf(t, "compare", lan, lan, "--old-variant", "default", "--new-variant", "jumbo").mustSucceed(t)
	if strings.Count(r.stdout, "better") != 2 {
		t.Errorf("want better twice:\n%s", r.stdout)
	}
	r = ovpnperf(t, "compare", lan, lan, "--old-variant", "jumbo", "--new-variant", "default", "--json")
	var cmp report.Comparison
	if err := json.Unmarshal([]byte(r.stdout), &cmp); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if r.code != 1 || !cmp.Worse || cmp.Schema != report.CompareSchema || len(cmp.Changes) != 2 || cmp.Changes[0].Verdict != report.Worse {
		t.Errorf("exit %d, %+v", r.code, cmp)
	}
	html := filepath.Join(t.TempDir(), "c.html")
	ovpnperf(t, "compare", recorded("labrun-wan-1.json"), recorded("labrun-wan-2.json"), "--html", html).mustSucceed(t)
	// The rows marked invalid in either run are not comparable; of the
	// rest only routed down is tight enough (×0.96–×1.02) to show that
	// nothing changed, the others spread too wide (up to ×0.31–×1.51).
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for verdict, n := range map[string]int{report.CannotTell: 5, report.NoChange: 1, report.Incomparable: 2} {
		if got := strings.Count(string(page), `<tr data-verdict="`+verdict+`">`); got != n {
			t.Errorf("compare page: %d rows %q, want %d", got, verdict, n)
		}
	}
	ovpnperf(t, "compare", lan, lan, "--old-variant", "nope", "--new-variant", "jumbo").mustBeUsageError(t, `--old-variant "nope"`)
	ovpnperf(t, "compare", lan).mustBeUsageError(t, "accepts 2 arg")
	ovpnperf(t, "compare", lan, filepath.Join("..", "..", "internal", "cryptobench", "testdata", "report-epyc.json")).mustBeUsageError(t, "compare reads one lab run or recipe document")
}

// checkReportable: a command's --json output names its schema, and
// `ovpnperf report`'s page of it shows want.
func checkReportable(t *testing.T, out, want string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "doc.json")
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"schema": "ovpnperf/`) && !strings.Contains(out, `"schema":"ovpnperf/`) {
		t.Errorf("--json output names no schema")
	}
	page := filepath.Join(t.TempDir(), "doc.html")
	ovpnperf(t, "report", f, "-o", page).mustSucceed(t)
	html, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(html), want) {
		t.Errorf("report of the --json output lacks %q (%v)", want, err)
	}
	// The page names the exact command and the machine.
	if strings.Contains(string(html), "does not record its exact command line") || !strings.Contains(string(html), "<dt>Kernel</dt>") {
		t.Errorf("report of the --json output lacks the command line or the host")
	}
}

// compare with one sample a side: "not enough samples to judge", exit 0,
// in the table and in JSON (before: "worse", exit 1, from one sample).
func TestCompareOneSample(t *testing.T) {
	t.Parallel()
	rep, err := measure.ReadJSON(mustOpen(t, recorded("labrun-wan-1.json")))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, scale float64) string {
		r := *rep
		r.Rows = append([]measure.Row(nil), rep.Rows...)
		for i := range r.Rows {
			r.Rows[i].SamplesBps = []float64{scale * r.Rows[i].MedianBps}
			r.Rows[i].Valid, r.Rows[i].Error, r.Rows[i].Refusal = true, "", nil
			r.Rows[i].Samples = nil
			r.Rows[i].Summarize()
		}
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := r.WriteJSON(f); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old, new := write("old.json", 1), write("new.json", 0.5)
	r := ovpnperf(t, "compare", old, new).mustSucceed(t)
	if strings.Contains(r.stdout, "worse") || !strings.Contains(r.stdout, "not enough samples") {
		t.Errorf("compare of one sample a side:\n%s", r.stdout)
	}
	r = ovpnperf(t, "compare", old, new, "--json").mustSucceed(t)
	var cmp report.Comparison
	if err := json.Unmarshal([]byte(r.stdout), &cmp); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	for _, c := range cmp.Changes {
		if c.Verdict != report.TooFew {
			t.Errorf("%s %s %s: %s (%s)", c.Network, c.Variant, c.Direction, c.Verdict, c.Reason)
		}
	}
	if cmp.Worse || len(cmp.Changes) == 0 {
		t.Errorf("worse %v over %d rows", cmp.Worse, len(cmp.Changes))
	}
}

func mustOpen(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
