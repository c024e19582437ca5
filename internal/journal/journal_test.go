package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/journal"
)

type meta struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
}

func TestRecordDoneMeta(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	j, err := journal.Create(dir, "r1", meta{Name: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	a, _ := j.Record(journal.Entry{Kind: "netns", Name: "ovpnperf-r1-a"})
	b, _ := j.Record(journal.Entry{Kind: "netns", Name: "ovpnperf-r1-b"})
	if _, err := j.Record(journal.Entry{Kind: "process", Name: "p", Pid: 7, StartTicks: 9, Argv: []string{"sleep", "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := j.Done(a); err != nil {
		t.Fatal(err)
	}
	if err := j.SetMeta(meta{Name: "r1", Ready: true}); err != nil {
		t.Fatal(err)
	}
	c, err := journal.Load(dir, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var m meta
	if err := json.Unmarshal(c.Meta, &m); err != nil || !m.Ready {
		t.Errorf("meta %s (%v), want the last one written", c.Meta, err)
	}
	var names []string
	for _, e := range c.Entries {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, []string{"ovpnperf-r1-b", "p"}) || c.Entries[0].Seq != b || !slices.Equal(c.Entries[1].Argv, []string{"sleep", "1"}) {
		t.Errorf("entries %+v, want b and p (a done)", c.Entries)
	}
	// Appending from another process continues the numbering.
	j2, err := journal.Append(dir, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if seq, _ := j2.Record(journal.Entry{Kind: "netns", Name: "ovpnperf-r1-c"}); seq != 4 {
		t.Errorf("next seq %d, want 4", seq)
	}
	j2.Close()
	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, journal.File): 0o600} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}
}

// A journal cut short (the writer killed mid-line), damaged in the middle,
// of another run, or not a regular file: one line, and only what came
// before the damage.
func TestDamagedJournal(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Create(dir, "r2", meta{Name: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	j.Record(journal.Entry{Kind: "netns", Name: "ovpnperf-r2-a"})
	j.Record(journal.Entry{Kind: "netns", Name: "ovpnperf-r2-b"})
	j.Close()
	path := filepath.Join(dir, journal.File)
	whole, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(whole), "\n")
	for _, c := range []struct {
		name, text, run string
		entries         int
		why             string
	}{
		{"cut in the last entry", strings.Join(lines[:3], "") + lines[3][:10], "r2", 1, "line 4 is cut short"},
		{"garbage in the middle", strings.Join(lines[:3], "") + "{x\n" + lines[3], "r2", 1, "line 4"},
		{"an unknown operation", strings.Join(lines[:3], "") + `{"op":"undo"}` + "\n", "r2", 1, "line 4 is no journal line"},
		{"cut in the header", lines[0][:20], "r2", 0, "line 1 is cut short"},
		{"no header", lines[1], "r2", 0, "no journal header"},
		{"another run's", string(whole), "r3", 0, `journal of "r2"`},
		{"empty", "", "r2", 0, "empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := journal.Load(dir, c.run)
			var d *journal.DamagedError
			if !errors.As(err, &d) || !strings.Contains(err.Error(), c.why) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line saying %q", err, c.why)
			}
			if len(got.Entries) != c.entries {
				t.Errorf("%d entries, want the %d before the damage", len(got.Entries), c.entries)
			}
			if _, err := journal.Append(dir, c.run); err == nil {
				t.Error("appending to a damaged journal")
			}
		})
	}
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// A blocking open of a FIFO would wait for a writer for ever.
	if _, err := journal.Load(dir, "r2"); err == nil || !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("a FIFO as journal: %v", err)
	}
	os.Remove(path)
	if _, err := journal.Load(dir, "r2"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no journal: %v, want not exist", err)
	}
}

// The state file of an earlier version is read, refused when it names
// another run, and carried into a journal when the run goes on.
func TestLegacyStateFile(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, journal.LegacyFile)
	os.WriteFile(legacy, []byte(`{"name":"old","ready":true,"resources":[{"kind":"netns","name":"ovpnperf-old-a"},{"kind":"process","name":"x","pid":5,"start_ticks":6}]}`), 0o600)
	c, err := journal.Load(dir, "old")
	if err != nil || !c.Legacy || len(c.Entries) != 2 || c.Entries[1].Pid != 5 {
		t.Fatalf("legacy: %+v, %v", c, err)
	}
	if _, err := journal.Load(dir, "new"); err == nil || !strings.Contains(err.Error(), `it names "old"`) {
		t.Errorf("legacy file of another run: %v", err)
	}
	j, err := journal.Append(dir, "old")
	if err != nil {
		t.Fatal(err)
	}
	j.Record(journal.Entry{Kind: "netns", Name: "ovpnperf-old-b"})
	j.Close()
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("legacy file kept beside the journal: %v", err)
	}
	c, err = journal.Load(dir, "old")
	var m meta
	json.Unmarshal(c.Meta, &m)
	if err != nil || c.Legacy || len(c.Entries) != 3 || !m.Ready {
		t.Errorf("carried over: %+v, %v", c, err)
	}
}

