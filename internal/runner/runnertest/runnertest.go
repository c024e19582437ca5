// Package runnertest gives tests processes to point a state file at: a
// child that does nothing but live until the test ends, named by its pid
// and start time (runner.StartTicks), as the journals of labs, clusters
// and connect runs name the processes they start. The tests that check
// that teardown stops only what a run started use it as the stranger a
// damaged or forged state file names.
package runnertest

import (
	"os/exec"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// Sleeper starts `sleep 600`, which the test's cleanup kills and reaps,
// and returns it with its start time.
func Sleeper(tb testing.TB) (*exec.Cmd, uint64) {
	tb.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ticks, err := runner.StartTicks(cmd.Process.Pid)
	if err != nil {
		tb.Fatal(err)
	}
	return cmd, ticks
}
