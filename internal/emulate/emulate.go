// Package emulate is ovpnperf's userspace link emulator, for kernels built
// without sch_netem. iptables NFQUEUE rules in the lab's router hand every
// forwarded packet of one direction to one netfilter queue; the emulator
// holds each packet for the configured delay (± jitter) and then gives it
// back to the kernel, or drops it at random to emulate loss.
//
//	          router namespace
//	rc ──► FORWARD -j NFQUEUE 0 ──► [ queue 0: up   ] ──► rs
//	rc ◄── [ queue 1: down ] ◄── FORWARD -j NFQUEUE 1 ◄── rs
//	                │   ▲
//	     NFQNL_MSG_PACKET  NFQNL_MSG_VERDICT(_BATCH)
//	                ▼   │
//	   one netlink socket and one OS thread per queue:
//	   recvmmsg ─► loss? ─► FIFO(due) ─► ppoll until the head is due
//
// Packets are never reordered: release times are kept non-decreasing, so the
// FIFO releases in the kernel queue's own order and one batch verdict
// ("accept every id up to N") lets a whole run of due packets go.
//
// The emulator never lets a packet through early or silently: the queue is
// bound without NFQA_CFG_F_FAIL_OPEN and the rules without --queue-bypass,
// so a full kernel queue or a full socket buffer drops packets, and both are
// counted (kernel counters from /proc/net/netfilter/nfnetlink_queue, ENOBUFS
// on the socket). Any such drop, or a release later than the tolerance, sets
// Stats.Behind: a measurement taken across the lab is then not trustworthy.
//
// Timing: each direction has one OS thread running the wake loop
// (wakeloop.go), real-time, sleeping in a raw ppoll (an hrtimer) until
// its next release; in a process of its own (RunProcess) every thread is
// real-time so that the Go runtime never keeps a waking one waiting (see
// rawPpoll and rtprocess_linux.go). Lateness is then the host's own
// wake-up latency, which BenchmarkHostWakeup measures without the
// emulator. A packet's delay counts from the kernel's receive stamp where
// there is one, and then the thread need not wake for each arrival (lazy
// reads, wakeLoop.lazyWindow). docs/emulator.md has the design in full.
//
// A second backend (Config.XDP, xsk_linux.go) is a layer-2 bump in the
// wire: an XDP program on each of two ports redirects every frame to an
// AF_XDP socket, one thread per direction holds it with the same scheduler
// and sends it out of the other port. A third (Config.AFPacket,
// afpacket_linux.go) is the same bump in the wire on AF_PACKET sockets.
// docs/emulator.md compares them.
package emulate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Backend names the emulation mechanism in Stats.
const Backend = "nfqueue"

// BackendAFXDP names the AF_XDP backend in Stats.
const BackendAFXDP = "afxdp"

// XDPConfig makes the emulator a layer-2 bump in the wire between two
// ports of its network namespace. Queue 0 of Config.Queues is the up
// direction (frames arriving on PortA leave by PortB), queue 1 down.
// Every frame crosses, IP or not (ARP too), and is delayed like the rest.
type XDPConfig struct {
	PortA string `json:"port_a"`
	PortB string `json:"port_b"`
	// XDPMode is XDPModeNative or XDPModeGeneric; empty tries native first
	// and falls back to generic.
	XDPMode string `json:"xdp_mode,omitempty"`
}

// XDP attach modes, as Stats.XDPMode reports them.
const (
	XDPModeNative  = "native"  // XDP_FLAGS_DRV_MODE: in the veth driver's NAPI poll
	XDPModeGeneric = "generic" // XDP_FLAGS_SKB_MODE: in the stack's receive path, on an skb
)

