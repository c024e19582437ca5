// Package journal is the one record of what an ovpnperf run changes on a
// host: a lab, a cluster, a `cluster connect` run. Every change is written
// to the run's journal, and the file synced, before the change is made; the
// run's owner, or `clean` after a crash, undoes the entries newest first.
//
// The journal is a file of JSON lines in the run's directory (0700),
// itself 0600:
//
//	{"journal":"ovpnperf/journal/v1","run":"ID"}   header
//	{"op":"meta","meta":{…}}                       the owner's document (last wins)
//	{"op":"do","entry":{"seq":1,"kind":…}}          an entry, before its change
//	{"op":"done","seq":1}                          entry 1 undone, or its object gone
//
// Lines are only ever appended, each with one write and an fsync, so a
// crash leaves at worst a last line cut short. Reading stops at the first
// line that is incomplete or does not parse and says so in one line: what
// came before it is all that any command acts on. (An entry cut short was
// never acted on: its change is made only after the write returned.)
//
// The journal trusts no entry it reads: undoing goes through an Action per
// kind, and each says whether the object is still the run's (a namespace
// named with the run's prefix, a process whose pid, start time and command
// line all match the entry, a chain named with the run's id, a sysctl still
// at the value the run set). An entry that fails is left alone and
// reported; an entry whose object is gone is done (CNI DEL semantics).
package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Schema names the format in the header line.
const Schema = "ovpnperf/journal/v1"

// File is the journal's name in a run's directory; LegacyFile is the
// state file of earlier versions, read (never written) by Load.
const (
	File       = "journal.jsonl"
	LegacyFile = "state.json"
)

// maxSize bounds a journal read back: far larger than any real one, small
// enough that a damaged or forged file cannot exhaust memory.
const maxSize = 16 << 20

// Entry is one change to the host, recorded before it is made.
type Entry struct {
	// Seq numbers the entries of one journal from 1; a done line names it.
	Seq  int    `json:"seq,omitempty"`
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Netns is the namespace the object lives in, if any.
	Netns string `json:"netns,omitempty"`
	// Pid, StartTicks and Argv identify a process: a recycled pid has
	// another start time, and another program another command line.
	Pid        int      `json:"pid,omitempty"`
	StartTicks uint64   `json:"start_ticks,omitempty"`
	Argv       []string `json:"argv,omitempty"`
	// Detail is the kind's own data (a sysctl's value before the run).
	Detail string `json:"detail,omitempty"`
	// Set is the value the run wrote (a sysctl): it is restored only while
	// it still holds this one.
	Set string `json:"set,omitempty"`
}

type header struct {
	Journal string `json:"journal"`
	Run     string `json:"run"`
}

type line struct {
	Op    string          `json:"op"`
	Entry *Entry          `json:"entry,omitempty"`
	Seq   int             `json:"seq,omitempty"`
	Meta  json.RawMessage `json:"meta,omitempty"`
}

// Contents is a journal as read: the owner's document and the entries not
// yet done, oldest first.
type Contents struct {
	Run     string
	Meta    json.RawMessage
	Entries []Entry
	// Legacy is set when the contents come from an earlier version's
	// state file.
	Legacy bool
}

// DamagedError is a journal that could not be read to its end: Contents
// returned with it hold what came before the damage.
type DamagedError struct {
	Path string
	Why  string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("corrupt state file %s (%s)", e.Path, e.Why)
}

// Journal is an open journal that this process appends to.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
	c    Contents
	seq  int
}

// Create starts the journal of run in dir (made 0700 if it is not there)
// with the owner's first document, and syncs it and the directory.
func Create(dir, run string, meta any) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, File)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating journal: %w", err)
	}
	j := &Journal{f: f, path: path, c: Contents{Run: run}}
	h, _ := json.Marshal(header{Journal: Schema, Run: run})
	if err := j.write(h); err != nil {
		f.Close()
		return nil, err
	}
	if err := j.SetMeta(meta); err != nil {
		f.Close()
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

// Append opens run's journal in dir for further entries. An earlier
// version's state file is carried over into a new journal (and removed),
// so that one run keeps one file.
func Append(dir, run string) (*Journal, error) {
	c, err := load(dir, run)
	if err != nil {
		return nil, err
	}
	if c.Legacy {
		j, err := Create(dir, run, c.Meta)
		if err != nil {
			return nil, err
		}
		for _, e := range c.Entries {
			e.Seq = 0
			if _, err := j.Record(e); err != nil {
				j.Close()
				return nil, err
			}
		}
		if err := os.Remove(filepath.Join(dir, LegacyFile)); err != nil {
			j.Close()
			return nil, err
		}
		return j, nil
	}
	path := filepath.Join(dir, File)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("opening journal: %w", err)
	}
	return &Journal{f: f, path: path, c: c.Contents, seq: c.maxSeq}, nil
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }

// Close closes the file; the journal stays on disk.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}

// Record appends e and syncs the file; make the change only once it
// returned without error. It returns e's sequence number, for Done.
func (j *Journal) Record(e Entry) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	e.Seq = j.seq
	b, err := json.Marshal(line{Op: "do", Entry: &e})
	if err != nil {
		return 0, err
	}
	if err := j.write(b); err != nil {
		return 0, err
	}
	j.c.Entries = append(j.c.Entries, e)
	return e.Seq, nil
}

