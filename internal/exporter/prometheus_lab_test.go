package exporter_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
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
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/promtest"
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
	l := labtest.New(t, labpath.Path{})
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

	api := labtest.Prometheus(t, l, lab.Server, prometheusAddr, map[string]string{"exporter": exporterAddr, "cluster": clusterAddr}, rulesFile)

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

	// At least 4 scrapes of each target, all up.
	api.WaitScraped(2, 4, 30*time.Second)

	for _, ping := range pings {
		if err := ping.Wait(); err != nil {
			t.Fatalf("ping through a tunnel: %v\n%s", err, pingOut.String())
		}
	}

	// Each tunnel's server as the exporter saw it, from a status file
	// that the real OpenVPN wrote in version 1 and 2: one client, by
	// name, and tun packets during the pings.
	for v, dev := range srvDevs {
		if got := api.Query(fmt.Sprintf(`ovpnperf_openvpn_process_info{dev=%q, status_version="%d"}`, dev, v)); len(got) != 1 {
			t.Errorf("process_info of %s, status-version %d: %v", dev, v, got)
		}
		if got := api.Query(fmt.Sprintf(`ovpnperf_openvpn_clients{dev=%q}`, dev)); len(got) != 1 || got[0].Float() != 1 {
			t.Errorf("ovpnperf_openvpn_clients of %s: %v, want 1", dev, got)
		}
		if got := api.Query(fmt.Sprintf(`ovpnperf_openvpn_client_received_bytes_total{dev=%q, common_name="ovpnperf client"} > 0`, dev)); len(got) != 1 {
			t.Errorf("per-client bytes of %s's client: %v, want one series > 0", dev, got)
		}
		// The counter itself, not its increase: the pings may all have
		// passed before Prometheus's first scrape of the series (seen on a
		// loaded machine), and a new tun device counts from 0.
		if got := api.Query(fmt.Sprintf(`ovpnperf_openvpn_tun_receive_packets_total{dev=%q} > 0`, dev)); len(got) != 1 {
			t.Errorf("tun packets of %s after the pings: %v, want one series > 0", dev, got)
		}
	}
	// The cluster's instance writes status-version 3 (no clients).
	if got := api.Query(`ovpnperf_openvpn_process_info{status_version="3"} and on(dev) ovpnperf_openvpn_clients == 0`); len(got) != 1 {
		t.Errorf("the cluster instance's status-version 3 file: %v, want one process with 0 clients", got)
	}

	for title, exprs := range dashboardQueries(t) {
		for _, e := range exprs {
			if watchQuery(e) {
				continue // watch's panels: its own test (cmd/ovpnperf) asks them
			}
			if got := api.Query(e); len(got) == 0 {
				t.Errorf("dashboard panel %q: %s returns no series", title, e)
			}
		}
	}

	// Rules are evaluated every second; wait for one round after the
	// scrapes.
	time.Sleep(1500 * time.Millisecond)
	n := 0
	for _, r := range api.AlertRules() {
		n++
		if r.Health != "ok" || r.LastEvaluation.IsZero() {
			t.Errorf("rule %s: health %q, last evaluation %v, error %q", r.Name, r.Health, r.LastEvaluation, r.LastError)
		}
		lhs, ok := promtest.ConditionLHS(r.Query)
		if !ok {
			t.Errorf("rule %s: %q is not EXPR OP NUMBER", r.Name, r.Query)
			continue
		}
		if watchQuery(lhs) {
			continue // the watch group's metrics: its own test
		}
		m := metricName.FindString(lhs)
		exists := len(api.Query("count("+m+")")) > 0
		got := api.Query(lhs)
		switch {
		case exists && len(got) == 0:
			t.Errorf("rule %s: %s returns no series though %s exists", r.Name, lhs, m)
		case !exists && !strings.HasPrefix(m, "ovpnperf_cluster_registry_"):
			t.Errorf("rule %s: its metric %s has no series here", r.Name, m)
		}
	}
	if n == 0 {
		t.Fatal("Prometheus loaded no alert rules")
	}
}

// watchQuery reports whether a query asks for metrics of `ovpnperf watch`,
// which this test does not run (cmd/ovpnperf's TestWatchPrometheus does).
func watchQuery(expr string) bool { return strings.Contains(expr, "ovpnperf_watch_") }
