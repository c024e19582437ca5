package cluster

// Interrupt and receive-packet-steering placement (`cluster serve --irq`).
//
// The multi-instance layout pins one OpenVPN process per CPU. The NIC's
// interrupts and the softirq work they start (receive, transmit, RPS) land
// on whatever CPUs the kernel or irqbalance chose, and steal cycles from the
// instance pinned there. The plan below reads what is (IRQs from the NIC's
// MSI/MSI-X vectors and /proc/interrupts, smp_affinity_list, rps_cpus,
// xps_cpus, irqbalance), proposes one layout with a reason per line, and
// `apply` writes it after recording every old value in the state file, so
// that Stop and Clean put back exactly what was there.
//
//	CPUs not running an instance ──▶ take the queues' interrupts (and RPS)
//	every CPU runs an instance   ──▶ queue interrupts spread one per CPU,
//	                                 RPS over all CPUs when queues < CPUs

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// KindSysfs is a /proc or /sys value the cluster changed: Name is the path,
// Netns where it was written (a net device's queues are per namespace),
// Detail the value before.
const KindSysfs = "sysfs"

// parseCPUList reads a kernel CPU list ("0-3,6", "" or "\n" for none).
func parseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	var out []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b > 8191 {
			return nil, fmt.Errorf("CPU list %q", s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// cpuMask writes cpus as the hex mask rps_cpus and xps_cpus take
// (comma-separated 32-bit words, as the kernel prints them).
func cpuMask(cpus []int) string {
	m := new(big.Int)
	for _, c := range cpus {
		m.SetBit(m, c, 1)
	}
	h := m.Text(16)
	if pad := (8 - len(h)%8) % 8; pad > 0 {
		h = strings.Repeat("0", pad) + h
	}
	var words []string
	for i := 0; i < len(h); i += 8 {
		words = append(words, h[i:i+8])
	}
	return strings.Join(words, ",")
}

// maskCPUs reads a hex mask ("00000003", "0", "ff,00000000").
func maskCPUs(s string) ([]int, error) {
	h := strings.ReplaceAll(strings.TrimSpace(s), ",", "")
	m, ok := new(big.Int).SetString(h, 16)
	if !ok {
		return nil, fmt.Errorf("CPU mask %q", s)
	}
	var out []int
	for i := 0; i < m.BitLen(); i++ {
		if m.Bit(i) == 1 {
			out = append(out, i)
		}
	}
	return out, nil
}

// sameMask reports whether two masks name the same CPUs ("0" and
// "00000000" do).
func sameMask(a, b string) bool {
	x, err1 := maskCPUs(a)
	y, err2 := maskCPUs(b)
	return err1 == nil && err2 == nil && slices.Equal(x, y)
}

// interruptsLine is one numbered line of /proc/interrupts.
type interruptsLine struct {
	num    int
	counts []uint64
	name   string
}

// parseInterrupts reads /proc/interrupts: the header names the CPUs, each
// numbered line has one count per CPU, then chip and hardware IRQ fields,
// and the action name(s) last.
func parseInterrupts(s string) (map[int]interruptsLine, error) {
	lines := strings.Split(s, "\n")
	if len(lines) == 0 {
		return nil, errors.New("empty /proc/interrupts")
	}
	ncpu := len(strings.Fields(lines[0]))
	out := map[int]interruptsLine{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 1 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(f[0], ":"))
		if err != nil {
			continue // NMI, LOC …
		}
		il := interruptsLine{num: n}
		for i := 1; i <= ncpu && i < len(f); i++ {
			c, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				break
			}
			il.counts = append(il.counts, c)
		}
		if rest := f[1+len(il.counts):]; len(rest) > 0 {
			// Chip, hwirq and trigger come first; the action names
			// last (several, comma-separated, for a shared line).
			il.name = rest[len(rest)-1]
		}
		out[n] = il
	}
	return out, nil
}

// notQueue names interrupts of a NIC that carry no packets.
var notQueue = regexp.MustCompile(`(?i)config|control|ctrl|event|async|-link|lsc|mbx|misc`)

