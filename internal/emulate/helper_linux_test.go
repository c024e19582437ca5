package emulate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a standalone emulator process, the way the lab
// runs it (`ip netns exec ROUTER ovpnperf …`): alone in its process, so
// the benchmark's sender and receiver goroutines share no Go scheduler
// with it.
const (
	helperConfigEnv = "OVPNPERF_EMULATE_TEST_CONFIG"
	helperStatsEnv  = "OVPNPERF_EMULATE_TEST_STATS"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(helperConfigEnv); cfg != "" {
		os.Exit(helperMain(cfg, os.Getenv(helperStatsEnv)))
	}
	os.Exit(m.Run())
}

func helperMain(cfgJSON, statsPath string) int {
	var cfg Config
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := RunProcess(ctx, cfg, statsPath); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// processResult is what an emulator process leaves: its final stats and
// the CPU time (user + system) it used, which includes the kernel's
// forwarding work done in its verdict calls.
type processResult struct {
	Stats
	CPU time.Duration
}

// emulatorProcess is the emulator running as its own process in a
// namespace: the router of a testNet, or W of a wireNet.
type emulatorProcess struct {
	tb                 testing.TB
	cmd                *exec.Cmd
	statsPath, logPath string
	waited             chan error
	// killedByTest: kill ended it; stop then expects that death and
	// reads no final stats (SIGKILL leaves none).
	killedByTest bool
	stopped      bool
	final        processResult
}

// startEmulatorProcess runs the emulator as its own process in namespace
// ns, as the lab does, once it has written its first stats. It is stopped
// when the test ends, if the test has not stopped it.
func startEmulatorProcess(tb testing.TB, ns string, cfg Config) *emulatorProcess {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	p := &emulatorProcess{tb: tb, statsPath: filepath.Join(dir, "stats.json"), logPath: filepath.Join(dir, "emulator.log"), waited: make(chan error, 1)}
	p.cmd = exec.Command("ip", "netns", "exec", ns, exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), helperConfigEnv+"="+string(cfgJSON), helperStatsEnv+"="+p.statsPath)
	logf, err := os.Create(p.logPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.waited <- p.cmd.Wait() }()
	tb.Cleanup(func() { p.stop() })
	// Running once the first snapshot is there.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(p.statsPath); err == nil {
			break
		}
		select {
		case err := <-p.waited:
			log, _ := os.ReadFile(p.logPath)
			tb.Fatalf("emulator process ended: %v\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatal("emulator process wrote no stats within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p
}

// stop ends the process with SIGTERM and returns its final stats and the
// CPU time it used; after the first call it returns the same again.
func (p *emulatorProcess) stop() processResult {
	if p.stopped {
		return p.final
	}
	p.stopped = true
	tb := p.tb
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.waited:
		if err != nil && !p.killedByTest {
			log, _ := os.ReadFile(p.logPath)
			tb.Errorf("emulator process: %v\n%s", err, log)
		}
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.waited
		tb.Errorf("emulator process did not stop within 10 s")
	}
	if !p.killedByTest {
		var err error
		if p.final.Stats, err = readStats(p.statsPath); err != nil {
			tb.Error(err)
		}
	}
	if ps := p.cmd.ProcessState; ps != nil {
		p.final.CPU = ps.UserTime() + ps.SystemTime()
	}
	return p.final
}

// kill ends the process with SIGKILL, as a crash would: it cleans up
// nothing of its own. stop then only waits for it.
func (p *emulatorProcess) kill(tb testing.TB) {
	tb.Helper()
	p.killedByTest = true
	if err := p.cmd.Process.Kill(); err != nil {
		tb.Fatal(err)
	}
}

// killed says the process ended by SIGKILL.
func killed(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// TestEmulatorProcess runs the emulator the way the lab does, as its own
// process stopped by SIGTERM, and checks the stats file it leaves.
func TestEmulatorProcess(t *testing.T) {
	n := newTestNet(t)
	p := startEmulatorProcess(t, n.R, Config{Queues: []QueueConfig{
		{Num: queueUp, Delay: 10 * time.Millisecond},
		{Num: queueDown, Delay: 10 * time.Millisecond},
	}})
	r := ping(t, n.A, testAddrB, "-c", "10", "-i", "0.01", "-W", "2")
	st := p.stop()
	if st.Running || st.Backend != Backend || len(st.Queues) != 2 || !st.RealtimeProcess {
		t.Fatalf("final stats %+v", st)
	}
	if r.received != r.sent || r.min < 20*time.Millisecond {
		t.Errorf("ping %+v through 2 × 10 ms", r)
	}
	for _, q := range st.Queues {
		if q.Received != uint64(r.sent) || q.Released != q.Received || !q.KernelRead || !q.Realtime {
			t.Errorf("queue %d: %+v", q.Num, q)
		}
	}
}
