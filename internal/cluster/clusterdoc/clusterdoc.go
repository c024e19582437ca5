// Package clusterdoc holds the documents of `ovpnperf cluster`: the status
// (`cluster status --json`, the control socket's answer) with its
// instances, sites and interrupt plan. It is what readers of the documents
// (report) import instead of internal/cluster, which runs the cluster and
// links etcd and gRPC; internal/cluster names these types too.
package clusterdoc

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// StatusSchema names the document `cluster status --json` writes. Before
// version 1 it had no "schema" key (report still recognises such documents
// by their keys, and the name LegacyStatusSchema).
const StatusSchema = "ovpnperf/cluster-status/v1"

// LegacyStatusSchema is the name report gave the schema-less documents.
const LegacyStatusSchema = "ovpnperf/cluster-status"

// Status is `cluster status --json`, and the control socket's answer.
type Status struct {
	// Schema and Argv are set by `cluster status --json` (StatusSchema);
	// the control socket's answer leaves them empty.
	Schema    string     `json:"schema,omitempty"`
	Argv      []string   `json:"argv,omitempty"`
	ID        string     `json:"id"`
	Netns     string     `json:"netns,omitempty"`
	OnePort   uint16     `json:"one_port,omitempty"`
	Backend   string     `json:"one_port_backend,omitempty"`
	Instances []Instance `json:"instances"`
	IRQ       *IRQReport `json:"irq,omitempty"`
	Sites     []Site     `json:"sites,omitempty"`
}

// Instance states. The dispatcher assigns only StateUp.
//
//	starting ──ready+state CONNECTED──▶ up ──exit──▶ restarting ──backoff──▶ starting
//	    any ──SIGTERM──▶ draining ──▶ down
const (
	StateStarting   = "starting"
	StateUp         = "up"
	StateRestarting = "restarting"
	StateDraining   = "draining"
	StateDown       = "down"
)

// ClientBytes is one connected client as the management interface lists it.
type ClientBytes struct {
	CommonName string `json:"common_name"`
	Real       string `json:"real_address"`
	BytesIn    int64  `json:"bytes_in"`
	BytesOut   int64  `json:"bytes_out"`
}

// Instance is what status, metrics and the dispatcher see of one
// OpenVPN instance.
type Instance struct {
	Name        string        `json:"name"`
	State       string        `json:"state"`
	Pid         int           `json:"pid,omitempty"`
	CPU         int           `json:"cpu"`
	Proto       string        `json:"proto"`
	Port        uint16        `json:"port"`
	Dev         string        `json:"dev"`
	Subnet      string        `json:"subnet"`
	Clients     int           `json:"clients"`
	BytesIn     int64         `json:"bytes_in"`
	BytesOut    int64         `json:"bytes_out"`
	BytesPerSec float64       `json:"bytes_per_sec"`
	Restarts    int           `json:"restarts"`
	CrashLoop   bool          `json:"crash_loop"`
	LastExit    string        `json:"last_exit,omitempty"`
	UpSince     time.Time     `json:"up_since,omitzero"`
	CPUSeconds  float64       `json:"cpu_seconds"`
	Recoveries  []float64     `json:"recovery_seconds,omitempty"` // exit → up again, per restart
	PerClient   []ClientBytes `json:"per_client,omitempty"`
}

// IRQ modes of `cluster serve --irq`.
const (
	IRQOff   = "off"
	IRQPlan  = "plan"
	IRQApply = "apply"
)

// IRQ is one interrupt of a NIC as /proc shows it.
type IRQ struct {
	Num  int    `json:"irq"`
	Name string `json:"name"`
	// Affinity is /proc/irq/N/smp_affinity_list; Effective the CPUs the
	// kernel actually delivers to (effective_affinity_list), when shown.
	Affinity  string `json:"smp_affinity_list"`
	Effective string `json:"effective_affinity_list,omitempty"`
	// Counts per CPU from /proc/interrupts.
	Counts []uint64 `json:"counts"`
	Queue  bool     `json:"queue"` // carries packets (not a config/control vector)
}

