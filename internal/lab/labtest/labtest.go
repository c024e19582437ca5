// Package labtest gives each integration test a fresh, randomly named lab
// that is torn down when the test ends, and checks that nothing of it is
// left on the host.
//
// A test package that builds labs routes its TestMain through Main, which
// builds the ovpnperf binary that runs the labs' owner processes (`ovpnperf
// lab owner NAME`), and gives its labs Env, which names that binary:
//
//	func TestMain(m *testing.M) { labtest.Main(m) }
//	...
//	l, err := lab.Up(ctx, lab.Options{Env: labtest.Env(), ...})
package labtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// binaryEnv passes the ovpnperf built by Build to child test processes
// (helpers that a test re-executes), so that they do not build it again;
// scripts/test.sh sets it to the binary it built.
const binaryEnv = "OVPNPERF_TEST_BINARY"

// Main builds ovpnperf once for the test binary (Build), runs the tests and
// removes it.
//
// A test binary started as a lab owner (`X.test lab owner NAME`: a lab
// built without Env's Owner) would run every test in the lab's router
// namespace; it exits with an error instead.
func Main(m *testing.M) {
	RefuseLabOwner()
	_, cleanup, err := Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// RefuseLabOwner ends a test binary started as a lab's owner (`lab owner
// NAME`: a lab built without Env takes its own executable for ovpnperf)
// with one line and status 2, instead of running its tests in the lab.
// A TestMain that does not call Main calls it first.
func RefuseLabOwner() {
	if len(os.Args) > 2 && os.Args[1] == "lab" && os.Args[2] == "owner" {
		fmt.Fprintf(os.Stderr, "%s is a test binary, not ovpnperf: build labs with lab.Options{Env: labtest.Env()}\n", os.Args[0])
		os.Exit(2)
	}
}

// Binary is the ovpnperf that Main built, to run as a user would.
func Binary() string { return os.Getenv(binaryEnv) }

// Env is the host's lab environment with Binary as the program that runs
// the labs' owners: what a test passes to lab.Up (lab.Options.Env, or the
// Lab field of the experiment's spec and the recipe's options).
func Env() lab.Env { return lab.Env{Owner: Binary()} }

// Build builds the ovpnperf command and returns its path and a function to
// call when the tests are done. In a child of a test that built it already,
// it returns that one.
//
// The binary lives in a directory of this user's under the temporary
// directory, named for the module's source directory, readable by all (a
// test may run it as an unprivileged user), and is kept after the tests:
// the test packages of one `go test ./...` each build it, and go build
// links again only when the sources changed (it finds the build ID of the
// binary already there), which saves a link of the whole command, seconds,
// per package. Remove the directory at will.
func Build() (string, func(), error) {
	if bin := os.Getenv(binaryEnv); bin != "" {
		if _, err := os.Stat(bin); err == nil {
			return bin, func() {}, nil
		}
	}
	dir, err := buildDir()
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "ovpnperf")
	out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, "github.com/ovpnperf/ovpnperf/cmd/ovpnperf").CombinedOutput()
	if err != nil {
		return "", nil, fmt.Errorf("building ovpnperf: %v\n%s", err, out)
	}
	os.Setenv(binaryEnv, bin)
	return bin, func() {}, nil
}

// buildDir returns TMPDIR/ovpnperf-test-UID/KEY, KEY a hash of the module's
// directory (each worktree has its own binary), made 0755 if missing. A
// directory there that is not this user's or that others may write is
// refused: the tests run its binary as root.
func buildDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %v", err)
	}
	key := sha256.Sum256(bytes.TrimSpace(out))
	top := filepath.Join(os.TempDir(), fmt.Sprintf("ovpnperf-test-%d", os.Getuid()))
	dir := filepath.Join(top, hex.EncodeToString(key[:8]))
	for _, d := range []string{top, dir} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		fi, err := os.Lstat(d)
		if err != nil {
			return "", err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o022 != 0 {
			return "", fmt.Errorf("%s: not a directory of user %d that only it may write; remove it", d, os.Getuid())
		}
		if err := os.Chmod(d, 0o755); err != nil { // whatever the umask
			return "", err
		}
	}
	return dir, nil
}

