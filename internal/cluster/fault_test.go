package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// kills is how many times the fault test kills instance B: 5 in CI,
// OVPNPERF_CLUSTER_KILLS=20 for the README run.
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
	testenv.RequirePrograms(t, "openvpn", "iperf3")
	l := labtest.New(t, lab.Path{})
	c, pki := startCluster(t, l, cluster.Options{Instances: 2, Protos: []string{"udp"}, PortBase: 1195, CPUs: []int{0, 1}})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	// One client on A's own port.
	cl := startClients(t, ctx, l, pki, dir, 1, 1195, "udp")[0]
	if instanceOf(c, cl.addr) != "u0" {
		t.Fatalf("client on %s, want u0", instanceOf(c, cl.addr))
	}
	srv, err := l.Start(ctx, lab.Server, dir+"/iperf3-server.log", "iperf3", "-s", "-1", "-B", serverAddr(c, "u0").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	time.Sleep(300 * time.Millisecond)
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
	d := &cluster.Dispatcher{Registry: cluster.LocalRegistry{C: c, Host: lab.ServerV4.String()}, Strategy: cluster.RoundRobin}
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
	l := labtest.New(t, lab.Path{})
	ns := l.Namespace(lab.Server)
	t.Run("stop", func(t *testing.T) {
		o := cluster.Options{Instances: 2, Protos: []string{"udp", "tcp"}, PortBase: 1195, OnePort: 1194, Netns: ns, Pool: lab.TunnelV4}
		o.Prepare = labPrepare
		c, err := cluster.Start(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		go func() { <-c.StopRequested(); stopped <- c.Stop() }()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := c.WaitUp(ctx, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		checkPrivate(t, c.Dir())
		if err := cluster.RequestStop(ctx, c.ID()); err != nil {
			t.Fatal(err)
		}
		if err := <-stopped; err != nil {
			t.Errorf("stop: %v", err)
		}
		checkClusterGone(t, c.ID(), ns)
	})
	t.Run("kill-and-clean", func(t *testing.T) {
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
			st, err := cluster.QueryStatus(ctx, id)
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
		if _, err := os.Stat(cluster.Dir(id)); err != nil {
			t.Fatalf("after SIGKILL the cluster directory is already gone: the test would prove nothing: %v", err)
		}
		if err := cluster.Clean(ctx, id); err != nil {
			t.Errorf("clean: %v", err)
		}
		checkClusterGone(t, id, ns)
	})
}
