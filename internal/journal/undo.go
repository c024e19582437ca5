package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
)

// Action undoes one entry of its kind. It first checks that the object is
// still the run's, and returns a *ForeignError (Foreign) when it is not:
// the object is then left alone. An object already gone is not an error.
type Action func(ctx context.Context, e Entry) error

// ForeignError says what an entry names that the run did not make.
type ForeignError struct{ What string }

func (e *ForeignError) Error() string { return e.What }

// Foreign is the error of an Action that leaves an entry's object alone.
func Foreign(format string, args ...any) error {
	return &ForeignError{What: fmt.Sprintf(format, args...)}
}

// Result is what an undo did not do.
type Result struct {
	// Foreign are the entries whose objects are not the run's, each said
	// in a few words ("process 12 without its start time"), oldest first.
	Foreign []string
	// Errs are the undos that failed.
	Errs []error
	// Done are the sequence numbers of the entries undone, or whose
	// objects were gone.
	Done []int
}

// Undo undoes entries newest first with the action of their kind. An entry
// of a kind without an action is foreign: nothing the run makes is
// undone by guessing.
func Undo(ctx context.Context, entries []Entry, actions map[string]Action) Result {
	var r Result
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		act, ok := actions[e.Kind]
		if !ok {
			r.Foreign = append(r.Foreign, fmt.Sprintf("%.30q %.80q", e.Kind, e.Name))
			continue
		}
		err := act(ctx, e)
		var f *ForeignError
		switch {
		case errors.As(err, &f):
			r.Foreign = append(r.Foreign, f.What)
		case err != nil:
			r.Errs = append(r.Errs, err)
		default:
			r.Done = append(r.Done, e.Seq)
		}
	}
	slices.Reverse(r.Foreign)
	return r
}

// Undo undoes the journal's entries newest first (see Undo) and marks each
// one done as it goes, so that an undo that is interrupted, or run again,
// never repeats one.
func (j *Journal) Undo(ctx context.Context, actions map[string]Action) Result {
	r := Undo(ctx, j.Contents().Entries, actions)
	for _, seq := range r.Done {
		if err := j.Done(seq); err != nil {
			r.Errs = append(r.Errs, err)
			break
		}
	}
	return r
}

// Nothing is the action of objects that go with something else the run
// undoes (a link, a qdisc or a rule inside the run's own namespace).
func Nothing(context.Context, Entry) error { return nil }

// Process is what runs as a pid.
type Process struct {
	StartTicks uint64
	Argv       []string
}

// ReadProcess returns what runs as pid, from /proc; false when nothing
// does, a zombie, or a process with no command line: one that is exiting
// (its memory, and with it /proc/PID/cmdline, goes before it becomes a
// zombie) or a kernel thread, neither of which a run has to stop.
func ReadProcess(pid int) (Process, bool) {
	if pid <= 0 {
		return Process{}, false
	}
	t, err := cpuacct.Read(pid)
	if err != nil || t.State == 'Z' {
		return Process{}, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return Process{}, false
	}
	argv := splitCmdline(b)
	if len(argv) == 0 {
		return Process{}, false
	}
	return Process{StartTicks: t.StartTicks, Argv: argv}, true
}

func splitCmdline(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// Processes undoes process entries: it stops a process only while its
// pid, its start time and its command line all match the entry.
type Processes struct {
	// Lookup says what runs as a pid (ReadProcess when nil).
	Lookup func(pid int) (Process, bool)
	// Terminate stops the process with this pid and start time
	// (runner.Terminate: SIGTERM, then SIGKILL).
	Terminate func(pid int, ticks uint64)
	// Legacy judges an entry an earlier version wrote without its
	// command line: "" when p is the run's, else what it is. Nil: such
	// an entry is foreign.
	Legacy func(e Entry, p Process) string
	// Skip leaves a process alone, as done (the calling process itself).
	Skip func(e Entry) bool
}

// Undo is the Action of process entries.
func (ps Processes) Undo(ctx context.Context, e Entry) error {
	if e.Pid <= 0 || e.StartTicks == 0 {
		return Foreign("process %d without its start time", e.Pid)
	}
	if ps.Skip != nil && ps.Skip(e) {
		return nil
	}
	look := ps.Lookup
	if look == nil {
		look = ReadProcess
	}
	p, ok := look(e.Pid)
	if !ok || p.StartTicks != e.StartTicks {
		return nil // gone; its pid may be another's now
	}
	if why := ps.Owned(e, p); why != "" {
		return Foreign("%s", why)
	}
	ps.Terminate(e.Pid, e.StartTicks)
	return nil
}

// Owned says why p, running as e.Pid with e's start time, is not the
// process e recorded ("" when it is).
func (ps Processes) Owned(e Entry, p Process) string {
	if len(e.Argv) == 0 {
		if ps.Legacy == nil {
			return fmt.Sprintf("process %d without its command line", e.Pid)
		}
		return ps.Legacy(e, p)
	}
	if !SameCommand(e.Argv, p.Argv) {
		return fmt.Sprintf("process %d, which runs %.60q, not %.60q", e.Pid, strings.Join(p.Argv, " "), strings.Join(e.Argv, " "))
	}
	return ""
}

// SameCommand reports whether a process's command line is the one
// recorded. A leading `ip netns exec NS` counts on neither side: ip execs
// the program in its own process, so the pid shows one before the exec and
// the other after.
func SameCommand(recorded, running []string) bool {
	return slices.Equal(stripNetnsExec(recorded), stripNetnsExec(running))
}

func stripNetnsExec(argv []string) []string {
	if len(argv) > 4 && filepath.Base(argv[0]) == "ip" && argv[1] == "netns" && argv[2] == "exec" {
		return argv[4:]
	}
	return argv
}

// NamespaceOwned says why a namespace name is not one a run makes ("" when
// it is): the run's names begin with prefix (ovpnperf-NAME- for lab NAME)
// and are plain names, never paths.
func NamespaceOwned(prefix, name string) string {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return fmt.Sprintf("namespace %q", name)
	}
	return ""
}

// ChainOwned says why an iptables chain is not one run id makes ("" when
// it is): the run's chains are named ovpnperf-ID-….
func ChainOwned(id, name string) string {
	if !strings.HasPrefix(name, "ovpnperf-"+id+"-") {
		return fmt.Sprintf("iptables chain %q", name)
	}
	return ""
}

// Sysctls undoes sysctl entries (Name the key, Detail the value before,
// Set the value the run wrote): the old value is written back only while
// the run's value still holds; one that someone changed since is theirs.
type Sysctls struct {
	Read  func(ctx context.Context, netns, key string) (string, error)
	Write func(ctx context.Context, netns, key, value string) error
	// Allowed says why a key or a value is not one the run sets ("" when
	// it is).
	Allowed func(key, value string) string
}

// Undo is the Action of sysctl entries.
func (s Sysctls) Undo(ctx context.Context, e Entry) error {
	if why := s.Allowed(e.Name, e.Detail); why != "" {
		return Foreign("%s", why)
	}
	if e.Set != "" {
		cur, err := s.Read(ctx, e.Netns, e.Name)
		if err != nil {
			return err
		}
		if cur != e.Set {
			return nil
		}
	}
	return s.Write(ctx, e.Netns, e.Name, e.Detail)
}
