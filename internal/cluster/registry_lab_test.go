package cluster_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ovpnperf/ovpnperf/docs/schemas"
	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/etcdsrv"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// regLab is a lab with etcd, three server hosts each running `cluster
// serve --registry`, and two hosts each running `cluster dispatch`:
//
//	client ── router ─┬─ etcd  198.18.1.2  etcd 3.4, TLS + auth (etcdsrv)
//	                  ├─ h1..h3            cluster serve --registry, 1 instance each
//	                  └─ d1, d2            cluster dispatch --registry
type regLab struct {
	t      *testing.T
	l      *lab.Lab
	etcd   *etcdsrv.Server
	pki    *openvpn.PKI
	bin    string
	dir    string
	hosts  []lab.Node
	addr   map[lab.Node]netip.Addr
	serves map[lab.Node]*lab.Process
	ids    map[lab.Node]string
	disps  []string // dispatcher ADDR:PORT
	mets   []string // their /metrics and /status ADDR:PORT
	dlogs  []string
}

const (
	regTTL       = 3 * time.Second
	dispatchPort = 8443
	metricsPort  = 9188
)

func (r *regLab) registryFlags(cn string) []string {
	cert, key, err := r.etcd.ClientCert(cn)
	if err != nil {
		r.t.Fatal(err)
	}
	return []string{"--registry", "etcd://" + netip.AddrPortFrom(r.etcd.Addr(), etcdsrv.ClientPort).String(),
		"--registry-ca", r.etcd.CAFile(), "--registry-cert", cert, "--registry-key", key}
}

