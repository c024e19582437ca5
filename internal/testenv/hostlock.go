package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The host lock keeps measurements apart when test binaries run side by
// side (`go test -p 2 ./...`, two checkouts, two engineers on one
// machine): a test that judges a rate, a sample's validity or a time bound
// holds it exclusively (Exclusive), every other test that builds a lab or
// runs OpenVPN holds it shared (labtest.Require and RequireRoot call
// Shared). So a measuring test runs with no other ovpnperf test's lab on
// the machine, whichever package, checkout or worktree it comes from.
// scripts/test.sh goes further and runs the measuring tests in a phase of
// their own (DeferEnv), after the others, so that no test waits for the
// lock there.
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

// DeferEnv, when set to a file name, makes Exclusive and Tolerant skip
// their test and append the test's top-level name to that file (one line:
// the package's import path, the name and "exclusive" or "tolerant",
// separated by tabs) instead of running it. scripts/test.sh
// runs every package so, several at a time, then the tests named in the
// file one package at a time: the measuring tests run with nothing else
// on the machine, the others overlap without waiting for one another.
const DeferEnv = "OVPNPERF_TEST_DEFER_EXCLUSIVE"

// deferredMessage starts the skip message of a deferred test; the test
// runner does not count such a skip as one.
const deferredMessage = "deferred to the measuring phase"

// NoLockEnv, set by scripts/test.sh for the run of the tolerant tests
// beside the measuring phase, makes Shared and Exclusive take no lock.
const NoLockEnv = "OVPNPERF_TEST_NO_HOST_LOCK"

// Tolerant marks a test that judges figures of a slow, long path whose
// tolerances far exceed what another test's load can do to them (a
// 10 Mbit/s, 600 ms satellite path allows 30 ms of lateness per release),
// and that loads the machine too little to spoil another's measurement.
// scripts/test.sh runs such tests beside the measuring phase instead of
// before it; elsewhere it does nothing (the test's lab holds the host lock
// shared as any other). docs/testing.md says which tests are so and why.
func Tolerant(tb testing.TB) {
	tb.Helper()
	deferTest(tb, "tolerant")
}

// deferExclusive records tb for the measuring phase and skips it, if
// DeferEnv asks for that.
func deferExclusive(tb testing.TB) {
	tb.Helper()
	deferTest(tb, "exclusive")
}

// deferTest appends tb's top-level name and kind to the DeferEnv file and
// skips it, if that file is set.
func deferTest(tb testing.TB, kind string) {
	tb.Helper()
	file := os.Getenv(DeferEnv)
	if file == "" {
		return
	}
	pkg := os.Getenv("OVPNPERF_TEST_PACKAGE")
	top, _, _ := strings.Cut(tb.Name(), "/")
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		tb.Fatalf("%s: %v", DeferEnv, err)
	}
	// One write of one short line: appends from several test binaries
	// do not interleave.
	_, err = fmt.Fprintf(f, "%s\t%s\t%s\n", pkg, top, kind)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatalf("%s: %v", DeferEnv, err)
	}
	tb.Skip(deferredMessage + " (scripts/test.sh runs it there)")
}

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
// a sample's validity, a time bound), before it builds a lab. With -short
// it skips the test: the inner loop measures nothing.
func Exclusive(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("measures: not run with -short")
	}
	deferExclusive(tb)
	host.mu.Lock()
	defer host.mu.Unlock()
	switch {
	case os.Getenv(NoLockEnv) != "":
		return
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
	if os.Getenv(NoLockEnv) != "" || testing.Short() {
		// With -short no test builds a lab or measures.
		return
	}
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
