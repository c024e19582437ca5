package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/promtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/watch/watchdoc"
)

// The alert rules and the Grafana dashboard that ship in docs/prometheus.
var (
	promRulesFile     = filepath.Join("..", "..", "docs", "prometheus", "ovpnperf-rules.yml")
	promDashboardFile = filepath.Join("..", "..", "docs", "prometheus", "ovpnperf-dashboard.json")
)

// The group of the rules file that holds watch's alerts, and the alert on
// a tunnel below its path.
const (
	watchRuleGroup = "ovpnperf-watch"
	belowOutside   = "OvpnperfWatchTunnelBelowOutside"
)

// limitTunnelPackets holds the tunnel's own datagrams (UDP port
// tunnel.BasePort, either direction) to perSec packets a second at the
// lab's router and drops the rest; the path's other traffic keeps its
// rate. The returned function removes the rules (the lab's teardown
// removes them with the router's namespace too).
func limitTunnelPackets(tb testing.TB, l *lab.Lab, perSec int) func() {
	tb.Helper()
	port := strconv.Itoa(tunnel.BasePort)
	limit := strconv.Itoa(perSec) + "/sec"
	rules := [][]string{
		{"-p", "udp", "--dport", port, "-m", "limit", "--limit", limit, "--limit-burst", "50", "-j", "ACCEPT"},
		{"-p", "udp", "--dport", port, "-j", "DROP"},
		{"-p", "udp", "--sport", port, "-m", "limit", "--limit", limit, "--limit-burst", "50", "-j", "ACCEPT"},
		{"-p", "udp", "--sport", port, "-j", "DROP"},
	}
	iptables := func(args ...string) {
		// Equivalent to: ip netns exec ovpnperf-NAME-router iptables -w …
		c := l.Command(context.Background(), lab.Router, append([]string{"iptables", "-w"}, args...)...)
		if o, err := c.CombinedOutput(); err != nil {
			tb.Fatalf("iptables %v: %v\n%s", args, err, o)
		}
	}
	for i, r := range rules {
		iptables(append([]string{"-I", "FORWARD", strconv.Itoa(i + 1)}, r...)...)
	}
	return func() {
		for i := len(rules) - 1; i >= 0; i-- {
			iptables(append([]string{"-D", "FORWARD"}, rules[i]...)...)
		}
	}
}

