package ui

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/syncbuf"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

func TestProgressPlain(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(3, &buf) // a buffer is no terminal
	p.Step("wan routed up")
	p.Logf("emulator fell behind")
	p.Step("wan default up")
	p.Step("wan default down")
	p.Done()
	p.Done()
	p.Step("after done")
	want := "[1/3] wan routed up\nemulator fell behind\n[2/3] wan default up\n[3/3] wan default down\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// With a nil writer (--json on stdout) the display shows nothing, yet
// counts its steps; a nil *Progress does nothing and does not panic.
func TestProgressSilent(t *testing.T) {
	p := NewProgress(2, nil)
	p.Step("a")
	p.Logf("x")
	p.Step("b")
	p.Done()
	if p.plain != nil || p.mp != nil || p.bar != nil {
		t.Errorf("a display without a writer has an output: plain %v, bar %v", p.plain, p.bar)
	}
	if p.started != 2 || p.label != "b" || !p.done {
		t.Errorf("silent display: %d steps begun, label %q, done %v; want 2, \"b\", true", p.started, p.label, p.done)
	}
	var nilP *Progress
	nilP.Step("a")
	nilP.Logf("b")
	nilP.Done() // a panic fails the test
}

// TestProgressBar drives the mpb bar into a buffer (forced on: a buffer is
// no terminal) and checks it ends at its total with the last label shown.
func TestProgressBar(t *testing.T) {
	buf := &syncbuf.Buffer{}
	p := newProgress(2, buf, true)
	p.Step("lan routed up")
	p.Logf("note from the run")
	p.Step("lan default up")
	p.Done()
	out := buf.String()
	for _, s := range []string{"2/2", "lan default up", "note from the run"} {
		if !strings.Contains(out, s) {
			t.Errorf("bar output lacks %q:\n%q", s, out)
		}
	}
}

// A run cut short (an error after one of three steps) must not hang Done.
func TestProgressBarCutShort(t *testing.T) {
	buf := &syncbuf.Buffer{}
	p := newProgress(3, buf, true)
	p.Step("only step")
	p.Done()
	if !strings.Contains(buf.String(), "1/3") {
		t.Errorf("output %q", buf.String())
	}
}

func TestIsTerminal(t *testing.T) {
	if isTerminal(&bytes.Buffer{}) {
		t.Error("buffer is a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) {
		t.Error("pipe is a terminal")
	}
	// A pseudo-terminal master answers terminal ioctls.
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		testenv.SkipOrFail(t, "no /dev/ptmx: %v", err)
	}
	defer ptm.Close()
	if isTerminal(ptm) {
		t.Error("a pty of 0 columns counts as a terminal")
	}
	if err := unix.IoctlSetWinsize(int(ptm.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 30, Col: 100}); err != nil {
		t.Fatal(err)
	}
	if !isTerminal(ptm) {
		t.Error("/dev/ptmx with 100 columns is not a terminal")
	}
}
