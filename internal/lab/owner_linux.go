package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/journal"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// ownerProgram is the ovpnperf binary that runs the lab's owner as
// `ovpnperf lab owner NAME`: Env.Owner if set, else this process's own
// executable, which is ovpnperf itself.
func (e Env) ownerProgram() (string, error) {
	if e.Owner != "" {
		return e.Owner, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding own executable for the lab owner: %w", err)
	}
	return exe, nil
}

// The owner process
//
//	creator (lab up / lab run / a test)
//	   │ ip netns exec ROUTER ovpnperf lab owner NAME
//	   ▼
//	owner ── runs the userspace emulator (if any), writes stats.json
//	   │     prints "ready" on stdout, then waits
//	   ├─ SIGTERM (lab down, Lab.Down) ─────────► exits; the caller tears down
//	   └─ creator gone, lab ephemeral ───────────► tears the lab down, exits
//
// A lab whose owner is gone without a teardown (SIGKILL, crash) is what
// `ovpnperf lab clean` removes. The owner is a (hidden) command of its own,
// so `ps` shows which lab each owner holds.

func (l *Lab) startOwner(ctx context.Context) error {
	exe, err := l.env.ownerProgram()
	if err != nil {
		return err
	}
	argv := []string{"lab", "owner", l.name}
	if l.env.BaseDir() != DefaultBaseDir {
		// The owner reads the lab's state where its creator keeps it.
		argv = append(argv, "--base", l.env.BaseDir())
	}
	cmd := l.Command(context.Background(), Router, append([]string{exe}, argv...)...)
	// Its own session: a Ctrl-C in the creator's terminal reaches only the
	// creator, which then decides what to tear down.
	// An ephemeral lab's owner notices its creator's death by polling its
	// parent pid rather than by PR_SET_PDEATHSIG, which fires when the
	// creating OS thread exits, not the process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	logf, err := os.OpenFile(filepath.Join(l.Dir(), "owner.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting lab owner: %w", err)
	}
	ticks, _ := startTicks(cmd.Process.Pid)
	if err := l.state.record(Resource{Kind: KindProcess, Name: "owner", Netns: l.Namespace(Router), Pid: cmd.Process.Pid, StartTicks: ticks, Argv: cmd.Args}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if strings.TrimSpace(line) == "ready" {
			ready <- nil
			_, _ = io.Copy(io.Discard, out)
			return
		}
		if err == nil {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			_ = cmd.Wait()
			b, _ := os.ReadFile(filepath.Join(l.Dir(), "owner.log"))
			return fmt.Errorf("%w (%s): %s", errNoOwner, exe, strings.TrimSpace(string(b)))
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("lab owner did not become ready within 10s")
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return ctx.Err()
	}
	l.owner = cmd
	// Reap it when it exits so it does not linger as a zombie.
	go func() { _ = cmd.Wait() }()
	return l.state.update(func(s *State) {
		s.Owner = Owner{Pid: cmd.Process.Pid, StartTicks: ticks}
		s.Ready = true
	})
}

// RunOwner is the body of the owner process, `ovpnperf lab owner NAME`. It
// runs in the router namespace (started through `ip netns exec`) until it
// is told to stop or, for an ephemeral lab, its creator is gone.
func (env Env) RunOwner(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	st, err := env.readState(name)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	creator := os.Getppid()
	errc := make(chan error, 1)
	if UserspaceBackend(st.Backend) {
		// Open binds the queues (opens the wire's sockets) before ready:
		// a lab is never handed over with packets dropped for want of an
		// emulator.
		e, err := openEmulator(name, st.Path, st.Backend)
		if err != nil {
			return err
		}
		go func() { errc <- runEmulator(ctx, e, filepath.Join(env.Dir(name), "stats.json")) }()
		if st.Backend == labpath.BackendNFQueue {
			if err := waitQueuesBound(st.Path, errc); err != nil {
				return err
			}
		}
	}
	fmt.Println("ready")
	os.Stdout.Close()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			stop()
			if UserspaceBackend(st.Backend) && errc != nil {
				return <-errc
			}
			return nil
		case err := <-errc:
			// The emulator failed: without it the lab drops every emulated
			// packet, so say so loudly in the owner log and keep the lab
			// for inspection until it is taken down.
			fmt.Fprintf(os.Stderr, "emulator stopped: %v\n", err)
			errc = nil
		case <-tick.C:
			if st.Ephemeral && os.Getppid() != creator {
				// The process that owned this lab died without taking it
				// down: do it now.
				stop()
				cur, err := env.readState(name)
				if err != nil {
					return err
				}
				return env.teardownState(cur)
			}
		}
	}
}

