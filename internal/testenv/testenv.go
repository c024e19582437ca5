// Package testenv decides whether a test that needs root, a real kernel
// feature or an installed program can run here. Outside CI a missing
// requirement skips the test; with OVPNPERF_TEST_DISALLOW_SKIP=1 (set by
// .ci/run) it fails it instead, so that CI never passes by skipping.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// DisallowSkipEnv is the variable that turns skips into failures.
const DisallowSkipEnv = "OVPNPERF_TEST_DISALLOW_SKIP"

// SkipOrFail skips the test, or fails it when skips are disallowed.
func SkipOrFail(tb testing.TB, format string, a ...any) {
	tb.Helper()
	if os.Getenv(DisallowSkipEnv) != "" {
		tb.Fatalf("required for this test (skips are disallowed): "+format, a...)
	}
	tb.Skipf(format, a...)
}

// RequireRoot skips (or fails) unless the test runs as root, and holds
// the host test lock shared until the test ends. With -short (a
// developer's inner loop: no root, no lab) it skips, also in CI, which
// never passes -short.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs root: not run with -short")
	}
	if os.Geteuid() != 0 {
		SkipOrFail(tb, "needs root")
	}
	// What needs root here builds namespaces or runs OpenVPN: it holds
	// the host test lock shared (hostlock.go).
	Shared(tb)
}

// RequirePrograms skips (or fails) unless each program is in PATH.
func RequirePrograms(tb testing.TB, programs ...string) {
	tb.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			SkipOrFail(tb, "needs %s in PATH", p)
		}
	}
}
