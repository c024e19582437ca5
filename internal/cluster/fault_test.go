package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/docs/schemas"
	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// kills is how many times the fault test kills instance B: 5 in CI,
// OVPNPERF_CLUSTER_KILLS=20 for the run in docs/measurements.md.
func kills() int {
	if n, err := strconv.Atoi(os.Getenv("OVPNPERF_CLUSTER_KILLS")); err == nil && n > 0 {
		return n
	}
	return 5
}

func stateOf(c *cluster.Cluster, name string) cluster.InstanceStatus {
	for _, s := range c.Status() {
		if s.Name == name {
			return s
		}
	}
	return cluster.InstanceStatus{}
}

// TestKillUnderLoad is must-show 3: iperf3 through instance A (u0) while
// instance B (u1) is killed with SIGKILL again and again. B must come back
// up; the dispatcher keeps answering and never names B while B is down;
// A's throughput has no interval below half its median. A's load is paced
// at 40 Mbit/s, well below what one instance carries here, so that the
// other engineers' load on the shared cores does not pass for an effect
// of the kills; a dip shows A was disturbed.
func TestKillUnderLoad(t *testing.T) {
	testenv.Exclusive(t)
	testenv.RequirePrograms(t, "openvpn", "iperf3")
	l := labtest.New(t, labpath.Path{})
	c, pki := startCluster(t, l, cluster.Options{Instances: 2, Protos: []string{"udp"}, PortBase: 1195, CPUs: []int{0, 1}})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	// One client on A's own port.
	cl := startClients(t, ctx, l, pki, dir, 1, 1195, "udp")[0]
	if instanceOf(c, cl.addr) != "u0" {
		t.Fatalf("client on %s, want u0", instanceOf(c, cl.addr))
	}
	srvLog := dir + "/iperf3-server.log"
	srv, err := l.Start(ctx, lab.Server, srvLog, iperf.ServerOptions{OneOff: true, Bind: serverAddr(c, "u0")}.Args()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if err := iperf.WaitListening(ctx, srvLog, srv.Done(), 0); err != nil {
		t.Fatal(err)
	}
	n := kills()
	seconds := 4 + n*2
	type iperfOut struct {
		out []byte
		err error
	}
	done := make(chan iperfOut, 1)
	go func() {
		out, err := l.Command(ctx, lab.Client, "iperf3", "-c", serverAddr(c, "u0").String(), "-t", strconv.Itoa(seconds), "-i", "1", "-b", "10M", "-J").Output()
		done <- iperfOut{out, err}
	}()
	// The dispatcher, in this process, over the cluster's own registry.
	d := &cluster.Dispatcher{Registry: cluster.LocalRegistry{C: c, Host: lab.ServerV4().String()}, Strategy: cluster.RoundRobin}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { _ = d.Serve(ln, pki.ServerCert(), pki.ServerKey(), pki.CACert()) }()
	tlsCfg, err := cluster.ClientTLS(pki.ClientCert(), pki.ClientKey(), pki.CACert())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // iperf3 settles before the first kill
	answered, duringOutage := 0, 0
	for k := range n {
		for w := time.Now(); stateOf(c, "u1").State != cluster.StateUp; time.Sleep(20 * time.Millisecond) {
			if time.Since(w) > 15*time.Second {
				t.Fatalf("u1 not up before kill %d: %+v", k, stateOf(c, "u1"))
			}
		}
		if _, err := c.Kill("u1"); err != nil {
			t.Fatalf("kill %d: %v", k, err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for stateOf(c, "u1").State != cluster.StateUp {
			if time.Now().After(deadline) {
				t.Fatalf("u1 not back up 15 s after kill %d: %+v", k, stateOf(c, "u1"))
			}
			// Paced: the test's own TLS handshakes share the cores with A.
			time.Sleep(20 * time.Millisecond)
			before := stateOf(c, "u1").State
			r, err := cluster.Ask(ctx, ln.Addr().String(), tlsCfg, cluster.NewRequest("udp"))
			after := stateOf(c, "u1").State
			if err != nil {
				t.Errorf("dispatcher during outage %d: %v", k, err)
				continue
			}
			answered++
			if before != cluster.StateUp && after != cluster.StateUp {
				duringOutage++
				if r.Instance == "u1" {
					t.Errorf("dispatcher named u1 while it was %s", before)
				}
			}
		}
		time.Sleep(800 * time.Millisecond)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("iperf3: %v\n%s", res.err, res.out)
	}
	st := stateOf(c, "u1")
	rec := slices.Clone(st.Recoveries)
	slices.Sort(rec)
	if len(rec) != n {
		t.Fatalf("u1 recovered %d times, killed %d: %+v", len(rec), n, st)
	}
	med, max := rec[len(rec)/2], rec[len(rec)-1]
	t.Logf("u1 killed %d times: back up after median %.3f s, min %.3f s, max %.3f s (restarts %d, crash loop %v)", n, med, rec[0], max, st.Restarts, st.CrashLoop)
	t.Logf("dispatcher answered %d requests during the outages (%d while u1 was down throughout)", answered, duringOutage)
	// Generous bound: the machine is shared; the figure is in the log.
	if max > 5 {
		t.Errorf("u1 took %.1f s to come back up", max)
	}
	var j struct {
		Intervals []struct {
			Sum struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum"`
		} `json:"intervals"`
	}
	if err := json.Unmarshal(res.out, &j); err != nil {
		t.Fatal(err)
	}
	var rates []float64
	for _, iv := range j.Intervals {
		rates = append(rates, iv.Sum.BitsPerSecond/1e6)
	}
	sorted := slices.Clone(rates)
	slices.Sort(sorted)
	median := sorted[len(sorted)/2]
	t.Logf("A's iperf3 Mbit/s per second: median %.0f, min %.0f, max %.0f, all %s", median, sorted[0], sorted[len(sorted)-1], fmt.Sprint(rates))
	for i, r := range rates {
		if r < median/2 {
			t.Errorf("interval %d: %.0f Mbit/s, below half the median %.0f", i, r, median)
		}
	}
	if sa := stateOf(c, "u0"); sa.Restarts != 0 {
		t.Errorf("A restarted %d times", sa.Restarts)
	}
}

// TestStopAndClean is must-show 5: `cluster stop` over the control
// socket, and SIGKILL of serve + Clean, leave nothing behind.
func TestStopAndClean(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn", "iptables")
	l := labtest.New(t, labpath.Path{})
	ns := l.Namespace(lab.Server)
	// stop runs the commands a user runs: `cluster serve` with metrics and
	// a dispatcher, `cluster status --json`, a scrape, an assignment, then
	// `cluster stop`; serve must exit 0 and leave nothing.
	t.Run("stop", func(t *testing.T) {
		bin := testBinary(t)
		id := cluster.NewID()
		serve := startServe(t, id, "--lab", l.Name(), "--instances", "2", "--proto", "udp,tcp",
			"--one-port", "1194", "--port-base", "1195", "--metrics", "127.0.0.1:0", "--dispatcher", "127.0.0.1:0", "--drain", "0s")
		out, exited := serve.out, serve.exited
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var metrics, disp string
		for metrics == "" || disp == "" {
			for _, line := range strings.Split(out.String(), "\n") {
				if a, ok := strings.CutPrefix(line, "metrics on "); ok {
					metrics = a
				}
				if a, ok := strings.CutPrefix(line, "dispatcher on "); ok {
					disp, _, _ = strings.Cut(a, " ")
				}
			}
			select {
			case <-exited:
				t.Fatalf("serve exited: %v\n%s", serve.err, out.String())
			case <-ctx.Done():
				t.Fatalf("serve printed no metrics and dispatcher address:\n%s", out.String())
			case <-time.After(100 * time.Millisecond):
			}
		}
		var st cluster.ClusterStatus
		for {
			r, err := exec.CommandContext(ctx, bin, "cluster", "status", id, "--json").Output()
			st = cluster.ClusterStatus{}
			if err == nil && json.Unmarshal(r, &st) == nil && len(st.Instances) == 4 {
				up := 0
				for _, s := range st.Instances {
					if s.State == cluster.StateUp {
						up++
					}
				}
				if up == 4 {
					if _, err := schemas.Check(r); err != nil {
						t.Errorf("cluster status --json: %v\n%s", err, r)
					}
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("cluster status: not 4 instances up: %v %+v\n%s", err, st, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if st.ID != id || st.Netns != ns || st.OnePort != 1194 {
			t.Errorf("cluster status: %+v, want id %s netns %s one-port 1194", st, id, ns)
		}
		// With --lab, serve's listeners are in the lab's server namespace
		// (127.0.0.1 there, not the host's): reach them from inside it.
		m := scrapeIn(t, ns, metrics)
		for _, s := range st.Instances {
			checkMetrics(t, m, map[string]float64{"ovpnperf_cluster_instance_up{" + s.Name + "}": 1, "ovpnperf_cluster_instance_restarts_total{" + s.Name + "}": 0})
		}
		pki, err := openvpn.LoadPKI(filepath.Join(cluster.Paths{}.Dir(id), "pki"))
		if err != nil {
			t.Fatal(err)
		}
		tlsCfg, err := cluster.ClientTLS(pki.ClientCert(), pki.ClientKey(), pki.CACert())
		if err != nil {
			t.Fatal(err)
		}
		r, err := cluster.AskConn(ctx, dialIn(t, ns, disp), tlsCfg, cluster.NewRequest("tcp"))
		if err != nil || r.Proto != "tcp" || r.Remote != lab.ServerV4().String() {
			t.Errorf("dispatcher of serve: %+v, %v; want a tcp instance at %s", r, err, lab.ServerV4())
		}
		checkPrivate(t, cluster.Paths{}.Dir(id))
		if b, err := exec.CommandContext(ctx, bin, "cluster", "stop", id).CombinedOutput(); err != nil {
			t.Fatalf("cluster stop: %v\n%s", err, b)
		}
		select {
		case <-exited:
			if serve.err != nil {
				t.Errorf("serve after stop: %v\n%s", serve.err, out.String())
			}
		case <-ctx.Done():
			t.Fatalf("serve still runs after cluster stop")
		}
		checkClusterGone(t, id, ns)
	})
	t.Run("kill-and-clean", func(t *testing.T) {
		// The helper serves with --site: clean also restores the
		// multipath hashing sysctls it set.
		hash := func() string {
			b, _ := exec.Command("ip", "netns", "exec", ns, "sysctl", "-n", cluster.MultipathHashSysctls()[0], cluster.MultipathHashSysctls()[1]).CombinedOutput()
			return string(b)
		}
		hashBefore := hash()
		id := cluster.NewID()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+id+" "+ns)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for {
			st, err := cluster.Paths{}.QueryStatus(ctx, id)
			if err == nil && len(st.Instances) == 2 && st.Instances[0].State == cluster.StateUp && st.Instances[1].State == cluster.StateUp {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("helper serve not up: %v %+v", err, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if _, err := os.Stat(cluster.Paths{}.Dir(id)); err != nil {
			t.Fatalf("after SIGKILL the cluster directory is already gone: the test would prove nothing: %v", err)
		}
		if h := hash(); h == hashBefore {
			t.Errorf("serve --site left the multipath hash sysctls as they were (%q): clean would prove nothing", h)
		}
		if err := (cluster.Paths{}).Clean(ctx, id); err != nil {
			t.Errorf("clean: %v", err)
		}
		if h := hash(); h != hashBefore {
			t.Errorf("after clean the multipath hash sysctls are %q, were %q", h, hashBefore)
		}
		checkClusterGone(t, id, ns)
	})
}
