package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
)

// Bad input: one line, exit 2, no cluster directory made.
func TestClusterUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bridge := filepath.Join(dir, "bridge.conf")
	if err := os.WriteFile(bridge, []byte("dev tap0\nserver-bridge 10.8.0.4 255.255.255.0 10.8.0.128 10.8.0.254\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := cluster.List()
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
		{[]string{"cluster", "clean"}, "accepts 1 arg"},
		{[]string{"cluster", "systemd-unit"}, "--id"},
		{[]string{"cluster", "connect", "127.0.0.1:1"}, "--ca, --cert and --key"},
	} {
		ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
	}
	if after, _ := cluster.List(); len(after) != len(before) {
		t.Errorf("clusters before %v, after %v", before, after)
	}
}
