// Package runner runs external programs (ip, tc, iptables, openvpn, iperf3,
// openssl) with a fixed C locale, and turns their failures into errors that
// carry the whole command line and its output.
package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Env is the environment given to every program: the caller's, with the
// locale forced to C so that output can be parsed.
func Env() []string {
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LC_ALL=") || strings.HasPrefix(kv, "LANG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// Command builds an *exec.Cmd with the C locale. It does not start it.
func Command(ctx context.Context, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = Env()
	return cmd
}

// InNetns builds a command that runs inside the named network namespace,
// through `ip netns exec`, so that anyone can reproduce it by hand.
func InNetns(ctx context.Context, ns string, argv ...string) *exec.Cmd {
	return Command(ctx, append([]string{"ip", "netns", "exec", ns}, argv...)...)
}

// Run runs argv and returns its combined output. On failure the error names
// the command, the exit status and the output.
func Run(ctx context.Context, argv ...string) ([]byte, error) {
	return Output(Command(ctx, argv...))
}

// RunIn runs argv inside the named network namespace.
func RunIn(ctx context.Context, ns string, argv ...string) ([]byte, error) {
	return Output(InNetns(ctx, ns, argv...))
}

// Output runs a prepared command and returns its combined output, wrapping a
// failure as described for Run.
func Output(cmd *exec.Cmd) ([]byte, error) {
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	err := cmd.Run()
	if err != nil {
		return buf.Bytes(), fmt.Errorf("running %q: %w\n%s", strings.Join(cmd.Args, " "), err, bytes.TrimSpace(buf.Bytes()))
	}
	return buf.Bytes(), nil
}

// VersionTimeout bounds the runs of `PROGRAM --version` that collect this
// host's facts: a program on PATH that hangs makes the fact unknown, never
// the command wait.
const VersionTimeout = 5 * time.Second

// TimeoutError is a program that did not finish within its limit.
type TimeoutError struct {
	Argv  []string
	Limit time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("running %q: did not finish within %v; stopped", strings.Join(e.Argv, " "), e.Limit)
}

// RunBounded is Run with a time limit: past it the program, and every
// process it started (it runs in its own process group), is killed and
// the error is a *TimeoutError. For short questions to programs
// (`openvpn --version`) whose answer is not worth waiting for.
func RunBounded(ctx context.Context, limit time.Duration, argv ...string) ([]byte, error) {
	tctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := Command(tctx, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that keeps the output pipe open does not hold Wait.
	cmd.WaitDelay = time.Second
	out, err := Output(cmd)
	if err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		return out, &TimeoutError{Argv: argv, Limit: limit}
	}
	return out, err
}

// MissingProgramError says which Debian package provides a program that is
// not installed.
type MissingProgramError struct {
	Program string
	Package string
}

func (e *MissingProgramError) Error() string {
	return fmt.Sprintf("%s not found in PATH: install the Debian package %s (apt-get install %s)", e.Program, e.Package, e.Package)
}

// packages maps the programs ovpnperf runs to the Debian packages that ship them.
var packages = map[string]string{
	"ip":        "iproute2",
	"tc":        "iproute2",
	"iptables":  "iptables",
	"ip6tables": "iptables",
	"openvpn":   "openvpn",
	"iperf3":    "iperf3",
	"openssl":   "openssl",
	"tcpdump":   "tcpdump",
	"ping":      "iputils-ping",
	"sockperf":  "sockperf",
	"taskset":   "util-linux",
	"modprobe":  "kmod",
	"sysctl":    "procps",
}

// Require checks that each program is in PATH and returns a
// *MissingProgramError for the first one that is not.
func Require(programs ...string) error {
	for _, p := range programs {
		if _, err := Path(p); err != nil {
			return err
		}
	}
	return nil
}

// Path returns where program is in PATH, or a *MissingProgramError naming
// the Debian package that installs it.
func Path(program string) (string, error) {
	path, err := exec.LookPath(program)
	if err != nil {
		pkg := packages[program]
		if pkg == "" {
			pkg = program
		}
		return "", &MissingProgramError{Program: program, Package: pkg}
	}
	return path, nil
}
