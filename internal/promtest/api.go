package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/netns"
)

// API asks a Prometheus through its HTTP API (/api/v1/…), connecting from
// inside a network namespace (a lab's), so that a test asks the
// Prometheus it started there.
type API struct {
	tb   testing.TB
	addr string
	c    *http.Client
}

// NewAPI returns the API of the Prometheus listening on addr (host:port)
// in namespace ns.
func NewAPI(tb testing.TB, ns, addr string) *API {
	return &API{tb: tb, addr: addr, c: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, a string) (net.Conn, error) {
			var conn net.Conn
			err := netns.Do(ns, func() (err error) {
				conn, err = net.DialTimeout(network, a, 5*time.Second)
				return err
			})
			return conn, err
		}}}}
}

// Get decodes the data of an API answer into v; an answer other than
// "success" is an error.
func (p *API) Get(path string, q url.Values, v any) error {
	resp, err := p.c.Get("http://" + p.addr + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var a struct {
		Status, Error string
		Data          json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if a.Status != "success" {
		return fmt.Errorf("%s %v: %s %s", path, q, a.Status, a.Error)
	}
	return json.Unmarshal(a.Data, v)
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Metric map[string]string
	Value  [2]any
}

// Float is the sample's value.
func (s Sample) Float() float64 {
	str, _ := s.Value[1].(string)
	f, _ := strconv.ParseFloat(str, 64)
	return f
}

// Query evaluates expr now; a query Prometheus refuses fails the test.
func (p *API) Query(expr string) []Sample {
	p.tb.Helper()
	var d struct {
		ResultType string
		Result     []Sample
	}
	if err := p.Get("/api/v1/query", url.Values{"query": {expr}}, &d); err != nil {
		p.tb.Fatalf("query %q: %v", expr, err)
	}
	if d.ResultType != "vector" {
		p.tb.Fatalf("query %q: result type %s, want vector", expr, d.ResultType)
	}
	return d.Result
}

// WaitScraped waits until Prometheus has scraped targets targets, each at
// least n times in the last minute and up every time, or d passes (a test
// failure).
func (p *API) WaitScraped(targets, n int, d time.Duration) {
	p.tb.Helper()
	deadline := time.Now().Add(d)
	for {
		var ups []Sample
		ready := 0
		q := fmt.Sprintf(`min_over_time(up[1m]) == 1 and count_over_time(up[1m]) >= %d`, n)
		if err := p.Get("/api/v1/query", url.Values{"query": {q}}, &struct{ Result *[]Sample }{&ups}); err == nil {
			ready = len(ups)
		}
		if ready >= targets {
			return
		}
		if time.Now().After(deadline) {
			p.tb.Fatalf("Prometheus did not scrape %d targets %d times in %v (%d ready)", targets, n, d, ready)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Rule is an alerting rule as Prometheus evaluates it (/api/v1/rules).
type Rule struct {
	Group                          string
	Name, Query, Health, LastError string
	LastEvaluation                 time.Time
	DurationSeconds                float64 `json:"duration"`
}

// AlertRules returns the alerting rules Prometheus loaded, by group.
func (p *API) AlertRules() []Rule {
	p.tb.Helper()
	var rg struct {
		Groups []struct {
			Name  string
			Rules []Rule
		}
	}
	if err := p.Get("/api/v1/rules", url.Values{"type": {"alert"}}, &rg); err != nil {
		p.tb.Fatal(err)
	}
	var out []Rule
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			r.Group = g.Name
			out = append(out, r)
		}
	}
	return out
}

// ConditionLHS returns the expression an alert compares with a number
// ("rate(x[5m]) > 0" → "rate(x[5m])"); the rules file keeps that form so
// that its metric side can be evaluated on its own.
func ConditionLHS(expr string) (string, bool) {
	for _, op := range []string{" > ", " >= ", " == ", " != ", " < ", " <= "} {
		i := strings.LastIndex(expr, op)
		if i < 0 {
			continue
		}
		if _, err := strconv.ParseFloat(strings.TrimSpace(expr[i+len(op):]), 64); err == nil {
			return strings.TrimSpace(expr[:i]), true
		}
	}
	return "", false
}

// Panel is one panel of a Grafana dashboard and its queries.
type Panel struct {
	Type, Title string
	Exprs       []string
}

// DashboardPanels returns the panels of a Grafana dashboard file (rows
// left out) with their queries; a panel without a query, or a file
// without panels, fails the test.
func DashboardPanels(tb testing.TB, file string) []Panel {
	tb.Helper()
	b, err := os.ReadFile(file)
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
		tb.Fatalf("%s: %v", file, err)
	}
	var out []Panel
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			tb.Errorf("panel %q has no query", p.Title)
		}
		pn := Panel{Type: p.Type, Title: p.Title}
		for _, t := range p.Targets {
			if t.Expr == "" {
				tb.Errorf("panel %q: a target without expr", p.Title)
			}
			pn.Exprs = append(pn.Exprs, t.Expr)
		}
		out = append(out, pn)
	}
	if len(out) == 0 {
		tb.Fatalf("%s: no panels", file)
	}
	return out
}

// Config is a prometheus.yml scraping each job's one target (job name →
// host:port) every second, evaluating the rules files every second.
func Config(jobs map[string]string, rules ...string) string {
	var b strings.Builder
	b.WriteString("global: {scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 900ms}\n")
	fmt.Fprintf(&b, "rule_files: [")
	for i, r := range rules {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", r)
	}
	b.WriteString("]\nscrape_configs:\n")
	names := make([]string, 0, len(jobs))
	for job := range jobs {
		names = append(names, job)
	}
	sort.Strings(names)
	for _, job := range names {
		fmt.Fprintf(&b, "  - job_name: %q\n    static_configs: [{targets: [%q]}]\n", job, jobs[job])
	}
	return b.String()
}