// fakeHost is a machine for undo: processes, namespaces and sysctls in
// maps, and a log of what was done to them.
type fakeHost struct {
	procs   map[int]journal.Process
	netns   map[string]bool
	sysctls map[string]string
	log     []string
}

func (h *fakeHost) actions(run string) map[string]journal.Action {
	return map[string]journal.Action{
		"process": journal.Processes{
			Lookup: func(pid int) (journal.Process, bool) { p, ok := h.procs[pid]; return p, ok },
			Terminate: func(pid int, ticks uint64) {
				h.log = append(h.log, fmt.Sprintf("kill %d", pid))
				delete(h.procs, pid)
			},
		}.Undo,
		"netns": func(_ context.Context, e journal.Entry) error {
			if why := journal.NamespaceOwned("ovpnperf-"+run+"-", e.Name); why != "" {
				return journal.Foreign("%s", why)
			}
			if h.netns[e.Name] {
				h.log = append(h.log, "del "+e.Name)
				delete(h.netns, e.Name)
			}
			return nil
		},
		"chain": func(_ context.Context, e journal.Entry) error {
			if why := journal.ChainOwned(run, e.Name); why != "" {
				return journal.Foreign("%s", why)
			}
			h.log = append(h.log, "chain "+e.Name)
			return nil
		},
		"sysctl": journal.Sysctls{
			Read: func(_ context.Context, _, key string) (string, error) { return h.sysctls[key], nil },
			Write: func(_ context.Context, _, key, v string) error {
				h.log = append(h.log, "sysctl "+key+"="+v)
				h.sysctls[key] = v
				return nil
			},
			Allowed: func(key, v string) string {
				if !strings.HasPrefix(key, "net.") || len(v) != 1 {
					return fmt.Sprintf("sysctl %q = %q", key, v)
				}
				return ""
			},
		}.Undo,
	}
}

