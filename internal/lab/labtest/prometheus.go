package labtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/promtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// Prometheus runs Debian's prometheus in node of the lab, listening on
// addr (host:port in that namespace), scraping each job's target (job →
// host:port) every second and evaluating the rules files every second;
// it stops when the test ends (with its log in the test's output when
// the test failed). It returns the API to ask it.
//
// Prometheus's files are its own (0644 and 0755, whatever the umask says
// for some): they live outside the lab directory, whose files must be
// private, in a t.TempDir that goes after Prometheus stopped.
func Prometheus(tb testing.TB, l *lab.Lab, node lab.Node, addr string, jobs map[string]string, rules ...string) *promtest.API {
	tb.Helper()
	testenv.RequirePrograms(tb, "prometheus")
	dir := tb.TempDir()
	var abs []string
	for _, r := range rules {
		a, err := filepath.Abs(r)
		if err != nil {
			tb.Fatal(err)
		}
		abs = append(abs, a)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(promtest.Config(jobs, abs...)), 0o600); err != nil {
		tb.Fatal(err)
	}
	log := filepath.Join(dir, "prometheus.log")
	prom, err := l.Start(context.Background(), node, log, "prometheus", "--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = prom.Stop()
		if tb.Failed() {
			b, _ := os.ReadFile(log)
			tb.Logf("prometheus log:\n%s", b)
		}
	})
	return promtest.NewAPI(tb, l.Namespace(node), addr)
}
