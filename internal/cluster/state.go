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
	"sync"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// BaseDir holds one directory per cluster (mode 0700): state file, PKI,
// instance configs, status files, and run/ with the sockets.
var BaseDir = "/run/ovpnperf/cluster"

// Resource kinds in the state file.
const (
	KindProcess = "process"
	KindChain   = "iptables-chain" // Name: chain, Detail: "table proto port"
	KindSysctl  = "sysctl"         // Name: key, Detail: value before
	// KindSysfs (irq.go): an IRQ affinity or RPS/XPS mask.
)

// Resource is one thing the cluster made.
type Resource struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Netns      string `json:"netns,omitempty"`
	Pid        int    `json:"pid,omitempty"`
	StartTicks uint64 `json:"start_ticks,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// State is the cluster's state file.
type State struct {
	ID        string     `json:"id"`
	Netns     string     `json:"netns,omitempty"`
	ServePid  int        `json:"serve_pid"`
	Control   string     `json:"control_socket"`
	Resources []Resource `json:"resources"`
}

// Dir returns cluster id's directory.
func Dir(id string) string { return filepath.Join(BaseDir, id) }

func statePath(id string) string { return filepath.Join(Dir(id), "state.json") }

// ControlPath is where serve listens for status and stop.
func ControlPath(id string) string { return filepath.Join(Dir(id), "run", "control.sock") }

// stateFile is the cluster's state file, written through on every change.
type stateFile struct{ lockedState[State] }

func newStateFile(st State) *stateFile {
	return &stateFile{lockedState[State]{st: st, path: statePath(st.ID)}}
}

// record appends r and writes the file before the caller makes r.
func (s *stateFile) record(r Resource) error {
	return s.update(func(st *State) { st.Resources = append(st.Resources, r) })
}

// forget drops a resource that has been removed (a process that exited).
func (s *stateFile) forget(kind, name string, pid int) error {
	return s.update(func(st *State) {
		out := st.Resources[:0]
		for _, r := range st.Resources {
			if r.Kind == kind && r.Name == name && r.Pid == pid {
				continue
			}
			out = append(out, r)
		}
		st.Resources = out
	})
}

// forgetResource drops r (one that was recorded but never made).
func (s *stateFile) forgetResource(r Resource) error {
	return s.update(func(st *State) { st.Resources = dropLast(st.Resources, r) })
}

// lockedState holds a state document (the cluster's State, a connect run's
// ConnectState) under one lock and writes all of it to path after every
// change, so that the file lists a resource before it is made.
type lockedState[T any] struct {
	mu   sync.Mutex
	st   T
	path string
}

// update changes the document with fn and writes the file.
func (s *lockedState[T]) update(fn func(st *T)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.st)
	return writeStateJSON(s.path, s.st)
}

// get returns a copy of the document as it stands.
func (s *lockedState[T]) get() T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// dropLast removes the last resource equal to r, if any.
func dropLast(rs []Resource, r Resource) []Resource {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i] == r {
			return append(rs[:i], rs[i+1:]...)
		}
	}
	return rs
}

// writeStateJSON writes v to path (0600) through a rename, so that a
// reader sees the old file or the new one, never half of one.
func writeStateJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readStateJSON reads the state file at path into v; a file that does not
// parse is named in the error.
func readStateJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ReadState reads cluster id's state file.
func ReadState(id string) (State, error) {
	var st State
	return st, readStateJSON(statePath(id), &st)
}

// List returns the ids of the clusters with a state directory.
func List() ([]string, error) { return listIDs(BaseDir) }

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

// Clean removes everything cluster id's state file lists: it stops the
// serve process and the instances (if still ours), deletes the iptables
// chains, restores sysctls and removes the directory. Missing resources are
// not errors (CNI DEL semantics).
func Clean(ctx context.Context, id string) error {
	if !idRE.MatchString(id) {
		return usage.Errorf("cluster id %q: want 4 hex digits (see `ovpnperf cluster status`)", id)
	}
	st, err := ReadState(id)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var errs []error
	if st.ServePid > 0 && st.ServePid != os.Getpid() {
		if t, why := serveProcess(id, st); why != "" {
			errs = append(errs, fmt.Errorf("state file of %s names %s as its serve; left alone", id, why))
		} else if t != 0 {
			runner.Terminate(st.ServePid, t, 5*time.Second)
		}
	}
	for i := len(st.Resources) - 1; i >= 0; i-- {
		if err := removeResource(ctx, id, Dir(id), st.Resources[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(Dir(id)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// serveProcess returns the start time of cluster id's serve process when
// it still runs (0: it has ended), or says why the state file's serve_pid
// names no serve of this cluster: a serve is stopped only when its pid,
// its start time (recorded with it) and its command line (`cluster serve`,
// with this id if it names one) all agree. A damaged or forged state file
// must not make clean stop any process.
func serveProcess(id string, st State) (ticks uint64, why string) {
	pid := st.ServePid
	var rec *Resource
	for i, r := range st.Resources {
		if r.Kind == KindProcess && r.Name == "serve" {
			rec = &st.Resources[i]
		}
	}
	switch {
	case rec == nil || rec.StartTicks == 0:
		if _, err := startTicks(pid); err != nil {
			return 0, ""
		}
		return 0, fmt.Sprintf("process %d without its start time", pid)
	case rec.Pid != pid:
		return 0, fmt.Sprintf("process %d, but its serve entry process %d", pid, rec.Pid)
	}
	if !alive(pid, rec.StartTicks) {
		return 0, ""
	}
	if !runsServe(pid, id) {
		return 0, fmt.Sprintf("process %d, which does not run `ovpnperf cluster serve` of %s", pid, id)
	}
	return rec.StartTicks, ""
}

// runsServe reports whether process pid's command line is `… cluster
// serve …`, with --id id when it gives an id; a serve that chose its id
// (no --id) must hold the cluster's control socket.
func runsServe(pid int, id string) bool {
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
	return holdsSocket(pid, ControlPath(id))
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

func removeResource(ctx context.Context, id, dir string, r Resource) error {
	if why := notOurs(id, dir, r); why != "" {
		return fmt.Errorf("state file of %s names %s, which it does not make; left alone", id, why)
	}
	if r.Kind != KindProcess && r.Netns != "" && !netns.Exists(r.Netns) {
		// The namespace went with its rules and sysctls (a lab torn
		// down); a process may outlive it and is still checked.
		return nil
	}
	switch r.Kind {
	case KindProcess:
		if r.Name != "serve" && alive(r.Pid, r.StartTicks) && runsFrom(r.Pid, dir) {
			runner.Terminate(r.Pid, r.StartTicks, 3*time.Second)
		}
	case KindChain:
		return hostIptables.deleteChain(ctx, r)
	case KindSysctl:
		return writeSysctl(ctx, r.Netns, r.Name, r.Detail)
	case KindSysfs:
		return restoreSysfs(ctx, r)
	case KindMultipath:
		return removeMultipathResource(ctx, r)
	case KindLink:
		return removeLink(ctx, r)
	case KindNATChain:
		return deleteNATChain(ctx, r)
	}
	return nil
}

// ownSysctls are the sysctls a cluster or connect run changes (and so
// restores); their values are small integers.
var ownSysctls = append([]string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"}, MultipathHashSysctls...)

var sysctlValueRE = regexp.MustCompile(`^[0-9]{1,3}$`)

// notOurs says what r, read from the state file of cluster or connect run
// id (directory dir), names that the run does not make, "" if it could
// have made it: a state file damaged or written by someone else must not
// make clean write any sysctl, delete another's chain or device, or stop
// a process that is not one of the run's openvpns.
func notOurs(id, dir string, r Resource) string {
	switch r.Kind {
	case KindProcess:
		if r.Name != "serve" && (r.Pid <= 0 || r.StartTicks == 0) {
			return fmt.Sprintf("process %d without its start time", r.Pid)
		}
	case KindChain:
		if !strings.HasPrefix(r.Name, "ovpnperf-"+id+"-") {
			return fmt.Sprintf("iptables chain %q", r.Name)
		}
	case KindSysctl:
		if !slices.Contains(ownSysctls, r.Name) || !sysctlValueRE.MatchString(r.Detail) {
			return fmt.Sprintf("sysctl %.60q = %.20q", r.Name, r.Detail)
		}
	case KindLink:
		if !strings.HasPrefix(r.Name, "ovpnperf"+id+"t") {
			return fmt.Sprintf("link %q", r.Name)
		}
	case KindNATChain:
		if _, ok := natTool(r.Detail); !ok || r.Name != hostNATChain(id) {
			return fmt.Sprintf("nat chain %q (%.20q)", r.Name, r.Detail)
		}
	}
	return ""
}

// runsFrom reports whether process pid's command line names a file in dir
// (a cluster instance's --config, a connect tunnel's --management socket).
func runsFrom(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), dir+"/")
}

// sysctl path of key (net.ipv4.ip_forward → /proc/sys/net/ipv4/ip_forward).
func sysctlFile(key string) string { return "/proc/sys/" + strings.ReplaceAll(key, ".", "/") }

// readSysctl reads key in namespace ns (host if empty).
func readSysctl(ctx context.Context, ns, key string) (string, error) {
	out, err := inNs(ctx, ns, "sysctl", "-n", key)
	return strings.TrimSpace(string(out)), err
}

// writeSysctl sets key in ns. Equivalent to: ip netns exec NS sysctl -w KEY=VALUE
func writeSysctl(ctx context.Context, ns, key, value string) error {
	_, err := inNs(ctx, ns, "sysctl", "-q", "-w", key+"="+value)
	return err
}

func inNs(ctx context.Context, ns string, argv ...string) ([]byte, error) {
	if ns == "" {
		return runner.Run(ctx, argv...)
	}
	return runner.RunIn(ctx, ns, argv...)
}