// waitRound waits until the history holds a round that started after
// since and measured every row (ok), and returns it; a round that started
// after since but was refused in part, or skipped, is waited past (the
// next one may measure). It fails the test when d passes or watch exits.
func waitRound(t *testing.T, w *bgRun, hist string, since time.Time, d time.Duration) watchdoc.Round {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		data, _ := os.ReadFile(hist)
		var rounds []watchdoc.Round
		if len(data) > 0 {
			var err error
			if rounds, _, err = watchdoc.Read(data); err != nil {
				t.Fatalf("history: %v\n%s", err, data)
			}
		}
		for _, r := range rounds {
			if r.Started.After(since) && r.Result == watchdoc.ResultOK {
				return r
			}
		}
		select {
		case <-w.done:
			t.Fatalf("watch exited (%v):\n%s", w.err, w.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no measured round that started after %v within %v:\n%s\n%s", since.Format(time.TimeOnly), d, data, w.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitQuery asks Prometheus expr until it returns series (want true) or
// none (want false), for at most d: the scrape after a round and the
// rules' evaluation take a second each.
func waitQuery(t *testing.T, api *promtest.API, expr string, want bool, d time.Duration) []promtest.Sample {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := api.Query(expr)
		if (len(got) > 0) == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d series %v after %v, want series: %v", expr, len(got), got, d, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestWatchPrometheus runs Debian's Prometheus in a lab, scraping a real
// `ovpnperf watch --every 10s` on a real tunnel across a 20 Mbit/s lab
// path every second, with the shipped rules loaded. After the first
// measured round every watch panel of the shipped dashboard returns
// series, and so does the metric side of every alert of the watch group
// (which Prometheus evaluates without error); the tunnel is not below its
// path. Then the tunnel's own datagrams are held to 300 packets a second
// at the router (the path's other traffic keeps its rate): after the next
// round the tunnel-below-outside alert's expression holds and the alert is
// pending; with the limit removed, the round after makes it false again.
// SIGTERM ends watch and nothing of it is left.
//
// It is a tolerant test (testenv.Tolerant): scripts/test.sh runs it beside
// the measuring tests. The ratio it judges is below 0.2 with the limit and
// near 1 without it, against a threshold of 0.5, far beyond what another
// test's load moves it; a 20 Mbit/s path loads a CPU little.
func TestWatchPrometheus(t *testing.T) {
	testenv.Tolerant(t)
	t.Parallel()
	testenv.RequirePrograms(t, "prometheus")
	start := time.Now()
	b := newMeasureBench(t, labpath.Path{Up: labpath.Link{RateBitsPerSec: 20e6}, Down: labpath.Link{RateBitsPerSec: 20e6}}, true, nil)
	listen := netipPort(lab.ClientV4().String(), 9479)
	hist := filepath.Join(t.TempDir(), "watch.jsonl")
	w := startBackgroundArgv(t, "", watchArgs(b, listen, "10s", "--history", hist)...)
	api := labtest.Prometheus(t, b.lab, lab.Client, "127.0.0.1:9090", map[string]string{"watch": listen}, promRulesFile)
	first := waitRound(t, w, hist, start, 40*time.Second)
	api.WaitScraped(1, 4, 20*time.Second)
	// The scrape after the round, and the rules evaluated on it.
	waitQuery(t, api, `ovpnperf_watch_rate_bytes_per_second{path="inside"}`, true, 5*time.Second)
	time.Sleep(1500 * time.Millisecond)

	panels := 0
	for _, p := range promtest.DashboardPanels(t, promDashboardFile) {
		for _, e := range p.Exprs {
			if !strings.Contains(e, "ovpnperf_watch_") {
				continue
			}
			panels++
			if got := api.Query(e); len(got) == 0 {
				t.Errorf("dashboard panel %q: %s returns no series", p.Title, e)
			}
		}
	}
	if panels == 0 {
		t.Error("the dashboard has no watch panel")
	}
	var below string
	rules := 0
	for _, r := range api.AlertRules() {
		if r.Group != watchRuleGroup {
			continue
		}
		rules++
		if r.Health != "ok" || r.LastEvaluation.IsZero() {
			t.Errorf("rule %s: health %q, last evaluation %v, error %q", r.Name, r.Health, r.LastEvaluation, r.LastError)
		}
		lhs, ok := promtest.ConditionLHS(r.Query)
		if !ok {
			t.Errorf("rule %s: %q is not EXPR OP NUMBER", r.Name, r.Query)
			continue
		}
		if got := api.Query(lhs); len(got) == 0 {
			t.Errorf("rule %s: %s returns no series after a measured round", r.Name, lhs)
		}
		if r.Name == belowOutside {
			below = r.Query
		}
	}
	if rules < 3 || below == "" {
		t.Fatalf("%d rules in group %s, %s among them: %q", rules, watchRuleGroup, belowOutside, below)
	}
	if got := api.Query(below); len(got) != 0 {
		t.Fatalf("%s holds before the tunnel is limited: %v (first round %+v)", below, got, first.Run.Rows)
	}

	// The tunnel's datagrams held to 300/s (about 3 Mbit/s of 1 400-byte
	// packets) at the router.
	limited := time.Now()
	unlimit := limitTunnelPackets(t, b.lab, 300)
	r := waitRound(t, w, hist, limited, 30*time.Second)
	got := waitQuery(t, api, below, true, 5*time.Second)
	for _, s := range got {
		if s.Float() >= 0.5 {
			t.Errorf("%s: %v", below, s)
		}
	}
	waitQuery(t, api, `ALERTS{alertname="`+belowOutside+`", alertstate="pending"}`, true, 5*time.Second)
	t.Logf("limited round %d: tunnel over outside %v", r.Seq, got)

	freed := time.Now()
	unlimit()
	r = waitRound(t, w, hist, freed, 30*time.Second)
	waitQuery(t, api, below, false, 5*time.Second)
	t.Logf("round %d after the limit: %s false", r.Seq, belowOutside)

	if code := w.stop(t, syscall.SIGTERM); code != 130 {
		t.Errorf("after SIGTERM: exit %d, want 130:\n%s", code, w.output())
	}
	b.checkNothingLeft(t)
	if runningIn(b.lab.Namespace(lab.Client), "ping") {
		t.Error("a ping of watch still runs")
	}
	t.Logf("lab time %v", time.Since(start).Round(time.Second))
}