func startRegLab(t *testing.T, ctx context.Context) *regLab {
	labtest.Require(t)
	testenv.RequirePrograms(t, "openvpn", etcdsrv.Program)
	bin := testBinary(t)
	r := &regLab{t: t, bin: bin, dir: t.TempDir(), hosts: []lab.Node{"h1", "h2", "h3"},
		addr: map[lab.Node]netip.Addr{}, serves: map[lab.Node]*lab.Process{}, ids: map[lab.Node]string{}}
	before, _ := cluster.Paths{}.List()
	name := "t" + lab.NewName()
	l, err := lab.Up(ctx, lab.Options{Name: name, Ephemeral: true, Hosts: []lab.Node{"etcd", "h1", "h2", "h3", "d1", "d2"}, Env: labtest.Env()})
	if err != nil {
		t.Fatal(err)
	}
	r.l = l
	// Must-show 5: nothing of the lab, etcd or the cluster is left.
	t.Cleanup(func() {
		for _, p := range r.serves {
			_ = p.Stop()
		}
		for _, id := range r.ids {
			_ = cluster.Paths{}.Clean(context.Background(), id)
		}
		if r.etcd != nil {
			_ = r.etcd.Close()
		}
		if err := l.Down(); err != nil {
			t.Errorf("lab down: %v", err)
		}
		labtest.CheckGone(t, name)
		for h, id := range r.ids {
			checkClusterGone(t, id, l.Namespace(h))
		}
		// A cluster directory this test made and did not record: one
		// that was not there before and whose cluster ran in this lab.
		// (Other packages' tests run clusters at the same time: the
		// host's list is not this test's.)
		after, _ := cluster.Paths{}.List()
		for _, id := range after {
			if slices.Contains(before, id) {
				continue
			}
			if st, err := (cluster.Paths{}).ReadState(id); err == nil && strings.HasPrefix(st.Netns, "ovpnperf-"+name+"-") {
				t.Errorf("cluster directory %s of this lab (%s) left", cluster.Paths{}.Dir(id), st.Netns)
			}
		}
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), "ovpnperf-"+name) || strings.Contains(string(b), r.dir) {
				t.Errorf("process %s still runs: %q", p, strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
	})
	for _, h := range l.Hosts() {
		r.addr[h.Node] = h.Addr
	}
	if r.etcd, err = etcdsrv.Start(ctx, l, "etcd", filepath.Join(l.Dir(), "etcd")); err != nil {
		t.Fatal(err)
	}

	// One OpenVPN PKI and server config for every host; each host's
	// instances get their own pool (the clients share one namespace).
	base, pki, err := cluster.LabBase(filepath.Join(r.dir), false)
	if err != nil {
		t.Fatal(err)
	}
	r.pki = pki
	// keepalive 1 4: the server pings every second and pushes
	// ping-restart 4, so a client notices a dead server after 4 s instead
	// of the lab default's 60 (the reconnect time below is that plus
	// connect's round trip).
	base.Set(openvpn.Directive{Name: "keepalive", Args: []string{"1", "4"}})
	text, err := base.Render()
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(r.dir, "server.conf")
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, h := range r.hosts {
		id := cluster.NewID()
		r.ids[h] = id
		argv := append([]string{r.bin, "cluster", "serve", "--id", id, "--config", conf, "--instances", "1",
			"--cpus", strconv.Itoa(i % 2), "--port-base", "1195", "--pool", fmt.Sprintf("10.8%d.0.0/24", i+1),
			"--registry-host", string(h), "--registry-ttl", regTTL.String(), "--advertise", r.addr[h].String(),
			"--drain", "200ms"}, r.registryFlags(etcdsrv.UserServe)...)
		p, err := l.Start(ctx, h, filepath.Join(r.dir, "serve-"+string(h)+".log"), argv...)
		if err != nil {
			t.Fatal(err)
		}
		r.serves[h] = p
	}
	for _, d := range []lab.Node{"d1", "d2"} {
		a := r.addr[d]
		listen := netip.AddrPortFrom(a, dispatchPort).String()
		mets := netip.AddrPortFrom(a, metricsPort).String()
		logPath := filepath.Join(r.dir, "dispatch-"+string(d)+".log")
		argv := append([]string{r.bin, "cluster", "dispatch", "--listen", listen, "--metrics", mets,
			"--ca", pki.CACert(), "--cert", pki.ServerCert(), "--key", pki.ServerKey(), "--strategy", cluster.LeastLoaded,
			"--rate", "1000"}, r.registryFlags(etcdsrv.UserDispatch)...)
		if _, err := l.Start(ctx, d, logPath, argv...); err != nil {
			t.Fatal(err)
		}
		r.disps = append(r.disps, listen)
		r.mets = append(r.mets, mets)
		r.dlogs = append(r.dlogs, logPath)
	}
	// Every dispatcher sees the three instances up.
	r.waitFor(ctx, 60*time.Second, "dispatchers do not see 3 instances up", func() bool {
		for i := range r.disps {
			st, err := r.status(ctx, i)
			if err != nil || st.View.Stale || countUp(st.Instances) != 3 {
				return false
			}
		}
		return true
	})
	return r
}

func countUp(es []cluster.Endpoint) int {
	n := 0
	for _, e := range es {
		if e.State == cluster.StateUp {
			n++
		}
	}
	return n
}

func (r *regLab) waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) time.Duration {
	r.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout || ctx.Err() != nil {
			logs := ""
			for _, p := range append(append([]string{}, r.dlogs...), filepath.Join(r.dir, "serve-h1.log")) {
				b, _ := os.ReadFile(p)
				logs += "\n--- " + p + "\n" + tail(string(b), 1500)
			}
			r.t.Fatalf("after %v: %s%s", time.Since(start).Round(time.Millisecond), what, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// dialFrom opens a TCP connection from the lab's client namespace.
func (r *regLab) dialFrom(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := netns.Do(r.l.Namespace(lab.Client), func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

func (r *regLab) httpClient() *http.Client {
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return r.dialFrom(ctx, addr) }}}
}

func (r *regLab) status(ctx context.Context, i int) (*cluster.DispatchStatus, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+r.mets[i]+"/status", nil)
	resp, err := r.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st cluster.DispatchStatus
	return &st, json.NewDecoder(resp.Body).Decode(&st)
}

func (r *regLab) metric(ctx context.Context, i int, name string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+r.mets[i]+"/metrics", nil)
	resp, err := r.httpClient().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no metric %s", name)
}