// Undo goes newest first, marks each entry done, and a second undo does
// nothing; objects already gone are done too.
func TestUndoReverseIdempotent(t *testing.T) {
	h := &fakeHost{
		procs:   map[int]journal.Process{10: {StartTicks: 100, Argv: []string{"openvpn", "--config", "a"}}},
		netns:   map[string]bool{"ovpnperf-r4-a": true},
		sysctls: map[string]string{"net.x": "1"},
	}
	dir := t.TempDir()
	j, err := journal.Create(dir, "r4", meta{Name: "r4"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, e := range []journal.Entry{
		{Kind: "netns", Name: "ovpnperf-r4-a"},
		{Kind: "netns", Name: "ovpnperf-r4-gone"},
		{Kind: "sysctl", Name: "net.x", Detail: "0", Set: "1"},
		{Kind: "chain", Name: "ovpnperf-r4-udp"},
		// Recorded with ip netns exec; /proc shows the program after the exec.
		{Kind: "process", Name: "openvpn", Pid: 10, StartTicks: 100, Argv: []string{"ip", "netns", "exec", "ovpnperf-r4-a", "openvpn", "--config", "a"}},
	} {
		if _, err := j.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	r := j.Undo(context.Background(), h.actions("r4"))
	if len(r.Foreign) != 0 || len(r.Errs) != 0 {
		t.Errorf("undo: %+v", r)
	}
	want := []string{"kill 10", "chain ovpnperf-r4-udp", "sysctl net.x=0", "del ovpnperf-r4-a"}
	if !slices.Equal(h.log, want) {
		t.Errorf("undo did %q, want %q", h.log, want)
	}
	c, err := journal.Load(dir, "r4")
	if err != nil || len(c.Entries) != 0 {
		t.Errorf("after undo the journal lists %+v (%v), want nothing", c.Entries, err)
	}
	h.log = nil
	if r := j.Undo(context.Background(), h.actions("r4")); len(h.log) != 0 || len(r.Done) != 0 {
		t.Errorf("second undo did %q", h.log)
	}
	// The same entries again, read by another process that never saw
	// them undone: everything is gone, so everything is done.
	r = journal.Undo(context.Background(), []journal.Entry{{Kind: "netns", Name: "ovpnperf-r4-a"}, {Kind: "process", Pid: 10, StartTicks: 100, Argv: []string{"openvpn"}}}, h.actions("r4"))
	if len(h.log) != 0 || len(r.Done) != 2 {
		t.Errorf("undo of what is gone did %q, %+v", h.log, r)
	}
}

// A damaged or forged journal names what the run did not make; none of it
// is touched, each is said, and what is the run's is still undone.
func TestUndoLeavesWhatItDidNotMake(t *testing.T) {
	h := &fakeHost{
		procs: map[int]journal.Process{
			1:  {StartTicks: 1, Argv: []string{"/sbin/init"}},
			20: {StartTicks: 200, Argv: []string{"sleep", "60"}},
			21: {StartTicks: 210, Argv: []string{"openvpn", "--config", "x"}},
			22: {StartTicks: 220, Argv: []string{"iperf3", "-s"}},
		},
		netns:   map[string]bool{"ovpnperf-r5x-router": true, "ovpnperf-r5-router": true},
		sysctls: map[string]string{"net.x": "1", "net.y": "5", "kernel.core_pattern": "core"},
	}
	entries := []journal.Entry{
		{Kind: "netns", Name: "ovpnperf-r5-router"},
		{Kind: "netns", Name: "ovpnperf-r5x-router"},                                            // another run's
		{Kind: "netns", Name: "ovpnperf-r5-../../etc"},                                          // a path
		{Kind: "process", Pid: 1},                                                               // no start time
		{Kind: "process", Pid: 20, StartTicks: 200, Argv: []string{"openvpn", "--config", "x"}}, // a stranger's pid and start time
		{Kind: "process", Pid: 21, StartTicks: 999, Argv: []string{"openvpn", "--config", "x"}}, // pid recycled
		{Kind: "process", Pid: 22, StartTicks: 220},                                             // no command line
		{Kind: "chain", Name: "ovpnperf-ffff-udp"},
		{Kind: "sysctl", Name: "kernel.core_pattern", Detail: "|/tmp/x"},
		{Kind: "sysctl", Name: "net.y", Detail: "0", Set: "1"}, // changed since by someone else
		{Kind: "file", Name: "/etc/passwd"},
	}
	r := journal.Undo(context.Background(), entries, h.actions("r5"))
	for _, want := range []string{`namespace "ovpnperf-r5x-router"`, `namespace "ovpnperf-r5-../../etc"`,
		"process 1 without its start time", `process 20, which runs "sleep 60"`, "process 22 without its command line",
		`iptables chain "ovpnperf-ffff-udp"`, `sysctl "kernel.core_pattern"`, `"file" "/etc/passwd"`} {
		if !slices.ContainsFunc(r.Foreign, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("undo does not report %s: %q", want, r.Foreign)
		}
	}
	if len(r.Foreign) != 8 {
		t.Errorf("%d foreign entries, want 8: %q", len(r.Foreign), r.Foreign)
	}
	if want := []string{"del ovpnperf-r5-router"}; !slices.Equal(h.log, want) {
		t.Errorf("undo did %q, want only %q", h.log, want)
	}
	if h.sysctls["net.y"] != "5" || h.sysctls["kernel.core_pattern"] != "core" {
		t.Errorf("sysctls %v changed", h.sysctls)
	}
}

// A process without a command line (a kernel thread here; an exiting
// process likewise, for the moment between freeing its memory and
// becoming a zombie) is nothing a run stops: ReadProcess reports it as
// gone, so undo neither stops it nor calls it foreign.
func TestReadProcessWithoutCommandLine(t *testing.T) {
	b, err := os.ReadFile("/proc/2/cmdline")
	if err != nil || len(b) != 0 {
		t.Fatalf("pid 2 is not a kernel thread here (%v, %q): the test needs one", err, b)
	}
	if p, ok := journal.ReadProcess(2); ok {
		t.Errorf("ReadProcess(2) = %+v, true: a kernel thread read as a process a run could own", p)
	}
	if p, ok := journal.ReadProcess(os.Getpid()); !ok || len(p.Argv) == 0 || p.StartTicks == 0 {
		t.Errorf("ReadProcess(self) = %+v, %v", p, ok)
	}
}
