package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/syncbuf"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// localEtcd is a plain etcd (no TLS) on two kernel-chosen loopback ports,
// its data in a temporary directory, for the registry's unit tests. The
// lab tests use the TLS etcd of package etcdsrv in a lab namespace.
type localEtcd struct {
	t       testing.TB
	dir     string
	client  string // 127.0.0.1:PORT
	args    []string
	cmd     *exec.Cmd
	exitErr chan error
}

func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startLocalEtcd(t testing.TB) *localEtcd {
	t.Helper()
	testenv.RequirePrograms(t, "etcd")
	e := &localEtcd{t: t, dir: t.TempDir(), client: freePort(t)}
	peer := freePort(t)
	name := "ovpnperf-test-" + cluster.NewID()
	e.args = []string{"--name", name, "--data-dir", e.dir + "/data",
		"--listen-client-urls", "http://" + e.client, "--advertise-client-urls", "http://" + e.client,
		"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
		"--initial-cluster", name + "=http://" + peer, "--log-level", "error", "--logger", "zap"}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *localEtcd) start() {
	e.t.Helper()
	e.cmd = exec.Command("etcd", e.args...)
	log, err := os.OpenFile(e.dir+"/etcd.log", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		e.t.Fatal(err)
	}
	e.cmd.Stdout, e.cmd.Stderr = log, log
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	log.Close()
	e.exitErr = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(e.cmd, e.exitErr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", e.client, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(e.dir + "/etcd.log")
			e.t.Fatalf("etcd did not listen on %s: %v\n%s", e.client, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *localEtcd) stop() {
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exitErr:
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.exitErr
	}
	e.cmd = nil
}

func (e *localEtcd) connect(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := cluster.RegistryOptions{Endpoints: []string{e.client}}.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// fakeHost is a host's instances as its publisher sees them.
type fakeHost struct {
	mu   sync.Mutex
	inst []cluster.InstanceStatus
}

func (h *fakeHost) status() []cluster.InstanceStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]cluster.InstanceStatus(nil), h.inst...)
}

func (h *fakeHost) set(name, state string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.inst {
		if h.inst[i].Name == name {
			h.inst[i].State = state
		}
	}
}

