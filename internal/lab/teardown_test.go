package lab_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/emulate"
	"github.com/ovpnperf/ovpnperf/internal/journal"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/runner/runnertest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// writeState puts a state file for lab name under env as a damaged or
// forged one would be: whatever st says.
func writeState(t *testing.T, env lab.Env, name string, st any) {
	t.Helper()
	dir := env.Dir(name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDownTouchesOnlyItsOwn gives lab down and lab clean state files that
// name what the lab did not make: another lab's namespace, a process
// outside the lab's namespaces (by pid and start time, and by pid alone
// as the owner), a file, and a lab name that is a path out of the labs'
// directory. All of it must survive; the error says what was left alone.
func TestDownTouchesOnlyItsOwn(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	dir := t.TempDir()
	env := lab.Env{Base: filepath.Join(dir, "labs")}

	name := "h" + lab.NewName()
	// Another lab's namespace: lab NAMEx's router, not lab NAME's.
	foreignNS := "ovpnperf-" + name + "x-router"
	if err := netns.Create(foreignNS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(foreignNS) })
	sleep, ticks := runnertest.Sleeper(t)
	pid := sleep.Process.Pid
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A namespace name that is a path to a file (netns.Delete removes
	// what the name reaches).
	victimNS := filepath.Join(dir, "victim-ns")
	if err := os.WriteFile(victimNS, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	relNS, err := filepath.Rel(netns.Dir, victimNS)
	if err != nil {
		t.Fatal(err)
	}
	writeState(t, env, name, map[string]any{
		"name":  name,
		"owner": map[string]any{"pid": pid},
		"resources": []map[string]any{
			{"kind": "netns", "name": foreignNS},
			{"kind": "netns", "name": relNS},
			{"kind": "process", "name": "sleep", "pid": pid, "start_ticks": ticks},
			{"kind": "file", "name": victim},
		},
	})
	l, err := env.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	err = l.Down()
	if err == nil || !strings.Contains(err.Error(), "left alone") || !strings.Contains(err.Error(), foreignNS) || strings.Contains(err.Error(), "\n") {
		t.Errorf("lab down of a state naming what is not the lab's: want one line saying what was left alone, got %v", err)
	}
	if !runner.Alive(pid, ticks) {
		t.Error("lab down killed a process outside the lab's namespaces")
	}
	if !netns.Exists(foreignNS) {
		t.Error("lab down deleted another lab's namespace")
	}
	for _, p := range []string{victim, victimNS} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("lab down removed %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(env.Base, name)); !os.IsNotExist(err) {
		t.Errorf("lab down left the lab's own directory: %v", err)
	}

	// A state file naming another lab (here a path): its teardown would
	// remove that lab's directory, or any directory.
	outside := filepath.Join(dir, "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	name2 := "h" + lab.NewName()
	writeState(t, env, name2, map[string]any{"name": "../outside", "owner": map[string]any{"pid": pid}})
	if _, err := env.Open(name2); err == nil || !strings.Contains(err.Error(), "corrupt state file") || !strings.Contains(err.Error(), "lab clean "+name2) {
		t.Errorf("open of a state naming another lab: want a corrupt state error pointing to lab clean, got %v", err)
	}
	if _, err := env.Clean(name2); err != nil {
		t.Errorf("lab clean %s: %v", name2, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("lab clean of a state naming ../outside removed it: %v", err)
	}
	if _, err := os.Stat(filepath.Join(env.Base, name2)); !os.IsNotExist(err) {
		t.Errorf("lab clean left the corrupt lab's directory: %v", err)
	}
	if !runner.Alive(pid, ticks) {
		t.Error("lab clean killed a process outside the lab's namespaces")
	}
}

// returnsWhileFIFOSilent runs read, which reads fifo, and fails the test if
// it is still blocked after 10 s (a blocking open of a FIFO waits for a
// writer forever); it then opens the FIFO for writing to release it.
func returnsWhileFIFOSilent(t *testing.T, fifo string, read func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { read(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("reading %s: still blocked after 10 s", fifo)
		// Release each blocked open in turn until read is done.
		for {
			if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// The files a lab keeps, and the host's ceiling record, replaced by a FIFO
// (a device would do the same with memory): every command listing the labs
// would hang on it. Each is refused at once as unreadable.
func TestLabFilesAreRegularFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := lab.Env{Base: filepath.Join(dir, "labs"), Ceiling: filepath.Join(dir, "ceiling.json")}
	mkfifo := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	name := "h" + lab.NewName()
	state := filepath.Join(env.Base, name, "state.json")
	mkfifo(state)
	returnsWhileFIFOSilent(t, state, func() {
		states, err := env.List()
		if err != nil || len(states) != 1 || !strings.Contains(states[0].Corrupt, "FIFO") || strings.Contains(states[0].Corrupt, "\n") {
			t.Errorf("list with a FIFO as state file: want the lab corrupt, one line naming the FIFO, got %+v, %v", states, err)
		}
		if _, err := env.Open(name); err == nil || !strings.Contains(err.Error(), "corrupt state file") {
			t.Errorf("open with a FIFO as state file: %v", err)
		}
	})

	name2 := "h" + lab.NewName()
	writeState(t, env, name2, map[string]any{"name": name2, "emulation_backend": "nfqueue"})
	stats := filepath.Join(env.Base, name2, "stats.json")
	mkfifo(stats)
	returnsWhileFIFOSilent(t, stats, func() {
		l, err := env.Open(name2)
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := l.Stats(); err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("stats from a FIFO: %v", err)
		}
	})

	mkfifo(env.Ceiling)
	returnsWhileFIFOSilent(t, env.Ceiling, func() {
		r := env.EmulationCeiling("nfqueue")
		if r == nil || r.Status != emulate.CeilingNotMeasured || !strings.Contains(r.Summary, "unreadable") || !strings.Contains(r.Summary, "FIFO") {
			t.Errorf("ceiling record that is a FIFO: %+v", r)
		}
	})
}

// A lab journal naming a live process by its pid and start time with
// another command line (a forged entry, or a damaged one): lab down leaves
// the process alone and says so; the lab's own entries are still undone.
func TestDownChecksCommandLine(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	env := lab.Env{Base: filepath.Join(t.TempDir(), "labs")}
	sleep, ticks := runnertest.Sleeper(t)
	pid := sleep.Process.Pid
	name := "h" + lab.NewName()
	j, err := journal.Create(filepath.Join(env.Base, name), name, lab.State{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []journal.Entry{
		{Kind: lab.KindDir, Name: filepath.Join(env.Base, name)},
		{Kind: lab.KindNetns, Name: "ovpnperf-" + name + "-router"},
		{Kind: lab.KindProcess, Name: "iperf3", Pid: pid, StartTicks: ticks, Argv: []string{"ip", "netns", "exec", "ovpnperf-" + name + "-router", "iperf3", "-s"}},
	} {
		if _, err := j.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	l, err := env.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	err = l.Down()
	if err == nil || !strings.Contains(err.Error(), "left alone") || !strings.Contains(err.Error(), `which runs "sleep 600"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("lab down of a journal naming another command: want one line saying what was left alone, got %v", err)
	}
	if !runner.Alive(pid, ticks) {
		t.Error("lab down killed a process whose command line is not the recorded one")
	}
	if _, err := os.Stat(filepath.Join(env.Base, name)); !os.IsNotExist(err) {
		t.Errorf("lab down left the lab's own directory: %v", err)
	}
}

// A lab journal cut short: `lab status` says where it breaks off, `lab
// clean` leaves it, `lab clean NAME` undoes the entries before the damage
// (here a process of the lab) and nothing the cut line began to name.
func TestCleanActsOnlyOnWhatParsed(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	env := lab.Env{Base: filepath.Join(t.TempDir(), "labs")}
	before, beforeTicks := runnertest.Sleeper(t)
	after, afterTicks := runnertest.Sleeper(t)
	name := "h" + lab.NewName()
	dir := filepath.Join(env.Base, name)
	j, err := journal.Create(dir, name, lab.State{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*exec.Cmd{before, after} {
		ticks := beforeTicks
		if c == after {
			ticks = afterTicks
		}
		if _, err := j.Record(journal.Entry{Kind: lab.KindProcess, Name: "sleep", Pid: c.Process.Pid, StartTicks: ticks, Argv: c.Args}); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	path := filepath.Join(dir, journal.File)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The last line loses its end, as a write cut by a crash would.
	if err := os.WriteFile(path, b[:len(b)-20], 0o600); err != nil {
		t.Fatal(err)
	}
	states, err := env.List()
	if err != nil || len(states) != 1 || !strings.Contains(states[0].Corrupt, "line 4 is cut short") || strings.Contains(states[0].Corrupt, "\n") {
		t.Errorf("status of a journal cut short: want one line saying where, got %+v, %v", states, err)
	}
	if cleaned, err := env.Clean(); len(cleaned) != 0 || err == nil || !strings.Contains(err.Error(), "left alone") {
		t.Errorf("lab clean with a journal cut short: cleaned %v, %v; want it left alone and said", cleaned, err)
	}
	if _, err := env.Clean(name); err != nil {
		t.Errorf("lab clean %s: %v", name, err)
	}
	if runner.Alive(before.Process.Pid, beforeTicks) {
		t.Error("the process listed before the damage still runs")
	}
	if !runner.Alive(after.Process.Pid, afterTicks) {
		t.Error("lab clean stopped the process named only in the line cut short")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("lab clean left the lab's directory: %v", err)
	}
}
