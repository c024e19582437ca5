package cluster_test

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/syncbuf"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// hostNIC is the host's default-route device and its interrupts as
// /proc and /sys show them, read here independently of the code under
// test: a virtio NIC's vectors are the /proc/interrupts lines named
// virtioK-…, another PCI NIC's are its msi_irqs.
func hostNIC(t *testing.T) (dev string, irqs []int) {
	t.Helper()
	out, err := exec.Command("ip", "-o", "route", "show", "default").Output()
	f := strings.Fields(string(out))
	i := slices.Index(f, "dev")
	if err != nil || i < 0 || i+1 >= len(f) {
		testenv.SkipOrFail(t, "no default route on the host: no NIC to plan for")
	}
	dev = f[i+1]
	devPath, err := filepath.EvalSymlinks("/sys/class/net/" + dev + "/device")
	if err != nil {
		testenv.SkipOrFail(t, "%s has no bus device (virtual): no interrupts to place", dev)
	}
	if base := filepath.Base(devPath); regexp.MustCompile(`^virtio\d+$`).MatchString(base) {
		for _, l := range strings.Split(readTrim(t, "/proc/interrupts"), "\n") {
			f := strings.Fields(l)
			if len(f) > 2 && strings.HasPrefix(f[len(f)-1], base+"-") {
				n, _ := strconv.Atoi(strings.TrimSuffix(f[0], ":"))
				irqs = append(irqs, n)
			}
		}
	} else {
		es, _ := os.ReadDir(devPath + "/msi_irqs")
		for _, e := range es {
			n, _ := strconv.Atoi(e.Name())
			irqs = append(irqs, n)
		}
	}
	slices.Sort(irqs)
	if len(irqs) == 0 {
		testenv.SkipOrFail(t, "%s (%s): no MSI/MSI-X interrupts found", dev, devPath)
	}
	return dev, irqs
}

