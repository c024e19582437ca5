// Package inputfile opens the files a user names as input (a config, a
// log, a JSON document, a key, a capture) the one way every command does:
//
//   - only a regular file is read: a FIFO, a device (/dev/zero), a
//     directory or a socket is refused at once, without blocking (the
//     open itself is non-blocking, so a FIFO with no writer cannot hang
//     it);
//   - at most the size suited to the file's kind is read, counted while
//     reading (a file that grows, or lies about its size, is stopped at
//     the cap, not when memory runs out);
//   - every read gives up when the command's context ends (SIGINT,
//     SIGTERM), also a read of standard input that would block forever.
//
// Refusals are usage errors (exit status 2) of one line naming the file.
package inputfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Kind is what a file is read as, and so how large it may be.
type Kind struct {
	// What names the kind in messages ("config", "JSON document").
	What string
	// Max is the most bytes read.
	Max int64
}

// The kinds of input. The caps are far above anything real of the kind
// and far below what would exhaust memory. Each is a function, so that no
// caller can change a cap for the others.

// Config is an OpenVPN config or an included one. Inline blocks
// (certificates, a CRL of a large CA) make the largest real ones a few
// hundred KiB.
func Config() Kind { return Kind{"config", 16 << 20} }

// Key is a PEM certificate, key or CA bundle, or a pre-shared key.
func Key() Kind { return Kind{"key or certificate file", 1 << 20} }

// Log is an OpenVPN log; it is streamed, so the cap only bounds the time a
// runaway input takes.
func Log() Kind { return Kind{"log", 4 << 30} }

// Document is an ovpnperf JSON document (run, recipe, tune, probe, pmtu,
// pps, crypto, cluster status), decoded in memory.
func Document() Kind { return Kind{"JSON document", 64 << 20} }

// Capture is a pcap file, streamed.
func Capture() Kind { return Kind{"capture", 2 << 30} }

// Status is an OpenVPN status file (--status), read whole at each scrape:
// a few hundred bytes per client.
func Status() Kind { return Kind{"status file", 64 << 20} }

// ErrNotRegular marks a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge marks a file larger than its kind's cap.
var ErrTooLarge = errors.New("too large")

// Error is a refused input file.
type Error struct {
	Path string
	Kind Kind
	// Err is ErrNotRegular, ErrTooLarge, or the error of open.
	Err error
	// Detail says more (the file type found, the cap).
	Detail string
}

func (e *Error) Error() string {
	switch {
	case errors.Is(e.Err, ErrNotRegular):
		return fmt.Sprintf("%q is %s, not a regular file; give the %s as a file", e.Path, e.Detail, e.Kind.What)
	case errors.Is(e.Err, ErrTooLarge):
		return fmt.Sprintf("%q is larger than %s, the most ovpnperf reads as a %s", e.Path, size(e.Kind.Max), e.Kind.What)
	}
	var pe *fs.PathError
	if errors.As(e.Err, &pe) {
		return fmt.Sprintf("%q: %v", e.Path, pe.Err)
	}
	return fmt.Sprintf("%q: %v", e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Reason is what was wrong with the file, without its name or advice:
// "a FIFO (named pipe), not a regular file", "larger than 16 MiB", "no
// such file or directory"; for a file ovpnperf itself keeps (a state
// file), whose message names it in its own words.
func (e *Error) Reason() string {
	switch {
	case errors.Is(e.Err, ErrNotRegular):
		return e.Detail + ", not a regular file"
	case errors.Is(e.Err, ErrTooLarge):
		return "larger than " + size(e.Kind.Max)
	}
	var pe *fs.PathError
	if errors.As(e.Err, &pe) {
		return pe.Err.Error()
	}
	return e.Err.Error()
}

// Reason is err's Reason if it is an Error, and err's message otherwise.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason()
	}
	return err.Error()
}

func size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// refuse makes a usage error of a refusal.
func refuse(path string, k Kind, err error, detail string) error {
	return usage.Wrap(&Error{Path: path, Kind: k, Err: err, Detail: detail})
}

// File is an open input file. Read stops with an error wrapping
// ErrTooLarge past the kind's cap, and with ctx.Err() once ctx ends.
type File struct {
	f    *os.File
	r    io.Reader
	n    int64
	kind Kind
	path string
	ctx  context.Context
}

// Open opens path as an input of kind k. A missing or unreadable file,
// and anything but a regular file, is a usage error naming path.
func Open(ctx context.Context, path string, k Kind) (*File, error) {
	// O_NONBLOCK: opening a FIFO for reading blocks until a writer
	// comes; non-blocking, it returns at once and fstat refuses it.
	// On a regular file the flag changes nothing.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, refuse(path, k, err, "")
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, refuse(path, k, err, "")
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, refuse(path, k, ErrNotRegular, fileType(fi.Mode()))
	}
	if fi.Size() > k.Max {
		f.Close()
		return nil, refuse(path, k, ErrTooLarge, "")
	}
	return &File{f: f, r: f, kind: k, path: path, ctx: ctx}, nil
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "a special file"
}

// Read reads from the file, counting bytes against the cap.
func (f *File) Read(p []byte) (int, error) {
	if err := f.ctx.Err(); err != nil {
		return 0, err
	}
	// Read one byte past the cap, so that a file of exactly Max bytes is
	// accepted and one more is refused.
	if left := f.kind.Max + 1 - f.n; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := f.r.Read(p)
	f.n += int64(n)
	if f.n > f.kind.Max {
		return n, refuse(f.path, f.kind, ErrTooLarge, "")
	}
	return n, err
}

// Close closes the file.
func (f *File) Close() error {
	if f.f == nil {
		return nil
	}
	return f.f.Close()
}

// Name is the path as given.
func (f *File) Name() string { return f.path }

// ReadFile reads all of path as an input of kind k.
func ReadFile(ctx context.Context, path string, k Kind) ([]byte, error) {
	f, err := Open(ctx, path, k)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Stream wraps r (standard input, for a command that documents "-") as
// an input of kind k called name: capped like a file, and each Read gives
// up when ctx ends, also while r blocks (the blocked read is left to a
// goroutine; the command is ending anyway).
func Stream(ctx context.Context, r io.Reader, name string, k Kind) *File {
	return &File{r: &ctxReader{ctx: ctx, r: r}, kind: k, path: name, ctx: ctx}
}

type readResult struct {
	n   int
	err error
}

// ctxReader reads r in a goroutine so that a Read can return when ctx
// ends while r blocks. Only one read is ever outstanding; its buffer is
// the reader's own, copied out, so an abandoned read writes nowhere the
// caller still uses.
type ctxReader struct {
	ctx     context.Context
	r       io.Reader
	buf     []byte
	pending chan readResult
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if c.pending == nil {
		if len(c.buf) < len(p) {
			c.buf = make([]byte, max(len(p), 64<<10))
		}
		buf := c.buf[:len(p)]
		ch := make(chan readResult, 1)
		c.pending = ch
		go func() {
			n, err := c.r.Read(buf)
			ch <- readResult{n, err}
		}()
	}
	select {
	case <-c.ctx.Done():
		return 0, c.ctx.Err()
	case res := <-c.pending:
		c.pending = nil
		n := copy(p, c.buf[:res.n])
		return n, res.err
	}
}
