package exporter_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/promtest"
)

// The alert rules and the Grafana dashboard that ship in docs/prometheus.
var (
	rulesFile     = filepath.Join("..", "..", "docs", "prometheus", "ovpnperf-rules.yml")
	dashboardFile = filepath.Join("..", "..", "docs", "prometheus", "ovpnperf-dashboard.json")
)

// dashboardQueries returns every panel query of the dashboard by panel
// title.
func dashboardQueries(tb testing.TB) map[string][]string {
	tb.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		tb.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		tb.Fatalf("%s: %v", dashboardFile, err)
	}
	out := map[string][]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			tb.Errorf("panel %q has no query", p.Title)
		}
		for _, t := range p.Targets {
			if t.Expr == "" {
				tb.Errorf("panel %q: a target without expr", p.Title)
			}
			out[p.Title] = append(out[p.Title], t.Expr)
		}
	}
	if len(out) == 0 {
		tb.Fatalf("%s: no panels", dashboardFile)
	}
	return out
}

var metricName = regexp.MustCompile(`ovpnperf_[a-z_]+`)

// TestRulesAndDashboard: the rules pass promtool, and every metric the
// rules and the dashboard query is one the docs list (a renamed metric
// fails here, not on an admin's silent panel).
func TestRulesAndDashboard(t *testing.T) {
	promtest.CheckRules(t, rulesFile)
	var docs strings.Builder
	for _, p := range []string{"exporter.md", "cluster.md", "cluster-hosts.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", p))
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, line := range strings.Split(string(rules), "\n") {
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			exprs = append(exprs, e)
		}
	}
	for _, qs := range dashboardQueries(t) {
		exprs = append(exprs, qs...)
	}
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			if !strings.Contains(docs.String(), "`"+m+"`") {
				t.Errorf("%q queries %s, which docs/exporter.md and docs/cluster*.md do not list", e, m)
			}
		}
	}
}
