package cluster_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// TestCleanDeadConnects: `cluster clean` without an id removes the connect
// runs whose process is gone and leaves the live ones, a run that is
// starting (directory, no state yet) and one whose namespace it cannot
// reach (with the reason).
func TestCleanDeadConnects(t *testing.T) {
	t.Parallel()
	paths := cluster.Paths{State: t.TempDir(), Connect: t.TempDir()}

	self, _, _, err := netns.Self()
	if err != nil {
		t.Fatal(err)
	}
	ownTicks, err := runner.StartTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A pid that ran and is gone.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	write := func(id string, st cluster.ConnectState) {
		t.Helper()
		st.ID = id
		if err := os.MkdirAll(paths.ConnectRunDir(id), 0o700); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(st)
		if err := os.WriteFile(filepath.Join(paths.ConnectRunDir(id), "state.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("dead", cluster.ConnectState{}) // not an id: never listed
	write("0d0d", cluster.ConnectState{Pid: gone.Process.Pid, StartTicks: 1, NetnsInode: self})
	write("a11e", cluster.ConnectState{Pid: os.Getpid(), StartTicks: ownTicks, NetnsInode: self})
	// Dead, in an unnamed namespace that is not this one.
	write("e15e", cluster.ConnectState{Pid: gone.Process.Pid, StartTicks: 1, NetnsInode: self + 1,
		Resources: []cluster.Resource{{Kind: cluster.KindSysctl, Name: cluster.MultipathHashSysctls()[0], Detail: "0"}}})
	if err := os.Mkdir(paths.ConnectRunDir("5a5a"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(paths.ConnectRunDir("01d0"), 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(paths.ConnectRunDir("01d0"), old, old); err != nil {
		t.Fatal(err)
	}

	cleaned, err := paths.CleanDead(context.Background())
	slices.Sort(cleaned)
	if !slices.Equal(cleaned, []string{"01d0", "0d0d"}) {
		t.Errorf("cleaned %v, want [01d0 0d0d]", cleaned)
	}
	if err == nil || !strings.Contains(err.Error(), "e15e") || !strings.Contains(err.Error(), "inside it") {
		t.Errorf("error %v, want one naming run e15e and where to clean it", err)
	}
	if err := paths.CleanID(context.Background(), "a11e"); err == nil || !strings.Contains(err.Error(), "alive") {
		t.Errorf("clean of a live run: %v, want a refusal", err)
	}
	for id, want := range map[string]bool{"0d0d": false, "01d0": false, "a11e": true, "5a5a": true, "e15e": true, "dead": true} {
		_, err := os.Stat(paths.ConnectRunDir(id))
		if got := err == nil; got != want {
			t.Errorf("%s exists: %v, want %v", id, got, want)
		}
	}
}

// TestRoutesFromEnv reads the routes OpenVPN 2.6 hands a --route-up script
// (names and value forms of route.c setenv_route / setenv_route_ipv6) and
// refuses what OpenVPN does not write.
func TestRoutesFromEnv(t *testing.T) {
	t.Parallel()
	env := []string{"script_type=route-up", "dev=ovpnperf1a2bt0",
		"route_network_1=10.98.0.0", "route_netmask_1=255.255.255.0", "route_gateway_1=203.0.113.1",
		"route_network_2=203.0.113.0", "route_netmask_2=255.255.255.0",
		"route_network_4=10.1.0.0", "route_netmask_4=255.255.0.0", // after a gap: not read
		"route_ipv6_network_1=fd00:98::/64", "route_ipv6_gateway_1=fd00:8::1",
		"route_ipv6_network_2=fd00:98::5/64"} // the same network again
	got, err := cluster.RoutesFromEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	if want := "10.98.0.0/24 203.0.113.0/24 fd00:98::/64"; strings.Join(s, " ") != want {
		t.Errorf("routes %v, want %s", s, want)
	}
	for _, bad := range [][]string{
		{"route_network_1=10.98.0.0", "route_netmask_1=255.0.255.0"},
		{"route_network_1=10.98.0.0\nroute x", "route_netmask_1=255.255.255.0"},
		{"route_network_1=fd00::", "route_netmask_1=255.255.255.0"},
		{"route_ipv6_network_1=10.0.0.0/8"},
		{"route_ipv6_network_1=fd00::/129"},
	} {
		if _, err := cluster.RoutesFromEnv(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if got, err := cluster.RoutesFromEnv([]string{"dev=x"}); err != nil || len(got) != 0 {
		t.Errorf("no routes: %v %v", got, err)
	}
}

// TestRouteHookFile: the hook writes a tunnel's routes file of a connect
// run, nothing else.
func TestRouteHookFile(t *testing.T) {
	t.Parallel()
	paths := cluster.Paths{Connect: t.TempDir()}
	if err := os.Mkdir(paths.ConnectRunDir("1a2b"), 0o700); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(paths.ConnectRunDir("1a2b"), "t1.routes")
	if err := paths.RouteHookFile(ok); err != nil {
		t.Errorf("%s: %v", ok, err)
	}
	for _, bad := range []string{
		filepath.Join(paths.ConnectRunDir("1a2b"), "state.json"),
		filepath.Join(paths.ConnectRunDir("3c4d"), "t0.routes"), // no such run
		filepath.Join(paths.Connect, "t0.routes"),
		"/etc/passwd",
		filepath.Join(paths.ConnectRunDir("1a2b"), "..", "..", "t0.routes"),
	} {
		if err := paths.RouteHookFile(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
