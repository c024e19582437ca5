package report

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// These tests open real report pages, made from documents that real
// `lab run` and `recipe` runs wrote (testdata/), in Debian's headless
// Chromium driven over the DevTools protocol, and check what a person would
// see: the bars of every variant with a width, axis labels with units, the
// verdicts; no console error and no network request (the page must be
// complete in itself). Each saves a PNG screenshot in the artifacts
// directory: $OVPNPERF_ARTIFACTS, or a temporary one named in the log.
//
// The screenshot in docs/report.md is made by:
//
//	OVPNPERF_ARTIFACTS=$PWD/docs go test -count=1 -run 'TestInChromium/labrun' ./internal/report

// browser is one Chromium shared by the tests of this package (its start
// is most of their time).
type browser struct {
	ctx    context.Context
	cancel func()
}

var (
	browserOnce sync.Once
	shared      *browser
	browserErr  error
)

func chromium(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		testenv.SkipOrFail(t, "chromium not installed (Debian package chromium; scripts/install.sh installs it)")
	}
	browserOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ovpnperf-chromium-")
		if err != nil {
			browserErr = err
			return
		}
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(path), chromedp.UserDataDir(dir),
			chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
			chromedp.WindowSize(1200, 900),
		}
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		if err := chromedp.Do(bctx); err != nil {
			bcancel()
			acancel()
			os.RemoveAll(dir)
			browserErr = fmt.Errorf("starting chromium: %w", err)
			return
		}
		shared = &browser{ctx: bctx, cancel: func() { bcancel(); acancel(); os.RemoveAll(dir) }}
	})
	if browserErr != nil {
		t.Fatal(browserErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.cancel()
	}
	os.Exit(code)
}

