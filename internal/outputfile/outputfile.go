// Package outputfile writes the files a user names as output (-o, --out,
// --html, lint --fix's copy) the one way every command does:
//
//   - Check, before any work, that the file can be written: its
//     directory exists and is writable, and the name is not a directory;
//     a refusal is a usage error (exit 2) and nothing has been created;
//   - Write into a new temporary file in the target's directory (created
//     with O_EXCL, so it follows no link), with its final mode set before
//     anything is written, then rename it over the name. A symbolic link
//     at the name is replaced, never followed: the file it points to is
//     left as it was. Readers never see a half-written file.
package outputfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Check refuses, as a usage error naming flag, an output path that cannot
// be written: an empty name, a directory, a directory that does not exist
// or cannot be written. It creates nothing.
func Check(flag, path string) error {
	if path == "" {
		return usage.Errorf("%s \"\": want a file name", flag)
	}
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return usage.Errorf("%s %q: is a directory; want a file name", flag, path)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usage.Errorf("%s %q: is a link to a directory; want a file name", flag, path)
	}
	dir := filepath.Dir(path)
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
	return nil
}

// Write replaces path with what write writes, with mode perm (0600 for
// anything holding keys, 0644 for what is meant to be shared).
func Write(path string, perm os.FileMode, write func(w io.Writer) error) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	name := tmp.Name()
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
