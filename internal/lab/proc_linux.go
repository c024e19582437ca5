package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func startTicks(pid int) (uint64, error) { return runner.StartTicks(pid) }

func alive(pid int, ticks uint64) bool { return runner.Alive(pid, ticks) }

// self identifies the calling process.
func self() Owner {
	t, _ := startTicks(os.Getpid())
	return Owner{Pid: os.Getpid(), StartTicks: t}
}

// pidsInNetns lists the processes whose network namespace is the named one
// (what `ip netns pids NAME` prints). It finds them also when a later mount
// on /run/netns hides the name, by the namespace's inode in mountinfo.
func pidsInNetns(name string) []int {
	ino, ok := netns.Inode(name)
	if !ok {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st); err != nil {
			continue
		}
		if st.Ino == ino {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Process is a long-running program started in a lab node and recorded in
// the lab's state, so that teardown stops it even after a crash.
type Process struct {
	Cmd   *exec.Cmd
	ticks uint64
	done  chan struct{}
	err   error
}

// Pid returns the process id. `ip netns exec` execs the program in place,
// so this is the program's own pid.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Wait waits for the process to exit and returns its error.
func (p *Process) Wait() error { <-p.done; return p.err }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop ends the process (SIGTERM, then SIGKILL after 3 s) and waits for it.
func (p *Process) Stop() error {
	runner.Stop(p.Cmd.Process, p.done, 3*time.Second)
	return nil
}

// Start runs argv in node, with stdout and stderr appended to logPath (or
// discarded when logPath is empty), and records it in the lab's state. The
// process is not tied to ctx's lifetime beyond start: stop it with Stop, or
// let Down do it.
func (l *Lab) Start(ctx context.Context, node Node, logPath string, argv ...string) (*Process, error) {
	return l.start(ctx, node, logPath, false, argv)
}

// StartDetached is Start for a program of a persistent lab that must
// outlive the command that starts it (etcd of `lab up --etcd`): it runs in
// a session of its own with no parent-death signal, and stays until lab
// down (or lab clean) stops it, by its pid in the state or as a process
// in the lab's namespaces.
func (l *Lab) StartDetached(ctx context.Context, node Node, logPath string, argv ...string) (*Process, error) {
	return l.start(ctx, node, logPath, true, argv)
}

func (l *Lab) start(ctx context.Context, node Node, logPath string, detached bool, argv []string) (*Process, error) {
	cmd := l.Command(context.Background(), node, argv...)
	var logf *os.File
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		logf = f
		cmd.Stdout, cmd.Stderr = f, f
	}
	// Its own process group keeps a Ctrl-C in the terminal from reaching it
	// before ovpnperf has decided what to stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := ctx.Err(); err != nil {
		if logf != nil {
			logf.Close()
		}
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		if logf != nil {
			logf.Close()
		}
		return nil, fmt.Errorf("starting %q in %s: %w", strings.Join(argv, " "), node, err)
	}
	ticks, _ := startTicks(cmd.Process.Pid)
	p := &Process{Cmd: cmd, ticks: ticks, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if logf != nil {
			logf.Close()
		}
		close(p.done)
	}()
	if err := l.state.record(Resource{Kind: KindProcess, Name: filepath.Base(argv[0]), Netns: l.Namespace(node), Pid: cmd.Process.Pid, StartTicks: ticks, Argv: cmd.Args}); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

// errNotRoot is a usage error: the user ran a lab command without root.
var errNotRoot = usage.Errorf("ovpnperf lab needs root (network namespaces, tc and iptables): run it as root")
