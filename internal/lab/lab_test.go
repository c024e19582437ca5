package lab_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func TestMain(m *testing.M) { labtest.Main(m) }

var pingAvgRe = regexp.MustCompile(`= [0-9.]+/([0-9.]+)/[0-9.]+/[0-9.]+ ms`)
var pingLossRe = regexp.MustCompile(`([0-9]+) packets transmitted, ([0-9]+) received`)

func run(t *testing.T, l *lab.Lab, n lab.Node, argv ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := runner.Output(l.Command(ctx, n, argv...))
	return string(out), err
}

// iperfTCP runs a TCP test client→server and returns the receiver's rate,
// leaving out the first two seconds of slow start.
func iperfTCP(t *testing.T, l *lab.Lab, seconds int) float64 {
	t.Helper()
	srv, err := l.Start(context.Background(), lab.Server, "", "iperf3", "-s", "-1", "-B", lab.ServerV4().String())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	var out string
	for i := 0; i < 50; i++ { // the server needs a moment to listen
		out, err = run(t, l, lab.Client, "iperf3", "-J", "-c", lab.ServerV4().String(), "-t", strconv.Itoa(seconds), "-O", "2")
		if err == nil || !strings.Contains(out, "connect") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3: %v", err)
	}
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("iperf3 JSON: %v", err)
	}
	return res.End.SumReceived.BitsPerSecond
}

// Must show 1: rate and RTT, and nothing left after down (labtest checks).
func TestRateAndRTT(t *testing.T) {
	testenv.Exclusive(t)
	testenv.RequirePrograms(t, "ping", "iperf3")
	l := labtest.New(t, labpath.Path{
		Up:   labpath.Link{RateBitsPerSec: 20e6, Delay: 50 * time.Millisecond},
		Down: labpath.Link{RateBitsPerSec: 20e6, Delay: 50 * time.Millisecond},
	})
	out, err := run(t, l, lab.Client, "ping", "-c", "10", "-i", "0.2", lab.ServerV4().String())
	if err != nil {
		t.Fatal(err)
	}
	m := pingAvgRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no RTT in ping output:\n%s", out)
	}
	avg, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("ping RTT avg %.2f ms (set 100 ms)", avg)
	if avg < 95 || avg > 105 {
		t.Errorf("average RTT %.2f ms, want 100 ± 5 ms", avg)
	}
	bps := iperfTCP(t, l, 5)
	t.Logf("iperf3 TCP client→server: %.2f Mbit/s (set 20 Mbit/s)", bps/1e6)
	if bps < 17e6 || bps > 20.5e6 {
		t.Errorf("TCP throughput %.2f Mbit/s, want 17–20.5", bps/1e6)
	}
	st, err := l.Stats()
	if err != nil {
		t.Fatalf("emulator stats: %v", err)
	}
	t.Logf("emulator: %+v", st)
}

// Must show 2: the MTU bottleneck answers DF probes with "frag needed"; the
// black hole swallows that answer.
func TestMTUAndBlackhole(t *testing.T) {
	testenv.RequirePrograms(t, "ping")
	for _, blackhole := range []bool{false, true} {
		t.Run(fmt.Sprintf("blackhole=%v", blackhole), func(t *testing.T) {
			l := labtest.New(t, labpath.Path{MTU: 1400, ICMPBlackhole: blackhole})
			if out, err := run(t, l, lab.Client, "ping", "-M", "do", "-s", "1372", "-c", "1", "-W", "2", lab.ServerV4().String()); err != nil {
				t.Fatalf("1372-byte DF ping should pass: %v\n%s", err, out)
			}
			out, err := run(t, l, lab.Client, "ping", "-M", "do", "-s", "1373", "-c", "1", "-W", "2", lab.ServerV4().String())
			if err == nil {
				t.Fatalf("1373-byte DF ping passed a 1400-byte MTU:\n%s", out)
			}
			gotFragNeeded := strings.Contains(out, "Frag needed") || strings.Contains(out, "mtu = 1400")
			if blackhole && gotFragNeeded {
				t.Errorf("black hole let the ICMP error through:\n%s", out)
			}
			if !blackhole && !gotFragNeeded {
				t.Errorf("no \"frag needed\" for a 1373-byte DF ping:\n%s", out)
			}
			// IPv6: 1400 − 40 − 8 = 1352 bytes of payload fit.
			if out, err := run(t, l, lab.Client, "ping", "-6", "-M", "do", "-s", "1352", "-c", "1", "-W", "2", lab.ServerV6().String()); err != nil {
				t.Fatalf("1352-byte IPv6 ping should pass: %v\n%s", err, out)
			}
			out, err = run(t, l, lab.Client, "ping", "-6", "-M", "do", "-s", "1353", "-c", "1", "-W", "2", lab.ServerV6().String())
			if err == nil {
				t.Fatalf("1353-byte IPv6 ping passed a 1400-byte MTU:\n%s", out)
			}
			tooBig := strings.Contains(out, "Packet too big") || strings.Contains(out, "mtu=1400")
			if blackhole == tooBig {
				t.Errorf("blackhole=%v but packet-too-big seen=%v:\n%s", blackhole, tooBig, out)
			}
		})
	}
}

