package hostnet_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// fileSteps reads and writes a device's files as the cluster's --irq does
// (its mtu stands for a file only its namespace shows), on a Host that
// has device dev with MTU 1400, a queue rx-0, and no device "nosuchdev0".
func fileSteps(t *testing.T, h hostnet.Host, dev string) {
	t.Helper()
	ctx := context.Background()
	base := "/sys/class/net/" + dev
	if b, err := h.ReadFile(ctx, base+"/mtu"); err != nil || strings.TrimSpace(string(b)) != "1400" {
		t.Errorf("%s/mtu: %q, %v; want 1400", base, b, err)
	}
	if _, err := h.ReadFile(ctx, "/sys/class/net/nosuchdev0/mtu"); !hostnet.IsNotExist(err) {
		t.Errorf("reading a missing device's file: %v; want a missing file", err)
	}
	if r, err := h.EvalSymlinks(ctx, base); err != nil || r != "/sys/devices/virtual/net/"+dev {
		t.Errorf("%s resolves to %q, %v; want /sys/devices/virtual/net/%s", base, r, err, dev)
	}
	if qs, err := h.ReadDir(ctx, base+"/queues"); err != nil || !slices.Contains(qs, "rx-0") {
		t.Errorf("%s/queues: %v, %v; want rx-0 among them", base, qs, err)
	}
	rps := base + "/queues/rx-0/rps_cpus"
	if err := h.WriteFile(ctx, rps, []byte("1\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := h.ReadFile(ctx, rps); err != nil || strings.TrimLeft(strings.TrimSpace(string(b)), "0,") != "1" {
		t.Errorf("%s after writing 1: %q, %v", rps, b, err)
	}
	for _, p := range []string{"/etc/passwd", "/sys/class/net/../../etc/passwd", "sys/class/net"} {
		if _, err := h.ReadFile(ctx, p); err == nil {
			t.Errorf("read %s", p)
		}
		if err := h.WriteFile(ctx, p, []byte("x")); err == nil {
			t.Errorf("wrote %s", p)
		}
	}
}

// TestKernelFiles: a namespace's /sys shows its own devices (not the
// caller's namespace's) and takes writes, as the cluster's --irq needs.
func TestKernelFiles(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ns := "ovpnperf-hostnet-" + id
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(ns); err != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	})
	h := hostnet.Open(ns)
	dev := "h" + id
	if err := h.VethAdd(ctx, dev, 1400, "p"+id, ns); err != nil {
		t.Fatal(err)
	}
	fileSteps(t, h, dev)
	if _, err := hostnet.Open("").ReadFile(ctx, "/sys/class/net/"+dev+"/mtu"); !hostnet.IsNotExist(err) {
		t.Errorf("the caller's namespace shows %s: %v", dev, err)
	}
}

// TestFakeFiles: the fake's files are its root's, as a test lays them out.
func TestFakeFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dev := filepath.Join(root, "sys/devices/virtual/net/v0")
	for p, v := range map[string]string{"mtu": "1400\n", "queues/rx-0/rps_cpus": "0\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dev, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dev, p), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/class/net"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../devices/virtual/net/v0", filepath.Join(root, "sys/class/net/v0")); err != nil {
		t.Fatal(err)
	}
	f := hostnet.NewFake("")
	if _, err := f.ReadFile(context.Background(), "/sys/class/net/v0/mtu"); !hostnet.IsNotExist(err) {
		t.Errorf("a fake without a root has a file: %v", err)
	}
	f.SetRoot(root)
	fileSteps(t, f, "v0")
}
