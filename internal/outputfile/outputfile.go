// Package outputfile writes the files a user names as output (-o, --out,
// --html, lint --fix's copy, captures, client configs, the documentation
// and unit files gendoc writes) the one way every command does:
//
//   - Check, before any work, that the file can be written: the name is
//     new, a regular file or a symbolic link (replaced, below), never a
//     directory, device, FIFO or socket (renaming over one would replace
//     /dev/null with a regular file); the name fits the file system
//     (NAME_MAX, PATH_MAX); its directory exists, can be written and lets
//     a file be made in it (a read-only mount, /sys, /proc refuse). A
//     refusal is a usage error (exit 2) and nothing is left behind;
//   - Write into a new temporary file in the target's directory (created
//     with O_EXCL, so it follows no link), with its final mode set before
//     anything is written, then rename it over the name. A symbolic link
//     at the name is replaced, never followed: the file it points to is
//     left as it was. Readers never see a half-written file. What is at
//     the name is checked again just before the rename.
package outputfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// nameMax and pathMax are Linux's NAME_MAX and PATH_MAX (with its NUL).
const (
	nameMax = 255
	pathMax = 4095
)

// Check refuses, as a usage error naming flag, an output path that cannot
// be written: an empty name, a name too long, anything at the name but a
// regular file or a link (a directory, device, FIFO or socket), a
// directory that does not exist, cannot be written or makes no files.
// What it makes to find out is removed before it returns.
func Check(flag, path string) error {
	if path == "" {
		return usage.Errorf("%s \"\": want a file name", flag)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	dir = filepath.Clean(dir)
	if base == "" || base == "." || base == ".." {
		return usage.Errorf("%s %q: is a directory; want a file name", flag, path)
	}
	if len(base) > nameMax {
		return usage.Errorf("%s %.40q…: a file name of %d bytes; want at most %d", flag, path, len(base), nameMax)
	}
	if len(path) > pathMax {
		return usage.Errorf("%s %.40q…: a path of %d bytes; want at most %d", flag, path, len(path), pathMax)
	}
	if err := checkTarget(path); err != nil {
		return usage.Errorf("%s %q: %v", flag, path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usage.Errorf("%s %q: is a link to a directory; want a file name", flag, path)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return usage.Errorf("%s %q: directory %s does not exist", flag, path, dir)
	}
	if !fi.IsDir() {
		return usage.Errorf("%s %q: %s is not a directory", flag, path, dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return usage.Errorf("%s %q: cannot write in %s: %v", flag, path, dir, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err == nil && sfs.Flags&unix.ST_RDONLY != 0 {
		return usage.Errorf("%s %q: %s is on a read-only file system", flag, path, dir)
	}
	// Root passes every access check, and some file systems (sysfs,
	// proc, cgroup) take no new files whatever the mode says: make the
	// temporary file Write would make, and remove it.
	tmp, err := createTemp(dir, base)
	if err != nil {
		return usage.Errorf("%s %q: cannot make a file in %s: %v", flag, path, dir, unwrapPath(err))
	}
	tmp.Close()
	os.Remove(tmp.Name())
	return nil
}

// checkTarget refuses what is at path unless it is nothing, a regular
// file or a symbolic link (which Write replaces, never follows).
func checkTarget(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	m := fi.Mode()
	switch {
	case m.IsRegular(), m&os.ModeSymlink != 0:
		return nil
	case m.IsDir():
		return errors.New("is a directory; want a file name")
	default:
		return fmt.Errorf("is a %s; want a regular file or a new name", kind(m))
	}
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "block device"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// pending holds the temporary files being written, so that a command
// ended by a signal removes them (RemovePending).
var pending struct {
	sync.Mutex
	names  map[string]bool
	closed bool
}

// createTemp makes the temporary file of base in dir: a hidden name
// starting with base, shortened so that it fits NAME_MAX.
func createTemp(dir, base string) (*os.File, error) {
	prefix := "." + base
	// CreateTemp adds up to 20 digits and the suffix.
	if max := nameMax - 20 - len(".tmp"); len(prefix) > max {
		prefix = prefix[:max]
	}
	return os.CreateTemp(dir, prefix+".*.tmp")
}

// RemovePending removes the temporary files of writes under way, and
// makes every later Write fail: main calls it when a signal ends a
// command before its writes finish, just before it exits.
func RemovePending() {
	pending.Lock()
	defer pending.Unlock()
	for n := range pending.names {
		os.Remove(n)
	}
	pending.names, pending.closed = nil, true
}

// Write replaces path with what write writes, with mode perm (0600 for
// anything holding keys, 0644 for what is meant to be shared).
func Write(path string, perm os.FileMode, write func(w io.Writer) error) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := checkTarget(path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// Made and recorded under one lock, so that RemovePending sees
	// every temporary file there is.
	pending.Lock()
	if pending.closed {
		pending.Unlock()
		return fmt.Errorf("writing %s: interrupted", path)
	}
	tmp, err := createTemp(dir, base)
	if err != nil {
		pending.Unlock()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	name := tmp.Name()
	if pending.names == nil {
		pending.names = map[string]bool{}
	}
	pending.names[name] = true
	pending.Unlock()
	defer func() {
		pending.Lock()
		delete(pending.names, name)
		pending.Unlock()
	}()
	// Set the mode before the data goes in: a key never sits in a file
	// others can read, not even for a moment.
	err = tmp.Chmod(perm)
	if err == nil {
		err = write(tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
			err = errors.New("is a directory")
		}
	}
	if err == nil {
		// Something else may have been put at the name during the work.
		err = checkTarget(path)
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// WriteBytes is Write of data.
func WriteBytes(path string, perm os.FileMode, data []byte) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
