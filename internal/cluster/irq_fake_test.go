package cluster

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
)

// virtioRoot lays out, under a fake's root, the /sys and /proc of a VM
// whose eth0 is virtio2 on PCI function 0000:00:03.0 (MSI-X vectors 37-39,
// one rx and one tx queue), as the kernel links them.
func virtioRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	pci := "sys/devices/pci0000:00/0000:00:03.0"
	dev := pci + "/virtio2/net/eth0"
	files := map[string]string{
		dev + "/queues/rx-0/rps_cpus":            "0\n",
		dev + "/queues/tx-0/xps_cpus":            "3\n",
		pci + "/msi_irqs/37":                     "msix\n",
		pci + "/msi_irqs/38":                     "msix\n",
		pci + "/msi_irqs/39":                     "msix\n",
		"sys/bus/virtio/drivers/virtio_net/bind": "",
		"proc/irq/37/smp_affinity_list":          "0-1\n",
		"proc/irq/38/smp_affinity_list":          "1\n",
		"proc/irq/39/smp_affinity_list":          "0\n",
	}
	b, err := os.ReadFile("testdata/interrupts-virtio-2cpu.txt")
	if err != nil {
		t.Fatal(err)
	}
	files["proc/interrupts"] = string(b)
	for p, v := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"sys/class/net/eth0":    "../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0",
		dev + "/device":         "../../../virtio2",
		pci + "/virtio2/driver": "../../../../bus/virtio/drivers/virtio_net",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// ReadNIC reads a NIC through its namespace's Host: the bus device and
// driver behind the links, the PCI function's vectors with their
// /proc/interrupts names, affinities and queue masks; restoring a queue
// mask writes it through the Host too.
func TestReadNICOnFake(t *testing.T) {
	t.Parallel()
	root := virtioRoot(t)
	h := hostnet.NewFake("ovpnperf-irqtest")
	h.SetRoot(root)
	n, err := ReadNIC(t.Context(), h, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	want := NIC{Dev: "eth0", Netns: "ovpnperf-irqtest", Device: "/sys/devices/pci0000:00/0000:00:03.0/virtio2", Driver: "virtio_net",
		IRQs: []IRQ{{Num: 37, Name: "virtio2-config", Affinity: "0-1", Counts: []uint64{0, 0}},
			{Num: 38, Name: "virtio2-input.0", Affinity: "1", Counts: []uint64{0, 4453}, Queue: true},
			{Num: 39, Name: "virtio2-output.0", Affinity: "0", Counts: []uint64{5531, 0}, Queue: true}},
		RX: []Queue{{Name: "rx-0", Mask: "0", HasMask: true}}, TX: []Queue{{Name: "tx-0", Mask: "3", HasMask: true}}}
	if !reflect.DeepEqual(n, want) {
		t.Errorf("ReadNIC:\n got %+v\nwant %+v", n, want)
	}
	if _, err := ReadNIC(t.Context(), h, "eth1"); err == nil {
		t.Error("ReadNIC read a device the namespace lacks")
	}
	rps := "/sys/class/net/eth0/queues/rx-0/rps_cpus"
	if err := restoreSysfs(t.Context(), h, Resource{Kind: KindSysfs, Name: rps, Detail: "2"}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/queues/rx-0/rps_cpus")); err != nil || strings.TrimSpace(string(b)) != "2" {
		t.Errorf("rps_cpus after restoring 2: %q, %v", b, err)
	}
}
