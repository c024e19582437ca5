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

// startEmulatorProcess runs the emulator as its own process in the router
// namespace. The returned function stops it and returns its final stats.
func (n *testNet) startEmulatorProcess(tb testing.TB, cfg Config) (stop func() processResult) {
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
	statsPath := filepath.Join(dir, "stats.json")
	cmd := exec.Command("ip", "netns", "exec", n.R, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperConfigEnv+"="+string(cfgJSON), helperStatsEnv+"="+statsPath)
	logf, err := os.Create(filepath.Join(dir, "emulator.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var final processResult
	stopped := false
	stop = func() processResult {
		if stopped {
			return final
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-waited:
			if err != nil {
				log, _ := os.ReadFile(logf.Name())
				tb.Errorf("emulator process: %v\n%s", err, log)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-waited
			tb.Errorf("emulator process did not stop within 10 s")
		}
		final.Stats, err = ReadStats(statsPath)
		if err != nil {
			tb.Error(err)
		}
		if ps := cmd.ProcessState; ps != nil {
			final.CPU = ps.UserTime() + ps.SystemTime()
		}
		return final
	}
	tb.Cleanup(func() { stop() })
	// Running once the first snapshot is there.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(statsPath); err == nil {
			break
		}
		select {
		case err := <-waited:
			log, _ := os.ReadFile(logf.Name())
			tb.Fatalf("emulator process ended: %v\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatal("emulator process wrote no stats within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return stop
}

// TestEmulatorProcess runs the emulator the way the lab does, as its own
// process stopped by SIGTERM, and checks the stats file it leaves.
func TestEmulatorProcess(t *testing.T) {
	n := newTestNet(t)
	stop := n.startEmulatorProcess(t, Config{Queues: []QueueConfig{
		{Num: queueUp, Delay: 10 * time.Millisecond},
		{Num: queueDown, Delay: 10 * time.Millisecond},
	}})
	r := ping(t, n.A, testAddrB, "-c", "10", "-i", "0.01", "-W", "2")
	st := stop()
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
