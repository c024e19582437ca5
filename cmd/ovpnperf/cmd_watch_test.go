package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
	"github.com/ovpnperf/ovpnperf/internal/watch/watchdoc"
)

// sample is one line of a Prometheus text scrape: a metric's name, its
// labels and its value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseScrape reads the Prometheus text format as the watcher writes it
// (no escaped quotes in its label values, no timestamps).
func parseScrape(t *testing.T, text string) []sample {
	t.Helper()
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			t.Fatalf("scrape line %q", line)
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		s := sample{name: line[:sp], labels: map[string]string{}, value: v}
		if i := strings.IndexByte(s.name, '{'); i >= 0 {
			for _, kv := range strings.Split(strings.TrimSuffix(s.name[i+1:], "}"), `",`) {
				k, v, _ := strings.Cut(kv, `="`)
				s.labels[k] = strings.TrimSuffix(v, `"`)
			}
			s.name = s.name[:i]
		}
		out = append(out, s)
	}
	return out
}

// find returns the samples of name whose labels include want (k=v pairs).
func find(ss []sample, name string, want ...string) []sample {
	var out []sample
next:
	for _, s := range ss {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(want); i += 2 {
			if s.labels[want[i]] != want[i+1] {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// one returns the value of the one sample of name with labels want.
func one(t *testing.T, ss []sample, name string, want ...string) float64 {
	t.Helper()
	f := find(ss, name, want...)
	if len(f) != 1 {
		t.Fatalf("%d samples of %s %v, want 1", len(f), name, want)
	}
	return f[0].value
}

// scrape fetches http://addr/metrics from inside namespace ns (the
// connection is made there and used from here).
func scrape(t *testing.T, ns, addr string) string {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		var c net.Conn
		err := netns.Do(ns, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, a)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s in %s: %v", addr, ns, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scraping %s: %d %v", addr, resp.StatusCode, err)
	}
	return string(b)
}

// promtoolCheck pipes a scrape through `promtool check metrics` (Debian's
// prometheus package), which fails on names and types against the
// Prometheus conventions.
func promtoolCheck(t *testing.T, text string) {
	t.Helper()
	testenv.RequirePrograms(t, "promtool")
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// waitScrape scrapes until ok says the metrics are what the test waits
// for, or d passes.
func waitScrape(t *testing.T, w *bgRun, ns, addr string, d time.Duration, what string, ok func([]sample) bool) []sample {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ss := parseScrape(t, scrape(t, ns, addr))
		if ok(ss) {
			return ss
		}
		select {
		case <-w.done:
			t.Fatalf("watch exited (%v) before %s:\n%s", w.err, what, w.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v:\n%s", what, d, w.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// watchArgs are a short watch: 1-second samples, one each, counters and
// echoes every second, a round every every.
func watchArgs(b *measureBench, listen, every string, more ...string) []string {
	return append([]string{"ip", "netns", "exec", b.lab.Namespace(lab.Client), binary, "watch", lab.ServerV4().String(),
		"--tunnel", b.tun.ServerAddr.String(), "--listen", listen, "--every", every, "--probe-interval", "1s",
		"--time", "1s", "--omit", "0s", "--repeat", "1"}, more...)
}

// runningIn reports whether a process named name (pgrep -x) runs in
// namespace ns.
func runningIn(ns, name string) bool {
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(netns.Dir, ns), &st) != nil {
		return false
	}
	out, _ := exec.Command("pgrep", "-x", name).Output()
	for _, pid := range strings.Fields(string(out)) {
		var p syscall.Stat_t
		if syscall.Stat("/proc/"+pid+"/ns/net", &p) == nil && p.Ino == st.Ino && p.Dev == st.Dev {
			return true
		}
	}
	return false
}

// watch on a real tunnel: one active round measures inside and outside the
// tunnel and its figures, findings, echo histograms and counters are
// scraped (and pass promtool); a flow of the user's through the tunnel
// makes the next round a skipped one (busy); the history holds both, the
// first with its run document; SIGTERM during the third round ends watch
// with 130 and leaves no iperf3 behind.
func TestWatchRoundAndInterrupt(t *testing.T) {
	testenv.Exclusive(t)
	start := time.Now()
	b := newMeasureBench(t, labpath.Path{}, true, nil)
	ns := b.lab.Namespace(lab.Client)
	listen := netipPort(lab.ClientV4().String(), 9477)
	hist := filepath.Join(t.TempDir(), "watch.jsonl")
	w := startBackgroundArgv(t, "", watchArgs(b, listen, "12s", "--history", hist)...)
	w.waitFor(t, "metrics on", 30*time.Second)
	ss := waitScrape(t, w, ns, listen, 60*time.Second, "a first round", func(ss []sample) bool {
		var n float64
		for _, s := range find(ss, "ovpnperf_watch_rounds_total") {
			n += s.value
		}
		return n >= 1
	})
	text := scrape(t, ns, listen)
	promtoolCheck(t, text)
	ss = parseScrape(t, text)
	if v := one(t, ss, "ovpnperf_watch_rounds_total", "result", "ok"); v != 1 {
		t.Fatalf("rounds ok %v, want 1:\n%s\n%s", v, text, w.output())
	}
	for _, path := range []string{"inside", "outside"} {
		for _, dir := range []string{"up", "down"} {
			if v := one(t, ss, "ovpnperf_watch_rate_bytes_per_second", "path", path, "direction", dir); v <= 0 {
				t.Errorf("rate %s %s: %v", path, dir, v)
			}
		}
		if v := one(t, ss, "ovpnperf_watch_echo_rtt_seconds_count", "path", path); v < 1 {
			t.Errorf("echo histogram %s: count %v", path, v)
		}
	}
	if got, want := len(find(ss, "ovpnperf_watch_finding")), len(finding.Kinds())*3*len(verdict.Outcomes()); got != want {
		t.Errorf("%d finding series, want %d", got, want)
	}
	if v := one(t, ss, "ovpnperf_watch_openvpn_up"); v != 1 {
		t.Errorf("openvpn_up %v", v)
	}
	if v := one(t, ss, "ovpnperf_watch_openvpn_cpu_seconds_total"); v <= 0 {
		t.Errorf("OpenVPN CPU seconds %v", v)
	}
	if v := one(t, ss, "ovpnperf_watch_tun_bytes_total", "direction", "up"); v <= 0 {
		t.Errorf("tun bytes up %v after a round", v)
	}
	// The skip rule: a user's flow through the tunnel (one iperf3 flow
	// up, the tunnel's whole rate) makes the second round a skipped one.
	load := b.lab.Command(context.Background(), lab.Client, "iperf3", "-c", b.tun.ServerAddr.String(), "-t", "40")
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	loadDone := make(chan struct{})
	go func() { load.Wait(); close(loadDone) }()
	defer func() { load.Process.Kill(); <-loadDone }()
	ss = waitScrape(t, w, ns, listen, 30*time.Second, "a skipped round", func(ss []sample) bool {
		return one(t, ss, "ovpnperf_watch_rounds_skipped_total", "reason", watchdoc.SkipBusy) >= 1
	})
	if v := one(t, ss, "ovpnperf_watch_tunnel_load_ratio"); v < 0.2 {
		t.Errorf("skipped as busy at a load of %v of the last rate, the rule's share is 0.2", v)
	}
	if v := one(t, ss, "ovpnperf_watch_rounds_total", "result", "ok"); v != 1 {
		t.Errorf("rounds ok %v while the tunnel was busy, want still 1", v)
	}
	load.Process.Kill()
	<-loadDone
	// The third round: SIGTERM while its iperf3 runs.
	deadline := time.Now().Add(40 * time.Second)
	for !runningIn(ns, "iperf3") {
		if time.Now().After(deadline) {
			t.Fatalf("no iperf3 of a third round:\n%s", w.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := w.stop(t, syscall.SIGTERM); code != 130 {
		t.Errorf("after SIGTERM during a round: exit %d, want 130:\n%s", code, w.output())
	}
	b.checkNothingLeft(t)
	if runningIn(ns, "ping") {
		t.Error("a ping of watch still runs")
	}
	data, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	rounds, cut, err := watchdoc.Read(data)
	if err != nil || cut || len(rounds) != 2 || rounds[1].Result != watchdoc.ResultSkipped || rounds[1].Reason != watchdoc.SkipBusy || rounds[1].Load == nil {
		t.Fatalf("history: %d rounds (cut %v), want one measured and one skipped as busy: %v\n%s", len(rounds), cut, err, data)
	}
	checkSchema(t, "the history", string(data), true)
	r := rounds[0]
	if r.Result != watchdoc.ResultOK || r.Run == nil || len(r.Run.Rows) != 4 || r.Run.Scenario.Real == nil || len(r.Echoes) != 2 {
		t.Errorf("history round: %+v", r)
	}
	// report draws the history: one band per direction of the measured
	// round, one row in the table.
	page := filepath.Join(t.TempDir(), "watch.html")
	ovpnperf(t, "report", hist, "-o", page).mustSucceed(t)
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), `data-round="1"`); n != 2 {
		t.Errorf("%d bands of round 1 on the page, want 2 (up, down)", n)
	}
	if n := strings.Count(string(html), `<tr data-result="`); n != 2 {
		t.Errorf("%d rows in the rounds table, want 2", n)
	}
	t.Logf("lab time %v", time.Since(start).Round(time.Second))
}

// watch with no iperf3 server at the far end: it says so at the start,
// each round fails as no-server (a metric, never silence), and the
// counters and echoes go on being served.
func TestWatchNoServer(t *testing.T) {
	start := time.Now()
	b := newMeasureBench(t, labpath.Path{}, false, nil)
	ns := b.lab.Namespace(lab.Client)
	listen := netipPort(lab.ClientV4().String(), 9477)
	w := startBackgroundArgv(t, "", watchArgs(b, listen, "10s")...)
	w.waitFor(t, "no iperf3 server", 30*time.Second)
	ss := waitScrape(t, w, ns, listen, 30*time.Second, "a failed round", func(ss []sample) bool {
		return len(find(ss, "ovpnperf_watch_rounds_failed_total", "kind", watchdoc.FailNoServer)) == 1 &&
			one(t, ss, "ovpnperf_watch_rounds_failed_total", "kind", watchdoc.FailNoServer) >= 1
	})
	if v := one(t, ss, "ovpnperf_watch_rounds_total", "result", "failed"); v < 1 {
		t.Errorf("rounds failed %v", v)
	}
	if v := one(t, ss, "ovpnperf_watch_rounds_total", "result", "ok"); v != 0 {
		t.Errorf("rounds ok %v without a server", v)
	}
	before := one(t, ss, "ovpnperf_watch_echo_rtt_seconds_count", "path", "inside")
	// Still watching: more echoes, OpenVPN still read.
	ss = waitScrape(t, w, ns, listen, 10*time.Second, "more echoes", func(ss []sample) bool {
		return one(t, ss, "ovpnperf_watch_echo_rtt_seconds_count", "path", "inside") > before
	})
	if v := one(t, ss, "ovpnperf_watch_openvpn_up"); v != 1 {
		t.Errorf("openvpn_up %v", v)
	}
	if code := w.stop(t, syscall.SIGINT); code != 130 {
		t.Errorf("after SIGINT: exit %d, want 130:\n%s", code, w.output())
	}
	b.checkNothingLeft(t)
	if runningIn(ns, "ping") {
		t.Error("a ping of watch still runs")
	}
	t.Logf("lab time %v", time.Since(start).Round(time.Second))
}

func netipPort(addr string, port int) string { return net.JoinHostPort(addr, strconv.Itoa(port)) }

// The recorded history (internal/report/testdata, made by watch on a lab
// tunnel) follows docs/schemas/watch-round.v1.json line by line, and so
// does `schema check` of one of its lines; the lab test checks the history
// it makes too.
func TestWatchHistoryFollowsSchema(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(recorded("watch-history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ids := checkSchema(t, "watch-history.jsonl", string(b), true)
	if len(ids) < 2 {
		t.Errorf("checked %v", ids)
	}
	for _, id := range ids {
		if id != watchdoc.Schema {
			t.Errorf("a line of schema %s", id)
		}
	}
}

// The hour docs/watch.md shows (recorded by BenchmarkWatchRecordedHour):
// every line follows the schema, and report's page of it draws a band per
// direction of each measured round, named by the limit the round's
// findings give, path-bound before and after the tunnel was held and
// below-path while it was.
func TestWatchRecordedHour(t *testing.T) {
	t.Parallel()
	file := recorded("watch-hour.jsonl")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if ids := checkSchema(t, "watch-hour.jsonl", string(b), true); len(ids) != 12 {
		t.Fatalf("%d lines checked, the hour has 12 rounds", len(ids))
	}
	page := reportPage(t, file)
	limits := map[string]int{}
	for _, m := range regexp.MustCompile(`data-round="([0-9]+)" data-direction="([a-z]+)" data-limit="([a-z-]*)"`).FindAllStringSubmatch(page, -1) {
		limits[m[3]]++
	}
	if limits[string(finding.PathBound)] != 14 || limits[string(finding.BelowPath)] != 6 {
		t.Errorf("bands by limit %v, want 14 path-bound (rounds 3, 4, 8–12 both ways) and 6 below-path (rounds 5–7)", limits)
	}
}

// The recorded hour's rounds carry the findings of the loss rule before
// paced echoes: loss confirmed on the outside up flow in every round, on
// a path without random loss. Judged again by today's rule (the history
// is not rewritten): each round's document alone has no paced echo, so
// loss is not tested; with watch's own echoes outside the tunnel between
// rounds (one per probe interval, none while a round runs: paced, on the
// idle path) as its echoes, a round's few dozen are too few to refute
// (noise) and none confirms; the hour's together refute it.
func TestWatchRecordedHourLossRule(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(recorded("watch-hour.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rounds, _, err := watchdoc.Read(b)
	if err != nil || len(rounds) != 12 {
		t.Fatalf("%d rounds, %v: the hour has 12", len(rounds), err)
	}
	loss := func(fs []finding.Finding) *finding.Finding {
		for i := range fs {
			if fs[i].Kind == finding.Loss {
				return &fs[i]
			}
		}
		return nil
	}
	outside := func(r watchdoc.Round) (sent, answered int) {
		for _, e := range r.Echoes {
			if e.Path == "outside" {
				return e.Sent, e.Answered
			}
		}
		return 0, 0
	}
	var hour measure.EchoCount
	var pooled []*measure.Report
	for _, r := range rounds {
		if r.Run == nil {
			t.Fatalf("round %d has no run document", r.Seq)
		}
		old := loss(r.Run.Findings)
		if old == nil || old.Outcome != verdict.Confirmed {
			t.Fatalf("round %d: recorded loss finding %+v, the hour recorded it confirmed", r.Seq, old)
		}
		rejudge := func(e *measure.EchoCount) *finding.Finding {
			doc := *r.Run
			rp := *doc.Scenario.Real
			rp.LossEchoes = e
			doc.Scenario.Real, doc.Findings = &rp, nil
			f := loss(measure.Findings(&doc))
			if f == nil {
				t.Fatalf("round %d: no loss finding judged again: the outside flow's retransmits raise it", r.Seq)
			}
			return f
		}
		alone := rejudge(nil)
		sent, answered := outside(r)
		hour.Sent += sent
		hour.Answered += answered
		withWatch := rejudge(&measure.EchoCount{Sent: sent, Answered: answered})
		if alone.Outcome != verdict.NotTested || withWatch.Outcome == verdict.Confirmed {
			t.Errorf("round %d: judged again %q alone, %q with watch's %d of %d echoes", r.Seq, alone.Outcome, withWatch.Outcome, answered, sent)
		}
		t.Logf("round %2d: retransmits at least %.1f %%; recorded %s; again: alone %s, with watch's echoes (%d of %d answered) %s",
			r.Seq, alone.Figures[measure.FigRetransmitMinPercent], old.Outcome, alone.Outcome, answered, sent, withWatch.Outcome)
		pooled = append(pooled, r.Run)
	}
	doc := *pooled[0]
	rp := *doc.Scenario.Real
	rp.LossEchoes = &hour
	doc.Scenario.Real, doc.Findings = &rp, nil
	f := loss(measure.Findings(&doc))
	t.Logf("the hour's echoes outside: %d of %d answered; round 1 judged with them: %s", hour.Answered, hour.Sent, f.Outcome)
	if hour.Sent < measure.LossEchoes || f.Outcome != verdict.Refuted {
		t.Errorf("the hour's %d of %d echoes: loss %s", hour.Answered, hour.Sent, f.Outcome)
	}
}
