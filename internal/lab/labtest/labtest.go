// Package labtest gives each integration test a fresh, randomly named lab
// that is torn down when the test ends, and checks that nothing of it is
// left on the host.
//
// A test package that builds labs must route its TestMain through Main, so
// that the test binary can serve as the lab's owner process:
//
//	func TestMain(m *testing.M) { labtest.Main(m) }
package labtest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// Main runs the lab owner when the binary was started as one, else the tests.
func Main(m *testing.M) {
	lab.RunOwnerIfRequested()
	os.Exit(m.Run())
}

// Require skips (or, in CI, fails) unless labs can be built here.
func Require(tb testing.TB) {
	tb.Helper()
	testenv.RequireRoot(tb)
	testenv.RequirePrograms(tb, "ip", "iptables-restore", "ip6tables-restore", "tc")
	if err := lab.Preflight(); err != nil {
		testenv.SkipOrFail(tb, "%v", err)
	}
}

// New builds an ephemeral lab with a random name for the test and tears it
// down in t.Cleanup, failing the test if any namespace of it remains.
func New(tb testing.TB, p lab.Path) *lab.Lab {
	tb.Helper()
	Require(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := lab.Up(ctx, lab.Options{Name: "t" + lab.NewName(), Path: p, Ephemeral: true})
	if err != nil {
		tb.Fatalf("lab up: %v", err)
	}
	tb.Cleanup(func() {
		if err := l.Down(); err != nil {
			tb.Errorf("lab down: %v", err)
		}
		CheckGone(tb, l.Name())
	})
	return l
}

// CheckGone fails the test if anything of lab name remains: a namespace,
// its state directory.
func CheckGone(tb testing.TB, name string) {
	tb.Helper()
	for _, n := range lab.Nodes {
		if ns := lab.NamespaceName(name, n); netns.Exists(ns) {
			tb.Errorf("namespace %s still exists after teardown", ns)
		}
	}
	if _, err := os.Stat(lab.BaseDir + "/" + name); err == nil {
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
		{lab.BaseDir, prefix},
	} {
		entries, _ := os.ReadDir(dir.path)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), dir.namePrefix) {
				tb.Errorf("%s/%s still exists after teardown", dir.path, e.Name())
			}
		}
	}
}