// Defaults.
const (
	// DefaultMaxLen is the kernel queue length (packets held for us) when
	// QueueConfig.MaxLen is 0. 65536 holds 200 ms at 100 Mbit/s of
	// 40-byte packets, or more than 5 Gbit/s × 200 ms of full-size ones.
	DefaultMaxLen = 65536
	// DefaultSocketBufferBytes is the netlink receive buffer (SO_RCVBUFFORCE)
	// when Config.SocketBufferBytes is 0: room for tens of thousands of
	// packet messages while the emulator is descheduled.
	DefaultSocketBufferBytes = 16 << 20
	// MinTolerance is the smallest lateness that counts as late.
	MinTolerance = time.Millisecond
	// MaxGather caps how long after a held packet falls due its release
	// may wait for the packets due right behind it, to let them go in one
	// batch (one wake-up, one send or verdict), which lowers the CPU per
	// packet of a dense stream (docs/measurements.md#batched-releases).
	MaxGather = 200 * time.Microsecond
	// StatsInterval is how often Run rewrites the stats file.
	StatsInterval = 250 * time.Millisecond
	// StallLateness is the lateness beyond which a release counts as a
	// stall (QueueStats.Stalled). A flow stalled that long sends little, so
	// a share of late packets can miss it; a single stalled packet is
	// enough to say the link did not behave as configured.
	StallLateness = 50 * time.Millisecond
)

// Config is the whole emulator: one entry per netfilter queue.
type Config struct {
	Queues []QueueConfig `json:"queues"`
	// SocketBufferBytes is each netlink socket's receive buffer; 0 means
	// DefaultSocketBufferBytes.
	SocketBufferBytes int `json:"socket_buffer_bytes,omitempty"`
	// XDP, when set, selects the AF_XDP backend: a layer-2 bump in the
	// wire between two ports instead of netfilter queues (xsk_linux.go).
	// Queue 0 is then the up direction, queue 1 down; both must be given.
	XDP *XDPConfig `json:"xdp,omitempty"`
	// AFPacket, when set, selects the AF_PACKET backend: the same bump in
	// the wire on packet sockets (afpacket_linux.go), queue 0 up and
	// queue 1 down as for XDP.
	AFPacket *AFPacketConfig `json:"afpacket,omitempty"`
}

// QueueConfig is one direction of the link: the packets an iptables rule
// sends to queue Num.
type QueueConfig struct {
	Num uint16 `json:"queue"`
	// Delay is added to every packet.
	Delay time.Duration `json:"delay_ns"`
	// Jitter spreads the delay uniformly over Delay ± Jitter (never below
	// zero). Packets keep their order, so under load a packet waits at
	// least as long as the one before it.
	Jitter time.Duration `json:"jitter_ns"`
	// LossPercent drops this share of packets at random, 0–100.
	LossPercent float64 `json:"loss_percent"`
	// MaxLen is the kernel queue length in packets; 0 means DefaultMaxLen.
	MaxLen uint32 `json:"max_len,omitempty"`
	// Tolerance is how late a release may be before it counts as late; 0
	// means the larger of MinTolerance and a tenth of Delay.
	Tolerance time.Duration `json:"tolerance_ns,omitempty"`
	// Seed fixes the random source (loss and jitter); 0 picks one at random.
	Seed uint64 `json:"seed,omitempty"`
}

func (q QueueConfig) maxLen() uint32 {
	if q.MaxLen == 0 {
		return DefaultMaxLen
	}
	return q.MaxLen
}

// gather is the scheduler's gather window (scheduler.wakeAt): a fifth of
// the tolerance, at most MaxGather, so that what it adds to a release's
// lateness stays well inside what counts as late.
func (q QueueConfig) gather() time.Duration {
	return min(q.tolerance()/5, MaxGather)
}

func (q QueueConfig) tolerance() time.Duration {
	if q.Tolerance > 0 {
		return q.Tolerance
	}
	return max(MinTolerance, q.Delay/10)
}

