package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// The host lock lets the test packages run side by side (scripts/test.sh
// runs two test binaries at a time) without spoiling a measurement: a test
// that judges a rate, a sample's validity or a time bound holds it
// exclusively (Exclusive), every other test that builds a lab or runs
// OpenVPN holds it shared (labtest.Require calls Shared). So labs that only
// check structure, exit statuses and clean-up overlap one another, and a
// measuring test runs with no other ovpnperf test's lab on the machine,
// whichever package, checkout or worktree it comes from.
//
// It is two flock(2)ed files. Exclusive-takers and shared-takers both pass
// through a turnstile (held exclusively only while the main lock is
// taken), so a waiting measuring test is not starved by a stream of shared
// holders: once it waits at the main lock, new shared-takers wait behind
// it at the turnstile.
//
// Within one test binary the lock is taken once for the process: a test's
// subtests and helpers that ask for Shared while their test holds it
// exclusively go through (they are the measuring test's own), and the
// package's parallel tests share one shared hold.

// LockDirEnv names the directory of the lock files (default: the
// temporary directory), for a developer who keeps test runs apart.
const LockDirEnv = "OVPNPERF_TEST_LOCK_DIR"

var host struct {
	mu        sync.Mutex
	exclusive bool
	holders   int
	f         *os.File
}

func lockPath(name string) string {
	dir := os.Getenv(LockDirEnv)
	if dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "ovpnperf-tests."+name)
}

func flockFile(name string, how int) (*os.File, error) {
	f, err := os.OpenFile(lockPath(name), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", f.Name(), err)
	}
	return f, nil
}

// take acquires the main lock (LOCK_SH or LOCK_EX) through the turnstile.
func take(how int) (*os.File, error) {
	gate, err := flockFile("turnstile", syscall.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer gate.Close() // closing the descriptor releases its lock
	return flockFile("lock", how)
}

// Exclusive makes the calling test the only ovpnperf test with a lab on
// this host until it ends: call it first in a test that measures (a rate,
// a sample's validity, a time bound), before it builds a lab.
func Exclusive(tb testing.TB) {
	tb.Helper()
	host.mu.Lock()
	defer host.mu.Unlock()
	switch {
	case host.holders > 0 && host.exclusive:
		host.holders++ // a subtest of the measuring test
	case host.holders > 0:
		// Parallel tests of this package hold it shared: a measuring
		// test must not be parallel (go test runs parallel tests
		// after the serial ones), so this is a mistake in the test.
		tb.Fatalf("testenv.Exclusive in %s while other tests of this package hold the host lock shared: a measuring test must not call t.Parallel", tb.Name())
	default:
		f, err := take(syscall.LOCK_EX)
		if err != nil {
			tb.Fatalf("host test lock: %v", err)
		}
		host.f, host.exclusive, host.holders = f, true, 1
	}
	tb.Cleanup(release)
}

// Shared holds the host lock shared until the calling test ends: labs of
// other tests may run beside this one, a measuring test's may not.
func Shared(tb testing.TB) {
	tb.Helper()
	host.mu.Lock()
	if host.holders > 0 {
		host.holders++
		host.mu.Unlock()
		tb.Cleanup(release)
		return
	}
	host.mu.Unlock()
	// Taken outside mu: waiting here must not block this binary's
	// other tests from releasing theirs.
	f, err := take(syscall.LOCK_SH)
	if err != nil {
		tb.Fatalf("host test lock: %v", err)
	}
	host.mu.Lock()
	if host.holders > 0 {
		f.Close() // another test of this binary took it meanwhile
	} else {
		host.f, host.exclusive = f, false
	}
	host.holders++
	host.mu.Unlock()
	tb.Cleanup(release)
}

func release() {
	host.mu.Lock()
	defer host.mu.Unlock()
	host.holders--
	if host.holders == 0 && host.f != nil {
		host.f.Close()
		host.f, host.exclusive = nil, false
	}
}
