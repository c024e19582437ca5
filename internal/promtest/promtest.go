// Package promtest checks metrics endpoints and rule files with Debian's
// promtool (package prometheus), for tests: a scrape must pass `promtool
// check metrics` (names, units, _total on counters, help texts) and a rules
// file `promtool check rules`.
package promtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// Scrape returns the body of GET url (a /metrics endpoint); any status but
// 200 fails the test.
func Scrape(tb testing.TB, url string) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("scraping %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("scraping %s: HTTP %d\n%s", url, resp.StatusCode, body)
	}
	return body
}

// CheckMetrics pipes a scrape through `promtool check metrics` and fails
// the test on any problem it names.
func CheckMetrics(tb testing.TB, scrape []byte) {
	tb.Helper()
	testenv.RequirePrograms(tb, "promtool")
	if len(bytes.TrimSpace(scrape)) == 0 {
		tb.Fatal("promtool check metrics: the scrape is empty")
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	cmd.Env = []string{"LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		tb.Fatalf("promtool check metrics: %v\n%s\nscrape:\n%s", err, out, scrape)
	}
}

// CheckRules runs `promtool check rules FILE` and fails the test unless it
// finds rules and no problem.
func CheckRules(tb testing.TB, file string) {
	tb.Helper()
	testenv.RequirePrograms(tb, "promtool")
	cmd := exec.Command("promtool", "check", "rules", file)
	cmd.Env = []string{"LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		tb.Fatalf("running %q: %v\n%s", fmt.Sprint(cmd.Args), err, out)
	}
}

// Parse reads a scrape in the text format into its metric families by name.
func Parse(tb testing.TB, scrape []byte) map[string]*dto.MetricFamily {
	tb.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(scrape))
	if err != nil {
		tb.Fatalf("parsing the scrape: %v\n%s", err, scrape)
	}
	return fams
}

// Label returns the value of label name of m ("" when absent).
func Label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}
