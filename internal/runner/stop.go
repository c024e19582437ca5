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