// waitQueuesBound waits until the kernel lists the emulator's queues as
// bound (/proc/net/netfilter/nfnetlink_queue in this namespace).
func waitQueuesBound(p labpath.Path, errc chan error) error {
	want := map[int]bool{}
	if p.Up.Emulated() {
		want[queueUp] = true
	}
	if p.Down.Emulated() {
		want[queueDown] = true
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-errc:
			return fmt.Errorf("emulator: %w", err)
		default:
		}
		b, _ := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
		bound := 0
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil && want[n] {
					bound++
				}
			}
		}
		if bound == len(want) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return errors.New("emulator queues not bound within 5s")
}

// Open returns a handle on an existing lab, from its state file.
func (e Env) Open(name string) (*Lab, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	st, err := e.readState(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, usage.Errorf("no lab named %q (see `ovpnperf lab status`)", name)
	}
	if corrupt(err) {
		return nil, fmt.Errorf("%w; remove the lab with `ovpnperf lab clean %s`", err, name)
	}
	if err != nil {
		return nil, err
	}
	return &Lab{name: name, env: e, state: &stateFile{dir: e.Dir(name), name: name, st: st}}, nil
}

// OwnerAlive reports whether the lab's owner process still runs.
func (s State) OwnerAlive() bool { return alive(s.Owner.Pid, s.Owner.StartTicks) }

// Down stops the owner and every process of the lab, deletes its namespaces
// (with the links, qdiscs and rules inside them) and removes its directory.
// Resources already gone are not errors; calling Down twice is harmless.
func (l *Lab) Down() error {
	l.state.close()
	cur, err := l.env.readState(l.name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// The owner first, given time to stop its emulator; only if it is
	// the lab's (teardownState says why not).
	if ValidateName(cur.Name) == nil {
		for _, r := range cur.Resources {
			if r.Kind == KindProcess && r.Name == "owner" {
				procs := journal.Processes{Terminate: func(pid int, ticks uint64) { runner.Terminate(pid, ticks, 3*time.Second) }, Legacy: newOwnership(cur).legacy}
				_ = procs.Undo(context.Background(), r)
			}
		}
	}
	return l.env.teardownState(cur)
}

// Clean tears down labs whose owner is gone (killed, crashed) and returns
// their names: every such lab, or only the named ones. Labs with a live
// owner are left alone, and nothing that no lab state file lists is touched.
// A lab whose state file is corrupt is reported in the error and removed
// only when named: its namespaces are then found by their names, and the
// processes in them (its owner among them) are stopped.
func (e Env) Clean(names ...string) ([]string, error) {
	for _, n := range names {
		if err := ValidateName(n); err != nil {
			return nil, err
		}
	}
	states, err := e.List()
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var cleaned []string
	var errs []error
	seen := map[string]bool{}
	for _, st := range states {
		if len(want) > 0 && !want[st.Name] {
			continue
		}
		seen[st.Name] = true
		switch {
		case st.Corrupt != "" && len(want) == 0:
			errs = append(errs, fmt.Errorf("%s; left alone: remove it with `ovpnperf lab clean %s`", st.Corrupt, st.Name))
			continue
		case st.Corrupt != "":
			// What was read before the damage, and the lab's
			// namespaces found by their names.
			st, _ = e.readState(st.Name)
			for _, ns := range NamespacesOf(st.Name) {
				st.Resources = append(st.Resources, Resource{Kind: KindNetns, Name: ns})
			}
		case st.OwnerAlive():
			if len(want) > 0 {
				errs = append(errs, usage.Errorf("lab %s is alive (its owner, pid %d, runs): take it down with `ovpnperf lab down %s`", st.Name, st.Owner.Pid, st.Name))
			}
			continue
		}
		if err := e.teardownState(st); err != nil {
			errs = append(errs, fmt.Errorf("lab %s: %w", st.Name, err))
			continue
		}
		cleaned = append(cleaned, st.Name)
	}
	// A directory without a state file is a lab whose creator died between
	// claiming the name and writing the state; give a creator 10 s to
	// write it.
	entries, _ := os.ReadDir(e.BaseDir())
	for _, de := range entries {
		if len(want) > 0 && !want[de.Name()] {
			continue
		}
		dir := e.Dir(de.Name())
		if journal.Exists(dir) {
			continue
		}
		seen[de.Name()] = true
		if info, err := de.Info(); err == nil && time.Since(info.ModTime()) > 10*time.Second {
			if os.RemoveAll(dir) == nil {
				cleaned = append(cleaned, de.Name())
			}
		}
	}
	for _, n := range names {
		if !seen[n] {
			errs = append(errs, usage.Errorf("no lab named %q (see `ovpnperf lab status`)", n))
		}
	}
	return cleaned, errors.Join(errs...)
}
