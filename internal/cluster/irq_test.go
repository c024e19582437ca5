package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
)

// /proc/interrupts of a 2-CPU VM with a virtio-net NIC (virtio2: config,
// input.0, output.0 on MSI-X).
func TestParseInterrupts(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/interrupts-virtio-2cpu.txt")
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseInterrupts(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for n, name := range map[int]string{37: "virtio2-config", 38: "virtio2-input.0", 39: "virtio2-output.0", 26: "ttyS0"} {
		if m[n].name != name || len(m[n].counts) != 2 {
			t.Errorf("irq %d: %+v, want name %s and 2 counts", n, m[n], name)
		}
	}
	if _, ok := m[0]; ok {
		t.Errorf("a named row (NMI, LOC) parsed as irq 0")
	}
}

func TestCPUListsAndMasks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		list string
		mask string
	}{{"0", "00000001"}, {"0-1", "00000003"}, {"1,3-5", "0000003a"}, {"0,32", "00000001,00000001"}} {
		cpus, err := parseCPUList(c.list)
		if err != nil {
			t.Fatal(err)
		}
		if got := formatCPUList(cpus); got != c.list {
			t.Errorf("formatCPUList(%v) = %s, want %s", cpus, got, c.list)
		}
		if got := cpuMask(cpus); got != c.mask {
			t.Errorf("cpuMask(%v) = %s, want %s", cpus, got, c.mask)
		}
		if back, _ := maskCPUs(c.mask); !slices.Equal(back, cpus) {
			t.Errorf("maskCPUs(%s) = %v, want %v", c.mask, back, cpus)
		}
	}
	if !sameMask("0", "00000000") || sameMask("3", "1") {
		t.Errorf("sameMask")
	}
	if q := queueIndex("virtio2-input.3"); q != 3 {
		t.Errorf("queueIndex = %d", q)
	}
	if q := queueIndex("mlx5_comp2@pci:0000:3b:00.0"); q != 2 {
		t.Errorf("queueIndex mlx5 = %d", q)
	}
}

func virtioNIC() NIC {
	return NIC{Dev: "eth0", Device: "/sys/devices/pci0000:00/0000:00:03.0/virtio2", Driver: "virtio_net",
		IRQs: []IRQ{{Num: 37, Name: "virtio2-config", Affinity: "0-1"},
			{Num: 38, Name: "virtio2-input.0", Affinity: "0-1", Queue: true},
			{Num: 39, Name: "virtio2-output.0", Affinity: "0-1", Queue: true}},
		RX: []Queue{{Name: "rx-0", Mask: "0", HasMask: true}}, TX: []Queue{{Name: "tx-0"}}}
}

func planLine(t *testing.T, plan []IRQChange, path string) IRQChange {
	t.Helper()
	for _, ch := range plan {
		if ch.Path == path {
			return ch
		}
	}
	t.Fatalf("no plan line for %s in %+v", path, plan)
	return IRQChange{}
}