// TestIRQPlanApplyRestore is must-show 4 on the host's real NIC: --irq
// plan lists the NIC's interrupts and masks as /proc and /sys show them;
// --irq apply changes a queue interrupt's affinity and an RPS mask;
// `cluster stop` restores both exactly, and so does `cluster clean` after
// SIGKILL of serve. The test writes the originals back itself whatever
// happens (t.Cleanup), so a failure leaves the host as it was.
func TestIRQPlanApplyRestore(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn")
	dev, irqs := hostNIC(t)
	online := readTrim(t, "/sys/devices/system/cpu/online")
	if online == "0" {
		testenv.SkipOrFail(t, "one CPU: no affinity to change")
	}
	l := labtest.New(t, labpath.Path{})
	bin := testBinary(t)
	rps := "/sys/class/net/" + dev + "/queues/rx-0/rps_cpus"
	files := []string{rps}
	for _, n := range irqs {
		files = append(files, "/proc/irq/"+strconv.Itoa(n)+"/smp_affinity_list")
	}
	orig := map[string]string{}
	for _, f := range files {
		orig[f] = readTrim(t, f)
	}
	writable := map[string]bool{}
	t.Cleanup(func() {
		for _, f := range files {
			if err := os.WriteFile(f, []byte(orig[f]+"\n"), 0o644); err != nil && writable[f] {
				t.Errorf("restoring %s to %q: %v", f, orig[f], err)
			}
		}
	})
	// A starting point that the plan must change: every queue interrupt
	// on all CPUs, RPS off. (The plan puts a queue on one CPU and, with
	// one rx queue and 2+ CPUs, RPS on several.)
	before := map[string]string{}
	for _, f := range files {
		v := online
		if f == rps {
			v = "0"
		}
		if err := os.WriteFile(f, []byte(v+"\n"), 0o644); err != nil {
			t.Logf("setting %s to %s: %v (kept as is)", f, v, err)
		} else {
			writable[f] = true
		}
		before[f] = readTrim(t, f)
	}
	current := func() map[string]string {
		m := map[string]string{}
		for _, f := range files {
			m[f] = readTrim(t, f)
		}
		return m
	}
	serve := func(id, mode string) (*exec.Cmd, chan struct{}, *syncbuf.Buffer, *cluster.IRQReport) {
		p := startServe(t, id, "--lab", l.Name(), "--instances", "2", "--irq", mode, "--nic", dev, "--drain", "0s")
		cmd, exited, out := p.cmd, p.exited, p.out
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for {
			st, err := cluster.Paths{}.QueryStatus(ctx, id)
			if err == nil && st.IRQ != nil {
				return cmd, exited, out, st.IRQ
			}
			select {
			case <-exited:
				t.Fatalf("serve --irq %s exited:\n%s", mode, out.String())
			case <-ctx.Done():
				t.Fatalf("serve --irq %s: no status: %v\n%s", mode, err, out.String())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	t.Run("plan", func(t *testing.T) {
		id := cluster.NewID()
		_, exited, out, r := serve(id, cluster.IRQPlan)
		if len(r.NICs) != 1 || r.NICs[0].Dev != dev {
			t.Fatalf("plan NICs %+v, want %s", r.NICs, dev)
		}
		var got []int
		for _, q := range r.NICs[0].IRQs {
			got = append(got, q.Num)
			if want := before["/proc/irq/"+strconv.Itoa(q.Num)+"/smp_affinity_list"]; q.Affinity != want {
				t.Errorf("irq %d: plan reads smp_affinity_list %q, /proc has %q", q.Num, q.Affinity, want)
			}
		}
		if !slices.Equal(got, irqs) {
			t.Errorf("plan lists irqs %v of %s, /proc/interrupts has %v", got, dev, irqs)
		}
		if len(r.NICs[0].RX) == 0 || r.NICs[0].RX[0].Mask != before[rps] {
			t.Errorf("plan reads rx queues %+v, %s has %q", r.NICs[0].RX, rps, before[rps])
		}
		for _, ch := range r.Plan {
			if ch.Reason == "" {
				t.Errorf("plan line without a reason: %+v", ch)
			}
		}
		if got := current(); !maps.Equal(got, before) {
			t.Errorf("--irq plan changed the host: %v, was %v", got, before)
		}
		if b, err := exec.Command(bin, "cluster", "stop", id).CombinedOutput(); err != nil {
			t.Fatalf("cluster stop: %v\n%s", err, b)
		}
		<-exited
		if !strings.Contains(out.String(), "irq plan") {
			t.Errorf("serve printed no plan:\n%s", out.String())
		}
	})
	apply := func(t *testing.T, id string) (*exec.Cmd, chan struct{}) {
		cmd, exited, out, r := serve(id, cluster.IRQApply)
		now := current()
		changedIRQ := false
		for _, f := range files[1:] {
			changedIRQ = changedIRQ || now[f] != before[f]
		}
		if !changedIRQ || now[rps] == before[rps] {
			t.Fatalf("--irq apply changed no IRQ affinity or no RPS mask: before %v, now %v\n%s", before, now, out.String())
		}
		for _, ch := range r.Plan {
			if ch.New != ch.Old && (ch.Path == rps || slices.Contains(files, ch.Path)) {
				if ch.Path == rps && !sameHexMask(now[rps], ch.New) || ch.Path != rps && now[ch.Path] != ch.New {
					t.Errorf("%s: plan says %s, /proc has %s", ch.Path, ch.New, now[ch.Path])
				}
			}
		}
		return cmd, exited
	}
	t.Run("apply-stop", func(t *testing.T) {
		id := cluster.NewID()
		_, exited := apply(t, id)
		if b, err := exec.Command(bin, "cluster", "stop", id).CombinedOutput(); err != nil {
			t.Fatalf("cluster stop: %v\n%s", err, b)
		}
		<-exited
		if got := current(); !maps.Equal(got, before) {
			t.Errorf("after cluster stop: %v, want %v", got, before)
		}
		checkClusterGone(t, id, l.Namespace(lab.Server))
	})
	t.Run("apply-kill-clean", func(t *testing.T) {
		id := cluster.NewID()
		cmd, exited := apply(t, id)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		if got := current(); maps.Equal(got, before) {
			t.Fatalf("after SIGKILL the values are already back: the test would prove nothing")
		}
		if b, err := exec.Command(bin, "cluster", "clean", id).CombinedOutput(); err != nil {
			t.Fatalf("cluster clean: %v\n%s", err, b)
		}
		if got := current(); !maps.Equal(got, before) {
			t.Errorf("after cluster clean: %v, want %v", got, before)
		}
		checkClusterGone(t, id, l.Namespace(lab.Server))
	})
}

func sameHexMask(a, b string) bool {
	x, err1 := strconv.ParseUint(strings.ReplaceAll(a, ",", ""), 16, 64)
	y, err2 := strconv.ParseUint(strings.ReplaceAll(b, ",", ""), 16, 64)
	return err1 == nil && err2 == nil && x == y
}
