package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// bgRun is the built binary running in the background: a server command
// (cluster serve, pps --server) that runs until it is told to stop.
type bgRun struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer // stdout and stderr, interleaved
	done chan struct{}
	err  error
}

type lockedWriter struct{ r *bgRun }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.out.Write(p)
}

// startBackground starts ovpnperf args; the test's cleanup stops it if the
// test did not.
func startBackground(t *testing.T, args ...string) *bgRun {
	t.Helper()
	return startBackgroundArgv(t, "", append([]string{binary}, args...)...)
}

// startBackgroundArgv starts any program in dir ("" for the test's own).
func startBackgroundArgv(t *testing.T, dir string, argv ...string) *bgRun {
	t.Helper()
	args := argv
	r := &bgRun{done: make(chan struct{})}
	r.cmd = runner.Command(context.Background(), argv...)
	r.cmd.Dir = dir
	r.cmd.Stdout, r.cmd.Stderr = lockedWriter{r}, lockedWriter{r}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting ovpnperf %s: %v", strings.Join(args, " "), err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() { r.stop(t, syscall.SIGKILL) })
	return r
}

// output is what the run printed so far.
func (r *bgRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitFor waits until the output holds want; it fails the test when the
// run exits first or d passes.
func (r *bgRun) waitFor(t *testing.T, want string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for !strings.Contains(r.output(), want) {
		select {
		case <-r.done:
			if !strings.Contains(r.output(), want) {
				t.Fatalf("exited (%v) before printing %q:\n%s", r.err, want, r.output())
			}
			return
		case <-deadline:
			t.Fatalf("no %q after %v:\n%s", want, d, r.output())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends sig (if the run still runs) and waits for the exit; it
// returns the exit status, -1 for a run killed by a signal.
func (r *bgRun) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	select {
	case <-r.done:
	default:
		_ = r.cmd.Process.Signal(sig)
		select {
		case <-r.done:
		case <-time.After(60 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.done
			t.Errorf("did not stop within 60 s of %v:\n%s", sig, r.output())
		}
	}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		return ee.ExitCode()
	}
	if r.err != nil {
		return -1
	}
	return 0
}