func TestPlanIRQ(t *testing.T) {
	t.Parallel()
	t.Run("every CPU runs an instance", func(t *testing.T) {
		plan, notes := PlanIRQ([]int{0, 1}, []int{0, 1}, []NIC{virtioNIC()})
		if ch := planLine(t, plan, "/proc/irq/37/smp_affinity_list"); ch.New != "0-1" {
			t.Errorf("config vector moved: %+v", ch)
		}
		if ch := planLine(t, plan, "/proc/irq/38/smp_affinity_list"); ch.New != "0" {
			t.Errorf("input.0: %+v, want CPU 0", ch)
		}
		if ch := planLine(t, plan, "/sys/class/net/eth0/queues/rx-0/rps_cpus"); ch.New != "00000003" {
			t.Errorf("rps: %+v, want both CPUs", ch)
		}
		if !strings.Contains(strings.Join(notes, "\n"), "every online CPU runs an instance") {
			t.Errorf("notes %q", notes)
		}
	})
	t.Run("spare CPUs take the interrupts", func(t *testing.T) {
		n := virtioNIC()
		n.RX = []Queue{{Name: "rx-0", Mask: "0", HasMask: true}, {Name: "rx-1", Mask: "0", HasMask: true}}
		n.IRQs = append(n.IRQs, IRQ{Num: 40, Name: "virtio2-input.1", Affinity: "0-7", Queue: true})
		plan, _ := PlanIRQ([]int{0, 1, 2, 3, 4, 5, 6, 7}, []int{0, 1, 2, 3, 4, 5}, []NIC{n})
		if ch := planLine(t, plan, "/proc/irq/38/smp_affinity_list"); ch.New != "6" {
			t.Errorf("input.0: %+v, want CPU 6", ch)
		}
		if ch := planLine(t, plan, "/proc/irq/39/smp_affinity_list"); ch.New != "6" {
			t.Errorf("output.0: %+v, want CPU 6 (beside its rx vector)", ch)
		}
		if ch := planLine(t, plan, "/proc/irq/40/smp_affinity_list"); ch.New != "7" {
			t.Errorf("input.1: %+v, want CPU 7", ch)
		}
		// 2 rx queues for 2 interrupt CPUs: no RPS.
		if ch := planLine(t, plan, "/sys/class/net/eth0/queues/rx-0/rps_cpus"); ch.New != ch.Old {
			t.Errorf("rps with as many queues as CPUs: %+v", ch)
		}
	})
	t.Run("veth: RPS/XPS only, and says so", func(t *testing.T) {
		n := NIC{Dev: "s0", Netns: "ovpnperf-x-server", RX: []Queue{{Name: "rx-0", Mask: "0", HasMask: true}}, TX: []Queue{{Name: "tx-0", Mask: "0", HasMask: true}}}
		plan, notes := PlanIRQ([]int{0, 1}, []int{0, 1}, []NIC{n})
		if len(plan) != 1 || plan[0].Netns != n.Netns || plan[0].New != "00000003" {
			t.Errorf("plan %+v, want one RPS line in the namespace", plan)
		}
		if !strings.Contains(strings.Join(notes, "\n"), "covers RPS/XPS only") {
			t.Errorf("notes %q", notes)
		}
	})
	t.Run("XPS over several tx queues", func(t *testing.T) {
		n := virtioNIC()
		n.TX = []Queue{{Name: "tx-0", Mask: "0", HasMask: true}, {Name: "tx-1", Mask: "0", HasMask: true}}
		plan, _ := PlanIRQ([]int{0, 1, 2, 3}, []int{0, 1, 2, 3}, []NIC{n})
		if ch := planLine(t, plan, "/sys/class/net/eth0/queues/tx-1/xps_cpus"); ch.New != "0000000a" {
			t.Errorf("xps tx-1: %+v, want CPUs 1,3", ch)
		}
	})
	for _, ch := range func() []IRQChange { p, _ := PlanIRQ([]int{0, 1}, []int{0}, []NIC{virtioNIC()}); return p }() {
		if ch.Reason == "" {
			t.Errorf("line without a reason: %+v", ch)
		}
	}
}

// Clean writes what the state file names: only affinity and RPS/XPS files.
func TestRestoreSysfsRefusesOtherPaths(t *testing.T) {
	for _, p := range []string{"/etc/passwd", "/proc/irq/38/../../sys/kernel/x", "/sys/class/net/eth0/queues/rx-0/../../mtu", "/proc/sys/net/ipv4/ip_forward"} {
		if err := restoreSysfs(t.Context(), hostnet.NewFake(""), Resource{Kind: KindSysfs, Name: p, Detail: "1"}); err == nil {
			t.Errorf("restoreSysfs wrote %s", p)
		}
	}
}

func TestIrqbalanceNote(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	if irqbalancePid(proc) != 0 {
		t.Fatal("irqbalance found in an empty /proc")
	}
	if err := os.MkdirAll(filepath.Join(proc, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "4242", "comm"), []byte("irqbalance\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid := irqbalancePid(proc); pid != 4242 {
		t.Errorf("irqbalance pid %d, want 4242", pid)
	}
}

func TestIrqbalanceNoteText(t *testing.T) {
	t.Parallel()
	n := irqbalanceNote(4242, []int{0, 1}, []NIC{virtioNIC()})
	for _, want := range []string{"pid 4242", "will undo", "IRQBALANCE_BANNED_CPULIST=0-1", "--banirq=38", "does not stop it"} {
		if !strings.Contains(n, want) {
			t.Errorf("note %q lacks %q", n, want)
		}
	}
}
