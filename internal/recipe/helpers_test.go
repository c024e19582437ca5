package recipe

import (
	"context"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// runForTest runs a recipe in real labs under a fresh lab name, after
// checking root and the programs it needs (openvpn always), and fails the
// test if the recipe failed or left any of its labs behind.
//
// The recipe tests whose checks no other lab's load can spoil (the rows'
// and verdicts' structure, what OpenVPN logged or negotiated, deterministic
// counts such as the MSS clamp or IP fragments, an invalid row allowed if
// it says why) call t.Parallel, so that they overlap one another after the
// package's serial tests. Those that judge a rate or require every row
// valid (ciphers, instances, mtu, shaper) stay serial. Each run's labs
// carry its own random name, and only that name's labs are checked.
func runForTest(t *testing.T, run func(context.Context, Options) (*measure.Report, error), o Options, programs ...string) *measure.Report {
	t.Helper()
	labtest.Require(t)
	testenv.RequirePrograms(t, append([]string{"openvpn"}, programs...)...)
	o.LabName = "t" + lab.NewName()
	o.Lab = labtest.Env()
	rep, err := run(context.Background(), o)
	labtest.CheckGonePrefix(t, o.LabName)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
