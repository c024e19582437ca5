package openvpn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/certs"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// Proc is a started program as this package needs to see it. *lab.Process
// satisfies it, so the lab can start OpenVPN and record it in its state.
type Proc interface {
	Pid() int
	// Stop ends the program (SIGTERM, then SIGKILL) and waits for it.
	Stop() error
	// Done is closed when the program has exited; Wait then returns its
	// error.
	Done() <-chan struct{}
	Wait() error
}

// Launcher starts argv, with stdout and stderr appended to logPath, in the
// network namespace it stands for. An adapter for the lab:
//
//	func(ctx context.Context, logPath string, argv ...string) (openvpn.Proc, error) {
//		p, err := l.Start(ctx, lab.Server, logPath, argv...)
//		if err != nil {
//			return nil, err
//		}
//		return p, nil
//	}
type Launcher func(ctx context.Context, logPath string, argv ...string) (Proc, error)

// NetnsLauncher starts programs with `ip netns exec NS` (runner.InNetns),
// in their own process group, killed if ovpnperf dies.
func NetnsLauncher(ns string) Launcher {
	return commandLauncher(func(argv []string) *exec.Cmd {
		return runner.InNetns(context.Background(), ns, argv...)
	})
}

// HostLauncher starts programs in ovpnperf's own network namespace, as
// NetnsLauncher does in a named one (a cluster serve without --netns).
func HostLauncher() Launcher {
	return commandLauncher(func(argv []string) *exec.Cmd {
		return runner.Command(context.Background(), argv...)
	})
}

// commandLauncher starts the command build makes of argv, with its output
// appended to the log, in its own process group and with SIGTERM if
// ovpnperf dies. The command is built on context.Background: the process
// outlives the launch's ctx on purpose, Stop ends it.
func commandLauncher(build func(argv []string) *exec.Cmd) Launcher {
	return func(ctx context.Context, logPath string, argv ...string) (Proc, error) {
		if err := runner.Require(argv[0]); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		cmd := build(argv)
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if err := ctx.Err(); err != nil {
			f.Close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			f.Close()
			return nil, fmt.Errorf("starting %q: %w", strings.Join(cmd.Args, " "), err)
		}
		p := &cmdProc{cmd: cmd, done: make(chan struct{})}
		go func() {
			p.err = cmd.Wait()
			f.Close()
			close(p.done)
		}()
		return p, nil
	}
}

type cmdProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *cmdProc) Pid() int              { return p.cmd.Process.Pid }
func (p *cmdProc) Done() <-chan struct{} { return p.done }
func (p *cmdProc) Wait() error           { <-p.done; return p.err }

func (p *cmdProc) Stop() error {
	runner.Stop(p.cmd.Process, p.done, StopGrace)
	return nil
}

// StopGrace is how long Stop waits after SIGTERM before SIGKILL. OpenVPN
// closes its tun device and, for UDP clients with explicit-exit-notify,
// tells the server, within well under a second.
const StopGrace = 3 * time.Second

var roleRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Process is one running OpenVPN.
type Process struct {
	Role       string
	ConfigPath string
	LogPath    string
	proc       Proc
	// logStart is the log's size before this process started: a log
	// reused by a restart is appended to, and older lines must not count.
	logStart int64
}

// Start renders cfg, writes it to DIR/ROLE.conf (0600) and starts
// `ip netns exec NS openvpn --config DIR/ROLE.conf` with its output in
// DIR/ROLE.log. Role names the side ("server", "client", "client-2").
func Start(ctx context.Context, ns string, cfg *Config, dir, role string) (*Process, error) {
	return StartWith(ctx, NetnsLauncher(ns), cfg, dir, role)
}

