package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// Bad input: one line, exit 2, no cluster directory made.
func TestClusterUsageErrors(t *testing.T) {
	testenv.Exclusive(t)
	dir := t.TempDir()
	bridge := filepath.Join(dir, "bridge.conf")
	if err := os.WriteFile(bridge, []byte("dev tap0\nserver-bridge 10.8.0.4 255.255.255.0 10.8.0.128 10.8.0.254\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := cluster.Paths{}.List()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "serve"}, "--config FILE, or --lab NAME"},
		{[]string{"cluster", "serve", "--lab", "x", "--proto", "icmp"}, "--proto"},
		{[]string{"cluster", "serve", "--lab", "x", "--instances", "0"}, "--instances"},
		{[]string{"cluster", "serve", "--lab", "x", "--cpus", "3-1"}, "--cpus"},
		{[]string{"cluster", "serve", "--lab", "x", "--nice", "40"}, "--nice"},
		{[]string{"cluster", "serve", "--lab", "x", "--spread", "magic"}, "--spread"},
		{[]string{"cluster", "serve", "--lab", "x", "--strategy", "random"}, "--strategy"},
		{[]string{"cluster", "serve", "--lab", "x", "--pool", "10.8.0.0"}, "--pool"},
		{[]string{"cluster", "serve", "--config", bridge, "--netns", "x"}, "tap"},
		{[]string{"cluster", "serve", "--lab", "x", "--dispatcher", "127.0.0.1:0", "--public", "--up /tmp/x"}, "--public"},
		{[]string{"cluster", "clean", "abcd", "ef01"}, "accepts at most 1 arg"},
		{[]string{"cluster", "systemd-unit"}, "--id"},
		{[]string{"cluster", "connect", "127.0.0.1:1"}, "--ca, --cert and --key"},
		{[]string{"cluster", "connect", "127.0.0.1:1,nohost", "--ca", "a", "--cert", "b", "--key", "c"}, "nohost"},
		{[]string{"cluster", "connect", "--ca", "a", "--cert", "b", "--key", "c"}, "give a dispatcher"},
		{[]string{"cluster", "serve", "--lab", "x", "--registry", "http://127.0.0.1:2379"}, "etcd://HOST:PORT"},
		{[]string{"cluster", "serve", "--lab", "x", "--registry", "etcd://127.0.0.1:2379", "--registry-ca", "ca.crt"}, "together"},
		{[]string{"cluster", "serve", "--lab", "x", "--registry", "etcd://127.0.0.1:2379", "--registry-cluster", "a/b"}, "--registry-cluster"},
		{[]string{"cluster", "serve", "--lab", "x", "--advertise", "198.51.100.1"}, "need --registry"},
		{[]string{"cluster", "serve", "--lab", "x", "--registry", "etcd://127.0.0.1:2379", "--advertise", "--up x"}, "--advertise"},
		{[]string{"cluster", "dispatch", "--registry", "etcd://127.0.0.1:2379", "--listen", "nope"}, "--listen"},
		{[]string{"cluster", "dispatch", "--registry", "etcd://127.0.0.1:2379", "--listen", "127.0.0.1:0"}, "--ca, --cert and --key"},
		{[]string{"cluster", "dispatch", "--registry", "etcd://127.0.0.1:2379", "--listen", "127.0.0.1:0", "--strategy", "x"}, "--strategy"},
		{[]string{"cluster", "status", "abcd", "--registry", "etcd://127.0.0.1:2379"}, "give no ID"},
		// Plain TCP to an etcd beyond this host: refused, with the reason
		// and both ways out.
		{[]string{"cluster", "serve", "--lab", "x", "--registry", "etcd://198.18.2.2:2379"}, "--registry-insecure"},
		{[]string{"cluster", "dispatch", "--registry", "etcd://10.0.0.5:2379", "--listen", "127.0.0.1:0"}, "forge"},
		{[]string{"cluster", "status", "--registry", "etcd://127.0.0.1:2379,etcd.example.net:2379"}, "--registry-ca"},
		// Loopback, or --registry-insecure: the transport is accepted and
		// the next check speaks.
		{[]string{"cluster", "dispatch", "--registry", "etcd://[::1]:2379", "--listen", "127.0.0.1:0"}, "--ca, --cert and --key"},
		{[]string{"cluster", "dispatch", "--registry", "etcd://10.0.0.5:2379", "--registry-insecure", "--listen", "127.0.0.1:0"}, "--ca, --cert and --key"},
		{[]string{"cluster", "serve", "--lab", "x", "--irq", "yes"}, "--irq"},
		{[]string{"cluster", "serve", "--lab", "x", "--site", "10.97.0.1/24=branch"}, "--site"},
		{[]string{"cluster", "serve", "--lab", "x", "--site", "10.97.0.0/24=a/b"}, "common name"},
		{[]string{"cluster", "connect", "127.0.0.1:1", "--ca", "a", "--cert", "b", "--key", "c", "--tunnels", "2", "--route", "fd00:98::1/64"}, "--route"},
		{[]string{"cluster", "connect", "127.0.0.1:1", "--ca", "a", "--cert", "b", "--key", "c", "--tunnels", "0"}, `--tunnels "0"`},
		{[]string{"cluster", "connect", "--one-port", "nohost", "--tunnels", "2"}, "--one-port"},
		{[]string{"cluster", "connect", "127.0.0.1:1", "--one-port", "127.0.0.1:1194", "--tunnels", "2"}, "give one or the other"},
		{[]string{"cluster", "connect", "127.0.0.1:1", "--ca", "a", "--cert", "b", "--key", "c", "--tunnels", "2", "--route", "10.98.0.1/24"}, "--route"},
		{[]string{"cluster", "serve", "--lab", "x", "--nic", "eth0"}, "give --irq too"},
		{[]string{"cluster", "serve", "--lab", "x", "--irq", "plan", "--nic", "../eth0"}, "--nic"},
	} {
		ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
	}
	if after, _ := (cluster.Paths{}).List(); len(after) != len(before) {
		t.Errorf("clusters before %v, after %v", before, after)
	}
}

// The printed unit is one systemd accepts without a warning, and its
// ExecStart passes serve's flags through as written: blanks quoted, % and $
// doubled so that systemd expands no specifier or variable in them.
func TestClusterSystemdUnit(t *testing.T) {
	testenv.RequirePrograms(t, "systemd-analyze")
	verify := func(r result) {
		t.Helper()
		unit := filepath.Join(t.TempDir(), "ovpnperf-cluster-abcd.service")
		if err := os.WriteFile(unit, []byte(r.stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput()
		// verify exits 0 on a line it ignores, so any word from it is a failure.
		if err != nil || len(bytes.TrimSpace(out)) != 0 {
			t.Errorf("systemd-analyze verify: %v\n%s\nunit:\n%s", err, out, r.stdout)
		}
	}
	// A lone ";" (here a file name) is an argument, not a command separator.
	r := ovpnperf(t, "cluster", "systemd-unit", "--id", "abcd", "--", "--config", ";", "--instances", "2").mustSucceed(t)
	verify(r)
	if !strings.Contains(r.stdout, `cluster serve --id abcd --config \; --instances 2`+"\n") {
		t.Errorf("lone ; not escaped:\n%s", r.stdout)
	}
	r = ovpnperf(t, "cluster", "systemd-unit", "--id", "abcd", "--", "--config", "/etc/openvpn/my $server 100%.conf",
		"--public", "vpn.example.com", "--instances", "2").mustSucceed(t)
	verify(r)
	want := map[string]string{
		"ExecStart":    binary + ` cluster serve --id abcd --config "/etc/openvpn/my $$server 100%%.conf" --public vpn.example.com --instances 2`,
		"ExecStartPre": "-" + binary + " cluster clean abcd",
		"ExecStopPost": binary + " cluster clean abcd",
		"KillSignal":   "SIGTERM",
		"Type":         "simple",
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if w, known := want[k]; ok && known {
			if v != w {
				t.Errorf("%s=%s\nwant %s=%s", k, v, k, w)
			}
			delete(want, k)
		}
	}
	for k := range want {
		t.Errorf("unit has no %s:\n%s", k, r.stdout)
	}
}

// systemd-unit parses serve's flags with serve's own flag set and refuses
// what serve would refuse, before printing anything: a unit whose serve
// runs another cluster than its clean lines name, or that would not start.
func TestClusterSystemdUnitRefusesBadServeFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--id", "ad03"}, `--id "ad03"`},
		{[]string{"--lab", "x", "--id=ad02"}, `--id "ad02"`},
		{[]string{"--frobnicate"}, "--frobnicate"},
		{[]string{"--lab", "x", "--instances", "1000"}, `--instances "1000"`},
		{[]string{"--lab", "x", "extra"}, `"extra"`},
		{[]string{"--lab", "x", ";"}, `";"`},
		{[]string{"--lab", "x", "--spread", "random"}, `--spread "random"`},
		{[]string{"--lab", "x", "--nice", "99"}, `--nice "99"`},
		{[]string{"--lab", "x", "--dispatcher", "nope"}, `--dispatcher "nope"`},
		{[]string{"--instances", "2"}, "--config"},
		{[]string{"--lab", "x", "--netns", "y"}, "--lab and --netns"},
		{[]string{"--lab", "x", "--advertise", "h"}, "--registry"},
	} {
		r := ovpnperf(t, append([]string{"cluster", "systemd-unit", "--id", "ad02", "--"}, c.args...)...)
		r.mustBeUsageError(t, c.want)
		if r.stdout != "" {
			t.Errorf("%v: printed a unit:\n%s", c.args, r.stdout)
		}
	}
}