func floodLoss(t *testing.T, l *lab.Lab, count int) float64 {
	t.Helper()
	out, _ := run(t, l, lab.Client, "ping", "-f", "-c", strconv.Itoa(count), "-W", "1", lab.ServerV4().String())
	m := pingLossRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no loss figures in ping output:\n%s", out)
	}
	sent, _ := strconv.Atoi(m[1])
	recv, _ := strconv.Atoi(m[2])
	return 100 * float64(sent-recv) / float64(sent)
}

// Must show 4: loss applies to each direction it is set on.
func TestLossPerDirection(t *testing.T) {
	testenv.Exclusive(t)
	testenv.RequirePrograms(t, "ping")
	t.Run("both", func(t *testing.T) {
		l := labtest.New(t, labpath.Path{Up: labpath.Link{LossPercent: 10}, Down: labpath.Link{LossPercent: 10}})
		loss := floodLoss(t, l, 1000)
		t.Logf("round-trip loss %.1f%% (expect 19%% = 1 − 0.9²)", loss)
		if loss < 15 || loss > 23 {
			t.Errorf("loss %.1f%%, want 15–23%%", loss)
		}
	})
	t.Run("up only", func(t *testing.T) {
		l := labtest.New(t, labpath.Path{Up: labpath.Link{LossPercent: 10}})
		// 2000 round trips: the binomial spread (0.67 %) keeps 8–12 % at 3σ.
		loss := floodLoss(t, l, 2000)
		t.Logf("round-trip loss %.1f%% (expect 10%%)", loss)
		if loss < 8 || loss > 12 {
			t.Errorf("loss %.1f%%, want 8–12%%", loss)
		}
		st, err := l.Stats()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("emulator: %+v", st)
	})
}