// artifacts returns the directory screenshots go to.
func artifacts(t *testing.T) string {
	dir := os.Getenv("OVPNPERF_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "ovpnperf-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// seen is what the page showed, collected in the page.
type seen struct {
	Bars []struct {
		Variant   string  `json:"variant"`
		Direction string  `json:"direction"`
		Width     float64 `json:"width"`
		Verdict   string  `json:"verdict"`
		Round     string  `json:"round"`
		Label     string  `json:"label"`
	} `json:"bars"`
	Axes     []string `json:"axes"`
	Titles   []string `json:"titles"`
	Series   int      `json:"series"`
	Verdicts []string `json:"verdicts"`
	Text     string   `json:"text"`
	// Unlabelled counts SVG charts without a <title> and <desc>.
	Unlabelled int    `json:"unlabelled"`
	Background string `json:"background"`
	// Bands are the watch page's limit bands, Rows its rounds table's
	// rows, each as drawn.
	Bands []struct {
		Round     string  `json:"round"`
		Direction string  `json:"direction"`
		Limit     string  `json:"limit"`
		Width     float64 `json:"width"`
	} `json:"bands"`
	Rows []struct {
		Result string `json:"result"`
		Cells  int    `json:"cells"`
	} `json:"rows"`
}

// collect is run in the page: it reads what is drawn, not the source.
const collect = `(() => {
  const vis = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const bars = [...document.querySelectorAll('svg.chart g.bar')].map(g => {
    const r = g.querySelector('rect'); const w = r ? r.getBoundingClientRect().width : 0;
    return {variant: g.dataset.variant || '', direction: g.dataset.direction || '', width: vis(g) ? w : 0, verdict: g.dataset.verdict || '', round: g.dataset.round || '', label: (g.querySelector('.rowlabel') || {}).textContent || ''};
  });
  return {
    bars,
    axes: [...document.querySelectorAll('svg.chart .axislabel')].filter(vis).map(e => e.textContent),
    titles: [...document.querySelectorAll('svg.chart > title')].map(e => e.textContent),
    series: [...document.querySelectorAll('.series-grid svg.chart g.series path.line')].filter(vis).length,
    verdicts: [...document.querySelectorAll('td.verdict')].filter(vis).map(e => e.textContent),
    text: document.body.innerText,
    unlabelled: [...document.querySelectorAll('svg.chart')].filter(s => !s.querySelector(':scope > title') || !s.querySelector(':scope > desc') || s.getAttribute('role') !== 'img').length,
    background: getComputedStyle(document.body).backgroundColor,
    bands: [...document.querySelectorAll('svg.chart rect.band')].map(r => ({round: r.dataset.round || '', direction: r.dataset.direction || '', limit: r.dataset.limit || '', width: vis(r) ? r.getBoundingClientRect().width : 0})),
    rows: [...document.querySelectorAll('table.watch-rounds tr[data-result]')].filter(vis).map(r => ({result: r.dataset.result, cells: r.querySelectorAll('td').length})),
  };
})()`

// open loads a page file in a new tab and returns what it showed, after
// saving screenshots of its first screen in light and dark mode, named after
// name.
func open(t *testing.T, b *browser, page, name string) seen {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	defer cancel()
	// Generous: on this shared machine at load 30 a 430 KB page took over a
	// minute to load; on an idle one it takes a second or two.
	ctx, cancel2 := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel2()
	url := "file://" + page
	var mu sync.Mutex
	var problems []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, fmt.Sprint(a.Value))
				}
				problems = append(problems, fmt.Sprintf("console %s: %s", e.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s: %s %s", e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			if e.Request.URL != url {
				problems = append(problems, "network request: "+e.Request.URL)
			}
		}
	}
	if err := chromedp.Listen(ctx, listen); err != nil {
		t.Fatal(err)
	}
	media := func(scheme string) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	}
	step := func(what string, err error) {
		if err != nil {
			t.Fatalf("chromium on %s: %s: %v", page, what, err)
		}
	}
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	step("Network.enable", err)
	_, err = chromedp.Call(ctx, runtime.Enable, cdp.Empty{})
	step("Runtime.enable", err)
	_, err = chromedp.Call(ctx, log.Enable, cdp.Empty{})
	step("Log.enable", err)
	step("light mode", media("light"))
	step("navigate", chromedp.Do(ctx, chromedp.EmulateViewport(1200, 1250), chromedp.Navigate(url), chromedp.WaitVisible("main")))
	got, err := chromedp.Run(ctx, chromedp.Evaluate[seen](collect))
	step("collect", err)
	light, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	step("screenshot", err)
	step("dark mode", media("dark"))
	darkBG, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	step("dark background", err)
	// The first screen only: a full-page PNG of a tall report took tens of
	// seconds on this loaded machine.
	dark, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	step("dark screenshot", err)
	// Printed, even from dark mode, the page is black on white.
	_, err = chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: "print",
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
	step("print media", err)
	printBG, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	step("print background", err)
	if printBG != "rgb(255, 255, 255)" {
		t.Errorf("%s: printed background %s, want white", name, printBG)
	}
	dir := artifacts(t)
	for file, data := range map[string][]byte{name + ".png": light, name + "-dark.png": dark} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots: %s/%s.png, %s-dark.png", dir, name, name)
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("%s: %s", name, p)
	}
	if got.Background == darkBG {
		t.Errorf("%s: the background is %s in light and dark mode alike", name, darkBG)
	}
	if got.Unlabelled > 0 {
		t.Errorf("%s: %d charts lack role=img, <title> or <desc>", name, got.Unlabelled)
	}
	return got
}