// StartWith is Start with the caller choosing how the program is started,
// for example through the lab so that it is recorded in the lab's state.
func StartWith(ctx context.Context, launch Launcher, cfg *Config, dir, role string) (*Process, error) {
	if !roleRE.MatchString(role) {
		return nil, fmt.Errorf("openvpn role %q: use 1-32 characters a-z, 0-9, '_' or '-'", role)
	}
	text, err := cfg.Render()
	if err != nil {
		return nil, fmt.Errorf("%s config: %w", role, err)
	}
	p := &Process{
		Role:       role,
		ConfigPath: filepath.Join(dir, role+".conf"),
		LogPath:    filepath.Join(dir, role+".log"),
	}
	if err := writeFile0600(p.ConfigPath, []byte(text)); err != nil {
		return nil, err
	}
	if st, err := os.Stat(p.LogPath); err == nil {
		p.logStart = st.Size()
	}
	proc, err := launch(ctx, p.LogPath, "openvpn", "--config", p.ConfigPath)
	if err != nil {
		return nil, fmt.Errorf("starting openvpn %s: %w", role, err)
	}
	p.proc = proc
	return p, nil
}

// writeFile0600 replaces path with data, mode 0600 from the start.
func writeFile0600(path string, data []byte) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := certs.WriteExclusive(tmp, data); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.proc.Pid() }

// Done is closed when OpenVPN has exited.
func (p *Process) Done() <-chan struct{} { return p.proc.Done() }

// Stop ends OpenVPN (SIGTERM, then SIGKILL) and waits for it.
func (p *Process) Stop() error { return p.proc.Stop() }

// Wait waits for the process to exit and returns how it ended (a
// supervisor reports it as the exit reason).
func (p *Process) Wait() error { return p.proc.Wait() }

// ReadyLine is what OpenVPN logs when its tun device is up and, on a
// client, the server's push has been applied.
const ReadyLine = "Initialization Sequence Completed"

// TailLines is how many log lines errors from WaitReady carry.
const TailLines = 15

// WaitReady waits until the log says ReadyLine. If OpenVPN exits first, the
// timeout passes or ctx ends, the error carries the last TailLines lines of
// this side's log.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	if err := p.WaitLogged(ctx, timeout, ReadyLine); err != nil {
		return err
	}
	// "Initialization Sequence Completed With Errors": up, but a route or
	// address could not be set; measuring through it would mislead.
	if bytes.Contains(p.logBytes(), []byte(ReadyLine+" With Errors")) {
		return fmt.Errorf("openvpn %s started with errors; last lines of %s:\n%s", p.Role, p.LogPath, p.Tail(TailLines))
	}
	return nil
}

// logBytes returns what this process has logged so far.
func (p *Process) logBytes() []byte {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(p.logStart, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}

// DataChannelLine starts the line OpenVPN logs once the data channel's
// keys are installed ("Data Channel: cipher 'AES-256-GCM', peer-id: 0").
// A server logs it a moment after its client's ready line.
const DataChannelLine = "Data Channel: cipher"

// WaitLogged waits until the log contains text, with the errors of
// WaitReady.
func (p *Process) WaitLogged(ctx context.Context, timeout time.Duration, text string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if bytes.Contains(p.logBytes(), []byte(text)) {
			return nil
		}
		select {
		case <-p.proc.Done():
			if bytes.Contains(p.logBytes(), []byte(text)) {
				return nil
			}
			werr := p.proc.Wait()
			if werr == nil {
				werr = errors.New("exit status 0")
			}
			return fmt.Errorf("openvpn %s exited before logging %q (%v); last lines of %s:\n%s", p.Role, text, werr, p.LogPath, p.Tail(TailLines))
		case <-ctx.Done():
			what := "timed out after " + timeout.String()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				what = ctx.Err().Error()
			}
			return fmt.Errorf("openvpn %s has not logged %q: %s; last lines of %s:\n%s", p.Role, text, what, p.LogPath, p.Tail(TailLines))
		case <-tick.C:
		}
	}
}

// Tail returns the last n lines this process logged.
func (p *Process) Tail(n int) string {
	b := p.logBytes()
	if len(b) == 0 {
		return "(nothing logged)"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Log parses what this process has logged so far.
func (p *Process) Log() (*Log, error) {
	return ParseLog(bytes.NewReader(p.logBytes()))
}
