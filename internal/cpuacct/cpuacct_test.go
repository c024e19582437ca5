package cpuacct

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// spinEnv makes the test binary a busy child: it burns the given amount of
// CPU time, prints "spun", and waits for stdin to close.
const spinEnv = "OVPNPERF_CPUACCT_TEST_SPIN"

func TestMain(m *testing.M) {
	if v := os.Getenv(spinEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		burn(d)
		fmt.Println("spun")
		bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var sink uint64

// burn spins until this process has used d more CPU time, however long
// that takes on a busy machine: the tests compare CPU time, not wall time.
func burn(d time.Duration) {
	start := selfCPU()
	for selfCPU()-start < d {
		for i := range 100000 {
			sink += uint64(i) * sink
		}
	}
}

// hz converts clock ticks as the kernel counts them (USER_HZ, 100 on
// Linux: 28 ticks = 280 ms).
func hz(n int64) time.Duration { return time.Duration(n) * time.Second / time.Duration(ClockTicks()) }

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Times
	}{
		// A command name with spaces and parentheses: "x) (y z".
		{"stat_paren_comm", Times{Pid: 13733, Comm: "x) (y z", State: 'S', StartTicks: 61345}},
		{"stat_init", Times{Pid: 1, Comm: "process_api", State: 'S', StartTicks: 15,
			User: hz(28), System: hz(68), ChildUser: hz(704), ChildSystem: hz(1131)}},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseStat(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if got != tc.want {
			t.Errorf("%s:\ngot  %+v\nwant %+v", tc.file, got, tc.want)
		}
	}
}

func TestParseStatBad(t *testing.T) {
	for _, in := range []string{
		"",
		"12 (x S 1 2",
		"12 (x) S 1 2 3",
		"x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
		"12 (y) S 1 2 3 4 5 6 7 8 9 10 -11 12 13 14 15 16 17 18 19 20",
	} {
		if _, err := ParseStat([]byte(in)); err == nil {
			t.Errorf("ParseStat(%q): no error", in)
		}
	}
}

func TestClockTicks(t *testing.T) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		testenv.SkipOrFail(t, "getconf: %v", err)
	}
	if got, want := fmt.Sprint(ClockTicks()), strings.TrimSpace(string(out)); got != want {
		t.Errorf("ClockTicks() = %s, getconf CLK_TCK = %s", got, want)
	}
}

// TestSelfAdvances checks the units: /proc/self/stat must advance by about
// the CPU time getrusage saw.
func TestSelfAdvances(t *testing.T) {
	pid := os.Getpid()
	a, err := Snapshot(pid)
	if err != nil {
		t.Fatal(err)
	}
	r0 := selfCPU()
	burn(300 * time.Millisecond)
	r1 := selfCPU()
	b, err := Snapshot(pid)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Delta(a, b)
	if err != nil {
		t.Fatal(err)
	}
	// The test binary's other goroutines and tick rounding (10 ms per
	// field) make the two differ a little; a unit error would be ×10 or ×100.
	ru := (r1 - r0).Seconds()
	if d[pid] < ru*0.8-0.03 || d[pid] > ru*1.25+0.03 {
		t.Errorf("/proc/self/stat advanced %.3f s, getrusage %.3f s", d[pid], ru)
	}
}

