// Package openvpntest holds checks that tests make with the real openvpn
// binary. It imports nothing of ovpnperf, so that any package's tests can
// use it.
package openvpntest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// CheckParses starts `openvpn --cd DIR --config CONFIG --verb 0` in a new
// network namespace (unshare -n: it has only lo, and disappears with the
// process) and checks that after 3 s it is still running (it got past
// option parsing and waits for the network) or, if it stopped, that it did
// not stop on an option error; it kills the process afterwards. The caller
// requires the programs openvpn, unshare and ip.
func CheckParses(t testing.TB, dir, config string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-n", "sh", "-c", `ip link set lo up && exec openvpn --cd "$1" --config "$2" --verb 0`, "ovpnperf-test-openvpn", dir, config)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if optionError(out.String()) {
			t.Fatalf("OpenVPN refused %s: %v\n%s", config, err, out.String())
		}
		text, _ := os.ReadFile(config)
		t.Fatalf("openvpn exited within 3 s (%v) without an option error; output:\n%s\nconfig:\n%s", err, out.String(), text)
	case <-time.After(3 * time.Second):
	}
	_ = cmd.Process.Kill()
	<-done
	if optionError(out.String()) {
		t.Fatalf("OpenVPN refused %s:\n%s", config, out.String())
	}
}

func optionError(out string) bool {
	return strings.Contains(out, "Options error") || strings.Contains(out, "Unrecognized option")
}
