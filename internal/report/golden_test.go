package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/golden"
)

// goldenOpts fix what would change from run to run: the time and the
// command line at the page's head.
var goldenOpts = Options{Now: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), Argv: []string{"/usr/bin/ovpnperf", "report", "x.json"}}

// benchDocs are a pps, a pmtu and the crypto document measured on this
// project's machine (the same as TestBenchmarkSections').
func benchDocs(t *testing.T) []Document {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "cryptobench", "testdata", "report-epyc.json"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Parse("crypto.json", data)
	if err != nil {
		t.Fatal(err)
	}
	ppsDoc := `{"schema":"ovpnperf/pps/v1","server":"10.0.0.2:9000","params":{"size_bytes":18,"flows":1},"sent":3000,"received":2990,"lost":10,"loss_percent":0.33,"pps_median":1000,
	"series":[{"end_s":1,"sent_pps":1000,"pps":1000},{"end_s":2,"sent_pps":1000,"pps":990,"loss_percent":1}],"flows":[],"warnings":["a warning"]}`
	pmtuDoc := `{"schema":"ovpnperf/pmtu/v1","host":"h","address":"192.0.2.1","family":"ipv4","path_mtu":1400,"hop":"198.51.100.1","hop_mtu":1400,"local_mtu":1500,"explanation":"a router said 1400","rounds":2,"probes_tried":[{"round":1,"size_bytes":1400,"outcome":"reply"},{"round":1,"size_bytes":1401,"outcome":"too-big","mtu":1400},{"round":2,"size_bytes":9000,"outcome":"lost"}],
	"openvpn":{"cipher":"AES-256-GCM","translations":[{"transport":"udp","outer_family":"ipv4","measured":true,"path_mtu":1400,"overhead_bytes":52,"max_tun_mtu":1348,"mssfix":"mssfix 1400 mtu"}]}}`
	for _, d := range []string{ppsDoc, pmtuDoc} {
		more, err := Parse("b.json", []byte(d))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, more...)
	}
	return docs
}

// TestGoldenPages keeps the pages of the recorded documents as they are:
// a change of the renderer shows as a diff of testdata/golden (go test
// -update rewrites them).
func TestGoldenPages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		docs func(t *testing.T) []Document
	}{
		{"labrun-default", func(t *testing.T) []Document { return load(t, "labrun-default.json") }},
		{"labrun-lan-jumbo", func(t *testing.T) []Document { return load(t, "labrun-lan-jumbo.json") }},
		{"recipe-all", func(t *testing.T) []Document { return load(t, "recipe-all.json") }},
		{"tune", func(t *testing.T) []Document {
			return append(load(t, "tune-blackhole.json"), load(t, "tune-lossy.json")...)
		}},
		{"cluster-status", func(t *testing.T) []Document { return load(t, "cluster-status.json") }},
		{"bench", benchDocs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, tc.docs(t), goldenOpts); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "golden", tc.name+".html"), lines(buf.Bytes()))
		})
	}
	t.Run("compare", func(t *testing.T) {
		a, b := load(t, "labrun-wan-1.json")[0].Run, load(t, "labrun-wan-2.json")[0].Run
		cmp := NewComparison("wan-1.json", a, "wan-2.json", b, CompareOptions{})
		var buf bytes.Buffer
		if err := WriteCompareHTML(&buf, cmp, a, b, goldenOpts); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "golden", "compare.html"), lines(buf.Bytes()))
	})
}

// lines breaks a page between tags, one element a line, so that a diff
// of a golden file points at the element that changed.
func lines(page []byte) []byte { return bytes.ReplaceAll(page, []byte("><"), []byte(">\n<")) }

// TestWatchHourPage keeps docs/watch-hour.html what `ovpnperf report`
// draws of the hour docs/watch.md describes (testdata/watch-hour.jsonl):
// the page in the docs is this test's output, never edited by hand (go
// test -update redraws it). The time and command at its head are fixed,
// those of the page as first drawn.
func TestWatchHourPage(t *testing.T) {
	const history = "internal/report/testdata/watch-hour.jsonl"
	data, err := os.ReadFile(filepath.Join("testdata", "watch-hour.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Parse(history, data)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Now: time.Date(2026, 11, 29, 11, 56, 0, 0, time.UTC), Argv: []string{"ovpnperf", "report", history, "-o", "docs/watch-hour.html"}}
	var buf bytes.Buffer
	if err := Write(&buf, docs, opts); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("..", "..", "docs", "watch-hour.html"), buf.Bytes())
}
