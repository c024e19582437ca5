package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/promtest"
)

// scrape reads the cluster's metrics, checks them with promtool, and returns each sample of the
// instance metrics as "name{instance}" → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	return scrapeWith(t, http.DefaultClient, url)
}

// scrapeIn scrapes a metrics endpoint that listens in namespace ns: the
// connection is opened inside it (netns.Do), used from anywhere.
func scrapeIn(t *testing.T, ns, url string) map[string]float64 {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			var conn net.Conn
			err := netns.Do(ns, func() (err error) {
				conn, err = net.DialTimeout(network, addr, 5*time.Second)
				return err
			})
			return conn, err
		}}}
	return scrapeWith(t, c, url)
}

// dialIn opens a TCP connection to addr from inside namespace ns.
func dialIn(t *testing.T, ns, addr string) net.Conn {
	t.Helper()
	var conn net.Conn
	if err := netns.Do(ns, func() (err error) {
		conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("dialing %s in %s: %v", addr, ns, err)
	}
	return conn
}

func scrapeWith(t *testing.T, c *http.Client, url string) map[string]float64 {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	// Every scrape of a real cluster follows Prometheus's conventions.
	promtest.CheckMetrics(t, body)
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "ovpnperf_cluster_instance_") {
			continue
		}
		// name{cluster="…",openvpn_instance="u0",port="1195",proto="udp"} 1
		name, rest, _ := strings.Cut(line, "{")
		labels, val, _ := strings.Cut(rest, "} ")
		inst := ""
		for _, kv := range strings.Split(labels, ",") {
			if k, v, _ := strings.Cut(kv, "="); k == "openvpn_instance" {
				inst = strings.Trim(v, `"`)
			}
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[name+"{"+inst+"}"] = f
	}
	return out
}

// checkMetrics compares want with a scrape; a negative want means "> 0".
func checkMetrics(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("metric %s missing (scrape: %v)", k, got)
		case w < 0 && g <= 0:
			t.Errorf("metric %s = %v, want > 0", k, g)
		case w >= 0 && g != w:
			t.Errorf("metric %s = %v, want %v", k, g, w)
		}
	}
}