// Must show 3: SIGKILL the owner, then Clean removes everything of the lab.
func TestCleanAfterOwnerKilled(t *testing.T) {
	labtest.Require(t)
	name := "t" + lab.NewName()
	l, err := lab.Up(context.Background(), lab.Options{Env: labtest.Env(), Name: name, Path: labpath.Path{Up: labpath.Link{Delay: 5 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Down(); labtest.CheckGone(t, name) })
	st := l.State()
	if !st.OwnerAlive() {
		t.Fatal("owner not alive after Up")
	}
	// A process in a node, as `lab exec … sleep` would leave.
	if _, err := l.Start(context.Background(), lab.Server, "", "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.Owner.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && st.OwnerAlive(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	// A live lab next to it must survive the clean.
	other := labtest.New(t, labpath.Path{})
	// By name: the shared host's other orphans are not this test's. The
	// live lab is named too, and must be refused.
	cleaned, err := lab.Clean(name, other.Name())
	if err == nil || !strings.Contains(err.Error(), other.Name()+" is alive") {
		t.Errorf("clean of a live lab by name: want an error saying it is alive, got %v", err)
	}
	found := false
	for _, c := range cleaned {
		found = found || c == name
		if c == other.Name() {
			t.Errorf("clean removed live lab %s", c)
		}
	}
	if !found {
		t.Errorf("clean did not report %s (cleaned %v)", name, cleaned)
	}
	labtest.CheckGone(t, name)
	if _, err := run(t, other, lab.Client, "ping", "-c", "1", "-W", "2", lab.ServerV4().String()); err != nil {
		t.Errorf("the live lab stopped working after clean: %v", err)
	}
}

// An ephemeral lab dies with the process that made it: its owner notices.
func TestEphemeralOwnerTearsDownOrphan(t *testing.T) {
	labtest.Require(t)
	name := "t" + lab.NewName()
	// A child test process builds an ephemeral lab and is then killed.
	cmd, out := startHelper(t, "TestHelperEphemeralCreator", name)
	buf := make([]byte, 64)
	n, _ := out.Read(buf) // "up\n" once the lab exists
	if !strings.Contains(string(buf[:n]), "up") {
		_ = cmd.Process.Kill()
		t.Fatalf("helper did not build its lab: %q", buf[:n])
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(lab.Env{}.Dir(name)); errors.Is(err, os.ErrNotExist) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	labtest.CheckGone(t, name)
}

func TestHelperEphemeralCreator(t *testing.T) {
	name := os.Getenv("OVPNPERF_HELPER_LAB")
	if name == "" {
		t.Skip("helper process for TestEphemeralOwnerTearsDownOrphan")
	}
	if _, err := lab.Up(context.Background(), lab.Options{Env: labtest.Env(), Name: name, Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("up")
	time.Sleep(time.Minute)
}

// When the process that runs a measurement (lab run) and the
// lab's owner are killed at once, the programs the measurement started end
// at once (iperf3 -c used to run on until lab clean), and lab clean leaves
// nothing.
func TestKillCreatorAndOwnerTogether(t *testing.T) {
	labtest.Require(t)
	testenv.RequirePrograms(t, "iperf3")
	name := "t" + lab.NewName()
	cmd, out := startHelper(t, "TestHelperMeasuringCreator", name)
	t.Cleanup(func() { _, _ = lab.Clean(name); labtest.CheckGone(t, name) })
	line, _ := bufio.NewReader(out).ReadString('\n')
	var owner, server, client int
	if _, err := fmt.Sscanf(line, "up %d %d %d", &owner, &server, &client); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper did not start its lab and iperf3: %q", line)
	}
	// Both at once, as `kill -9 RUN OWNER` would.
	_ = syscall.Kill(owner, syscall.SIGKILL)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range []struct {
		what string
		pid  int
	}{{"iperf3 -c", client}, {"iperf3 -s", server}, {"owner", owner}} {
		for processRuns(p.pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if processRuns(p.pid) {
			t.Errorf("%s (pid %d) still runs after its creator and the owner were killed", p.what, p.pid)
		}
	}
	cleaned, err := lab.Clean(name)
	if err != nil || len(cleaned) != 1 {
		t.Errorf("lab clean %s: cleaned %v, %v", name, cleaned, err)
	}
	labtest.CheckGone(t, name)
}

// startHelper starts this test binary running only the helper test named,
// which builds lab name (OVPNPERF_HELPER_LAB) and reports on its stdout.
func startHelper(t *testing.T, helper, name string) (*exec.Cmd, io.Reader) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := runner.Command(context.Background(), exe, "-test.run", "^"+helper+"$")
	cmd.Env = append(cmd.Env, "OVPNPERF_HELPER_LAB="+name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// processRuns reports whether pid is a running process (not a zombie).
func processRuns(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// TestHelperMeasuringCreator is the child of TestKillCreatorAndOwnerTogether:
// like `lab run`, it builds an ephemeral lab, starts an iperf3 server as a
// lab process and a client through Lab.Command, and reports their pids.
func TestHelperMeasuringCreator(t *testing.T) {
	name := os.Getenv("OVPNPERF_HELPER_LAB")
	if name == "" {
		t.Skip("helper process for TestKillCreatorAndOwnerTogether")
	}
	// An emulated path, as in the report: once the emulator in the owner
	// is dead the path drops everything, so the client never hears that
	// its server died too, and only a signal can end it.
	l, err := lab.Up(context.Background(), lab.Options{Env: labtest.Env(), Name: name, Ephemeral: true, Path: labpath.Path{Up: labpath.Link{Delay: 5 * time.Millisecond}, Down: labpath.Link{Delay: 5 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := l.Start(context.Background(), lab.Server, "", "iperf3", "-s", "-B", lab.ServerV4().String())
	if err != nil {
		t.Fatal(err)
	}
	var cli *exec.Cmd
	for i := 0; i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		cli = l.Command(context.Background(), lab.Client, "iperf3", "-c", lab.ServerV4().String(), "-t", "60", "-b", "1M")
		if err := cli.Start(); err != nil {
			t.Fatal(err)
		}
		// A client that connected runs on; one refused (server not yet
		// listening) exits at once.
		time.Sleep(300 * time.Millisecond)
		if processRuns(cli.Process.Pid) {
			break
		}
		_ = cli.Wait()
	}
	fmt.Printf("up %d %d %d\n", l.State().Owner.Pid, srv.Pid(), cli.Process.Pid)
	time.Sleep(time.Minute)
}

// A name in use is refused without touching the lab that has it; a
// cancelled build leaves nothing.
func TestNameInUseAndCancel(t *testing.T) {
	l := labtest.New(t, labpath.Path{})
	_, err := lab.Up(context.Background(), lab.Options{Env: labtest.Env(), Name: l.Name(), Ephemeral: true})
	if err == nil || !usage.Is(err) {
		t.Fatalf("second lab with the same name: want a usage error, got %v", err)
	}
	if _, err := run(t, l, lab.Client, "ping", "-c", "1", "-W", "2", lab.ServerV4().String()); err != nil {
		t.Fatalf("the first lab broke: %v", err)
	}
	for _, after := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond} {
		name := "t" + lab.NewName()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		l2, err := lab.Up(ctx, lab.Options{Env: labtest.Env(), Name: name, Ephemeral: true, Path: labpath.Path{Up: labpath.Link{Delay: time.Millisecond}}})
		if err == nil {
			_ = l2.Down()
		}
		cancel()
		labtest.CheckGone(t, name)
	}
}

// Two labs at once do not collide.
func TestParallelLabs(t *testing.T) {
	a := labtest.New(t, labpath.Path{})
	b := labtest.New(t, labpath.Path{MTU: 1300})
	for _, l := range []*lab.Lab{a, b} {
		if out, err := run(t, l, lab.Client, "ping", "-c", "1", "-W", "2", lab.ServerV6().String()); err != nil {
			t.Errorf("lab %s: %v\n%s", l.Name(), err, out)
		}
	}
}

// BenchmarkUpDown measures building and tearing down a lab, unshaped and
// with the userspace emulator (rate, delay, loss):
//
//	go test ./internal/lab -run '^$' -bench UpDown -benchtime 20x
func BenchmarkUpDown(b *testing.B) {
	labtest.Require(b)
	for _, c := range []struct {
		name string
		p    labpath.Path
	}{
		{"plain", labpath.Path{}},
		{"emulated", labpath.Path{Up: labpath.Link{RateBitsPerSec: 20e6, Delay: 50 * time.Millisecond, LossPercent: 1}, Down: labpath.Link{RateBitsPerSec: 20e6, Delay: 50 * time.Millisecond}, MTU: 1400, ICMPBlackhole: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var up, down time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				l, err := lab.Up(context.Background(), lab.Options{Env: labtest.Env(), Name: "b" + lab.NewName(), Path: c.p, Ephemeral: true})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := l.Down(); err != nil {
					b.Fatal(err)
				}
				up += t1.Sub(t0)
				down += time.Since(t1)
			}
			b.ReportMetric(float64(up.Milliseconds())/float64(b.N), "ms-up/op")
			b.ReportMetric(float64(down.Milliseconds())/float64(b.N), "ms-down/op")
		})
	}
}

// The first packet of a fresh lab does not wait for neighbour discovery
// (it used to wait for the 1 s IPv6 solicitation retransmit).
func TestFirstPacketNotDelayed(t *testing.T) {
	testenv.Exclusive(t)
	testenv.RequirePrograms(t, "ping")
	l := labtest.New(t, labpath.Path{})
	for _, a := range []string{lab.ServerV6().String(), lab.ServerV4().String()} {
		out, err := run(t, l, lab.Client, "ping", "-c", "1", "-W", "2", a)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`time=([0-9.]+) ms`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no time in %s", out)
		}
		if ms, _ := strconv.ParseFloat(m[1], 64); ms > 500 {
			t.Errorf("first ping to %s took %.0f ms", a, ms)
		}
	}
}

// A lab kept in a directory of the caller's (lab.Env): its state is there,
// where its owner finds it too (Up returns only once the owner holds the
// lab), the host's labs do not list it, and Down removes it.
func TestLabInOwnDirectory(t *testing.T) {
	labtest.Require(t)
	env := labtest.Env()
	env.Base = filepath.Join(t.TempDir(), "labs")
	name := "t" + lab.NewName()
	l, err := lab.Up(context.Background(), lab.Options{Name: name, Ephemeral: true, Env: env, Path: labpath.Path{Up: labpath.Link{Delay: time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Down() })
	if l.Dir() != env.Dir(name) {
		t.Errorf("lab directory %s, want %s", l.Dir(), env.Dir(name))
	}
	states, err := env.List()
	if err != nil || len(states) != 1 || states[0].Name != name || !states[0].Ready || !states[0].OwnerAlive() {
		t.Errorf("labs of the test's directory: %+v, %v; want %s, ready, its owner alive", states, err, name)
	}
	host, _ := lab.List()
	for _, st := range host {
		if st.Name == name {
			t.Errorf("the host's labs list %s, kept in %s", name, env.Base)
		}
	}
	if _, err := lab.Open(name); err == nil {
		t.Errorf("the host's labs open %s, kept in %s", name, env.Base)
	}
	opened, err := env.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := opened.Down(); err != nil {
		t.Fatal(err)
	}
	for _, ns := range lab.NamespacesOf(name) {
		t.Errorf("namespace %s still exists after Down", ns)
	}
	if _, err := os.Stat(env.Dir(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lab directory %s after Down: %v", env.Dir(name), err)
	}
}
