package cluster

import (
	"os/exec"
	"syscall"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// hostProc is an OpenVPN started in serve's own namespace.
type hostProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *hostProc) Pid() int              { return p.cmd.Process.Pid }
func (p *hostProc) Done() <-chan struct{} { return p.done }
func (p *hostProc) Wait() error           { <-p.done; return p.err }
func (p *hostProc) Stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(openvpn.StopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}
