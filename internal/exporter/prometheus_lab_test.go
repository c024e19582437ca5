package exporter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/syncbuf"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
)

func TestMain(m *testing.M) {
	// The test starts a cluster, as serve does (its files are private).
	syscall.Umask(cluster.PrivateUmask)
	labtest.Main(m)
}

// The ports in the lab's server namespace, which is the test's own.
const (
	exporterAddr   = "127.0.0.1:9234"
	clusterAddr    = "127.0.0.1:9235"
	prometheusAddr = "127.0.0.1:9090"
)

// promAPI asks the Prometheus that listens in namespace ns.
type promAPI struct {
	t *testing.T
	c *http.Client
}

func newPromAPI(t *testing.T, ns string) *promAPI {
	return &promAPI{t: t, c: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			var conn net.Conn
			err := netns.Do(ns, func() (err error) {
				conn, err = net.DialTimeout(network, addr, 5*time.Second)
				return err
			})
			return conn, err
		}}}}
}

// get decodes the data of an API answer into v; an answer other than
// "success" is an error.
func (p *promAPI) get(path string, q url.Values, v any) error {
	resp, err := p.c.Get("http://" + prometheusAddr + path + "?" + q.Encode())
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

type sample struct {
	Metric map[string]string
	Value  [2]any
}

func (s sample) value() float64 {
	str, _ := s.Value[1].(string)
	f, _ := strconv.ParseFloat(str, 64)
	return f
}

// query evaluates expr now; a query Prometheus refuses fails the test.
func (p *promAPI) query(expr string) []sample {
	p.t.Helper()
	var d struct {
		ResultType string
		Result     []sample
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &d); err != nil {
		p.t.Fatalf("query %q: %v", expr, err)
	}
	if d.ResultType != "vector" {
		p.t.Fatalf("query %q: result type %s, want vector", expr, d.ResultType)
	}
	return d.Result
}

// conditionLHS returns the expression an alert compares with a number
// ("rate(x[5m]) > 0" → "rate(x[5m])"); the rules file keeps that form so
// that its metric side can be evaluated on its own.
func conditionLHS(expr string) (string, bool) {
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

// TestExporterPrometheus runs Debian's Prometheus in a lab, scraping
// `ovpnperf exporter` (with --client-labels) while two real OpenVPN tunnels
// carry pings (status files of version 1 and 2; the cluster's instance
// writes version 3) and a one-instance cluster's metrics, every second, with
// the shipped rules loaded. After a few scrapes every panel query of the
// shipped dashboard returns series, every alert rule was evaluated without
// error, and each rule's metric side returns series wherever its metric
// exists (the registry's, with no dispatcher here, exists nowhere).
func TestExporterPrometheus(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn", "prometheus", "ping")
	l := labtest.New(t, lab.Path{})
	ns := l.Namespace(lab.Server)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Two tunnels, in slots 14 and 15 (203.0.113.224/27), whose servers
	// write a status file every second, in status-version 1 and 2; the
	// cluster's instance writes version 3. The cluster's pool is the
	// lower half of the lab's tunnel network.
	pki, err := openvpn.NewPKI(filepath.Join(l.Dir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	var tunnels []*tunnel.Tunnel
	srvDevs := map[int]string{} // by status-version
	for _, v := range []int{1, 2} {
		statusFile := filepath.Join(l.Dir(), fmt.Sprintf("server-v%d.status", v))
		tu, err := tunnel.Up(ctx, l, tunnel.Options{Variant: openvpn.Variant{Name: "default"}, PKI: pki, Slot: 13 + v,
			Configure: func(srv, _ *openvpn.Config) {
				srv.Add("status", statusFile, "1")
				srv.Add("status-version", strconv.Itoa(v))
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer tu.Down()
		tunnels = append(tunnels, tu)
		srvDevs[v], _ = tu.Devs()
	}

	c, err := cluster.Start(ctx, cluster.Options{Netns: ns, Instances: 1, Protos: []string{"udp"}, PortBase: 1300,
		Pool: netip.MustParsePrefix("203.0.113.0/25"), CPUs: []int{0},
		Prepare: func(dir string) (*openvpn.Config, error) {
			base, _, err := cluster.LabBase(dir, false)
			return base, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cluster stop: %v", err)
		}
		if _, err := os.Stat(c.Dir()); err == nil {
			t.Errorf("cluster directory %s left", c.Dir())
		}
	})
	if err := c.WaitUp(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var ml net.Listener
	if err := netns.Do(ns, func() (err error) { ml, err = net.Listen("tcp", clusterAddr); return err }); err != nil {
		t.Fatal(err)
	}
	defer ml.Close()
	go func() { _ = c.ServeMetrics(ml) }()

	exp, err := l.Start(ctx, lab.Server, filepath.Join(l.Dir(), "exporter.log"), labtest.Binary(), "exporter", "--listen", exporterAddr, "--client-labels")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Stop() })

	// Prometheus's files are its own (0644 and 0755, whatever the umask
	// says for some): outside the lab directory, whose files must be
	// private; t.TempDir removes them after Prometheus stopped.
	dir := t.TempDir()
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 900ms}
rule_files: [%q]
scrape_configs:
  - job_name: exporter
    static_configs: [{targets: [%q]}]
  - job_name: cluster
    static_configs: [{targets: [%q]}]
`, rules, exporterAddr, clusterAddr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	promLog := filepath.Join(dir, "prometheus.log")
	prom, err := l.Start(ctx, lab.Server, promLog, "prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+prometheusAddr, "--log.level=warn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = prom.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(promLog)
			t.Logf("prometheus log:\n%s", b)
		}
	})

	// Traffic through the tunnels while Prometheus scrapes.
	var pings []*exec.Cmd
	var pingOut syncbuf.Buffer
	for _, tu := range tunnels {
		ping := l.Command(ctx, lab.Client, "ping", "-c", "30", "-i", "0.2", tu.ServerAddr.String())
		ping.Stdout, ping.Stderr = &pingOut, &pingOut
		if err := ping.Start(); err != nil {
			t.Fatal(err)
		}
		pings = append(pings, ping)
	}

	api := newPromAPI(t, ns)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// At least 4 scrapes of each target, all up, and every rule
		// evaluated.
		ready := 0
		var ups []sample
		if err := api.get("/api/v1/query", url.Values{"query": {`min_over_time(up[1m]) == 1 and count_over_time(up[1m]) >= 4`}}, &struct{ Result *[]sample }{&ups}); err == nil {
			ready = len(ups)
		}
		if ready == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not scrape both targets 4 times in 30 s (%d ready)", ready)
		}
		time.Sleep(500 * time.Millisecond)
	}

	for _, ping := range pings {
		if err := ping.Wait(); err != nil {
			t.Fatalf("ping through a tunnel: %v\n%s", err, pingOut.String())
		}
	}

	// Each tunnel's server as the exporter saw it, from a status file
	// that the real OpenVPN wrote in version 1 and 2: one client, by
	// name, and tun packets during the pings.
	for v, dev := range srvDevs {
		if got := api.query(fmt.Sprintf(`ovpnperf_openvpn_process_info{dev=%q, status_version="%d"}`, dev, v)); len(got) != 1 {
			t.Errorf("process_info of %s, status-version %d: %v", dev, v, got)
		}
		if got := api.query(fmt.Sprintf(`ovpnperf_openvpn_clients{dev=%q}`, dev)); len(got) != 1 || got[0].value() != 1 {
			t.Errorf("ovpnperf_openvpn_clients of %s: %v, want 1", dev, got)
		}
		if got := api.query(fmt.Sprintf(`ovpnperf_openvpn_client_received_bytes_total{dev=%q, common_name="ovpnperf client"} > 0`, dev)); len(got) != 1 {
			t.Errorf("per-client bytes of %s's client: %v, want one series > 0", dev, got)
		}
		// The counter itself, not its increase: the pings may all have
		// passed before Prometheus's first scrape of the series (seen on a
		// loaded machine), and a new tun device counts from 0.
		if got := api.query(fmt.Sprintf(`ovpnperf_openvpn_tun_receive_packets_total{dev=%q} > 0`, dev)); len(got) != 1 {
			t.Errorf("tun packets of %s after the pings: %v, want one series > 0", dev, got)
		}
	}
	// The cluster's instance writes status-version 3 (no clients).
	if got := api.query(`ovpnperf_openvpn_process_info{status_version="3"} and on(dev) ovpnperf_openvpn_clients == 0`); len(got) != 1 {
		t.Errorf("the cluster instance's status-version 3 file: %v, want one process with 0 clients", got)
	}

	for title, exprs := range dashboardQueries(t) {
		for _, e := range exprs {
			if got := api.query(e); len(got) == 0 {
				t.Errorf("dashboard panel %q: %s returns no series", title, e)
			}
		}
	}

	var rg struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Name, Query, Health, LastError string
				LastEvaluation                 time.Time
			}
		}
	}
	// Rules are evaluated every second; wait for one round after the
	// scrapes.
	time.Sleep(1500 * time.Millisecond)
	if err := api.get("/api/v1/rules", url.Values{"type": {"alert"}}, &rg); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" || r.LastEvaluation.IsZero() {
				t.Errorf("rule %s: health %q, last evaluation %v, error %q", r.Name, r.Health, r.LastEvaluation, r.LastError)
			}
			lhs, ok := conditionLHS(r.Query)
			if !ok {
				t.Errorf("rule %s: %q is not EXPR OP NUMBER", r.Name, r.Query)
				continue
			}
			m := metricName.FindString(lhs)
			exists := len(api.query("count("+m+")")) > 0
			got := api.query(lhs)
			switch {
			case exists && len(got) == 0:
				t.Errorf("rule %s: %s returns no series though %s exists", r.Name, lhs, m)
			case !exists && !strings.HasPrefix(m, "ovpnperf_cluster_registry_"):
				t.Errorf("rule %s: its metric %s has no series here", r.Name, m)
			}
		}
	}
	if n == 0 {
		t.Fatal("Prometheus loaded no alert rules")
	}
}