func startSpinner(t *testing.T, d time.Duration) (*exec.Cmd, *bufio.Reader, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinEnv+"="+d.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	release := func() {
		stdin.Close()
		cmd.Wait()
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, bufio.NewReader(stdout), release
}

// TestBusyChild: a child that burns 400 ms of CPU shows 400 ms in Delta,
// and its rusage after exit agrees.
func TestBusyChild(t *testing.T) {
	cmd, out, release := startSpinner(t, 400*time.Millisecond)
	pid := cmd.Process.Pid
	a, err := Snapshot(pid)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := out.ReadString('\n'); err != nil || line != "spun\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	b, err := Snapshot(pid)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Delta(a, b)
	if err != nil {
		t.Fatal(err)
	}
	// The child may have run a little before a was taken (process start,
	// runtime init): the delta is at most the 400 ms it burned plus its
	// exit bookkeeping, and at least most of it.
	if d[pid] < 0.3 || d[pid] > 1.0 {
		t.Errorf("busy child: %.3f CPU-seconds over the spin, want about 0.4", d[pid])
	}
	release()
	if ex := ExitedSeconds(cmd.ProcessState); ex < 0.4 || ex > 1.5 {
		t.Errorf("ExitedSeconds = %.3f, want ≥ 0.4", ex)
	}
	// Now gone: a new sample fails, and says so.
	if _, err := Snapshot(pid); !errors.Is(err, ErrGone) {
		t.Errorf("Snapshot of an exited pid: %v, want ErrGone", err)
	}
}

func TestDeltaErrors(t *testing.T) {
	a := Sample{Procs: map[int]Times{7: {Pid: 7, Comm: "openvpn", StartTicks: 100, User: time.Second}}}
	if _, err := Delta(a, Sample{Procs: map[int]Times{}}); !errors.Is(err, ErrGone) {
		t.Errorf("missing pid: %v", err)
	}
	reused := Sample{Procs: map[int]Times{7: {Pid: 7, Comm: "sh", StartTicks: 900, User: 2 * time.Second}}}
	if _, err := Delta(a, reused); !errors.Is(err, ErrGone) {
		t.Errorf("reused pid: %v", err)
	}
	if _, err := Delta(reused, Sample{Procs: map[int]Times{7: {Pid: 7, StartTicks: 900}}}); err == nil || errors.Is(err, ErrGone) {
		t.Errorf("backwards: %v", err)
	}
	later := Sample{Procs: map[int]Times{7: {Pid: 7, StartTicks: 100, User: 1500 * time.Millisecond,
		System: 250 * time.Millisecond, ChildSystem: 250 * time.Millisecond}}}
	d, err := Delta(a, later)
	if err != nil || d[7] != 1.0 {
		t.Errorf("Delta = %v, %v; want 1.0 (0.5 user + 0.25 system + 0.25 children)", d, err)
	}
}

func TestPerGB(t *testing.T) {
	for _, tc := range []struct {
		secs  float64
		bytes uint64
		want  float64
	}{
		{2, 1e9, 2},
		{1, 250e6, 4},
		{0.5, 4e9, 0.125},
		{3, 0, 0},
	} {
		if got := PerGB(tc.secs, tc.bytes); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("PerGB(%v, %d) = %v, want %v", tc.secs, tc.bytes, got, tc.want)
		}
	}
}

// tempNetns creates a randomly named namespace removed at the end of the test.
func tempNetns(t *testing.T) string {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "ip")
	name := fmt.Sprintf("ovpnperf-cpuacct-%d", time.Now().UnixNano()%1e9)
	if err := netns.Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// TestNetnsExecOpenVPN: the pid of `ip netns exec NS openvpn …` is
// openvpn's own. The openvpn here has no peer and no tun (--dev null): it
// binds a UDP port inside the namespace and waits, sending nothing.
func TestNetnsExecOpenVPN(t *testing.T) {
	name := tempNetns(t)
	testenv.RequirePrograms(t, "openvpn")
	cmd := inNetns(name, "openvpn", "--dev", "null", "--proto", "udp", "--lport", "0", "--verb", "3")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	up := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "link local (bound)") {
			up = true
			break
		}
	}
	if !up {
		t.Fatal("openvpn did not bind its socket")
	}
	go func() { // keep draining so that openvpn never blocks on its log
		for sc.Scan() {
		}
	}()
	tm, err := Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if tm.Comm != "openvpn" {
		t.Errorf("pid %d of `ip netns exec … openvpn` is %q", cmd.Process.Pid, tm.Comm)
	}
}

// TestNetnsExecKeepsPid checks what the package comment promises: the pid
// of `ip netns exec NS PROG` is PROG's own, so its CPU can be read from
// /proc while it runs.
func TestNetnsExecKeepsPid(t *testing.T) {
	name := tempNetns(t)
	cmd, out, release := func() (*exec.Cmd, *bufio.Reader, func()) {
		c := inNetns(name, os.Args[0], "-test.run=^$")
		c.Env = append(c.Env, spinEnv+"=200ms")
		stdin, _ := c.StdinPipe()
		stdout, _ := c.StdoutPipe()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if c.ProcessState == nil {
				c.Process.Kill()
				c.Wait()
			}
		})
		return c, bufio.NewReader(stdout), func() { stdin.Close(); c.Wait() }
	}()
	if line, err := out.ReadString('\n'); err != nil || line != "spun\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	tm, err := Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Base(os.Args[0]); !strings.HasPrefix(want, tm.Comm) {
		t.Errorf("pid %d is %q, not the test binary %q: ip netns exec forked?", cmd.Process.Pid, tm.Comm, want)
	}
	if tm.Total() < 150*time.Millisecond { // ticks round down: allow some slack
		t.Errorf("pid %d used %v, the spinner burned 200ms: not the program's own pid?", cmd.Process.Pid, tm.Total())
	}
	// And it really runs inside the namespace.
	self, _ := os.Readlink("/proc/self/ns/net")
	child, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	if err != nil || child == self {
		t.Errorf("child net namespace %q (%v), ours %q", child, err, self)
	}
	release()
}

// inNetns runs argv in namespace ns the way runner.InNetns does (runner
// reads process state through this package, so its tests cannot import it).
func inNetns(ns string, argv ...string) *exec.Cmd {
	c := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	c.Env = append(os.Environ(), "LC_ALL=C")
	return c
}
