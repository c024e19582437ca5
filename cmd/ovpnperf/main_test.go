package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// binary is ovpnperf built once for the command-line tests, which run it as
// a user would.
var binary string

func TestMain(m *testing.M) {
	labtest.RefuseLabOwner()
	bin, cleanup, err := labtest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// result is what one run of the binary printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
}

// ovpnperf runs the built binary with args and a 2-minute limit.
func ovpnperf(t *testing.T, args ...string) result {
	t.Helper()
	return ovpnperfWithin(t, 2*time.Minute, args...)
}

// ovpnperfWithin runs the built binary with args and the given limit,
// holding the host test lock shared (testenv.Shared): a command run here
// loads the CPUs, so no other package's measuring test runs meanwhile.
func ovpnperfWithin(t *testing.T, limit time.Duration, args ...string) result {
	t.Helper()
	testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := runner.Command(ctx, append([]string{binary}, args...)...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running ovpnperf %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// mustSucceed fails the test unless the run exited 0.
func (r result) mustSucceed(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return r
}

// mustBeUsageError checks the contract for bad input: exit status 2, one
// line on stderr that mentions want.
func (r result) mustBeUsageError(t *testing.T, want string) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("exit %d, want 2 (stderr %q)", r.code, r.stderr)
	}
	if lines := strings.Count(strings.TrimRight(r.stderr, "\n"), "\n") + 1; lines != 1 || r.stderr == "" {
		t.Errorf("want a one-line error, got %q", r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Errorf("error %q does not mention %q", r.stderr, want)
	}
	checkWording(t, r.stderr)
}
