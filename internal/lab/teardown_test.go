package lab_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// writeState puts a state file for lab name under lab.BaseDir as a damaged
// or forged one would be: whatever st says.
func writeState(t *testing.T, name string, st any) {
	t.Helper()
	dir := filepath.Join(lab.BaseDir, name)
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
	dir := t.TempDir()
	old := lab.BaseDir
	lab.BaseDir = filepath.Join(dir, "labs")
	t.Cleanup(func() { lab.BaseDir = old })

	name := "h" + lab.NewName()
	// Another lab's namespace: lab NAMEx's router, not lab NAME's.
	foreignNS := "ovpnperf-" + name + "x-router"
	if err := netns.Create(foreignNS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(foreignNS) })
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	pid := sleep.Process.Pid
	ticks, err := runner.StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
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
	writeState(t, name, map[string]any{
		"name":  name,
		"owner": map[string]any{"pid": pid},
		"resources": []map[string]any{
			{"kind": "netns", "name": foreignNS},
			{"kind": "netns", "name": relNS},
			{"kind": "process", "name": "sleep", "pid": pid, "start_ticks": ticks},
			{"kind": "file", "name": victim},
		},
	})
	l, err := lab.Open(name)
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
	if _, err := os.Stat(filepath.Join(lab.BaseDir, name)); !os.IsNotExist(err) {
		t.Errorf("lab down left the lab's own directory: %v", err)
	}

	// A state file naming another lab (here a path): its teardown would
	// remove that lab's directory, or any directory.
	outside := filepath.Join(dir, "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	name2 := "h" + lab.NewName()
	writeState(t, name2, map[string]any{"name": "../outside", "owner": map[string]any{"pid": pid}})
	if _, err := lab.Open(name2); err == nil || !strings.Contains(err.Error(), "corrupt state file") || !strings.Contains(err.Error(), "lab clean "+name2) {
		t.Errorf("open of a state naming another lab: want a corrupt state error pointing to lab clean, got %v", err)
	}
	if _, err := lab.Clean(name2); err != nil {
		t.Errorf("lab clean %s: %v", name2, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("lab clean of a state naming ../outside removed it: %v", err)
	}
	if _, err := os.Stat(filepath.Join(lab.BaseDir, name2)); !os.IsNotExist(err) {
		t.Errorf("lab clean left the corrupt lab's directory: %v", err)
	}
	if !runner.Alive(pid, ticks) {
		t.Error("lab clean killed a process outside the lab's namespaces")
	}
}