// Queue is one rx or tx queue and its steering mask (rps_cpus, xps_cpus).
type Queue struct {
	Name    string `json:"name"` // rx-0, tx-0
	Mask    string `json:"mask,omitempty"`
	HasMask bool   `json:"has_mask"` // false: the kernel shows no such file (one tx queue)
}

// NIC is a network device carrying the instances' traffic.
type NIC struct {
	Dev   string `json:"dev"`
	Netns string `json:"netns,omitempty"`
	// Device is the bus device behind it (sysfs path); empty for a
	// virtual device (veth), which has no interrupts.
	Device string  `json:"device,omitempty"`
	Driver string  `json:"driver,omitempty"`
	IRQs   []IRQ   `json:"irqs"`
	RX     []Queue `json:"rx_queues"`
	TX     []Queue `json:"tx_queues"`
}

// IRQChange is one line of the plan: a value to write, or one kept, with
// the reason.
type IRQChange struct {
	Path   string `json:"path"`
	Netns  string `json:"netns,omitempty"`
	Old    string `json:"old"`
	New    string `json:"new"` // equal to Old: kept
	Reason string `json:"reason"`
	What   string `json:"what"` // "eth0 irq 38 virtio2-input.0"
}

// IRQReport is what `--irq` found, planned and (with apply) did.
type IRQReport struct {
	Mode         string      `json:"mode"`
	OnlineCPUs   []int       `json:"online_cpus"`
	InstanceCPUs []int       `json:"instance_cpus"`
	Irqbalance   int         `json:"irqbalance_pid,omitempty"`
	NICs         []NIC       `json:"nics"`
	Notes        []string    `json:"notes"`
	Plan         []IRQChange `json:"plan"`
	Applied      int         `json:"applied"`
}

// FormatCPUList writes cpus the kernel's way ("0-3,6").
func FormatCPUList(cpus []int) string {
	c := slices.Clone(cpus)
	slices.Sort(c)
	c = slices.Compact(c)
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(c[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", c[i], c[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// WriteText prints the report for people: what was found, then one line
// per plan entry with its reason.
func (r *IRQReport) WriteText(w io.Writer) {
	verb := "plan (nothing written; --irq apply writes it)"
	if r.Mode == IRQApply {
		verb = fmt.Sprintf("applied (%d values changed, old values recorded for stop/clean)", r.Applied)
	}
	fmt.Fprintf(w, "irq %s: online CPUs %s, instances on %s\n", verb, FormatCPUList(r.OnlineCPUs), FormatCPUList(r.InstanceCPUs))
	if r.Irqbalance == 0 {
		fmt.Fprintf(w, "  irqbalance: not running (in this PID namespace)\n")
	}
	for _, n := range r.NICs {
		where := ""
		if n.Netns != "" {
			where = " in netns " + n.Netns
		}
		kind := "virtual"
		if n.Device != "" {
			kind = fmt.Sprintf("%s, %s", n.Driver, n.Device)
		}
		fmt.Fprintf(w, "  %s%s (%s): %d irqs, %d rx / %d tx queues\n", n.Dev, where, kind, len(n.IRQs), len(n.RX), len(n.TX))
		for _, q := range n.IRQs {
			eff := ""
			if q.Effective != "" {
				eff = " effective " + q.Effective
			}
			fmt.Fprintf(w, "    irq %d %s: smp_affinity_list %s%s, count per CPU %v\n", q.Num, q.Name, q.Affinity, eff, q.Counts)
		}
		for _, q := range append(slices.Clone(n.RX), n.TX...) {
			m := q.Mask
			if !q.HasMask {
				m = "(no file)"
			}
			fmt.Fprintf(w, "    %s mask %s\n", q.Name, m)
		}
	}
	for _, ch := range r.Plan {
		change := "keep " + ch.Old
		if ch.New != ch.Old {
			change = ch.Old + " → " + ch.New
		}
		fmt.Fprintf(w, "  %s: %s: %s\n", ch.What, change, ch.Reason)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// Site is a site in `cluster status`: the instances its route uses now.
type Site struct {
	Prefix string   `json:"prefix"`
	CN     string   `json:"common_name"`
	Via    []string `json:"via"`
}