func (r *regLab) ask(ctx context.Context, i int) (cluster.Reply, error) {
	cfg, err := cluster.ClientTLS(r.pki.ClientCert(), r.pki.ClientKey(), r.pki.CACert())
	if err != nil {
		return cluster.Reply{}, err
	}
	c, err := r.dialFrom(ctx, r.disps[i])
	if err != nil {
		return cluster.Reply{}, err
	}
	return cluster.AskConn(ctx, c, cfg, cluster.NewRequest("udp"))
}

func hostOf(instance string) lab.Node { return lab.Node(strings.Split(instance, "/")[0]) }

// regClient is one real OpenVPN client run by `cluster connect --reconnect`
// with both dispatchers.
type regClient struct {
	p *openvpn.Process
}

// assignments returns the hosts connect was assigned, in order, and how
// many times openvpn completed its start.
func (c *regClient) assignments() ([]lab.Node, int) {
	b, _ := os.ReadFile(c.p.LogPath)
	var hs []lab.Node
	for _, line := range strings.Split(string(b), "\n") {
		if _, rest, ok := strings.Cut(line, "dispatcher assigned "); ok {
			hs = append(hs, hostOf(strings.Fields(rest)[0]))
		}
	}
	return hs, strings.Count(string(b), "Initialization Sequence Completed")
}

