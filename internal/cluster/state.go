package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/journal"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Resource kinds in the state file.
const (
	KindProcess = "process"
	KindChain   = "iptables-chain" // Name: chain, Detail: "table proto port"
	KindSysctl  = "sysctl"         // Name: key, Detail: value before
	// KindSysfs (irq.go): an IRQ affinity or RPS/XPS mask.
)

// Resource is one thing the cluster (or a connect run) made: an entry of
// its journal, written before it is made.
type Resource = journal.Entry

// State is the cluster's state: its journal's document and the entries not
// yet undone.
type State struct {
	ID        string     `json:"id"`
	Netns     string     `json:"netns,omitempty"`
	ServePid  int        `json:"serve_pid"`
	Control   string     `json:"control_socket"`
	Resources []Resource `json:"resources"`
}

// ControlPath is where serve listens for status and stop.
func (p Paths) ControlPath(id string) string { return filepath.Join(p.Dir(id), "run", "control.sock") }

// runJournal is the journal of a cluster (T State) or a connect run (T
// ConnectState): the run's document, written once when the run starts,
// beside the entries.
type runJournal[T any] struct {
	j    *journal.Journal
	meta T
}

// createJournal starts the journal of run id in dir with its document.
func createJournal[T any](dir, id string, meta T) (*runJournal[T], error) {
	j, err := journal.Create(dir, id, meta)
	if err != nil {
		return nil, err
	}
	return &runJournal[T]{j: j, meta: meta}, nil
}

// record writes r to the journal; make r only once it returned nil.
func (s *runJournal[T]) record(r Resource) error {
	_, err := s.j.Record(r)
	return err
}

// forget marks done the newest entry match accepts (a process that
// exited, a change that failed and so changed nothing).
func (s *runJournal[T]) forget(match func(Resource) bool) error {
	es := s.j.Contents().Entries
	for i := len(es) - 1; i >= 0; i-- {
		if match(es[i]) {
			return s.j.Done(es[i].Seq)
		}
	}
	return nil
}

// get returns the run's document.
func (s *runJournal[T]) get() T { return s.meta }

// entries returns the entries not yet undone, oldest first.
func (s *runJournal[T]) entries() []Resource { return s.j.Contents().Entries }

// stateFile is the cluster's journal.
type stateFile = runJournal[State]

func (p Paths) newStateFile(st State) (*stateFile, error) {
	return createJournal(p.Dir(st.ID), st.ID, st)
}

// forgetProcess marks the entry of a process that exited done.
func (s *runJournal[T]) forgetProcess(name string, pid int) error {
	return s.forget(func(r Resource) bool { return r.Kind == KindProcess && r.Name == name && r.Pid == pid })
}

// loadState reads run id's journal in dir into meta, with its entries. A
// damaged journal is an error (one line); meta and the entries read before
// the damage are returned with it.
func loadState(dir, id string, meta any) ([]Resource, error) {
	c, err := journal.Load(dir, id)
	if len(c.Meta) > 0 {
		if jerr := json.Unmarshal(c.Meta, meta); jerr != nil && err == nil {
			err = &journal.DamagedError{Path: dir, Why: jerr.Error()}
		}
	}
	return c.Entries, err
}

// ReadState reads cluster id's state.
func (p Paths) ReadState(id string) (State, error) {
	var st State
	rs, err := loadState(p.Dir(id), id, &st)
	st.Resources = rs
	if st.ID != id {
		// Its undo would act for another cluster.
		if err == nil {
			err = &journal.DamagedError{Path: p.Dir(id), Why: fmt.Sprintf("it names cluster %q", st.ID)}
		}
		return State{ID: id}, err
	}
	return st, err
}

// List returns the ids of the clusters with a state directory.
func (p Paths) List() ([]string, error) { return listIDs(p.StateDir()) }

