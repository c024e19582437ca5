package cluster_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/runner/runnertest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// A damaged or forged state file does not make `cluster clean` act on what
// the cluster does not make: a process that is not one of its openvpns
// (or named without its start time), a sysctl it never sets or a value no
// sysctl of its takes, another cluster's chain, a device not its own.
// What it names is reported and left alone; a sysctl of its own is still
// restored.
func TestCleanLeavesWhatItDidNotMake(t *testing.T) {
	testenv.RequireRoot(t)
	paths := cluster.Paths{State: t.TempDir()}
	const id = "c1ea"

	sleeper := func() (int, uint64) {
		cmd, ticks := runnertest.Sleeper(t)
		return cmd.Process.Pid, ticks
	}
	stranger, strangerTicks := sleeper()
	untimed, _ := sleeper()
	readSys := func(key string) string {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	core := readSys("kernel.core_pattern")
	forward := readSys("net.ipv4.ip_forward")

	st := cluster.State{ID: id, Resources: []cluster.Resource{
		{Kind: cluster.KindProcess, Name: "u0", Pid: stranger, StartTicks: strangerTicks, Detail: "openvpn --config /etc/x.conf"},
		{Kind: cluster.KindProcess, Name: "u1", Pid: untimed},
		{Kind: cluster.KindSysctl, Name: "kernel.core_pattern", Detail: "|/tmp/ovpnperf-forged"},
		{Kind: cluster.KindSysctl, Name: "net.ipv4.ip_forward", Detail: "1\nkernel.core_pattern=x"},
		{Kind: cluster.KindSysctl, Name: "net.ipv4.ip_forward", Detail: forward},
		{Kind: cluster.KindChain, Name: "ovpnperf-ffff-udp", Detail: "udp 1194"},
		{Kind: cluster.KindLink, Name: "lo"},
		{Kind: cluster.KindNATChain, Name: "ovpnperf-ffff-hostnat", Detail: "ipv4"},
		{Kind: cluster.KindNATChain, Name: "ovpnperf-" + id + "-hostnat", Detail: "-t filter"},
	}}
	if err := os.MkdirAll(paths.Dir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(paths.Dir(id), "state.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	err := paths.Clean(context.Background(), id)
	if err == nil {
		t.Fatal("clean of a forged state file: no error")
	}
	for _, want := range []string{"process " + strconv.Itoa(untimed) + " without its start time", `sysctl "kernel.core_pattern"`,
		`sysctl "net.ipv4.ip_forward" = "1\nkernel.core_patter"`, `iptables chain "ovpnperf-ffff-udp"`, `link "lo"`,
		`nat chain "ovpnperf-ffff-hostnat"`, `nat chain "ovpnperf-` + id + `-hostnat" ("-t filter")`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("clean's error does not name %s:\n%v", want, err)
		}
	}
	for _, pid := range []int{stranger, untimed} {
		if _, err := runner.StartTicks(pid); err != nil {
			t.Errorf("process %d was stopped", pid)
		}
	}
	if got := readSys("kernel.core_pattern"); got != core {
		t.Errorf("kernel.core_pattern %q, was %q", got, core)
	}
	if got := readSys("net.ipv4.ip_forward"); got != forward {
		t.Errorf("net.ipv4.ip_forward %q, was %q", got, forward)
	}
	if _, err := os.Stat(paths.Dir(id)); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory is left: %v", err)
	}
}
