package watch

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/ovpnperf/ovpnperf/internal/watch/watchdoc"
)

// History appends rounds to a file of JSON lines, bounded in size: a line
// that would take the file past Max moves the file to FILE.1 (replacing
// the one there) and starts it again, so the two hold between Max and
// twice Max of the latest rounds and `ovpnperf report` reads each.
type History struct {
	path string
	max  int64

	mu   sync.Mutex
	f    *os.File
	size int64
}

// RotatedSuffix is added to the history's name for its one rotated file.
const RotatedSuffix = ".1"

// OpenHistory opens path for appending (made 0644 when missing) with a
// bound of maxBytes. The file must be a regular file; a link is not
// followed.
func OpenHistory(path string, maxBytes int64) (*History, error) {
	h := &History{path: path, max: maxBytes}
	if err := h.open(); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *History) open() error {
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return fmt.Errorf("history %s: a symbolic link, not followed", h.path)
		}
		return fmt.Errorf("history: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("history: %w", err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("history %s: not a regular file (%v)", h.path, st.Mode().Type())
	}
	h.f, h.size = f, st.Size()
	return nil
}

// Append writes r as one line, rotating first when the line would take
// the file past its bound.
func (h *History) Append(r watchdoc.Round) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return fmt.Errorf("history %s: closed", h.path)
	}
	if h.size > 0 && h.size+int64(len(b)) > h.max {
		if err := h.rotate(); err != nil {
			return err
		}
	}
	n, err := h.f.Write(b)
	h.size += int64(n)
	if err != nil {
		return fmt.Errorf("history %s: %w", h.path, err)
	}
	return nil
}

// rotate moves the file to its rotated name and opens a new one; h.mu is
// held.
func (h *History) rotate() error {
	if err := h.f.Close(); err != nil {
		return fmt.Errorf("history %s: %w", h.path, err)
	}
	h.f = nil
	if err := os.Rename(h.path, h.path+RotatedSuffix); err != nil {
		return fmt.Errorf("history: rotating: %w", err)
	}
	return h.open()
}

// Close closes the file.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	return err
}
