package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/syncbuf"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

func TestMain(m *testing.M) {
	// The test binary is the process that starts clusters, as serve is.
	syscall.Umask(cluster.PrivateUmask)
	if os.Getenv(helperEnv) != "" {
		runServeHelper()
		return
	}
	labtest.Main(m)
}

// client is one stock OpenVPN client in the lab's client namespace.
type client struct {
	name string
	dev  string
	p    *openvpn.Process
	addr netip.Addr
}

func clientLauncher(l *lab.Lab) openvpn.Launcher {
	return func(ctx context.Context, logPath string, argv ...string) (openvpn.Proc, error) {
		p, err := l.Start(ctx, lab.Client, logPath, argv...)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// startClients starts n clients against remote:port in parallel and waits
// until every one is ready.
func startClients(t testing.TB, ctx context.Context, l *lab.Lab, pki *openvpn.PKI, dir string, n int, port uint16, proto string) []*client {
	t.Helper()
	cs := make([]*client, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		name := fmt.Sprintf("k%d", i)
		if _, _, err := pki.IssueClient(name); err != nil {
			t.Fatal(err)
		}
		c := &client{name: name, dev: fmt.Sprintf("ovpnperf-k%d", i)}
		cs[i] = c
		cfg, err := openvpn.ClientConfig(openvpn.ClientParams{Dev: c.dev, Proto: proto, Remote: lab.ServerV4(), Port: port,
			Credentials: pki.Client(name), Management: filepath.Join(dir, name+".mgmt")})
		if err != nil {
			t.Fatal(err)
		}
		if c.p, err = openvpn.StartWith(ctx, clientLauncher(l), cfg, dir, name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.p.Stop() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = c.p.WaitReady(ctx, 60*time.Second); errs[i] != nil {
				return
			}
			lg, err := c.p.Log()
			if err != nil {
				errs[i] = err
				return
			}
			c.addr, errs[i] = pushedAddr(lg.PushReply)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
	return cs
}

func pushedAddr(reply string) (netip.Addr, error) {
	for _, opt := range strings.Split(reply, ",") {
		f := strings.Fields(opt)
		if len(f) >= 2 && f[0] == "ifconfig" {
			return netip.ParseAddr(f[1])
		}
	}
	return netip.Addr{}, fmt.Errorf("no ifconfig in %q", reply)
}

// startCluster runs a cluster in l's server namespace from the lab base.
func startCluster(t testing.TB, l *lab.Lab, o cluster.Options, edit ...func(*openvpn.Config)) (*cluster.Cluster, *openvpn.PKI) {
	t.Helper()
	var pki *openvpn.PKI
	o.Netns = l.Namespace(lab.Server)
	o.Prepare = func(dir string) (*openvpn.Config, error) {
		base, p, err := cluster.LabBase(dir, true)
		pki = p
		for _, e := range edit {
			if err == nil {
				e(base)
			}
		}
		return base, err
	}
	if o.Pool == (netip.Prefix{}) {
		o.Pool = lab.TunnelV4()
	}
	c, err := cluster.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cluster stop: %v", err)
		}
		checkClusterGone(t, c.ID(), l.Namespace(lab.Server))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitUp(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	return c, pki
}

// checkClusterGone fails unless nothing of cluster id is left: process
// (a command line naming its directory), tun device, iptables chain,
// socket, file.
func checkClusterGone(t testing.TB, id, ns string) {
	t.Helper()
	dir := cluster.Paths{}.Dir(id)
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s still exists", dir)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), dir+"/") {
			t.Errorf("process %s still runs: %q", p, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	out, _ := exec.Command("ip", "netns", "exec", ns, "ip", "-o", "link").CombinedOutput()
	if strings.Contains(string(out), "ovpnperf"+id) {
		t.Errorf("tun device of cluster %s left in %s:\n%s", id, ns, out)
	}
	for _, table := range []string{"nat", "mangle"} {
		out, _ := exec.Command("ip", "netns", "exec", ns, "iptables", "-w", "-t", table, "-S").CombinedOutput()
		if strings.Contains(string(out), "ovpnperf-"+id) {
			t.Errorf("iptables %s rules of cluster %s left:\n%s", table, id, out)
		}
	}
}

func instanceOf(c *cluster.Cluster, a netip.Addr) string {
	for _, s := range c.Specs() {
		if s.Subnet.Contains(a) {
			return s.Name
		}
	}
	return ""
}

func serverAddr(c *cluster.Cluster, name string) netip.Addr {
	for _, s := range c.Specs() {
		if s.Name == name {
			return s.Subnet.Addr().Next()
		}
	}
	return netip.Addr{}
}

// TestOnePortEightClients is must-show 1: 2 instances, 8 stock clients on
// one port, UDP: all pass traffic, split 3–5 (the counter backend gives
// 4/4), every client stays on its instance.
func TestOnePortEightClients(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn", "iptables", "ping")
	for _, tc := range []struct {
		proto, spread string
	}{{"udp", cluster.SpreadCounter}, {"tcp", cluster.SpreadHash}} {
		t.Run(tc.proto+"-"+tc.spread, func(t *testing.T) {
			l := labtest.New(t, labpath.Path{})
			c, pki := startCluster(t, l, cluster.Options{Instances: 2, Protos: []string{tc.proto}, PortBase: 1195, OnePort: 1194,
				Spread: tc.spread, PerClient: true, CPUs: []int{0, 1}})
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			dir := t.TempDir()
			clients := startClients(t, ctx, l, pki, dir, 8, 1194, tc.proto)
			per := map[string]int{}
			for _, k := range clients {
				inst := instanceOf(c, k.addr)
				per[inst]++
				out, err := l.Command(ctx, lab.Client, "ping", "-c", "2", "-W", "3", "-I", k.dev, serverAddr(c, inst).String()).CombinedOutput()
				if err != nil {
					t.Errorf("client %s (%s on %s): ping through the tunnel: %v\n%s", k.name, k.addr, inst, err, out)
				}
			}
			t.Logf("backend %s: split %v", c.Backend(), per)
			if tc.spread == cluster.SpreadCounter {
				for _, s := range c.Specs() {
					if n := per[s.Name]; n < 3 || n > 5 {
						t.Errorf("instance %s has %d of 8 clients, want 3-5", s.Name, n)
					}
				}
			} else if len(per) == 0 {
				t.Errorf("no client landed anywhere")
			}
			// Sticky: after the pings, each client is still on the instance
			// that gave it its address, connected once.
			time.Sleep(2 * cluster.DefaultTiming().PollInterval)
			where := map[string]string{}
			for _, s := range c.Status() {
				if s.State != cluster.StateUp || s.Restarts != 0 {
					t.Errorf("instance %s: state %s, %d restarts", s.Name, s.State, s.Restarts)
				}
				for _, pc := range s.PerClient {
					if prev, dup := where[pc.CommonName]; dup {
						t.Errorf("client %s on both %s and %s", pc.CommonName, prev, s.Name)
					}
					where[pc.CommonName] = s.Name
				}
			}
			if len(where) == 0 {
				b, _ := json.Marshal(c.Status())
				t.Logf("status: %s", b)
			}
			for _, k := range clients {
				if got, want := where["ovpnperf client "+k.name], instanceOf(c, k.addr); got != want {
					t.Errorf("client %s: listed on %q, its address %s is %q's", k.name, got, k.addr, want)
				}
				b, _ := os.ReadFile(k.p.LogPath)
				if n := strings.Count(string(b), openvpn.ReadyLine); n != 1 {
					t.Errorf("client %s connected %d times, want 1 (flow moved?)", k.name, n)
				}
			}
		})
	}
}

const helperEnv = "OVPNPERF_TEST_CLUSTER_SERVE"

// runServeHelper is a `cluster serve` stand-in that the kill test can
// SIGKILL: it starts a cluster from the lab base in the namespace named by
// the environment and blocks.
func runServeHelper() {
	f := strings.Fields(os.Getenv(helperEnv)) // ID NETNS
	o := cluster.Options{ID: f[0], Netns: f[1], Instances: 2, Protos: []string{"udp"}, PortBase: 1195, OnePort: 1194, Pool: lab.TunnelV4(),
		Sites: []cluster.Site{{Prefix: netip.MustParsePrefix("10.97.0.0/24"), CN: "ovpnperf client"}}}
	o.Prepare = func(dir string) (*openvpn.Config, error) {
		base, _, err := cluster.LabBase(dir, true)
		return base, err
	}
	if _, err := cluster.Start(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	select {}
}

// testBinary is the ovpnperf binary labtest.Main built.
func testBinary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("OVPNPERF_TEST_BINARY")
	if bin == "" {
		t.Fatal("no ovpnperf binary (labtest.Main builds it)")
	}
	return bin
}

// serveProc is `ovpnperf cluster serve` run by a test: what it prints,
// and exited, closed when it has ended (err is then Wait's error).
type serveProc struct {
	cmd    *exec.Cmd
	out    *syncbuf.Buffer
	exited chan struct{}
	err    error
}

// startServe runs `ovpnperf cluster serve --id ID ARGS…`. The test's
// clean-up kills it if it still runs and cleans the cluster.
func startServe(t testing.TB, id string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(testBinary(t), append([]string{"cluster", "serve", "--id", id}, args...)...)
	p := &serveProc{cmd: cmd, out: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		_ = cluster.Paths{}.Clean(context.Background(), id)
	})
	return p
}

func labPrepare(dir string) (*openvpn.Config, error) {
	base, _, err := cluster.LabBase(dir, true)
	return base, err
}

// checkPrivate fails unless every file under dir is 0600 (sockets
// included) and every directory 0700.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	n := 0
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		n++
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if n < 10 {
		t.Errorf("only %d files under %s: configs, keys, sockets expected", n, dir)
	}
}