// Require skips (or, in CI, fails) unless labs can be built here, and
// holds the host test lock shared until the test ends (testenv.Shared):
// a measuring test elsewhere waits for this one's lab to go.
func Require(tb testing.TB) {
	tb.Helper()
	testenv.RequireRoot(tb)
	testenv.RequirePrograms(tb, "ip", "iptables-restore", "ip6tables-restore", "tc")
	if err := lab.Preflight(); err != nil {
		testenv.SkipOrFail(tb, "%v", err)
	}
	testenv.Shared(tb)
}

// New builds an ephemeral lab with a random name for the test and tears it
// down in t.Cleanup, failing the test if any namespace of it remains.
func New(tb testing.TB, p labpath.Path) *lab.Lab {
	tb.Helper()
	Require(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := lab.Up(ctx, lab.Options{Name: "t" + lab.NewName(), Path: p, Ephemeral: true, Env: Env()})
	if err != nil {
		tb.Fatalf("lab up: %v", err)
	}
	tb.Cleanup(func() {
		CheckPrivate(tb, l)
		if err := l.Down(); err != nil {
			tb.Errorf("lab down: %v", err)
		}
		CheckGone(tb, l.Name())
	})
	return l
}

// CheckGone fails the test if anything of lab name remains: a namespace
// (client, router, server or a host's), its state directory.
func CheckGone(tb testing.TB, name string) {
	tb.Helper()
	// NamespacesOf finds hosts' namespaces too, by their names.
	for _, ns := range lab.NamespacesOf(name) {
		tb.Errorf("namespace %s still exists after teardown", ns)
	}
	if _, err := os.Stat(lab.Env{}.Dir(name)); err == nil {
		tb.Errorf("lab directory of %s still exists after teardown", name)
	}
}

// CheckGonePrefix fails the test if any namespace or lab directory of a lab
// whose name starts with prefix remains: for commands that build several
// labs named PREFIX-NETWORK.
func CheckGonePrefix(tb testing.TB, prefix string) {
	tb.Helper()
	for _, dir := range []struct{ path, namePrefix string }{
		{netns.Dir, "ovpnperf-" + prefix},
		{lab.DefaultBaseDir, prefix},
	} {
		entries, _ := os.ReadDir(dir.path)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), dir.namePrefix) {
				tb.Errorf("%s/%s still exists after teardown", dir.path, e.Name())
			}
		}
	}
}

// CheckPrivate fails the test unless everything in the lab's directory is
// private to root: every directory from /run/ovpnperf down to it and in it
// 0700, every file without group or other permissions, and every unix
// socket (OpenVPN creates its management sockets world-writable) inside
// such directories only. It returns how many sockets it found.
func CheckPrivate(tb testing.TB, l *lab.Lab) int {
	tb.Helper()
	private := func(path string, fi os.FileInfo) {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != 0 {
			tb.Errorf("%s is not owned by root", path)
		}
		switch {
		case fi.IsDir() && fi.Mode().Perm() != 0o700:
			tb.Errorf("directory %s has mode %v, want 0700", path, fi.Mode().Perm())
		case fi.Mode()&os.ModeSocket != 0:
			// Its own mode is OpenVPN's choice; the directories guard it.
		case !fi.IsDir() && fi.Mode().Perm()&0o077 != 0:
			tb.Errorf("%s has mode %v, want no group or other permissions", path, fi.Mode().Perm())
		}
	}
	// The directories above the lab's.
	for dir := filepath.Dir(l.Dir()); dir != filepath.Dir(filepath.Dir(filepath.Dir(l.Dir()))); dir = filepath.Dir(dir) {
		if fi, err := os.Stat(dir); err == nil {
			private(dir, fi)
		} else {
			tb.Errorf("%v", err)
		}
	}
	sockets := 0
	err := filepath.Walk(l.Dir(), func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			tb.Errorf("%s is a symbolic link", path)
			return nil
		}
		if fi.Mode()&os.ModeSocket != 0 {
			sockets++
		}
		private(path, fi)
		return nil
	})
	if err != nil {
		tb.Errorf("walking %s: %v", l.Dir(), err)
	}
	return sockets
}
