package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Results that cannot be written to --out at the end go to a temporary
// file, and the error names it.
func TestWriteOutFallsBackToTempFile(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "removed", "x.json")
	err := writeOut(gone, func(w io.Writer) error { _, err := io.WriteString(w, `{"ok":true}`); return err })
	var se *savedElsewhereError
	if !errors.As(err, &se) {
		t.Fatalf("writeOut to a missing directory: %v", err)
	}
	t.Cleanup(func() { os.Remove(se.tmp) })
	b, rerr := os.ReadFile(se.tmp)
	if rerr != nil || string(b) != `{"ok":true}` || !strings.Contains(err.Error(), se.tmp) {
		t.Errorf("results in %s: %q, %v; error %v", se.tmp, b, rerr, err)
	}
	ok := filepath.Join(t.TempDir(), "y.json")
	if err := writeOut(ok, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
		t.Errorf("writeOut to a writable directory: %v", err)
	}
}

func TestCheckOutPath(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{"/nonexistent/dir/x.json", dir, "/proc/version/x"} {
		if err := checkOutPath("--out", bad); err == nil || !strings.HasPrefix(err.Error(), "--out") {
			t.Errorf("checkOutPath(%q): %v", bad, err)
		}
	}
	if err := checkOutPath("--out", filepath.Join(dir, "r.json")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "r.json")); err == nil {
		t.Error("checkOutPath created the file")
	}
}
