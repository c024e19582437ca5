package inputfile

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Anything but a regular file is refused at once, a FIFO without a writer
// too (a blocking open would hang here), as a one-line usage error.
func TestRefusesNonRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", "/dev/null", dir} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(context.Background(), p, Config()); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !usage.Is(err) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %v", p, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: still reading after 2 s", p)
		}
	}
	if _, err := ReadFile(context.Background(), filepath.Join(dir, "missing"), Config()); err == nil || !usage.Is(err) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// The cap is counted while reading: Max bytes are read, Max+1 refused,
// also from a stream that never ends.
func TestCap(t *testing.T) {
	t.Parallel()
	k := Kind{"test", 100}
	dir := t.TempDir()
	for n, ok := range map[int]bool{100: true, 101: false} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte(strings.Repeat("x", n)), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := ReadFile(context.Background(), p, k)
		if ok && (err != nil || len(b) != n) {
			t.Errorf("%d bytes: %d read, %v", n, len(b), err)
		}
		if !ok && (!errors.Is(err, ErrTooLarge) || !usage.Is(err) || !strings.Contains(err.Error(), "100 bytes")) {
			t.Errorf("%d bytes: %v", n, err)
		}
	}
	f := Stream(context.Background(), zeros{}, "stdin", k)
	if _, err := io.ReadAll(f); !errors.Is(err, ErrTooLarge) {
		t.Errorf("endless stream: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A read of a stream that blocks ends when the context does.
func TestStreamEndsWithContext(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	f := Stream(ctx, pr, "stdin", Log())
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(f); done <- err }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("read ended with %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("read still blocked 2 s after the context ended")
	}
}