// Validate reports the first mistake in cfg as a usage error.
func (c Config) Validate() error {
	if len(c.Queues) == 0 {
		return usage.Errorf("link emulator: no queues configured")
	}
	seen := map[uint16]bool{}
	for _, q := range c.Queues {
		if seen[q.Num] {
			return usage.Errorf("link emulator: queue %d configured twice", q.Num)
		}
		seen[q.Num] = true
		switch {
		case q.Delay < 0:
			return usage.Errorf("link emulator: queue %d: delay %v is negative", q.Num, q.Delay)
		case q.Jitter < 0:
			return usage.Errorf("link emulator: queue %d: jitter %v is negative", q.Num, q.Jitter)
		case q.Delay > time.Minute || q.Jitter > time.Minute:
			return usage.Errorf("link emulator: queue %d: delay and jitter must be at most 1m", q.Num)
		case math.IsNaN(q.LossPercent) || q.LossPercent < 0 || q.LossPercent > 100:
			return usage.Errorf("link emulator: queue %d: loss %v%% is outside 0–100", q.Num, q.LossPercent)
		case q.Tolerance < 0:
			return usage.Errorf("link emulator: queue %d: tolerance %v is negative", q.Num, q.Tolerance)
		}
	}
	if c.SocketBufferBytes < 0 {
		return usage.Errorf("link emulator: socket buffer %d bytes is negative", c.SocketBufferBytes)
	}
	if c.XDP != nil && c.AFPacket != nil {
		return usage.Errorf("link emulator: XDP and AF_PACKET both configured; choose one")
	}
	if w := c.AFPacket; w != nil {
		if err := w.validate(); err != nil {
			return err
		}
		if len(c.Queues) != 2 || !seen[0] || !seen[1] {
			return usage.Errorf("link emulator: the wire needs queue 0 (up) and queue 1 (down), nothing else")
		}
	}
	if w := c.XDP; w != nil {
		switch {
		case w.PortA == "" || w.PortB == "" || w.PortA == w.PortB:
			return usage.Errorf("link emulator: the wire needs two different ports, got %q and %q", w.PortA, w.PortB)
		case w.XDPMode != "" && w.XDPMode != XDPModeNative && w.XDPMode != XDPModeGeneric:
			return usage.Errorf("link emulator: XDP mode %q is neither %s nor %s", w.XDPMode, XDPModeNative, XDPModeGeneric)
		case len(c.Queues) != 2 || !seen[0] || !seen[1]:
			return usage.Errorf("link emulator: the wire needs queue 0 (up) and queue 1 (down), nothing else")
		}
	}
	return nil
}

// Stats is the emulator's report, written as JSON to the stats file.
type Stats struct {
	Backend string    `json:"backend"`
	Time    time.Time `json:"time"`
	// Running is false in the snapshot written at exit.
	Running bool `json:"running"`
	// Behind is true when any queue fell behind: see QueueStats.Behind.
	Behind bool `json:"behind"`
	// XDPMode is how the AF_XDP backend's program runs on the ports:
	// "native" (in the driver) or "generic" (in the stack, on an skb).
	XDPMode string `json:"xdp_mode,omitempty"`
	// RealtimeProcess says every thread of the emulator's process ran
	// real-time at the last check (RunProcess).
	RealtimeProcess bool         `json:"realtime_process,omitempty"`
	Queues          []QueueStats `json:"queues"`
}