// queueIndex is the queue number in an IRQ name (virtio2-input.3 → 3,
// eth0-TxRx-1 → 1, mlx5_comp2@pci:… → 2), -1 if none.
func queueIndex(name string) int {
	name, _, _ = strings.Cut(name, "@")
	m := regexp.MustCompile(`(\d+)\D*$`).FindStringSubmatch(name)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// sysfs reads and writes files of one network namespace's view of /sys
// (a named namespace's net devices are visible only under `ip netns exec`,
// which mounts its own /sys). /proc/irq is global and read directly.
// proc and sys are where /proc and /sys are read and written in this
// namespace, the real ones when empty; tests give directories of their own.
type sysfs struct{ ns, proc, sys string }

func (s sysfs) procRoot() string {
	if s.proc == "" {
		return "/proc"
	}
	return s.proc
}

func (s sysfs) sysRoot() string {
	if s.sys == "" {
		return "/sys"
	}
	return s.sys
}

func (s sysfs) read(ctx context.Context, path string) (string, error) {
	if s.ns == "" || !strings.HasPrefix(path, "/sys/") {
		b, err := os.ReadFile(s.rooted(path))
		return strings.TrimSpace(string(b)), err
	}
	b, err := runner.RunIn(ctx, s.ns, "cat", path)
	return strings.TrimSpace(string(b)), err
}

func (s sysfs) list(ctx context.Context, dir string) ([]string, error) {
	if s.ns == "" {
		es, err := os.ReadDir(s.rooted(dir))
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out, err
	}
	b, err := runner.RunIn(ctx, s.ns, "ls", "-1", dir)
	return strings.Fields(string(b)), err
}

func (s sysfs) exists(ctx context.Context, path string) bool {
	if s.ns == "" {
		_, err := os.Stat(s.rooted(path))
		return err == nil
	}
	_, err := runner.RunIn(ctx, s.ns, "test", "-e", path)
	return err == nil
}

func (s sysfs) readlink(ctx context.Context, path string) string {
	if s.ns == "" {
		p, err := filepath.EvalSymlinks(s.rooted(path))
		if err != nil {
			return ""
		}
		return s.unrooted(p)
	}
	b, err := runner.RunIn(ctx, s.ns, "readlink", "-e", path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// write sets path to value. Equivalent to: [ip netns exec NS] sh -c 'echo VALUE > PATH'
func (s sysfs) write(ctx context.Context, path, value string) error {
	if s.ns == "" || !strings.HasPrefix(path, "/sys/") {
		return os.WriteFile(s.rooted(path), []byte(value+"\n"), 0o644)
	}
	_, err := runner.RunIn(ctx, s.ns, "sh", "-c", `printf '%s\n' "$1" > "$2"`, "ovpnperf-sysfs", value, path)
	return err
}

// rooted maps /proc/… and /sys/… onto s's roots.
func (s sysfs) rooted(p string) string {
	if r, ok := strings.CutPrefix(p, "/proc/"); ok {
		return filepath.Join(s.procRoot(), r)
	}
	if r, ok := strings.CutPrefix(p, "/sys/"); ok {
		return filepath.Join(s.sysRoot(), r)
	}
	return p
}

func (s sysfs) unrooted(p string) string {
	if r, ok := strings.CutPrefix(p, s.sysRoot()+"/"); ok {
		return "/sys/" + r
	}
	return p
}

// sysfsPathRE is what a KindSysfs resource may name: Clean writes to it
// from the state file, so nothing else is accepted.
var sysfsPathRE = regexp.MustCompile(`^(/proc/irq/[0-9]+/smp_affinity_list|/sys/class/net/[^/\s]{1,15}/queues/(rx|tx)-[0-9]+/(rps_cpus|xps_cpus))$`)

func restoreSysfs(ctx context.Context, r Resource) error {
	if !sysfsPathRE.MatchString(r.Name) {
		return fmt.Errorf("state file names %q: not an IRQ affinity or RPS/XPS file; left alone", r.Name)
	}
	if err := (sysfs{ns: r.Netns}).write(ctx, r.Name, r.Detail); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // the device went away
		}
		return fmt.Errorf("restoring %s to %q: %w", r.Name, r.Detail, err)
	}
	return nil
}

// ReadNIC reads dev's interrupts and queues in namespace ns ("" = here).
func ReadNIC(ctx context.Context, ns, dev string) (NIC, error) {
	fs := sysfs{ns: ns}
	base := "/sys/class/net/" + dev
	if !fs.exists(ctx, base) {
		return NIC{}, fmt.Errorf("no network device %s", dev)
	}
	n := NIC{Dev: dev, Netns: ns}
	if d := fs.readlink(ctx, base+"/device"); d != "" {
		n.Device = d
		if drv := fs.readlink(ctx, base+"/device/driver"); drv != "" {
			n.Driver = filepath.Base(drv)
		}
	}
	qs, err := fs.list(ctx, base+"/queues")
	if err != nil {
		return n, fmt.Errorf("queues of %s: %w", dev, err)
	}
	sort.Slice(qs, func(i, j int) bool { return queueIndex(qs[i]) < queueIndex(qs[j]) })
	for _, q := range qs {
		file := "rps_cpus"
		if strings.HasPrefix(q, "tx-") {
			file = "xps_cpus"
		}
		qu := Queue{Name: q}
		if m, err := fs.read(ctx, base+"/queues/"+q+"/"+file); err == nil {
			qu.Mask, qu.HasMask = m, true
		}
		if strings.HasPrefix(q, "rx-") {
			n.RX = append(n.RX, qu)
		} else if strings.HasPrefix(q, "tx-") {
			n.TX = append(n.TX, qu)
		}
	}
	if n.Device == "" {
		return n, nil
	}
	// The MSI/MSI-X vectors: of the device itself (most PCI NICs), or of
	// its parent (a virtio device sits on a PCI function that owns them).
	var nums []int
	for _, d := range []string{n.Device, filepath.Dir(n.Device)} {
		es, err := os.ReadDir(fs.rooted(d + "/msi_irqs"))
		if err != nil {
			continue
		}
		for _, e := range es {
			if k, err := strconv.Atoi(e.Name()); err == nil {
				nums = append(nums, k)
			}
		}
		break
	}
	if len(nums) == 0 {
		// A legacy (INTx) line.
		if b, err := os.ReadFile(fs.rooted(n.Device + "/irq")); err == nil {
			if k, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && k > 0 {
				nums = append(nums, k)
			}
		}
	}
	b, err := os.ReadFile(fs.rooted("/proc/interrupts"))
	if err != nil {
		return n, err
	}
	lines, err := parseInterrupts(string(b))
	if err != nil {
		return n, err
	}
	sort.Ints(nums)
	for _, k := range nums {
		irq := IRQ{Num: k, Name: lines[k].name, Counts: lines[k].counts}
		irq.Queue = irq.Name != "" && !notQueue.MatchString(irq.Name)
		if irq.Affinity, err = fs.read(ctx, fmt.Sprintf("/proc/irq/%d/smp_affinity_list", k)); err != nil {
			return n, fmt.Errorf("irq %d of %s: %w", k, dev, err)
		}
		irq.Effective, _ = fs.read(ctx, fmt.Sprintf("/proc/irq/%d/effective_affinity_list", k))
		n.IRQs = append(n.IRQs, irq)
	}
	return n, nil
}

// irqbalancePid returns the pid of a running irqbalance, 0 if none.
func (s sysfs) irqbalancePid() int {
	ds, _ := filepath.Glob(filepath.Join(s.procRoot(), "[0-9]*", "comm"))
	for _, d := range ds {
		b, err := os.ReadFile(d)
		if err == nil && strings.TrimSpace(string(b)) == "irqbalance" {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			return pid
		}
	}
	return 0
}

// irqbalanceNote tells what a running irqbalance will do to the plan and
// how the admin keeps it away; ovpnperf never stops it.
func irqbalanceNote(pid int, instanceCPUs []int, nics []NIC) string {
	var irqs []string
	for _, n := range nics {
		for _, q := range n.IRQs {
			irqs = append(irqs, "--banirq="+strconv.Itoa(q.Num))
		}
	}
	return fmt.Sprintf("irqbalance runs (pid %d): it rewrites smp_affinity_list every 10 s and will undo this plan's IRQ lines (ovpnperf does not stop it). "+
		"To keep it away, set IRQBALANCE_BANNED_CPULIST=%s (the instances' CPUs) or IRQBALANCE_ARGS=\"%s\" in /etc/default/irqbalance and restart it yourself",
		pid, formatCPUList(instanceCPUs), strings.Join(irqs, " "))
}

// PlanIRQ is the layout: a pure function of what was read.
//
// Queue interrupts go to the CPUs that run no instance, in turn by queue
// number (a queue's rx and tx vectors on one CPU); when every CPU runs an
// instance they go one queue per CPU over all of them. RPS spreads the
// receive work of a NIC with fewer rx queues than those CPUs; XPS maps
// each CPU to one tx queue when there are several.
func PlanIRQ(online, instanceCPUs []int, nics []NIC) ([]IRQChange, []string) {
	var notes []string
	spare := slices.DeleteFunc(slices.Clone(online), func(c int) bool { return slices.Contains(instanceCPUs, c) })
	target, why := spare, fmt.Sprintf("CPU%s %s run%s no instance: the NIC's interrupt and softirq work there takes no cycles from an OpenVPN process",
		plural(len(spare)), formatCPUList(spare), map[bool]string{true: "", false: "s"}[len(spare) != 1])
	if len(spare) == 0 {
		target = online
		why = fmt.Sprintf("every CPU (%s) runs an instance: one queue per CPU in turn, so that no one instance's CPU takes all the NIC's softirq work", formatCPUList(online))
		notes = append(notes, fmt.Sprintf("every online CPU runs an instance: interrupts cannot be kept away from them; to keep them apart, run fewer instances (--reserve-cpus 1) so that a CPU is left for interrupts"))
	}
	var plan []IRQChange
	for _, n := range nics {
		if n.Device == "" {
			notes = append(notes, fmt.Sprintf("%s is a virtual device (no bus device, no interrupts: a veth in a lab): the plan covers RPS/XPS only", n.Dev))
		} else if len(n.IRQs) == 0 {
			notes = append(notes, fmt.Sprintf("%s (%s): no MSI/MSI-X vectors or interrupt line found: the plan covers RPS/XPS only", n.Dev, n.Device))
		}
		for _, irq := range n.IRQs {
			ch := IRQChange{Path: fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq.Num), Old: irq.Affinity, New: irq.Affinity,
				What: fmt.Sprintf("%s irq %d %s", n.Dev, irq.Num, irq.Name)}
			switch {
			case !irq.Queue:
				ch.Reason = "not a queue interrupt (configuration/control): carries no packets"
			default:
				q := max(queueIndex(irq.Name), 0)
				cpu := target[q%len(target)]
				ch.New = strconv.Itoa(cpu)
				ch.Reason = fmt.Sprintf("queue %d → CPU %d: %s", q, cpu, why)
				if ch.New == ch.Old {
					ch.Reason = "already " + ch.Reason
				}
			}
			plan = append(plan, ch)
		}
		qdir := "/sys/class/net/" + n.Dev + "/queues/"
		for _, q := range n.RX {
			ch := IRQChange{Path: qdir + q.Name + "/rps_cpus", Netns: n.Netns, Old: q.Mask, New: q.Mask, What: fmt.Sprintf("%s %s rps_cpus", n.Dev, q.Name)}
			switch {
			case !q.HasMask:
				continue
			case len(n.RX) >= len(target):
				ch.Reason = fmt.Sprintf("%d rx queues for %d CPUs: the queues' interrupts already spread the receive work; RPS would add an inter-processor interrupt per batch", len(n.RX), len(target))
			default:
				ch.New = cpuMask(target)
				ch.Reason = fmt.Sprintf("%d rx queue%s for %d CPUs (%s): RPS hands the receive work (IP, UDP, the instances' sockets) to all of them by flow hash", len(n.RX), plural(len(n.RX)), len(target), formatCPUList(target))
				if sameMask(ch.New, ch.Old) {
					ch.New = ch.Old
					ch.Reason = "already: " + ch.Reason
				}
			}
			plan = append(plan, ch)
		}
		for i, q := range n.TX {
			ch := IRQChange{Path: qdir + q.Name + "/xps_cpus", Netns: n.Netns, Old: q.Mask, New: q.Mask, What: fmt.Sprintf("%s %s xps_cpus", n.Dev, q.Name)}
			if !q.HasMask || len(n.TX) == 1 {
				if len(n.TX) == 1 {
					notes = append(notes, fmt.Sprintf("%s has one tx queue: XPS has no queue to choose, nothing to set", n.Dev))
				}
				continue
			}
			var cpus []int
			for j, c := range online {
				if j%len(n.TX) == i {
					cpus = append(cpus, c)
				}
			}
			ch.New = cpuMask(cpus)
			ch.Reason = fmt.Sprintf("each CPU sends on its own tx queue (CPU%s %s here): no queue lock shared between CPUs", plural(len(cpus)), formatCPUList(cpus))
			if len(cpus) == 0 {
				ch.New = ch.Old
				ch.Reason = "more tx queues than CPUs: this queue gets no CPU of its own; kept"
			} else if sameMask(ch.New, ch.Old) {
				ch.New = ch.Old
				ch.Reason = "already: " + ch.Reason
			}
			plan = append(plan, ch)
		}
	}
	return plan, notes
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// nicsFor returns the devices to plan for: those named (looked up in the
// instances' namespace, then in serve's own, where a host's physical NICs
// are), or the devices of the instances' default routes (all routed
// devices but the cluster's tuns and lo when there is no default route).
func nicsFor(ctx context.Context, h hostnet.Host, named []string, tunPrefix string) ([]NIC, error) {
	var out []NIC
	if len(named) > 0 {
		for _, dev := range named {
			n, err := ReadNIC(ctx, h.Netns(), dev)
			if err != nil && h.Netns() != "" {
				n, err = ReadNIC(ctx, "", dev)
			}
			if err != nil {
				return nil, usage.Errorf("--nic %s: %v (looked in the instances' namespace and in serve's own)", dev, err)
			}
			out = append(out, n)
		}
		return out, nil
	}
	devs, err := routedDevs(ctx, h, tunPrefix)
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, usage.Errorf("--irq: no routed network device in the instances' namespace; name one with --nic")
	}
	for _, d := range devs {
		n, err := ReadNIC(ctx, h.Netns(), d)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// routedDevs: the devices of the default routes, or of every route.
// Equivalent to: ip [-6] route show
func routedDevs(ctx context.Context, h hostnet.Host, tunPrefix string) ([]string, error) {
	var def, all []string
	for _, fam := range []hostnet.Family{hostnet.IPv4, hostnet.IPv6} {
		rs, err := h.Routes(ctx, fam)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			d := r.Dev
			if d == "" || d == "lo" || strings.HasPrefix(d, tunPrefix) {
				continue
			}
			if r.Dst.Bits() == 0 && !slices.Contains(def, d) {
				def = append(def, d)
			}
			if !slices.Contains(all, d) {
				all = append(all, d)
			}
		}
	}
	if len(def) > 0 {
		return def, nil
	}
	return all, nil
}

// irqSetup reads, plans and (apply) writes the layout, recording each old
// value before it is changed.
func (c *Cluster) irqSetup(ctx context.Context) error {
	r := &IRQReport{Mode: c.opts.IRQ}
	b, err := os.ReadFile((sysfs{}).rooted("/sys/devices/system/cpu/online"))
	if err != nil {
		return err
	}
	if r.OnlineCPUs, err = parseCPUList(string(b)); err != nil {
		return err
	}
	for _, s := range c.specs {
		if s.CPU >= 0 && !slices.Contains(r.InstanceCPUs, s.CPU) {
			r.InstanceCPUs = append(r.InstanceCPUs, s.CPU)
		}
	}
	slices.Sort(r.InstanceCPUs)
	if r.NICs, err = nicsFor(ctx, c.opts.Paths.host(c.opts.Netns), c.opts.NICs, "ovpnperf"+c.id); err != nil {
		return err
	}
	r.Plan, r.Notes = PlanIRQ(r.OnlineCPUs, r.InstanceCPUs, r.NICs)
	if r.Irqbalance = (sysfs{}).irqbalancePid(); r.Irqbalance > 0 {
		r.Notes = append(r.Notes, irqbalanceNote(r.Irqbalance, r.InstanceCPUs, r.NICs))
	}
	c.irq = r
	if c.opts.IRQ != IRQApply {
		return nil
	}
	for _, ch := range r.Plan {
		if ch.New == ch.Old {
			continue
		}
		res := Resource{Kind: KindSysfs, Name: ch.Path, Netns: ch.Netns, Detail: ch.Old}
		if err := c.state.record(res); err != nil {
			return err
		}
		if err := (sysfs{ns: ch.Netns}).write(ctx, ch.Path, ch.New); err != nil {
			// Nothing changed: nothing to put back.
			_ = c.state.forget(func(r Resource) bool {
				return r.Kind == res.Kind && r.Name == res.Name && r.Netns == res.Netns && r.Detail == res.Detail
			})
			return fmt.Errorf("--irq apply: %s: writing %q to %s: %w", ch.What, ch.New, ch.Path, err)
		}
		r.Applied++
	}
	return nil
}

// IRQReport returns what --irq found and planned (nil when off).
func (c *Cluster) IRQReport() *IRQReport { return c.irq }

var devNameRE = regexp.MustCompile(`^[^/\s:]{1,15}$`)

// ValidDevName reports whether s can be a Linux network device name.
func ValidDevName(s string) bool { return devNameRE.MatchString(s) && s != "." && s != ".." }
