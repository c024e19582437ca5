// Package rules holds the judgements that two commands make about the same
// setting: advise (what to set for a path) and lint (what a config sets on
// that path) both call these functions, so they cannot recommend what the
// other warns against. It owns the socket-buffer rule, the tun-mtu /
// mssfix / jumbo-tunnel rule and the data-channel cipher rules, each with
// the reason and the evidence it rests on, and says which measurement
// decides a setting when the path description leaves it open.
//
// It is pure arithmetic and text over the overhead model
// (internal/overhead): no I/O, so every rule is table-tested, and the
// agreement of advise and lint is tested over a matrix of paths
// (cmd/ovpnperf TestAdviseLintAgree).
package rules

import (
	"fmt"
	"time"
)

// Path is what advise and lint know about a path and its tunnel. Zero
// means "not known" for every numeric field.
type Path struct {
	Proto     string // "udp" (default) or "tcp"
	OuterIPv6 bool
	// RateBitsPerSec is the bottleneck rate at the IP layer.
	RateBitsPerSec float64
	RTT            time.Duration
	// LossPercent is the lossier direction's loss; 0 is also "not given".
	LossPercent float64
	// LossGiven says whether LossPercent was measured or given (0 then
	// means a clean path, not an unknown one).
	LossGiven bool
	PathMTU   int // outer path MTU (bytes)
	Blackhole bool
	DCO       bool
	OpenVPN   string // "2.5" or "2.6" (default)
	// PacketsPerSecPerCore is a measured userspace forwarding rate; 0
	// uses DefaultPacketsPerSecPerCore, an assumption.
	PacketsPerSecPerCore float64
}

// Setting is one recommended line (or one thing not to do) with the
// reason and the figure it rests on.
type Setting struct {
	Directive string `json:"directive"`
	Reason    string `json:"reason"`
	Figure    string `json:"figure"`
}

// Undecided is a setting the rules cannot decide from what they were
// given: what is missing, the measurement that decides it, and what each
// answer would change.
type Undecided struct {
	Setting string `json:"setting"`
	Missing string `json:"missing"`
	Measure string `json:"measure"`
	Changes string `json:"changes"`
}

// BDPBytes is the bandwidth-delay product, 0 when the rate or RTT is not
// known.
func (p Path) BDPBytes() int {
	if p.RateBitsPerSec <= 0 || p.RTT <= 0 {
		return 0
	}
	return int(p.RateBitsPerSec / 8 * p.RTT.Seconds())
}

func (p Path) proto() string {
	if p.Proto == "" {
		return "udp"
	}
	return p.Proto
}

// PacketsPerSec is the forwarding rate per core the rules use: the given
// one, else the assumed default.
func (p Path) PacketsPerSec() float64 {
	if p.PacketsPerSecPerCore > 0 {
		return p.PacketsPerSecPerCore
	}
	return DefaultPacketsPerSecPerCore
}

// PacketRateSource says where PacketsPerSec comes from, for figures.
func (p Path) PacketRateSource() string {
	if p.PacketsPerSecPerCore > 0 {
		return fmt.Sprintf(" (%.0f packets/s per core, given)", p.PacketsPerSecPerCore)
	}
	return fmt.Sprintf(" (%d packets/s per core, assumed: not measured)", DefaultPacketsPerSecPerCore)
}

// DefaultPacketsPerSecPerCore is the userspace (non-DCO) OpenVPN 2.6
// forwarding cost assumed when none is given: about 45 000 full packets
// per second per core, the unshaped lab's default tunnel (≈515 Mbit/s at
// 1388-byte payloads, docs/measurements.md).
const DefaultPacketsPerSecPerCore = 45000

func mbit(bps float64) string { return fmt.Sprintf("%.1f Mbit/s", bps/1e6) }

// SweepCommand is the documented measurement that puts the transport's
// settings (tun-mtu × socket buffers × tcp-nodelay) to the test on a path.
const SweepCommand = "scripts/advise-sweep.sh OUTDIR 10s 3 --proto tcp -- PATH FLAGS (in ovpnperf's source tree; on an idle machine, with at least three TCP paths, short and long RTT)"