// QueueStats are the counters of one queue since the emulator bound it.
type QueueStats struct {
	Num         uint16        `json:"queue"`
	Delay       time.Duration `json:"delay_ns"`
	Jitter      time.Duration `json:"jitter_ns"`
	LossPercent float64       `json:"loss_percent"`
	Tolerance   time.Duration `json:"tolerance_ns"`

	// Received packets (a GSO aggregate counts once) and their bytes from
	// the network header on.
	Received      uint64 `json:"received"`
	ReceivedBytes uint64 `json:"received_bytes"`
	// Released (delayed and accepted) packets and bytes.
	Released      uint64 `json:"released"`
	ReleasedBytes uint64 `json:"released_bytes"`
	// DroppedLoss packets were dropped on purpose (LossPercent).
	DroppedLoss uint64 `json:"dropped_loss"`
	// Pending packets are held, waiting for their release time.
	Pending uint64 `json:"pending"`
	// Batches is how many batch verdicts released the packets.
	Batches uint64 `json:"batches"`

	// Late packets were released more than Tolerance after their due
	// time. A packet's lateness is taken when the send (verdict write,
	// sendto, sendmmsg) that carried it returned, not when its batch was
	// handed over: the packets of a batch leave one after another inside
	// the send, so this is each one's departure or later, by at most the
	// time the same call took for the packets after it.
	Late uint64 `json:"late"`
	// LateDelay is the lateness of the Late packets, summed: what they
	// added to the path's delay (Lateness.Judge weighs it against the
	// round trip).
	LateDelay time.Duration `json:"late_delay_ns"`
	// LateOnArrival packets were read more than Tolerance after their
	// earliest release time (kernel receive stamp + Delay − Jitter): what
	// held them was the router's receive path or a thread that did not
	// read in time, not a late wake-up for the release.
	LateOnArrival uint64 `json:"late_on_arrival"`
	// Stalled packets were released more than StallLateness late.
	Stalled        uint64        `json:"stalled"`
	MaxLateness    time.Duration `json:"max_lateness_ns"`
	LatenessMedian time.Duration `json:"lateness_median_ns"`
	LatenessP99    time.Duration `json:"lateness_p99_ns"`
	// LatenessSamples is how many releases the median and p99 are from
	// (a uniform sample of all releases, at most 4096).
	LatenessSamples int `json:"lateness_samples"`

	// ENOBUFS counts receive-buffer overruns reported on the netlink
	// socket; the packets lost in them are in KernelUserDropped.
	ENOBUFS uint64 `json:"enobufs"`
	// VerdictErrors counts verdicts the kernel refused (NLMSG_ERROR).
	VerdictErrors uint64 `json:"verdict_errors"`
	// Truncated counts packet messages cut by our receive slot size.
	Truncated uint64 `json:"truncated"`

	// KernelStamped packets carried the kernel's receive time, and their
	// delay counts from it; the others' from when the emulator read them.
	KernelStamped uint64 `json:"kernel_stamped"`
	// Realtime says the queue's thread runs with SCHED_FIFO priority; when
	// false (no CAP_SYS_NICE), releases are late whenever the host is busy.
	Realtime bool `json:"realtime"`

	// Kernel counters of the queue (/proc/net/netfilter/nfnetlink_queue):
	// packets dropped because the queue was full, packets dropped because
	// they could not be sent to us, packets held right now. KernelRead is
	// false if the file could not be read.
	KernelRead        bool   `json:"kernel_read"`
	KernelQueueDrops  uint64 `json:"kernel_queue_dropped"`
	KernelUserDropped uint64 `json:"kernel_user_dropped"`
	KernelQueued      uint64 `json:"kernel_queued"`

	// Behind is true when a packet was late beyond Tolerance, dropped by
	// the kernel queue, lost to a socket overrun, could not be parsed, or
	// a verdict failed: the link did not behave as configured.
	Behind bool `json:"behind"`
}

func (q *QueueStats) setBehind() {
	q.Behind = q.Late > 0 || q.KernelQueueDrops > 0 || q.KernelUserDropped > 0 || q.ENOBUFS > 0 ||
		q.Truncated > 0 || q.VerdictErrors > 0
}

// ParseStats parses b, the stats file at path written by Run.
func ParseStats(path string, b []byte) (Stats, error) {
	var s Stats
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("parsing emulator stats %s: %w", path, err)
	}
	if s.Backend == "" {
		return s, fmt.Errorf("parsing emulator stats %s: no backend field", path)
	}
	return s, nil
}

// writeStats replaces path atomically (temporary file in the same
// directory, then rename), so that readers never see a partial file.
func writeStats(path string, s Stats) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing emulator stats: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing emulator stats %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing emulator stats: %w", err)
	}
	return nil
}