func newFakeHost(n int) *fakeHost {
	h := &fakeHost{}
	for i := 0; i < n; i++ {
		h.inst = append(h.inst, cluster.InstanceStatus{Name: fmt.Sprintf("u%d", i), State: cluster.StateUp, Proto: "udp", Port: uint16(1195 + i)})
	}
	return h
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func names(es []cluster.Endpoint) string {
	var s []string
	for _, e := range es {
		s = append(s, e.Name+":"+e.State)
	}
	return strings.Join(s, ",")
}

// TestEtcdRegistry runs publishers and two dispatchers against a real
// (local, plain) etcd: registration, least-loaded agreement between two
// dispatchers, draining, a host whose lease expires, a garbage entry, etcd
// stopped and started again.
func TestEtcdRegistry(t *testing.T) {
	e := startLocalEtcd(t)
	const ttl = 2 * time.Second
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	hosts := map[string]*fakeHost{"h1": newFakeHost(2), "h2": newFakeHost(2), "h3": newFakeHost(2)}
	hostCancel := map[string]context.CancelFunc{}
	for name, h := range hosts {
		hctx, hc := context.WithCancel(ctx)
		hostCancel[name] = hc
		p := &cluster.Publisher{Client: e.connect(t), Cluster: "t1", Host: name, Advertise: "198.18." + name[1:] + ".2", ClusterID: "abcd", TTL: ttl, Every: 200 * time.Millisecond, Source: h.status, Log: log}
		wg.Add(1)
		go func() { defer wg.Done(); p.Run(hctx) }()
	}
	var views []*cluster.View
	var disps []*cluster.Dispatcher
	for i := 0; i < 2; i++ {
		v := cluster.NewView(e.connect(t), "t1", log)
		v.Probe = 300 * time.Millisecond
		wg.Add(1)
		go func() { defer wg.Done(); v.Run(ctx) }()
		views = append(views, v)
		disps = append(disps, &cluster.Dispatcher{Registry: v, Strategy: cluster.LeastLoaded})
	}
	for _, v := range views {
		waitFor(t, 10*time.Second, "views do not show 6 instances", func() bool { return len(v.Instances()) == 6 })
	}

	// 12 requests alternating between the dispatchers: every instance
	// gets 2 (3–5 per host in the lab test with its 3 hosts × 1..2).
	perHost := map[string]int{}
	perInst := map[string]int{}
	for i := 0; i < 12; i++ {
		r, err := disps[i%2].Assign(cluster.NewRequest("udp"), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		perInst[r.Instance]++
		perHost[strings.Split(r.Instance, "/")[0]]++
		if !strings.HasPrefix(r.Remote, "198.18.") {
			t.Errorf("reply %+v: remote is not the host's advertised address", r)
		}
	}
	for name, n := range perInst {
		if n != 2 {
			t.Errorf("instance %s got %d of 12 assignments, want 2 (all: %v)", name, n, perInst)
		}
	}
	if len(perInst) != 6 {
		t.Errorf("assignments went to %d instances, want 6: %v", len(perInst), perInst)
	}
	// Both views count the same recorded assignments.
	waitFor(t, 5*time.Second, "views disagree on recorded assignments", func() bool {
		a, b := views[0].Instances(), views[1].Instances()
		return fmt.Sprint(a) == fmt.Sprint(b)
	})

	// Draining: published before it stops; never assigned.
	hosts["h2"].set("u0", cluster.StateDraining)
	waitFor(t, 5*time.Second, "views do not show h2/u0 draining", func() bool {
		// Each view must show it, draining: a view without it has not
		// seen the change (the assignments below would then prove
		// nothing).
		for _, v := range views {
			draining := false
			for _, e := range v.Instances() {
				if e.Name == "h2/u0" {
					draining = e.State == cluster.StateDraining
				}
			}
			if !draining {
				return false
			}
		}
		return true
	})
	for i := 0; i < 50; i++ {
		r, err := disps[i%2].Assign(cluster.NewRequest("udp"), time.Now())
		if err != nil || r.Instance == "h2/u0" {
			t.Fatalf("request %d: %+v %v (h2/u0 drains)", i, r, err)
		}
	}

	// A garbage entry is ignored with a log line; the view goes on.
	admin := e.connect(t)
	if _, err := admin.Put(ctx, cluster.ClusterPrefix("t1")+"instances/h9/u0", `{"v":1,"host":"h9","name":"u0","address":"--up /bin/sh","port":1,"proto":"udp","state":"up"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Put(ctx, cluster.ClusterPrefix("t1")+"instances/h9/u1", "\x00garbage{"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "no log line for the garbage entries", func() bool {
		return strings.Count(logs.String(), "registry: ignoring entry") >= 4 // 2 entries × 2 views
	})
	for _, v := range views {
		if n := len(v.Instances()); n != 6 {
			t.Errorf("view has %d instances after garbage entries, want 6: %s", n, names(v.Instances()))
		}
		if v.Status().Rejected < 2 {
			t.Errorf("view status %+v: want 2 rejected entries", v.Status())
		}
	}
	if _, err := admin.Delete(ctx, cluster.ClusterPrefix("t1")+"instances/h9/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}

	// h3 stops renewing its lease (its serve was killed): within the TTL
	// (plus etcd's expiry check, 500 ms) its instances leave both views.
	killed := time.Now()
	hostCancel["h3"]()
	gone := waitFor(t, 2*ttl+2*time.Second, "h3's instances still in a view", func() bool {
		for _, v := range views {
			for _, e := range v.Instances() {
				if strings.HasPrefix(e.Name, "h3/") {
					return false
				}
			}
		}
		return true
	})
	t.Logf("h3's lease stopped being renewed: its instances left both views after %v (TTL %v)", gone.Round(10*time.Millisecond), ttl)
	_ = killed
	for i := 0; i < 200; i++ {
		r, err := disps[i%2].Assign(cluster.NewRequest("udp"), time.Now())
		if err != nil || strings.HasPrefix(r.Instance, "h3/") {
			t.Fatalf("request %d after h3 expired: %+v %v", i, r, err)
		}
	}

	// etcd stopped: the dispatchers keep assigning from their view, which
	// is marked stale; when etcd is back they list again and watch on.
	before := views[0].Status()
	e.stop()
	for _, v := range views {
		waitFor(t, 10*time.Second, "view not stale with etcd stopped", func() bool { return v.Status().Stale })
	}
	time.Sleep(ttl + time.Second) // longer than the hosts' TTL: their keep-alives fail meanwhile
	for i := 0; i < 20; i++ {
		r, err := disps[i%2].Assign(cluster.NewRequest("udp"), time.Now())
		if err != nil || strings.HasPrefix(r.Instance, "h3/") || r.Instance == "h2/u0" {
			t.Fatalf("request %d with etcd stopped: %+v %v", i, r, err)
		}
	}
	if st := views[1].Status(); st.AgeSeconds < ttl.Seconds() {
		t.Errorf("stale view's age %.1f s, want ≥ %v", st.AgeSeconds, ttl)
	}
	e.start()
	for _, v := range views {
		waitFor(t, 15*time.Second, "view does not catch up after etcd restarted", func() bool {
			st := v.Status()
			return !st.Stale && st.Lists > before.Lists && len(v.Instances()) == 4
		})
	}
	// The hosts re-registered (or kept their leases) and a change after
	// the restart reaches the views through the new watch.
	hosts["h1"].set("u1", cluster.StateDraining)
	for _, v := range views {
		waitFor(t, 10*time.Second, "change after etcd's restart not seen", func() bool {
			for _, e := range v.Instances() {
				if e.Name == "h1/u1" {
					return e.State == cluster.StateDraining
				}
			}
			return false
		})
	}
	if !strings.Contains(logs.String(), "etcd unreachable; assigning from the last view") {
		t.Errorf("no log line about the stale view:\n%s", logs.String())
	}

	// status reads hosts, instances and lease TTLs.
	st, err := cluster.ReadRegistry(ctx, admin, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Hosts) != 2 || st.Schema != cluster.RegistryStatusSchema {
		t.Fatalf("registry status: %+v, want hosts h1 and h2", st)
	}
	for _, h := range st.Hosts {
		if len(h.Instances) != 2 || h.LeaseGranted != int64(ttl/time.Second) || h.LeaseTTLSeconds < 0 || h.LeaseTTLSeconds > h.LeaseGranted {
			t.Errorf("host %+v: want 2 instances, lease %v granted, 0..TTL left", h, ttl)
		}
	}
}
