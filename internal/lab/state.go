package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/journal"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
)

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

// Resource is one thing a lab created: an entry of its journal, written
// before it is created, so that teardown after a crash knows about it.
type Resource = journal.Entry

// Owner identifies the process that keeps a lab alive. When it is gone the
// lab is orphaned and `ovpnperf lab clean` removes it.
type Owner struct {
	Pid        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
}

// State is the lab's state file, /run/ovpnperf/labs/NAME/state.json.
type State struct {
	Name    string       `json:"name"`
	Created time.Time    `json:"created"`
	Path    labpath.Path `json:"path"`
	Backend string       `json:"emulation_backend"`
	// BackendWhy says why (EmulationChoice): asked for, or what auto found.
	BackendWhy string `json:"emulation_backend_why,omitempty"`
	Ephemeral  bool   `json:"ephemeral"`
	Owner      Owner  `json:"owner"`
	Ready      bool   `json:"ready"`
	// Resources are the journal's entries not yet undone, oldest first
	// (kept in the journal beside this document, not in it).
	Resources []Resource `json:"resources"`
	// Hosts are the extra hosts behind the router (AddHost), in the order
	// they were added; HostsAdded counts them and numbers their segments.
	Hosts      []Host `json:"hosts,omitempty"`
	HostsAdded int    `json:"hosts_added,omitempty"`
	// Corrupt, set only by List, says why the lab's state file could not
	// be read; the other fields are then empty but Name. Such a lab is
	// reported, and removed only by `lab clean NAME`.
	Corrupt string `json:"corrupt,omitempty"`
}

// stateFile is a lab's journal: its entries and, beside them, the lab's
// document (State without Resources). A lab opened from disk (Open) opens
// the journal for writing only when it changes something.
type stateFile struct {
	mu   sync.Mutex
	dir  string // the lab's directory
	name string
	j    *journal.Journal
	st   State
}

// The files a lab keeps, read back; far larger than any real one.
var (
	statsKind = inputfile.Kind{What: "emulator statistics file", Max: 16 << 20}
	// ceilingKind is the host's `lab calibrate` record.
	ceilingKind = inputfile.Kind{What: "emulator ceiling record", Max: 16 << 20}
)

// newStateFile starts the journal of a new lab in its directory.
func newStateFile(dir string, st State) (*stateFile, error) {
	j, err := journal.Create(dir, st.Name, st)
	if err != nil {
		return nil, fmt.Errorf("writing lab state: %w", err)
	}
	return &stateFile{dir: dir, name: st.Name, j: j, st: st}, nil
}

// readState loads a lab's journal (or the state file of an earlier
// version). A damaged one is an error that satisfies errors.As with
// *journal.DamagedError; the State returned with it holds the entries read
// before the damage.
func (e Env) readState(name string) (State, error) {
	c, err := journal.Load(e.Dir(name), name)
	if errors.Is(err, os.ErrNotExist) {
		return State{}, err
	}
	st := State{Name: name}
	if len(c.Meta) > 0 {
		if jerr := json.Unmarshal(c.Meta, &st); jerr != nil && err == nil {
			err = &journal.DamagedError{Path: e.Dir(name), Why: jerr.Error()}
		}
	}
	if st.Name != name {
		// Its teardown would act on another lab's name (or a path).
		return State{Name: name}, fmt.Errorf("lab %s: %w", name, &journal.DamagedError{Path: e.Dir(name), Why: fmt.Sprintf("it names lab %q", st.Name)})
	}
	st.Resources = c.Entries
	if err != nil {
		return st, fmt.Errorf("lab %s: %w", name, err)
	}
	return st, nil
}

// corrupt reports whether err is a damaged state file.
func corrupt(err error) bool {
	var d *journal.DamagedError
	return errors.As(err, &d)
}

// open returns the journal for writing, opening it on first use.
func (s *stateFile) open() (*journal.Journal, error) {
	if s.j == nil {
		j, err := journal.Append(s.dir, s.name)
		if err != nil {
			return nil, fmt.Errorf("lab %s: %w", s.name, err)
		}
		s.j = j
	}
	return s.j, nil
}

// record writes r to the journal before returning, so the caller creates r
// only once it is on disk.
func (s *stateFile) record(r Resource) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.open()
	if err != nil {
		return err
	}
	_, err = j.Record(r)
	return err
}

// update changes the lab's document and writes it.
func (s *stateFile) update(fn func(*State)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.open()
	if err != nil {
		return err
	}
	fn(&s.st)
	s.st.Resources = nil
	return j.SetMeta(s.st)
}

// close closes the journal's file (the journal stays on disk).
func (s *stateFile) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.j != nil {
		s.j.Close()
		s.j = nil
	}
}

func (s *stateFile) snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	if s.j != nil {
		st.Resources = s.j.Contents().Entries
	} else {
		st.Resources = append([]Resource(nil), s.st.Resources...)
	}
	return st
}

// List returns the state of every lab in e.BaseDir(), sorted by name. A lab
// whose state file cannot be read is listed with Corrupt set, so that one
// damaged file hides no other lab and fails no command about another lab.
func (e Env) List() ([]State, error) {
	entries, err := os.ReadDir(e.BaseDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []State
	for _, de := range entries {
		if !de.IsDir() {
			continue
		}
		st, err := e.readState(de.Name())
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			st = State{Name: de.Name(), Corrupt: err.Error()}
		}
		out = append(out, st)
	}
	return out, nil
}
