package runner

import (
	"os"
	"syscall"
	"time"
)

// Stop ends a started program the one way ovpnperf stops its processes:
// SIGTERM, then up to grace for it to exit (done is closed by whoever
// reaps it), then SIGKILL and a wait for done. A program already gone
// returns at once.
func Stop(p *os.Process, done <-chan struct{}, grace time.Duration) {
	select {
	case <-done:
		return
	default:
	}
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = p.Kill()
		<-done
	}
}

// Terminate is Stop for a process this one did not start or can no longer
// wait for, named by pid and start time (StartTicks) so that a recycled pid
// is never signalled: SIGTERM and SIGCONT (a stopped process acts on the
// SIGTERM only once it runs again), up to grace for it to go, then SIGKILL
// and up to a second more. A process already gone (or a zombie) is left
// alone.
func Terminate(pid int, ticks uint64, grace time.Duration) {
	if !Alive(pid, ticks) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	_ = syscall.Kill(pid, syscall.SIGCONT)
	if waitGone(pid, ticks, grace) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitGone(pid, ticks, time.Second)
}

// waitGone waits up to limit for the process to go and reports whether it
// went.
func waitGone(pid int, ticks uint64, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for Alive(pid, ticks) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