// listIDs returns the names of the directories in dir that are ids.
func listIDs(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var ids []string
	for _, e := range es {
		if e.IsDir() && idRE.MatchString(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, err
}

func startTicks(pid int) (uint64, error) { return runner.StartTicks(pid) }

// alive reports whether pid still runs with this start time. Unlike
// runner.Alive, a zombie counts as alive: its pid is still taken.
func alive(pid int, ticks uint64) bool {
	t, err := runner.StartTicks(pid)
	return err == nil && (ticks == 0 || t == ticks)
}

// Clean removes everything cluster id's journal lists: it stops the serve
// process and the instances (if still ours), deletes the iptables chains,
// restores sysctls and removes the directory. Missing resources are not
// errors (CNI DEL semantics). A damaged journal is reported, and only the
// entries read before the damage are undone.
func (p Paths) Clean(ctx context.Context, id string) error {
	if !idRE.MatchString(id) {
		return usage.Errorf("cluster id %q: want 4 hex digits (see `ovpnperf cluster status`)", id)
	}
	st, err := p.ReadState(id)
	var errs []error
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	serve, rest := p.splitServe(id, st)
	if serve.why != "" {
		errs = append(errs, fmt.Errorf("state file of %s names %s as its serve; left alone", id, serve.why))
	}
	// The serve first: it would restart the instances stopped below.
	r := journal.Undo(ctx, serve.entries, p.undoActions(id, p.Dir(id)))
	errs = append(errs, undoErrors(id, r)...)
	r = journal.Undo(ctx, rest, p.undoActions(id, p.Dir(id)))
	errs = append(errs, undoErrors(id, r)...)
	if err := os.RemoveAll(p.Dir(id)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// undoErrors are the errors of an undo of run id: the failures, and each
// entry left alone.
func undoErrors(id string, r journal.Result) []error {
	errs := r.Errs
	for _, f := range r.Foreign {
		errs = append(errs, fmt.Errorf("state file of %s names %s, which it does not make; left alone", id, f))
	}
	return errs
}

// serveEntries are a cluster's serve entries, to undo before the rest, or
// why the state's serve_pid names no serve of the cluster.
type serveEntries struct {
	entries []Resource
	why     string
}

// splitServe takes cluster id's serve entries out of st's. A serve is
// stopped only when serve_pid is its entry's pid, and the entry's start
// time and command line (an earlier version's entry: `cluster serve`, with
// this id if it names one) are the process's; a damaged or forged state
// file must not make clean stop any process. The serve entry of another
// pid than serve_pid is left alone (said once, as the serve).
func (p Paths) splitServe(id string, st State) (serveEntries, []Resource) {
	var s serveEntries
	var rest []Resource
	var rec *Resource
	for _, r := range st.Resources {
		if r.Kind == KindProcess && r.Name == "serve" {
			rec = &r
			continue
		}
		rest = append(rest, r)
	}
	pid := st.ServePid
	switch {
	case pid <= 0 && rec == nil:
	case rec == nil:
		if _, err := startTicks(pid); err == nil {
			s.why = fmt.Sprintf("process %d without its start time", pid)
		}
	case rec.Pid != pid && pid > 0:
		s.why = fmt.Sprintf("process %d, but its serve entry process %d", pid, rec.Pid)
	default:
		s.entries = []Resource{*rec}
	}
	return s, rest
}

// undoActions undo the entries of cluster or connect run id (directory
// dir). Each first checks that the object is the run's: a state file
// damaged or written by someone else must not make clean write any
// sysctl, delete another's chain or device, or stop a process that is not
// one of the run's.
func (p Paths) undoActions(id, dir string) map[string]journal.Action {
	procs := journal.Processes{
		Terminate: func(pid int, ticks uint64) { runner.Terminate(pid, ticks, 5*time.Second) },
		// An earlier version recorded no command line: its serve runs
		// `cluster serve` of this id, the others a file in dir.
		Legacy: func(e Resource, _ journal.Process) string {
			if e.Name == "serve" && !p.runsServe(e.Pid, id) {
				return fmt.Sprintf("process %d, which does not run `ovpnperf cluster serve` of %s", e.Pid, id)
			}
			if e.Name != "serve" && !runsFrom(e.Pid, dir) {
				return fmt.Sprintf("process %d, which runs nothing of %s", e.Pid, dir)
			}
			return ""
		},
		// A serve stopping itself undoes the rest.
		Skip: func(e Resource) bool { return e.Pid == os.Getpid() },
	}
	sysctls := journal.Sysctls{
		Read: func(ctx context.Context, ns, key string) (string, error) { return p.host(ns).Sysctl(ctx, key) },
		Write: func(ctx context.Context, ns, key, value string) error {
			_, err := p.host(ns).SetSysctl(ctx, key, value)
			return err
		},
		Allowed: func(key, value string) string {
			if !slices.Contains(ownSysctls, key) || !sysctlValueRE.MatchString(value) {
				return fmt.Sprintf("sysctl %.60q = %.20q", key, value)
			}
			return ""
		},
	}
	// inNetns: an object whose namespace is gone went with it (a lab torn
	// down).
	inNetns := func(owned func(Resource) string, undo journal.Action) journal.Action {
		return func(ctx context.Context, r Resource) error {
			if why := owned(r); why != "" {
				return journal.Foreign("%s", why)
			}
			if r.Netns != "" && !netns.Exists(r.Netns) {
				return nil
			}
			return undo(ctx, r)
		}
	}
	anyOf := func(Resource) string { return "" }
	return map[string]journal.Action{
		KindProcess: procs.Undo,
		KindChain: inNetns(func(r Resource) string { return journal.ChainOwned(id, r.Name) }, func(ctx context.Context, r Resource) error {
			return deleteChain(ctx, p.host(r.Netns), r)
		}),
		KindSysctl: inNetns(func(r Resource) string { return sysctls.Allowed(r.Name, r.Detail) }, sysctls.Undo),
		KindSysfs:  inNetns(anyOf, restoreSysfs), // restoreSysfs checks the path
		KindMultipath: inNetns(anyOf, func(ctx context.Context, r Resource) error {
			return removeMultipathResource(ctx, p.host(r.Netns), r)
		}),
		KindLink: inNetns(func(r Resource) string {
			if !strings.HasPrefix(r.Name, "ovpnperf"+id+"t") {
				return fmt.Sprintf("link %q", r.Name)
			}
			return ""
		}, func(ctx context.Context, r Resource) error { return removeLink(ctx, p.host(r.Netns), r) }),
		KindNATChain: inNetns(func(r Resource) string {
			if _, ok := natFamily(r.Detail); !ok || r.Name != hostNATChain(id) {
				return fmt.Sprintf("nat chain %q (%.20q)", r.Name, r.Detail)
			}
			return ""
		}, func(ctx context.Context, r Resource) error { return deleteNATChain(ctx, p.host(r.Netns), r) }),
	}
}

// runsServe reports whether process pid's command line is `… cluster
// serve …`, with --id id when it gives an id; a serve that chose its id
// (no --id) must hold the cluster's control socket.
func (p Paths) runsServe(pid int, id string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	i := slices.Index(argv, "serve")
	if i < 1 || argv[i-1] != "cluster" {
		return false
	}
	for j := i + 1; j < len(argv) && argv[j] != "--"; j++ {
		switch {
		case argv[j] == "--id" && j+1 < len(argv):
			return argv[j+1] == id
		case strings.HasPrefix(argv[j], "--id="):
			return strings.TrimPrefix(argv[j], "--id=") == id
		}
	}
	return holdsSocket(pid, p.ControlPath(id))
}

// holdsSocket reports whether process pid has the unix socket bound at
// path open: /proc/PID/net/unix names the socket's inode, and one of the
// process's descriptors links to socket:[inode].
func holdsSocket(pid int, path string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/unix", pid))
	if err != nil {
		return false
	}
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		// Num RefCount Protocol Flags Type St Inode Path
		if f := strings.Fields(line); len(f) == 8 && f[7] == path {
			inodes["socket:["+f[6]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return false
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && inodes[l] {
			return true
		}
	}
	return false
}

func servePidTicks(st State) (uint64, bool) {
	for _, r := range st.Resources {
		if r.Kind == KindProcess && r.Name == "serve" {
			return r.StartTicks, true
		}
	}
	return 0, st.ServePid > 0
}

// ownSysctls are the sysctls a cluster or connect run changes (and so
// restores); their values are small integers.
var ownSysctls = append([]string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"}, MultipathHashSysctls()...)

var sysctlValueRE = regexp.MustCompile(`^[0-9]{1,3}$`)

// runsFrom reports whether process pid's command line names a file in dir
// (a cluster instance's --config, a connect tunnel's --management socket).
func runsFrom(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), dir+"/")
}

// host is the network namespace ns ("" this process's) as the run
// changes it: p.Hosts's, or the kernel's.
func (p Paths) host(ns string) hostnet.Host {
	if p.Hosts != nil {
		return p.Hosts(ns)
	}
	return hostnet.Open(ns)
}