// Done marks entry seq undone (or its object gone by itself: a process
// that exited).
func (j *Journal) Done(seq int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	b, _ := json.Marshal(line{Op: "done", Seq: seq})
	if err := j.write(b); err != nil {
		return err
	}
	j.c.Entries = dropSeq(j.c.Entries, seq)
	return nil
}

// SetMeta replaces the owner's document (the lab's path, its owner
// process …); the last one written is the one read.
func (j *Journal) SetMeta(meta any) error {
	m, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	b, err := json.Marshal(line{Op: "meta", Meta: m})
	if err != nil {
		return err
	}
	if err := j.write(b); err != nil {
		return err
	}
	j.c.Meta = m
	return nil
}

// Contents returns what the journal holds now.
func (j *Journal) Contents() Contents {
	j.mu.Lock()
	defer j.mu.Unlock()
	c := j.c
	c.Entries = append([]Entry(nil), j.c.Entries...)
	return c
}

// write appends one line with a single write and syncs it.
func (j *Journal) write(b []byte) error {
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("writing journal %s: %w", j.path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func dropSeq(es []Entry, seq int) []Entry {
	for i, e := range es {
		if e.Seq == seq {
			return append(es[:i:i], es[i+1:]...)
		}
	}
	return es
}

// Exists reports whether dir holds a journal (or an earlier version's
// state file), whatever its state.
func Exists(dir string) bool {
	for _, n := range []string{File, LegacyFile} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}

// Load reads run's journal in dir, or the state file an earlier version
// wrote there. No file: an error satisfying errors.Is(err,
// os.ErrNotExist). A file that is not a regular one, too large, cut short
// or damaged: a *DamagedError (one line) with the Contents read before the
// damage; a journal of another run: a *DamagedError and nothing.
func Load(dir, run string) (Contents, error) {
	c, err := load(dir, run)
	return c.Contents, err
}

func load(dir, run string) (parsed, error) {
	path := filepath.Join(dir, File)
	b, err := readFile(path)
	if errors.Is(err, os.ErrNotExist) {
		c, err := loadLegacy(filepath.Join(dir, LegacyFile), run)
		return parsed{Contents: c}, err
	}
	if err != nil {
		return parsed{}, &DamagedError{Path: path, Why: err.Error()}
	}
	c, err := parse(b, run)
	if err != nil {
		err.(*DamagedError).Path = path
	}
	return c, err
}

// parsed is a journal read, with its highest sequence number (done
// entries included) for the next entry.
type parsed struct {
	Contents
	maxSeq int
}

func parse(b []byte, run string) (parsed, error) {
	var c parsed
	n := 0
	for len(b) > 0 {
		n++
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return c, &DamagedError{Why: fmt.Sprintf("line %d is cut short", n)}
		}
		text := b[:i]
		b = b[i+1:]
		if n == 1 {
			var h header
			if err := json.Unmarshal(text, &h); err != nil || h.Journal != Schema {
				return parsed{}, &DamagedError{Why: "no journal header"}
			}
			if h.Run != run {
				return parsed{}, &DamagedError{Why: fmt.Sprintf("it is the journal of %.40q", h.Run)}
			}
			c.Run = run
			continue
		}
		var l line
		if err := json.Unmarshal(text, &l); err != nil {
			return c, &DamagedError{Why: fmt.Sprintf("line %d: %v", n, err)}
		}
		switch {
		case l.Op == "do" && l.Entry != nil && l.Entry.Seq > c.maxSeq:
			c.maxSeq = l.Entry.Seq
			c.Entries = append(c.Entries, *l.Entry)
		case l.Op == "done" && l.Seq > 0:
			c.Entries = dropSeq(c.Entries, l.Seq)
		case l.Op == "meta" && len(l.Meta) > 0:
			c.Meta = l.Meta
		default:
			return c, &DamagedError{Why: fmt.Sprintf("line %d is no journal line", n)}
		}
	}
	if n == 0 {
		return c, &DamagedError{Why: "empty"}
	}
	return c, nil
}

// loadLegacy reads the state file of an earlier version: one JSON
// document, the owner's fields and "resources", which have the fields of
// an Entry. Its name field ("name" of a lab, "id" of a cluster or connect
// run) must be run.
func loadLegacy(path, run string) (Contents, error) {
	b, err := readFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Contents{}, err
	}
	if err != nil {
		return Contents{}, &DamagedError{Path: path, Why: err.Error()}
	}
	var doc struct {
		Name      *string `json:"name"`
		ID        *string `json:"id"`
		Resources []Entry `json:"resources"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return Contents{}, &DamagedError{Path: path, Why: err.Error()}
	}
	named := ""
	switch {
	case doc.Name != nil:
		named = *doc.Name
	case doc.ID != nil:
		named = *doc.ID
	}
	if named != run {
		// Its teardown would act on another run's name (or a path).
		return Contents{}, &DamagedError{Path: path, Why: fmt.Sprintf("it names %q", named)}
	}
	for i := range doc.Resources {
		doc.Resources[i].Seq = i + 1
	}
	return Contents{Run: run, Meta: b, Entries: doc.Resources, Legacy: true}, nil
}

// readFile reads a journal as any input is read: a FIFO or a device in
// its place (a damaged or forged directory) must neither hang nor exhaust
// the command, and a link is not followed.
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errors.New("a symbolic link, not a regular file")
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file but a %s", fileType(fi.Mode()))
	}
	b, err := io.ReadAll(bufio.NewReader(io.LimitReader(f, maxSize+1)))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSize {
		return nil, fmt.Errorf("larger than %d MiB", maxSize>>20)
	}
	return b, nil
}

func fileType(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}