// writePage renders docs into a page in a temporary directory.
func writePage(t *testing.T, name string, docs []Document) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".html")
	if err := WriteFile(path, docs, Options{Argv: []string{"ovpnperf", "report", "testdata/" + name + ".json"}}); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, file string) []Document {
	t.Helper()
	docs, err := Load(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func hasAxis(got seen, unit string) bool {
	for _, a := range got.Axes {
		if strings.Contains(a, unit) {
			return true
		}
	}
	return false
}

func TestInChromium(t *testing.T) {
	t.Parallel()
	b := chromium(t)

	t.Run("labrun", func(t *testing.T) {
		docs := load(t, "labrun-default.json")
		got := open(t, b, writePage(t, "labrun-default", docs), "report-labrun")
		rep := docs[0].Run
		// Every tunnel row of the document is a bar with a width.
		for _, r := range rep.Rows {
			if r.Path != "tunnel" {
				continue
			}
			found := false
			for _, bar := range got.Bars {
				if bar.Variant == r.Variant && bar.Direction == r.Direction && bar.Width > 1 {
					found = true
				}
			}
			if !found {
				t.Errorf("no visible bar for %s %s %s", r.Network, r.Variant, r.Direction)
			}
		}
		for _, unit := range []string{"Throughput (Mbit/s)", "CPU-seconds per GB", "Time, warm-up included (s)", "Mbit/s"} {
			if !hasAxis(got, unit) {
				t.Errorf("no axis labelled %q among %q", unit, got.Axes)
			}
		}
		// One line per sample of every row, as the document has them.
		want := 0
		for _, r := range rep.Rows {
			want += len(r.Samples)
		}
		if want == 0 || got.Series != want {
			t.Errorf("%d sample lines drawn, the document has %d samples", got.Series, want)
		}
		shown := []string{"Command: ovpnperf lab run --json", rep.Host.OpenVPNVersion, "routed", "Findings"}
		// Every finding of the document, in the renderer's sentence.
		for _, f := range rep.Judge() {
			shown = append(shown, measure.FindingText(f))
		}
		for _, s := range shown {
			if !strings.Contains(got.Text, s) {
				t.Errorf("the page does not show %q", s)
			}
		}
	})

	t.Run("recipe", func(t *testing.T) {
		docs := load(t, "recipe-all.json")
		page := writePage(t, "recipe-all", docs)
		if fi, err := os.Stat(page); err != nil || fi.Size() >= 1<<20 {
			t.Errorf("recipe all page: %v, want under 1 MB", err)
		} else {
			t.Logf("recipe all page: %d bytes", fi.Size())
		}
		got := open(t, b, page, "report-recipe-all")
		nv := 0
		for _, d := range docs {
			nv += len(d.Run.Verdicts)
			if !strings.Contains(got.Text, d.Run.Scenario.Command) {
				t.Errorf("the page does not name %q", d.Run.Scenario.Command)
			}
		}
		if len(got.Verdicts) != nv {
			t.Errorf("%d verdicts shown, the documents have %d", len(got.Verdicts), nv)
		}
		if !strings.Contains(got.Text, "Published and measured") || !hasAxis(got, "Throughput (Mbit/s)") {
			t.Errorf("no published-vs-measured table or no throughput axis")
		}
		for _, chart := range []string{"Throughput against RTT per socket buffer", "Ping round-trip time by size and fragment setting", "Packets per second on"} {
			found := false
			for _, title := range got.Titles {
				found = found || strings.HasPrefix(title, chart)
			}
			if !found {
				t.Errorf("no chart %q", chart)
			}
		}
	})

	t.Run("compare", func(t *testing.T) {
		docs := load(t, "labrun-lan-jumbo.json")
		cmp := NewComparison("lan.json", docs[0].Run, "lan.json", docs[0].Run, CompareOptions{OldVariant: "default", NewVariant: "jumbo"})
		path := filepath.Join(t.TempDir(), "compare.html")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteCompareHTML(f, cmp, docs[0].Run, docs[0].Run, Options{}); err != nil {
			t.Fatal(err)
		}
		f.Close()
		got := open(t, b, path, "report-compare")
		if len(got.Verdicts) != 2 {
			t.Fatalf("%d verdict cells, want 2 (up, down): %q", len(got.Verdicts), got.Verdicts)
		}
		for _, v := range got.Verdicts {
			if v != Better {
				t.Errorf("verdict %q shown, want better for jumbo over default", v)
			}
		}
		bars := 0
		for _, bar := range got.Bars {
			if bar.Verdict == Better && bar.Width > 1 {
				bars++
			}
		}
		if bars != 4 || !hasAxis(got, "Throughput (Mbit/s)") {
			t.Errorf("%d visible old/new bars (want 4), axes %q", bars, got.Axes)
		}
	})

	t.Run("tune", func(t *testing.T) {
		docs := load(t, "tune-blackhole.json")
		docs = append(docs, load(t, "tune-lossy.json")...)
		got := open(t, b, writePage(t, "tune", docs), "report-tune")
		// Every candidate of every round is a bar per direction; one with
		// samples has a width, and the chart's roles are marked.
		for _, d := range docs {
			r := d.Tune
			for _, st := range r.Steps {
				for _, c := range st.Candidates {
					for _, dir := range r.Directions {
						found := false
						for _, bar := range got.Bars {
							if bar.Variant == c.Name && bar.Direction == dir && bar.Round == fmt.Sprint(st.Round) &&
								(bar.Width > 1 || c.Spread[dir].Median < 0.05e6) && strings.Contains(bar.Label, c.Name) {
								found = true
							}
						}
						if !found {
							t.Errorf("%s: no visible bar for round %d %s %s", d.File, st.Round, c.Name, dir)
						}
					}
				}
			}
		}
		for _, unit := range []string{"Throughput up (Mbit/s)", "Throughput down (Mbit/s)"} {
			if !hasAxis(got, unit) {
				t.Errorf("no axis labelled %q among %q", unit, got.Axes)
			}
		}
		for _, s := range []string{"advise's gap ×", "advised=mssfix 1400 mtu;tun-mtu 1348", "best, advise", "default, all rounds", "nothing beats the default", "Mbit/s n=3"} {
			if !strings.Contains(got.Text, s) {
				t.Errorf("the page does not show %q", s)
			}
		}
	})

	t.Run("cluster", func(t *testing.T) {
		docs := load(t, "cluster-status.json")
		got := open(t, b, writePage(t, "cluster-status", docs), "report-cluster")
		for _, in := range docs[0].Cluster.Instances {
			for what, v := range map[string]int64{"clients": int64(in.Clients), "bytes_in": in.BytesIn, "bytes_out": in.BytesOut, "restarts": int64(in.Restarts)} {
				found := false
				for _, bar := range got.Bars {
					if bar.Variant == in.Name && bar.Direction == what && (v == 0 || bar.Width > 1) {
						found = true
					}
				}
				if !found {
					t.Errorf("no visible %s bar for instance %s (value %d)", what, in.Name, v)
				}
			}
			if !strings.Contains(got.Text, fmt.Sprintf("%s %s/%d cpu %d", in.Name, in.Proto, in.Port, in.CPU)) {
				t.Errorf("instance %s is not labelled with its proto, port and CPU", in.Name)
			}
		}
		for _, unit := range []string{"Connected clients (count)", "Bytes (kB)", "Restarts (count)"} {
			if !hasAxis(got, unit) {
				t.Errorf("no axis labelled %q among %q", unit, got.Axes)
			}
		}
		for _, s := range []string{"last: signal: killed", "4, 4 up", "ovpnperf cluster status"} {
			if !strings.Contains(got.Text, s) {
				t.Errorf("the page does not show %q", s)
			}
		}
	})

	t.Run("watch", func(t *testing.T) {
		docs := load(t, "watch-history.jsonl")
		got := open(t, b, writePage(t, "watch-history", docs), "report-watch")
		rounds := docs[0].Watch
		// A band with a width for each direction of every measured
		// round, named by the limit its findings confirmed.
		measured := 0
		for i := range rounds {
			r := &rounds[i]
			if r.Run == nil {
				continue
			}
			measured++
			for _, dir := range []string{measure.DirectionUp, measure.DirectionDown} {
				want := string(bindingLimit(r, dir))
				if want == "" {
					want = "not judged"
				}
				found := false
				for _, band := range got.Bands {
					found = found || band.Round == fmt.Sprint(r.Seq) && band.Direction == dir && band.Limit == want && band.Width >= 1
				}
				if !found {
					t.Errorf("round %d %s: no visible band of limit %q", r.Seq, dir, want)
				}
			}
		}
		if measured == 0 || len(got.Bands) != 2*measured {
			t.Errorf("%d bands drawn, want 2 for each of the %d measured rounds", len(got.Bands), measured)
		}
		// A visible table row per round, in order, with every column.
		if len(got.Rows) != len(rounds) {
			t.Fatalf("%d rows in the rounds table, want %d", len(got.Rows), len(rounds))
		}
		for i, row := range got.Rows {
			if row.Result != rounds[i].Result || row.Cells != 11 {
				t.Errorf("row %d: result %q with %d cells, want %q with 11", i+1, row.Result, row.Cells, rounds[i].Result)
			}
		}
		for _, chart := range []string{"TCP rate inside and outside the tunnel", "Round trip between rounds", "Binding limit per round"} {
			found := false
			for _, title := range got.Titles {
				found = found || title == chart
			}
			if !found {
				t.Errorf("no chart %q among %q", chart, got.Titles)
			}
		}
		for _, unit := range []string{"Mbit/s", "ms"} {
			if !hasAxis(got, unit) {
				t.Errorf("no axis labelled %q among %q", unit, got.Axes)
			}
		}
	})
}
