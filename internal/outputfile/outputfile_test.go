package outputfile

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// A symbolic link at the output name is replaced; the file it points to
// keeps its content and mode.
func TestWriteReplacesLinkNotTarget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.ovpn")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(link, 0o600, []byte("key material")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(target)
	fi, _ := os.Stat(target)
	if string(b) != "precious" || fi.Mode().Perm() != 0o644 {
		t.Errorf("the link's target changed: %q, mode %v", b, fi.Mode().Perm())
	}
	li, err := os.Lstat(link)
	if err != nil || !li.Mode().IsRegular() || li.Mode().Perm() != 0o600 {
		t.Fatalf("the name is not a 0600 regular file: %v %v", li, err)
	}
	if b, _ := os.ReadFile(link); string(b) != "key material" {
		t.Errorf("written %q", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// The mode is set before any byte is written: keys are never in a file
// others can read, not even while it is being written.
func TestWriteModeBeforeData(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "c.ovpn")
	err := Write(path, 0o600, func(w io.Writer) error {
		fi, err := w.(*os.File).Stat()
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("while writing: %v, %v", fi.Mode(), err)
		}
		_, err = io.WriteString(w, "k")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	linkDir := filepath.Join(dir, "linkdir")
	if err := os.Symlink(dir, linkDir); err != nil {
		t.Fatal(err)
	}
	bad := []string{"", "/nonexistent/x.html", dir, linkDir, "/proc/version/x", "/tmp"}
	if os.Geteuid() != 0 {
		bad = append(bad, filepath.Join(ro, "x"))
	}
	for _, p := range bad {
		err := Check("-o", p)
		if err == nil || !usage.Is(err) || !strings.HasPrefix(err.Error(), "-o") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Check(%q): %v", p, err)
		}
	}
	if err := Check("-o", filepath.Join(dir, "new.html")); err != nil {
		t.Error(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("Check created files: %v", ents)
	}
}

// A FIFO put at the name after Check (while the command worked) is not
// replaced by Write either: the file there keeps its kind, and no
// temporary file is left. Names that fit the directory but not with the
// temporary file's additions are written (the temporary name is cut).
func TestWriteRefusesSpecialFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "out.html")
	if err := Check("-o", fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(fifo, 0o644, []byte("page")); err == nil || !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("Write over a FIFO: %v", err)
	}
	if err := Check("-o", fifo); err == nil || !strings.Contains(err.Error(), "is a FIFO") {
		t.Errorf("Check of a FIFO: %v", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO is now %v (%v)", fi, err)
	}
	long := filepath.Join(dir, strings.Repeat("n", 255))
	if err := Check("-o", long); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(long, 0o644, []byte("x")); err != nil {
		t.Errorf("a 255-byte name: %v", err)
	}
	if err := Check("-o", long+"n"); err == nil || !strings.Contains(err.Error(), "256 bytes") {
		t.Errorf("a 256-byte name: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("files left: %v", ents)
	}
}
