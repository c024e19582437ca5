package ui

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/sys/unix"
)

// Progress shows how far a series of measurements has come. On a terminal
// it is an mpb bar with the current step's label; on anything else one
// plain line per step ("[3/12] lan tunnel default up"), so logs stay
// readable; with a nil writer (for --json on stdout, say) it shows nothing.
//
//	p := ui.NewProgress(len(plan), os.Stderr)
//	for _, m := range plan { p.Step(m.Label()); … }
//	p.Done()
//
// Methods are safe for concurrent use and do nothing on a nil *Progress.
type Progress struct {
	mu      sync.Mutex
	total   int
	started int // steps begun
	label   string
	done    bool
	begin   time.Time

	plain io.Writer // plain mode

	mp  *mpb.Progress // bar mode
	bar *mpb.Bar
}

// NewProgress prepares a display for total steps written to w: a bar when
// w is a terminal, plain lines otherwise, nothing when w is nil.
func NewProgress(total int, w io.Writer) *Progress {
	return newProgress(total, w, isTerminal(w))
}

func newProgress(total int, w io.Writer, bar bool) *Progress {
	p := &Progress{total: total, begin: time.Now()}
	switch {
	case w == nil:
	case bar:
		p.mp = mpb.New(mpb.WithOutput(w), mpb.WithWidth(24), mpb.WithAutoRefresh(),
			mpb.WithRefreshRate(200*time.Millisecond))
		p.bar = p.mp.AddBar(int64(total),
			mpb.PrependDecorators(
				decor.CountersNoUnit("%d/%d", decor.WCSyncWidth),
			),
			mpb.AppendDecorators(
				decor.Elapsed(decor.ET_STYLE_MMSS, decor.WCSyncSpace),
				decor.Any(func(decor.Statistics) string { return " " + p.currentLabel() }),
			),
		)
	default:
		p.plain = w
	}
	return p
}

func (p *Progress) currentLabel() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.label
}

// Step begins the next step, named by label; the step before it counts as
// finished.
func (p *Progress) Step(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	prev := p.started
	p.started++
	p.label = label
	n, total, plain := p.started, p.total, p.plain
	p.mu.Unlock()

	switch {
	case p.bar != nil:
		if prev > 0 {
			p.bar.Increment()
		}
	case plain != nil:
		fmt.Fprintf(plain, "[%d/%d] %s\n", n, total, label)
	}
}

// Logf prints a message line without disturbing the bar (above it on a
// terminal).
func (p *Progress) Logf(format string, a ...any) {
	if p == nil {
		return
	}
	msg := fmt.Sprintf(format, a...)
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	switch {
	case p.mp != nil && !done:
		p.mp.Write([]byte(msg))
	case p.plain != nil:
		io.WriteString(p.plain, msg)
	}
}

// Done finishes the display: the last step counts as finished, and a bar
// that did not reach its total (a run cut short) is left where it stopped.
// Calling Done again does nothing.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	started, total := p.started, p.total
	p.mu.Unlock()
	if p.bar == nil {
		return
	}
	if started > 0 {
		p.bar.Increment()
	}
	if started < total {
		p.bar.Abort(false)
	}
	p.mp.Wait()
}

// isTerminal reports whether w is a file that is a terminal with a known
// width. A terminal of 0 columns (a pty nobody sized, as under script(1)
// or some CI runners) gets plain lines: mpb would draw nothing there.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	fd := int(f.Fd())
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err != nil {
		return false
	}
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	return err == nil && ws.Col > 0
}
