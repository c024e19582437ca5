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

// RequireRoot skips (or fails) unless the test runs as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(tb, "needs root")
	}
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

// Short reports whether the run asked for short tests; integration tests
// still run in -short mode but use their shortest settings.
func Short() bool { return testing.Short() }