// TestRegistryAcrossHosts runs a cluster across hosts on a lab with etcd and
// three server hosts, two dispatchers and real OpenVPN clients:
//
//  1. 12 clients (3 real via `cluster connect`, 9 dispatcher requests)
//     through two least-loaded dispatchers: each host gets 3–5, and both
//     dispatchers hold the same view and load.
//  2. SIGKILL of one host's serve and instance: its instance leaves both
//     dispatchers within the TTL (+ etcd's 500 ms expiry tick), 200
//     requests name none of it, its real clients reconnect elsewhere.
//  3. etcd stopped 10 s: both dispatchers go on assigning, stale in
//     /status and metrics, and catch up when it is back.
//  4. Writes without a certificate, with another CA's, and with the
//     dispatch role's are refused; a garbage entry is logged and ignored.
//  5. Nothing is left (the cleanup registered by startRegLab).
func TestRegistryAcrossHosts(t *testing.T) {
	// Its bounds are seconds wide (expiry within the TTL + 3 s, reconnect
	// within a minute) and it mostly waits on timers: a tolerant test,
	// run beside the measuring tests (testenv.Tolerant).
	testenv.Tolerant(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	r := startRegLab(t, ctx)
	t.Logf("lab with etcd, 3 serve hosts and 2 dispatchers ready after %v", time.Since(start).Round(100*time.Millisecond))

	// 1. Three real clients through `cluster connect`, each with both
	// dispatchers (the first one alternating), then nine requests.
	perHost := map[lab.Node]int{}
	var clients []*regClient
	for i := 0; i < 3; i++ {
		if _, _, err := r.pki.IssueClient(fmt.Sprintf("rc%d", i)); err != nil {
			t.Fatal(err)
		}
		// The config's own remote is h1's instance: used only when no
		// dispatcher answers.
		cfg, err := openvpn.ClientConfig(openvpn.ClientParams{Dev: fmt.Sprintf("ovpnperf-rc%d", i), Proto: "udp", Remote: r.addr["h1"], Port: 1195, Credentials: r.pki.Client(fmt.Sprintf("rc%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		disp := r.disps[i%2] + "," + r.disps[(i+1)%2]
		p := startVia(t, ctx, r.l, cfg, r.dir, fmt.Sprintf("rc%d", i), func(conf string) []string {
			return []string{r.bin, "cluster", "connect", disp, "--reconnect", "--ca", r.pki.CACert(), "--cert", r.pki.ClientCert(), "--key", r.pki.ClientKey(),
				"--", "--config", conf}
		})
		if err := p.WaitReady(ctx, 60*time.Second); err != nil {
			t.Fatalf("client rc%d: %v", i, err)
		}
		c := &regClient{p: p}
		hs, _ := c.assignments()
		if len(hs) != 1 {
			t.Fatalf("client rc%d: assignments %v, want one", i, hs)
		}
		perHost[hs[0]]++
		clients = append(clients, c)
	}
	// Least-loaded counts a client twice until its assignment record
	// expires (PendingWindow): once connected (reported by its host) and
	// once assigned. Wait until both dispatchers see the three connected,
	// so that the nine requests meet the same load on every dispatcher.
	r.waitFor(ctx, 15*time.Second, "dispatchers do not see the 3 real clients", func() bool {
		for i := range r.disps {
			st, err := r.status(ctx, i)
			if err != nil {
				return false
			}
			n := 0
			for _, e := range st.Instances {
				n += e.Clients
			}
			if n != 3 {
				return false
			}
		}
		return true
	})
	for i := 0; i < 9; i++ {
		rep, err := r.ask(ctx, i%2)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if rep.Remote != r.addr[hostOf(rep.Instance)].String() || rep.Port != 1195 {
			t.Errorf("request %d: %+v, want host %s's address and port 1195", i, rep, hostOf(rep.Instance))
		}
		perHost[hostOf(rep.Instance)]++
	}
	t.Logf("Must-show 1: 12 assignments by host %v", perHost)
	for _, h := range r.hosts {
		if n := perHost[h]; n < 3 || n > 5 {
			t.Errorf("host %s got %d of 12 assignments, want 3–5 (%v)", h, n, perHost)
		}
	}
	// Both dispatchers agree: same instances, states and load.
	var views [2]string
	r.waitFor(ctx, 10*time.Second, "the dispatchers' views differ", func() bool {
		for i := range views {
			st, err := r.status(ctx, i)
			if err != nil {
				return false
			}
			var s []string
			for _, e := range st.Instances {
				s = append(s, fmt.Sprintf("%s %s %d+%d", e.Name, e.State, e.Clients, e.Assigned))
			}
			views[i] = strings.Join(s, ", ")
		}
		return views[0] == views[1]
	})
	t.Logf("both dispatchers: %s", views[0])

	// 2. SIGKILL the serve of the host the first real client is on, and
	// its instance, at once.
	for _, c := range clients {
		hs, inits := c.assignments()
		t.Logf("client %s: assigned %v, connected %d times", filepath.Base(c.p.LogPath), hs, inits)
		if inits != 1 {
			t.Errorf("client %s reconnected before any host died", filepath.Base(c.p.LogPath))
		}
	}
	victim, _ := clients[0].assignments()
	dead := victim[len(victim)-1]
	st, err := cluster.Paths{}.ReadState(r.ids[dead])
	if err != nil {
		t.Fatal(err)
	}
	pids := []int{r.serves[dead].Pid()}
	for _, res := range st.Resources {
		if res.Kind == cluster.KindProcess && res.Name != "serve" {
			pids = append(pids, res.Pid)
		}
	}
	var onDead []*regClient
	for _, c := range clients {
		if hs, _ := c.assignments(); hs[len(hs)-1] == dead {
			onDead = append(onDead, c)
		}
	}
	if len(onDead) == 0 {
		t.Fatalf("no real client on %s", dead)
	}
	killed := time.Now()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", pid, err)
		}
	}
	delete(r.serves, dead)
	// Each client of the dead host is watched from now on, so that its
	// reconnect time does not include the requests below.
	reconnected := make([]chan time.Duration, len(onDead))
	for i, c := range onDead {
		reconnected[i] = make(chan time.Duration, 1)
		go func() {
			for ctx.Err() == nil {
				if hs, inits := c.assignments(); inits >= 2 && hs[len(hs)-1] != dead {
					reconnected[i] <- time.Since(killed)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	gone := r.waitFor(ctx, regTTL+10*time.Second, fmt.Sprintf("%s's instance still in a dispatcher's view", dead), func() bool {
		for i := range r.disps {
			st, err := r.status(ctx, i)
			if err != nil {
				return false
			}
			for _, e := range st.Instances {
				if hostOf(e.Name) == dead {
					return false
				}
			}
		}
		return true
	})
	t.Logf("Must-show 2: SIGKILL of %s's serve (pid %d) and instance: gone from both dispatchers after %v (TTL %v)", dead, pids[0], gone.Round(10*time.Millisecond), regTTL)
	// The bound is the TTL plus etcd's expiry check (500 ms) and this
	// test's polling: generous, the machine is shared.
	if gone > regTTL+3*time.Second {
		t.Errorf("%s left the dispatchers %v after the kill, more than TTL %v + 3 s", dead, gone, regTTL)
	}
	for i := 0; i < 200; i++ {
		rep, err := r.ask(ctx, i%2)
		if err != nil {
			t.Fatalf("request %d after the kill: %v", i, err)
		}
		if hostOf(rep.Instance) == dead {
			t.Fatalf("request %d after the kill named %s on the dead host", i, rep.Instance)
		}
	}
	for i, c := range onDead {
		var took time.Duration
		select {
		case took = <-reconnected[i]: // polled every 50 ms: up to 50 ms late
		case <-time.After(regTTL + 60*time.Second):
			b, _ := os.ReadFile(c.p.LogPath)
			t.Fatalf("client %s of the dead host did not reconnect elsewhere:\n%s", filepath.Base(c.p.LogPath), tail(string(b), 3000))
		}
		hs, _ := c.assignments()
		b, _ := os.ReadFile(c.p.LogPath)
		for _, line := range strings.Split(string(b), "\n") {
			for _, w := range []string{"dispatcher assigned", "Initialization Sequence Completed", "ping-restart", "openvpn ended", "process exiting"} {
				if strings.Contains(line, w) {
					t.Logf("  %s", line)
					break
				}
			}
		}
		t.Logf("  (killed at %s)", killed.UTC().Format("15:04:05.000"))
		t.Logf("Must-show 2: client %s reconnected to %s %v after the kill (pushed ping-restart 4 s, TTL %v)", filepath.Base(c.p.LogPath), hs[len(hs)-1], took.Round(100*time.Millisecond), regTTL)
	}

	// 4. Unauthenticated writes are refused; garbage is ignored.
	testRegistryAuth(t, ctx, r)

	// 3. etcd stopped for 10 s.
	for i := range r.disps {
		if st, err := r.status(ctx, i); err != nil || st.View.Stale {
			t.Fatalf("dispatcher %d before etcd stops: %+v %v", i, st, err)
		}
	}
	lists := make([]int, len(r.disps))
	for i := range r.disps {
		st, _ := r.status(ctx, i)
		lists[i] = st.View.Lists
	}
	if err := r.etcd.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	staleAfter := r.waitFor(ctx, 8*time.Second, "a dispatcher does not mark its view stale", func() bool {
		for i := range r.disps {
			st, err := r.status(ctx, i)
			if err != nil || !st.View.Stale {
				return false
			}
			if v, err := r.metric(ctx, i, "ovpnperf_cluster_registry_stale"); err != nil || v != 1 {
				return false
			}
		}
		return true
	})
	for time.Since(stopped) < 10*time.Second {
		for i := range r.disps {
			rep, err := r.ask(ctx, i)
			if err != nil || hostOf(rep.Instance) == dead {
				t.Fatalf("dispatcher %d with etcd stopped: %+v %v", i, rep, err)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	for i := range r.disps {
		age, err := r.metric(ctx, i, "ovpnperf_cluster_registry_view_age_seconds")
		if err != nil || age < 5 {
			t.Errorf("dispatcher %d: view age %v s after 10 s without etcd (%v), want ≥ 5", i, age, err)
		}
	}
	if err := r.etcd.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	caught := r.waitFor(ctx, 30*time.Second, "dispatchers do not catch up after etcd is back", func() bool {
		// Both live hosts registered (again) with a lease, as etcd
		// itself says.
		cli, err := r.etcd.Client(lab.Client, etcdsrv.UserDispatch)
		if err != nil {
			return false
		}
		rs, err := cluster.ReadRegistry(ctx, cli, "default")
		cli.Close()
		if err != nil || len(rs.Hosts) != 2 {
			return false
		}
		for _, h := range rs.Hosts {
			if h.LeaseTTLSeconds <= 0 || len(h.Instances) != 1 {
				return false
			}
		}
		for i := range r.disps {
			st, err := r.status(ctx, i)
			if err != nil || st.View.Stale || st.View.Lists <= lists[i] || countUp(st.Instances) != 2 {
				return false
			}
			if v, err := r.metric(ctx, i, "ovpnperf_cluster_registry_stale"); err != nil || v != 0 {
				return false
			}
		}
		return true
	})
	t.Logf("Must-show 3: etcd stopped: both views stale after %v, assigning for 10 s; back %v after etcd's restart (%v since the stop)",
		staleAfter.Round(10*time.Millisecond), caught.Round(10*time.Millisecond), time.Since(stopped).Round(100*time.Millisecond))
	_ = restarted
	// Nothing crashed: the serves and the dispatchers still run.
	for h, p := range r.serves {
		select {
		case <-p.Done():
			t.Errorf("serve of %s exited while etcd was down", h)
		default:
		}
	}
	for i := range r.disps {
		if _, err := r.ask(ctx, i); err != nil {
			t.Errorf("dispatcher %d after etcd's restart: %v", i, err)
		}
		b, _ := os.ReadFile(r.dlogs[i])
		if !strings.Contains(string(b), "etcd unreachable; assigning from the last view") || !strings.Contains(string(b), "registry: view current") {
			t.Errorf("dispatcher %d's log does not tell the stale view and the catch-up:\n%s", i, tail(string(b), 2000))
		}
	}
	// cluster status --registry shows the two live hosts with their lease.
	out, err := r.l.Command(ctx, lab.Client, append([]string{r.bin, "cluster", "status", "--json"}, r.registryFlags(etcdsrv.UserDispatch)...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("cluster status --registry: %v\n%s", err, out)
	}
	var rs cluster.RegistryStatus
	if err := json.Unmarshal(out, &rs); err != nil {
		t.Fatalf("cluster status --json: %v\n%s", err, out)
	}
	if rs.Schema != cluster.RegistryStatusSchema || len(rs.Hosts) != 2 {
		t.Errorf("cluster status --registry: %s, want 2 hosts", out)
	}
	if _, err := schemas.Check(out); err != nil {
		t.Errorf("cluster status --registry --json: %v", err)
	}
	// So does a dispatcher's /status.
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+r.mets[0]+"/status", nil)
	if resp, err := r.httpClient().Do(req); err != nil {
		t.Errorf("dispatcher /status: %v", err)
	} else {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if _, cerr := schemas.Check(b); err != nil || cerr != nil {
			t.Errorf("dispatcher /status: %v %v\n%s", err, cerr, b)
		}
	}
	text, err := r.l.Command(ctx, lab.Client, append([]string{r.bin, "cluster", "status"}, r.registryFlags(etcdsrv.UserDispatch)...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("cluster status --registry: %v\n%s", err, text)
	}
	for _, h := range rs.Hosts {
		if !strings.Contains(string(text), h.Host+" ") || !strings.Contains(string(text), "/3s") {
			t.Errorf("cluster status text does not show host %s and its 3 s lease:\n%s", h.Host, text)
		}
	}
	t.Logf("cluster status --registry:\n%s", text)
	for _, h := range rs.Hosts {
		if h.Host == string(dead) || len(h.Instances) != 1 || h.LeaseGranted != int64(regTTL/time.Second) || h.LeaseTTLSeconds < 0 {
			t.Errorf("cluster status host %+v: want a live host, 1 instance, lease %v", h, regTTL)
		}
	}
}

// testRegistryAuth is Must-show 4.
func testRegistryAuth(t *testing.T, ctx context.Context, r *regLab) {
	key := cluster.ClusterPrefix("default") + "instances/h9/u0"
	forged := `{"v":1,"host":"h9","name":"u0","address":"198.18.9.2","port":1195,"proto":"udp","state":"up","clients":0,"bytes_per_sec":0}`
	put := func(what string, tlsCfg *tls.Config) error {
		cfgc := r.etcd.ClientConfig(lab.Client, tlsCfg)
		cfgc.DialTimeout = 3 * time.Second
		cli, err := clientv3.New(cfgc)
		if err != nil {
			return err
		}
		defer cli.Close()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = cli.Put(pctx, key, forged)
		return err
	}
	noCert, err := r.etcd.ClientTLS("")
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := r.etcd.ClientTLS("")
	if err != nil {
		t.Fatal(err)
	}
	// The OpenVPN PKI's client certificate: valid, but of another CA.
	oc, err := tls.LoadX509KeyPair(r.pki.ClientCert(), r.pki.ClientKey())
	if err != nil {
		t.Fatal(err)
	}
	otherCA.Certificates = []tls.Certificate{oc}
	dispatchRole, err := r.etcd.ClientTLS(etcdsrv.UserDispatch)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		cfg  *tls.Config
	}{{"no certificate", noCert}, {"another CA's certificate", otherCA}, {"the dispatch role's certificate", dispatchRole}} {
		err := put(c.what, c.cfg)
		if err == nil {
			t.Errorf("Must-show 4: a write with %s was accepted", c.what)
			continue
		}
		if c.cfg == dispatchRole && !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("write with %s: %v, want permission denied", c.what, err)
		}
		t.Logf("Must-show 4: write with %s refused: %v", c.what, err)
	}
	for i := range r.disps {
		st, err := r.status(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range st.Instances {
			if hostOf(e.Name) == "h9" {
				t.Errorf("dispatcher %d shows the refused entry %+v", i, e)
			}
		}
	}

	// A garbage entry, written with the serve role (a host with a bug, or
	// a stolen certificate): each dispatcher logs and ignores it.
	serve, err := r.etcd.Client(lab.Client, etcdsrv.UserServe)
	if err != nil {
		t.Fatal(err)
	}
	defer serve.Close()
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	if _, err := serve.Put(pctx, key, `{"v":1,"host":"h9","name":"u0","address":"--up /bin/sh","port":1195,"proto":"udp","state":"up"}`); err != nil {
		t.Fatal(err)
	}
	r.waitFor(ctx, 10*time.Second, "a dispatcher did not log the garbage entry", func() bool {
		for _, p := range r.dlogs {
			b, _ := os.ReadFile(p)
			if !strings.Contains(string(b), "registry: ignoring entry") || !strings.Contains(string(b), "h9/u0") {
				return false
			}
		}
		return true
	})
	for i := range r.disps {
		st, err := r.status(ctx, i)
		if err != nil || st.View.Rejected < 1 {
			t.Errorf("dispatcher %d after the garbage entry: %+v %v", i, st, err)
			continue
		}
		if _, err := r.ask(ctx, i); err != nil {
			t.Errorf("dispatcher %d after the garbage entry: %v", i, err)
		}
	}
	if _, err := serve.Delete(pctx, key); err != nil {
		t.Fatal(err)
	}
	var ss []string
	for _, p := range r.dlogs {
		b, _ := os.ReadFile(p)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "ignoring entry") {
				ss = append(ss, line)
				break
			}
		}
	}
	sort.Strings(ss)
	t.Logf("Must-show 4: garbage entry logged: %s", strings.Join(ss, " | "))
}
