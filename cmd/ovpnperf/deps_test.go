package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The packages of the documents (measure's run document, which carries the
// emulator's ceiling report, and report, which reads every document, tune's
// with its lab path) must not link the lab and its emulator: the eBPF
// library would follow it into every command that only reads documents.
func TestDocumentsDoNotLinkTheEmulator(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"./internal/measure", "./internal/report"} {
		list := exec.Command("go", "list", "-deps", pkg)
		list.Dir = moduleRoot(t)
		out, err := list.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s named %d packages: %q", pkg, len(deps), deps)
		}
		for _, d := range deps {
			if d == "github.com/ovpnperf/ovpnperf/internal/emulate" || d == "github.com/ovpnperf/ovpnperf/internal/lab" || strings.HasPrefix(d, "github.com/cilium/ebpf") {
				t.Errorf("%s links %s", pkg, d)
			}
		}
	}
}
