package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/inputfile"
)

// BaseDir holds one directory per lab: its state file, emulator statistics,
// logs and keys. /run is a tmpfs, so a reboot (which also ends every
// namespace) leaves no stale state behind.
var BaseDir = "/run/ovpnperf/labs"

// Resource kinds recorded in a lab's state file.
const (
	KindDir       = "dir"       // the lab directory
	KindNetns     = "netns"     // a named network namespace
	KindLink      = "link"      // a veth pair (lives in the lab's namespaces)
	KindQdisc     = "qdisc"     // a qdisc (lives on a lab link)
	KindIptables  = "iptables"  // a rule (lives in the router namespace)
	KindProcess   = "process"   // a process started for the lab
	KindEmulation = "emulation" // the userspace emulator (runs in the owner)
)

// Resource is one thing a lab created. It is written to the state file
// before it is created, so that teardown after a crash knows about it.
type Resource struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Netns is the namespace the resource lives in, if any; deleting that
	// namespace removes the resource with it.
	Netns string `json:"netns,omitempty"`
	// Pid and StartTicks identify a process; the start time guards against
	// a recycled pid.
	Pid        int    `json:"pid,omitempty"`
	StartTicks uint64 `json:"start_ticks,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// Owner identifies the process that keeps a lab alive. When it is gone the
// lab is orphaned and `ovpnperf lab clean` removes it.
type Owner struct {
	Pid        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
}

// State is the lab's state file, /run/ovpnperf/labs/NAME/state.json.
type State struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Path    Path      `json:"path"`
	Backend string    `json:"emulation_backend"`
	// BackendWhy says why (EmulationChoice): asked for, or what auto found.
	BackendWhy string     `json:"emulation_backend_why,omitempty"`
	Ephemeral  bool       `json:"ephemeral"`
	Owner      Owner      `json:"owner"`
	Ready      bool       `json:"ready"`
	Resources  []Resource `json:"resources"`
	// Hosts are the extra hosts behind the router (AddHost), in the order
	// they were added; HostsAdded counts them and numbers their segments.
	Hosts      []Host `json:"hosts,omitempty"`
	HostsAdded int    `json:"hosts_added,omitempty"`
	// Corrupt, set only by List, says why the lab's state file could not
	// be read; the other fields are then empty but Name. Such a lab is
	// reported, and removed only by `lab clean NAME`.
	Corrupt string `json:"corrupt,omitempty"`
}

// stateFile guards the on-disk state of one lab.
type stateFile struct {
	mu   sync.Mutex
	path string
	st   State
}

func labDir(name string) string { return filepath.Join(BaseDir, name) }

func statePath(name string) string { return filepath.Join(labDir(name), "state.json") }

// The files a lab keeps, read back; far larger than any real one.
var (
	stateKind = inputfile.Kind{What: "lab state file", Max: 16 << 20}
	statsKind = inputfile.Kind{What: "emulator statistics file", Max: 16 << 20}
	// ceilingKind is the host's `lab calibrate` record.
	ceilingKind = inputfile.Kind{What: "emulator ceiling record", Max: 16 << 20}
)

// errCorrupt marks a state file that cannot be read as one.
var errCorrupt = errors.New("corrupt state file")

// readState loads a lab's state file.
func readState(name string) (State, error) {
	var st State
	// Read as any input is: a FIFO or a device in its place (a damaged
	// or forged directory) must not hang or exhaust every command that
	// lists the labs.
	b, err := inputfile.ReadFile(context.Background(), statePath(name), stateKind)
	if errors.Is(err, os.ErrNotExist) {
		return st, err
	}
	if err != nil {
		return st, fmt.Errorf("lab %s: %w %s (%s)", name, errCorrupt, statePath(name), inputfile.Reason(err))
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("lab %s: %w %s (%v)", name, errCorrupt, statePath(name), err)
	}
	if st.Name != name {
		// Its teardown would act on another lab's name (or a path).
		return State{}, fmt.Errorf("lab %s: %w %s (it names lab %q)", name, errCorrupt, statePath(name), st.Name)
	}
	return st, nil
}

// record appends r to the state and writes the file before returning, so the
// caller creates r only once it is on disk.
func (s *stateFile) record(r Resource) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Resources = append(s.st.Resources, r)
	return s.writeLocked()
}

func (s *stateFile) update(fn func(*State)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.st)
	return s.writeLocked()
}

func (s *stateFile) snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Resources = append([]Resource(nil), s.st.Resources...)
	return st
}

// writeLocked replaces the state file atomically (write a temporary file,
// fsync it, rename it over the state file, fsync the directory): a reader
// sees the old state or the new one, never half of one.
func (s *stateFile) writeLocked() error {
	b, err := json.MarshalIndent(s.st, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("writing lab state: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("writing lab state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("writing lab state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing lab state: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("writing lab state: %w", err)
	}
	// The rename is durable only once the directory is on disk too.
	d, err := os.Open(filepath.Dir(s.path))
	if err != nil {
		return fmt.Errorf("writing lab state: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("writing lab state: %w", err)
	}
	return nil
}

// List returns the state of every lab on this host, sorted by name. A lab
// whose state file cannot be read is listed with Corrupt set, so that one
// damaged file hides no other lab and fails no command about another lab.
func List() ([]State, error) {
	entries, err := os.ReadDir(BaseDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []State
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		st, err := readState(e.Name())
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			st = State{Name: e.Name(), Corrupt: err.Error()}
		}
		out = append(out, st)
	}
	return out, nil
}
