package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The run document's package carries the emulator's ceiling report but
// must not link the emulator: its eBPF library would follow it into every
// package that only reads documents.
func TestMeasureDoesNotLinkTheEmulator(t *testing.T) {
	list := exec.Command("go", "list", "-deps", "./internal/measure")
	list.Dir = moduleRoot(t)
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps ./internal/measure: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps ./internal/measure named %d packages: %q", len(deps), deps)
	}
	for _, d := range deps {
		if d == "github.com/ovpnperf/ovpnperf/internal/emulate" || strings.HasPrefix(d, "github.com/cilium/ebpf") {
			t.Errorf("internal/measure links %s", d)
		}
	}
}
