// Package labpath is a lab's path as data: the rate, delay, jitter and loss
// of each direction, the bottleneck MTU and queue, and the emulator asked
// for, with the rules that check and size them. Documents that record the
// path they measured (tune's) carry it without linking the lab and its
// emulator.
package labpath

import (
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Limits on what a lab accepts.
const (
	MaxRTT = 10 * time.Second
	// The MTU limits are IP's, overhead's MinIPv4MTU, MinIPv6MTU and
	// MaxIPPacket: typed again here because overhead's lab tests import
	// this package (TestLimitsAreIPs checks they agree).
	MinMTUv4 = 576
	MinMTUv6 = 1280
	MaxMTU   = 65535
	// MaxQueueBytes bounds a rate limiter's queue: tbf takes a 32-bit
	// byte count, and a gigabyte already holds a second at 8 Gbit/s.
	MaxQueueBytes = 1 << 30
	// DefaultMTU is the bottleneck's MTU when the path sets none.
	DefaultMTU = 1500
	// MinDefaultQueueBytes is the floor of the queue a rate limiter gets
	// by default (QueueBytesFor).
	MinDefaultQueueBytes = 64 << 10
)

// Emulation backends, as a lab's state and host.emulation_backend name them.
const (
	BackendNone    = "none"    // no delay, jitter or loss configured
	BackendNetem   = "netem"   // the kernel's sch_netem
	BackendNFQueue = "nfqueue" // ovpnperf's userspace emulator behind iptables NFQUEUE
	// BackendAFPacket and BackendAFXDP are the userspace emulator as a
	// layer-2 bump in the wire on the client segment, in the lab's wire
	// namespace, on AF_PACKET or AF_XDP sockets (docs/emulator.md).
	BackendAFPacket = "afpacket"
	BackendAFXDP    = "afxdp"
)

// EmulatorAuto asks for this host's default backend: netem where the kernel
// has it, else nfqueue.
const EmulatorAuto = "auto"

// EmulatorNames are the values of Path.Emulator (and --emulator), in the
// order help texts list them; the slice is the caller's own.
func EmulatorNames() []string {
	return []string{EmulatorAuto, BackendNFQueue, BackendNetem, BackendAFPacket, BackendAFXDP}
}

// CheckEmulatorName refuses a Path.Emulator that names no backend; "" is
// auto. Whether this host has the backend is EmulationChoice's question.
func CheckEmulatorName(name string) error {
	if name == "" {
		return nil
	}
	for _, n := range EmulatorNames() {
		if name == n {
			return nil
		}
	}
	return usage.Errorf("--emulator %q: want one of %s", name, strings.Join(EmulatorNames(), ", "))
}

// Link is the emulation applied to one direction of the path.
type Link struct {
	// RateBitsPerSec limits the direction's rate; 0 leaves it unshaped.
	RateBitsPerSec uint64 `json:"rate_bps"`
	// Delay is the one-way delay added to every packet.
	Delay time.Duration `json:"delay_ns"`
	// Jitter spreads the delay uniformly by ± Jitter (packets keep their order).
	Jitter time.Duration `json:"jitter_ns"`
	// LossPercent drops this share of packets at random (0–100).
	LossPercent float64 `json:"loss_percent"`
}

// Emulated reports whether the direction needs delay, jitter or loss.
func (l Link) Emulated() bool { return l.Delay > 0 || l.Jitter > 0 || l.LossPercent > 0 }

// Path is the emulated path between client and server.
type Path struct {
	Up   Link `json:"up"`   // client → server
	Down Link `json:"down"` // server → client
	// MTU of the router–server segment; 0 means 1500.
	MTU int `json:"mtu"`
	// ICMPBlackhole drops ICMP "fragmentation needed" and ICMPv6 "packet too
	// big" at the router, breaking path-MTU discovery.
	ICMPBlackhole bool `json:"icmp_blackhole"`
	// QueueBytes is the bottleneck buffer of each rate limiter; 0 picks one
	// bandwidth-delay product (at least 64 KiB).
	QueueBytes int `json:"queue_bytes"`
	// NoIPv6 builds an IPv4-only lab (needed for an MTU below 1280).
	NoIPv6 bool `json:"no_ipv6"`
	// LateTolerance is how late the userspace emulator may release a
	// packet before it counts it as late; 0 leaves its default, the larger
	// of 1 ms and a tenth of the delay. `lab calibrate` sets 1 ms.
	LateTolerance time.Duration `json:"late_tolerance_ns,omitempty"`
	// Emulator chooses the mechanism of delay, jitter and loss: "" or
	// EmulatorAuto for this host's default (netem where the kernel has it,
	// else nfqueue), or one of BackendNFQueue, BackendNetem,
	// BackendAFPacket, BackendAFXDP. A path with nothing to emulate uses
	// none whatever it says. See docs/lab.md.
	Emulator string `json:"emulator,omitempty"`
}

// EffectiveMTU returns the MTU of the bottleneck segment.
func (p Path) EffectiveMTU() int {
	if p.MTU == 0 {
		return DefaultMTU
	}
	return p.MTU
}

// QueueBytesFor returns the bottleneck buffer of a rate limiter at
// rateBits: the configured size, or one bandwidth-delay product of the
// whole round trip (at least 5 ms at the rate and 64 KiB), which lets a
// single TCP flow fill the link as it would fill a well-buffered real one.
// clamped is true when that product exceeded MaxQueueBytes and was cut to
// it, rather than wrapping around tbf's 32-bit limit into a tiny queue.
func (p Path) QueueBytesFor(rateBits uint64) (bytes uint32, clamped bool) {
	if p.QueueBytes > 0 {
		return uint32(min(p.QueueBytes, MaxQueueBytes)), p.QueueBytes > MaxQueueBytes
	}
	rtt := p.Up.Delay + p.Down.Delay
	bdp := float64(rateBits) / 8 * rtt.Seconds()
	// The floor: 5 ms at the rate, at least 64 KiB. Veth hands the limiter
	// 64 KiB GSO aggregates, and a queue that holds only one of them cuts
	// TCP short (docs/measurements.md#the-rate-limiters-queue-floor).
	q := max(bdp, float64(rateBits)/8*0.005, MinDefaultQueueBytes)
	if q > MaxQueueBytes {
		return MaxQueueBytes, true
	}
	return uint32(q), false
}

// MinQueueBytes is the smallest --queue-bytes a path accepts: two
// full-size frames (MTU plus Ethernet header), since tbf drops every packet
// larger than its queue and a one-packet queue drops all but the first of
// every burst.
func (p Path) MinQueueBytes() int { return 2 * (p.EffectiveMTU() + 14) }

// Validate checks a path's settings and returns a usage error naming the
// offending setting.
func (p Path) Validate() error {
	for _, d := range []struct {
		dir string
		l   Link
	}{{"up", p.Up}, {"down", p.Down}} {
		if d.l.Delay < 0 || d.l.Jitter < 0 {
			return usage.Errorf("--%s-delay/--%s-jitter: must not be negative", d.dir, d.dir)
		}
		if d.l.Jitter > d.l.Delay && d.l.Jitter > 0 {
			return usage.Errorf("--%s-jitter %v: larger than the delay %v it varies", d.dir, d.l.Jitter, d.l.Delay)
		}
		if d.l.LossPercent < 0 || d.l.LossPercent > 100 {
			return usage.Errorf("--%s-loss %v%%: want 0–100%%", d.dir, d.l.LossPercent)
		}
	}
	if p.Up.Delay+p.Down.Delay > MaxRTT {
		return usage.Errorf("--up-delay %v + --down-delay %v: round trip over the %v limit", p.Up.Delay, p.Down.Delay, MaxRTT)
	}
	if p.MTU != 0 {
		switch {
		case p.MTU < MinMTUv4:
			return usage.Errorf("--mtu %d: below %d, the IPv4 minimum", p.MTU, MinMTUv4)
		case p.MTU < MinMTUv6 && !p.NoIPv6:
			return usage.Errorf("--mtu %d: below %d, the IPv6 minimum; add --no-ipv6 for an IPv4-only lab", p.MTU, MinMTUv6)
		case p.MTU > MaxMTU:
			return usage.Errorf("--mtu %d: above %d", p.MTU, MaxMTU)
		}
	}
	if p.LateTolerance < 0 {
		return usage.Errorf("late tolerance %v: must not be negative", p.LateTolerance)
	}
	if err := CheckEmulatorName(p.Emulator); err != nil {
		return err
	}
	switch {
	case p.QueueBytes < 0:
		return usage.Errorf("--queue-bytes %d: must not be negative", p.QueueBytes)
	case p.QueueBytes > MaxQueueBytes:
		return usage.Errorf("--queue-bytes %d: above %d (1 GiB); want %d–%d bytes", p.QueueBytes, MaxQueueBytes, p.MinQueueBytes(), MaxQueueBytes)
	case p.QueueBytes > 0 && p.QueueBytes < p.MinQueueBytes():
		return usage.Errorf("--queue-bytes %d: below two full-size frames, every larger packet would be dropped; want %d–%d bytes", p.QueueBytes, p.MinQueueBytes(), MaxQueueBytes)
	}
	return nil
}

// RTT is the round trip the path adds with empty queues: both directions'
// delays.
func (p Path) RTT() time.Duration { return p.Up.Delay + p.Down.Delay }

// LoadedRoundTrip is the round trip one flow sees once it fills its
// bottleneck: the delays and jitter of both directions and the drain time
// of the fuller of the two queues (a flow's data fills one direction's
// queue; its acknowledgements leave the other nearly empty).
func (p Path) LoadedRoundTrip() time.Duration {
	var q time.Duration
	for _, l := range []Link{p.Up, p.Down} {
		if l.RateBitsPerSec > 0 {
			b, _ := p.QueueBytesFor(l.RateBitsPerSec)
			q = max(q, time.Duration(float64(b)*8/float64(l.RateBitsPerSec)*float64(time.Second)))
		}
	}
	return p.RTT() + p.Up.Jitter + p.Down.Jitter + q
}

// MaxRoundTrip is the longest round trip the path gives a packet: both
// directions' delays, their jitter, and the time each rate limiter's queue
// takes to drain when full (QueueBytesFor at the direction's rate). A
// message sent after a flow of data arrives up to this much later than
// with an idle path; iperf3's end-of-test message is one.
func (p Path) MaxRoundTrip() time.Duration {
	d := p.RTT() + p.Up.Jitter + p.Down.Jitter
	for _, l := range []Link{p.Up, p.Down} {
		if l.RateBitsPerSec > 0 {
			q, _ := p.QueueBytesFor(l.RateBitsPerSec)
			d += time.Duration(float64(q) * 8 / float64(l.RateBitsPerSec) * float64(time.Second))
		}
	}
	return d
}
