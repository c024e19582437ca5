package runner

import (
	"bufio"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// stopCases are a program that exits on SIGTERM and one that ignores it,
// each printing "ready" once its trap is in place.
var stopCases = []struct {
	name   string
	script string
	killed bool
}{
	{"honours SIGTERM", "echo ready; exec sleep 30", false},
	{"ignores SIGTERM", "trap '' TERM; echo ready; while :; do sleep 0.05; done", true},
}

// startReady starts sh -c script and waits for its "ready" line, which
// comes after the trap is in place however loaded the machine. The
// test's cleanup kills and reaps it if the test did not.
func startReady(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	return cmd
}

// A program that exits on SIGTERM is not killed; one that ignores it is
// killed after the grace period.
func TestStop(t *testing.T) {
	for _, tc := range stopCases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := startReady(t, tc.script)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			Stop(cmd.Process, done, 300*time.Millisecond)
			select {
			case <-done:
			default:
				t.Fatal("Stop returned before the program was reaped")
			}
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if killed := ws.Signaled() && ws.Signal() == syscall.SIGKILL; killed != tc.killed {
				t.Errorf("killed %v (status %v), want %v", killed, ws, tc.killed)
			}
		})
	}
}

// Terminate ends a process by pid and start time the same way, and leaves
// a pid alone when the start time is not the recorded one (a recycled pid).
func TestTerminate(t *testing.T) {
	for _, tc := range stopCases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := startReady(t, tc.script)
			pid := cmd.Process.Pid
			ticks, err := StartTicks(pid)
			if err != nil {
				t.Fatal(err)
			}
			Terminate(pid, ticks+1, 100*time.Millisecond)
			if !Alive(pid, ticks) {
				t.Fatal("Terminate with another start time ended the process")
			}
			Terminate(pid, ticks, 300*time.Millisecond)
			if Alive(pid, ticks) {
				t.Fatal("still alive after Terminate")
			}
			_ = cmd.Wait()
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if killed := ws.Signaled() && ws.Signal() == syscall.SIGKILL; killed != tc.killed {
				t.Errorf("killed %v (status %v), want %v", killed, ws, tc.killed)
			}
		})
	}
}
