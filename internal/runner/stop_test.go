package runner

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// A program that exits on SIGTERM is not killed; one that ignores it is
// killed after the grace period.
func TestStop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		killed bool
	}{
		{"honours SIGTERM", "sleep 30", false},
		{"ignores SIGTERM", "trap '' TERM; while :; do sleep 0.05; done", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			time.Sleep(100 * time.Millisecond) // let sh install its trap
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
