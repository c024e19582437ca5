package cluster

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestKilledFromOutside feeds the check real exits of a shell: only a
// SIGKILL counts, not another signal or an exit status.
func TestKilledFromOutside(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   bool
	}{
		{"kill -KILL $$", true},
		{"kill -SEGV $$", false},
		{"kill -TERM $$", false},
		{"exit 137", false}, // the shell's code for a killed child, not a kill
		{"exit 0", false},
	} {
		err := exec.Command("sh", "-c", tc.script).Run()
		if got := killedFromOutside(err); got != tc.want {
			t.Errorf("sh -c %q: Wait error %v: killedFromOutside = %v, want %v", tc.script, err, got, tc.want)
		}
	}
	if killedFromOutside(errors.New("signal: killed")) {
		t.Error("an error that only reads like a kill counted as one")
	}
}

func TestTimingDefaults(t *testing.T) {
	got := Timing{PollInterval: time.Second}.withDefaults()
	want := DefaultTiming()
	want.PollInterval = time.Second
	if got != want {
		t.Errorf("withDefaults = %+v, want %+v", got, want)
	}
}

// TestCheckPrivateUmask: a process that did not make its files
// private gets an error before anything is created.
func TestCheckPrivateUmask(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	if err := checkPrivateUmask(); err == nil {
		t.Error("umask 022 accepted")
	}
	syscall.Umask(PrivateUmask)
	if err := checkPrivateUmask(); err != nil {
		t.Errorf("umask %04o: %v", PrivateUmask, err)
	}
}
