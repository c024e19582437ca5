package cluster

import "github.com/ovpnperf/ovpnperf/internal/cluster/clusterdoc"

// The status document's types live in clusterdoc, so that its readers
// need not link the cluster; these are their names here.
type (
	ClusterStatus  = clusterdoc.Status
	InstanceStatus = clusterdoc.Instance
	ClientBytes    = clusterdoc.ClientBytes
	SiteStatus     = clusterdoc.Site
	IRQReport      = clusterdoc.IRQReport
	IRQ            = clusterdoc.IRQ
	Queue          = clusterdoc.Queue
	NIC            = clusterdoc.NIC
	IRQChange      = clusterdoc.IRQChange
)

// Schemas of the status document (clusterdoc).
const (
	StatusSchema       = clusterdoc.StatusSchema
	LegacyStatusSchema = clusterdoc.LegacyStatusSchema
)

// Instance states (clusterdoc). The dispatcher assigns only StateUp.
const (
	StateStarting   = clusterdoc.StateStarting
	StateUp         = clusterdoc.StateUp
	StateRestarting = clusterdoc.StateRestarting
	StateDraining   = clusterdoc.StateDraining
	StateDown       = clusterdoc.StateDown
)

// IRQ modes of `cluster serve --irq` (clusterdoc).
const (
	IRQOff   = clusterdoc.IRQOff
	IRQPlan  = clusterdoc.IRQPlan
	IRQApply = clusterdoc.IRQApply
)

// formatCPUList writes cpus the kernel's way ("0-3,6").
func formatCPUList(cpus []int) string { return clusterdoc.FormatCPUList(cpus) }