// startVia starts a client whose openvpn is started by argv in the lab's
// client namespace instead of `openvpn --config C` (argv gets C appended as
// --config C when it ends with "--config"). It returns the process and
// tears it down with the test.
func startVia(t *testing.T, ctx context.Context, l *lab.Lab, cfg *openvpn.Config, dir, role string, argv func(conf string) []string) *openvpn.Process {
	t.Helper()
	launch := func(ctx context.Context, logPath string, a ...string) (openvpn.Proc, error) {
		p, err := l.Start(ctx, lab.Client, logPath, argv(a[len(a)-1])...)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	p, err := openvpn.StartWith(ctx, launch, cfg, dir, role)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

// readyAddr waits until p is connected and returns the address it was given.
func readyAddr(ctx context.Context, p *openvpn.Process) (netip.Addr, error) {
	if err := p.WaitReady(ctx, 60*time.Second); err != nil {
		return netip.Addr{}, err
	}
	lg, err := p.Log()
	if err != nil {
		return netip.Addr{}, err
	}
	return pushedAddr(lg.PushReply)
}

// testClientPaths checks, on a running 2-instance UDP cluster whose u0
// carries 4 clients and u1 none, the ways a client is given an instance
// besides one-port mode, and the metrics:
//   - `cluster connect` through a least-loaded dispatcher in the server
//     namespace lands on u1 (the instance the dispatcher named) and passes
//     traffic; with the dispatcher unreachable it falls back to the
//     config's remote (u0's port) and still connects;
//   - `cluster client-config` writes one remote per instance and
//     remote-random, mode 0600, and stock OpenVPN connects with it;
//   - the Prometheus metrics show up, clients, bytes and restarts, and
//     restarts counts a kill.
func testClientPaths(t *testing.T, ctx context.Context, l *lab.Lab, c *cluster.Cluster, pki *openvpn.PKI) {
	bin := testBinary(t)
	dir := t.TempDir()

	// Metrics on a loopback port 0 of the test's own namespace.
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close()
	go func() { _ = c.ServeMetrics(ml) }()
	murl := "http://" + ml.Addr().String() + "/metrics"
	checkMetrics(t, scrape(t, murl), map[string]float64{
		"ovpnperf_cluster_instance_up{u0}": 1, "ovpnperf_cluster_instance_up{u1}": 1,
		"ovpnperf_cluster_instance_clients{u0}": 4, "ovpnperf_cluster_instance_clients{u1}": 0,
		"ovpnperf_cluster_instance_received_bytes_total{u0}": -1, "ovpnperf_cluster_instance_sent_bytes_total{u0}": -1,
		"ovpnperf_cluster_instance_restarts_total{u0}": 0, "ovpnperf_cluster_instance_restarts_total{u1}": 0,
	})

	// The dispatcher listens in the server namespace, where connect in the
	// client namespace reaches it; a second port, opened and closed, is
	// one where nothing answers.
	var dl net.Listener
	var dead string
	if err := netns.Do(l.Namespace(lab.Server), func() error {
		var err error
		if dl, err = net.Listen("tcp", lab.ServerV4().String()+":0"); err != nil {
			return err
		}
		x, err := net.Listen("tcp", lab.ServerV4().String()+":0")
		if err != nil {
			return err
		}
		dead = x.Addr().String()
		return x.Close()
	}); err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	d := &cluster.Dispatcher{Registry: cluster.LocalRegistry{C: c, Host: lab.ServerV4().String()}, Strategy: cluster.LeastLoaded, RatePerSec: 20, Burst: 40}
	go func() { _ = d.Serve(dl, pki.ServerCert(), pki.ServerKey(), pki.CACert()) }()

	// Every client's config names u0's port only: landing on u1 can only
	// come from the dispatcher's answer.
	u0 := c.Specs()[0]
	newCfg := func(name, dev string) *openvpn.Config {
		t.Helper()
		if _, _, err := pki.IssueClient(name); err != nil {
			t.Fatal(err)
		}
		cfg, err := openvpn.ClientConfig(openvpn.ClientParams{Dev: dev, Proto: "udp", Remote: lab.ServerV4(), Port: u0.Port, Credentials: pki.Client(name)})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	connect := func(addr string) func(string) []string {
		return func(conf string) []string {
			return []string{bin, "cluster", "connect", addr, "--ca", pki.CACert(), "--cert", pki.ClientCert(), "--key", pki.ClientKey(), "--", "--config", conf}
		}
	}
	viaDisp := startVia(t, ctx, l, newCfg("cd", "ovpnperf-cd"), dir, "connect-dispatcher", connect(dl.Addr().String()))
	viaFallback := startVia(t, ctx, l, newCfg("cf", "ovpnperf-cf"), dir, "connect-fallback", connect(dead))

	// client-config through the command, from a base that names u0 only.
	base := newCfg("cc", "ovpnperf-cc")
	text, err := base.Render()
	if err != nil {
		t.Fatal(err)
	}
	basePath := filepath.Join(dir, "base.conf")
	if err := os.WriteFile(basePath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	ccPath := filepath.Join(dir, "cluster-client.conf")
	if out, err := exec.CommandContext(ctx, bin, "cluster", "client-config", c.ID(), "--base", basePath, "--host", lab.ServerV4().String(), "-o", ccPath).CombinedOutput(); err != nil {
		t.Fatalf("cluster client-config: %v\n%s", err, out)
	}
	fi, err := os.Stat(ccPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("client-config output mode %v, want 0600", fi.Mode().Perm())
	}
	cc, _ := os.ReadFile(ccPath)
	var remotes []string
	random := 0
	for _, line := range strings.Split(string(cc), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "remote":
			remotes = append(remotes, strings.Join(f[1:], " "))
		case len(f) > 0 && f[0] == "remote-random":
			random++
		}
	}
	var want []string
	for _, s := range c.Specs() {
		want = append(want, fmt.Sprintf("%s %d udp", lab.ServerV4(), s.Port))
	}
	if strings.Join(remotes, ",") != strings.Join(want, ",") || random != 1 {
		t.Errorf("client-config: remotes %q, remote-random %d times; want %q and once\n%s", remotes, random, want, cc)
	}
	viaCC := startVia(t, ctx, l, base, dir, "client-config", func(string) []string {
		return []string{"openvpn", "--config", ccPath}
	})

	var wg sync.WaitGroup
	addrs := make([]netip.Addr, 3)
	errs := make([]error, 3)
	for i, p := range []*openvpn.Process{viaDisp, viaFallback, viaCC} {
		wg.Add(1)
		go func() { defer wg.Done(); addrs[i], errs[i] = readyAddr(ctx, p) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
	dlog, _ := os.ReadFile(viaDisp.LogPath)
	if !strings.Contains(string(dlog), "dispatcher assigned u1 ") {
		t.Errorf("connect did not report the dispatcher's assignment of u1:\n%s", dlog)
	}
	flog, _ := os.ReadFile(viaFallback.LogPath)
	if !strings.Contains(string(flog), "using the config's remotes") {
		t.Errorf("connect with no dispatcher did not say it falls back:\n%s", flog)
	}
	for _, k := range []struct {
		name      string
		a         netip.Addr
		dev, want string
	}{
		{"connect via dispatcher", addrs[0], "ovpnperf-cd", "u1"},
		{"connect fallback", addrs[1], "ovpnperf-cf", "u0"},
		{"client-config", addrs[2], "ovpnperf-cc", ""},
	} {
		a := k.a
		inst := instanceOf(c, a)
		if k.want != "" && inst != k.want {
			t.Errorf("%s: address %s is on %q, want %s", k.name, a, inst, k.want)
		}
		if inst == "" {
			t.Errorf("%s: address %s is on no instance", k.name, a)
			continue
		}
		if out, err := l.Command(ctx, lab.Client, "ping", "-c", "2", "-W", "3", "-I", k.dev, serverAddr(c, inst).String()).CombinedOutput(); err != nil {
			t.Errorf("%s (%s on %s): ping through the tunnel: %v\n%s", k.name, a, inst, err, out)
		}
	}
	for _, p := range []*openvpn.Process{viaDisp, viaFallback, viaCC} {
		_ = p.Stop()
	}

	// restarts counts a kill, and up returns to 1 when the instance does.
	if _, err := c.Kill("u1"); err != nil {
		t.Fatal(err)
	}
	for {
		m := scrape(t, murl)
		if m["ovpnperf_cluster_instance_restarts_total{u1}"] == 1 && m["ovpnperf_cluster_instance_up{u1}"] == 1 {
			checkMetrics(t, m, map[string]float64{"ovpnperf_cluster_instance_restarts_total{u0}": 0, "ovpnperf_cluster_instance_up{u0}": 1})
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after killing u1: metrics %v, want u1 restarts 1 and up 1", m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
