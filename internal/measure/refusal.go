package measure

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Refusal is why a sample was refused, or a row given up, as data: a kind
// that scripts and tests compare, the figures that decided it, and for a
// row the tries it took. Row.Error is its sentence (Text), so people read
// what the document's "refusal" holds; nothing reads the sentence back.
//
// A judgement is a value rendered in one place: the sentences of the kinds
// judged here (the emulator, the host, the row's tries) are written by
// Text; a kind whose rule lives in a package below the run document
// (iperf3's consistency rules in internal/iperf, an error of a program)
// keeps that package's message in Detail, with its figures beside it.
// docs/schemas.md lists the kinds and the figures of each.
type Refusal struct {
	// Kind is one of RefusalKinds.
	Kind string `json:"kind"`
	// Side is the end a window rule judged: "sender" or "receiver".
	Side string `json:"side,omitempty"`
	// Figures are what decided it, each named with its unit (Figure*
	// keys); a figure that was not read is absent, not 0.
	Figures Figures `json:"figures,omitempty"`
	// Detail is the message of a refusal whose sentence is not Text's to
	// write (iperf3's rules and errors, a process that died …).
	Detail string `json:"detail,omitempty"`

	// A row given up: every one of Tries tries of sample Sample of
	// Samples was refused (this refusal is the last try's), and the
	// row's NotMeasured later samples were not taken. 0 for a refusal of
	// one sample.
	Tries       int `json:"tries,omitempty"`
	Sample      int `json:"sample,omitempty"`
	Samples     int `json:"samples,omitempty"`
	NotMeasured int `json:"not_measured,omitempty"`
}

// Figures are a judgement's numbers by name. Each key carries its unit
// (seconds, bytes, bps, packets, percent) as every key of the documents
// does; measure.CheckFigures applies to them.
type Figures map[string]float64

// Kinds of refusal (Refusal.Kind), stable across versions: scripts and
// tests compare them.
const (
	// The userspace link emulator released more than emulate.MaxLateShare
	// of the sample's packets late.
	RefusalEmulatorLate = "emulator-late"
	// The emulator released at least one packet later than
	// emulate.StallLateness.
	RefusalEmulatorStall = "emulator-stall"
	// The emulator lost packets it could not handle.
	RefusalEmulatorLost = "emulator-lost"
	// iperf3's measuring window of one side was well short of the
	// requested duration: the test ended early.
	RefusalWindowEndedEarly = "window-ended-early"
	// One side's window was shorter than the timers allow.
	RefusalWindowShort = "window-short"
	// One side's window was longer than the path's slack and the timers
	// allow.
	RefusalWindowLong = "window-long"
	// The receiver counted more than the sender beyond what the path
	// holds.
	RefusalReceiverAboveSender = "receiver-above-sender"
	// The payload file ran out before the requested duration or size.
	RefusalPayloadShort = "payload-short"
	// iperf3 reported an error of its own (its JSON "error" key).
	RefusalIperfError = "iperf-error"
	// No echo of a packet-rate sample came back.
	RefusalNoEcho = "no-echo"
	// A row ended without a valid sample and without another refusal.
	RefusalNoValidSample = "no-valid-sample"
	// The run ended (interrupted, or by an error) before the row had a
	// sample: Detail says how.
	RefusalNotMeasured = "not-measured"
	// Any other failure of a sample (a process died, a probe failed):
	// Detail says what.
	RefusalError = "error"
)

// RefusalKinds are every Refusal.Kind, in the order docs/schemas.md lists
// them; the slice is the caller's own.
func RefusalKinds() []string {
	return []string{
		RefusalEmulatorLate, RefusalEmulatorStall, RefusalEmulatorLost,
		RefusalWindowEndedEarly, RefusalWindowShort, RefusalWindowLong, RefusalReceiverAboveSender,
		RefusalPayloadShort, RefusalIperfError, RefusalNoEcho, RefusalNoValidSample, RefusalNotMeasured, RefusalError,
	}
}

// Figure keys of a refusal (Refusal.Figures).
const (
	// The emulator's releases during the sample, those later than its
	// tolerance, their share in percent and how late they were on
	// average.
	FigureReleasedPackets = "released_packets"
	FigureLatePackets     = "late_packets"
	FigureLatePercent     = "late_percent"
	FigureLateMeanSeconds = "late_mean_seconds"
	// Releases later than FigureStallSeconds (emulate.StallLateness).
	FigureStalledPackets = "stalled_packets"
	FigureStallSeconds   = "stall_seconds"
	// Packets the emulator lost against its will.
	FigureLostPackets = "lost_packets"
	// The share of all CPUs' time that was busy (steal included), and the
	// share the hypervisor gave to other guests (steal), during the
	// sample, in percent: present when /proc/stat was read both times.
	FigureHostBusyPercent  = "host_busy_percent"
	FigureHostStealPercent = "host_steal_percent"
	// The load average when the sample was refused, and the CPUs.
	FigureLoad1m  = "load_1m"
	FigureLoad5m  = "load_5m"
	FigureLoad15m = "load_15m"
	FigureCPUs    = "cpus"
	// A window rule: the side's window, the requested duration, the
	// limit it crossed (the least or the most allowed; none for an early
	// end), the path's slack and the rule's tolerance.
	FigureWindowSeconds    = "window_seconds"
	FigureRequestedSeconds = "requested_seconds"
	FigureLimitSeconds     = "limit_seconds"
	FigurePathSlackSeconds = "path_slack_seconds"
	FigureTolerancePercent = "tolerance_percent"
	// The receiver-above-sender rule (and payload-short: the sent bytes
	// and the requested ones).
	FigureReceivedBps      = "received_bps"
	FigureReceivedBytes    = "received_bytes"
	FigureReceivedSeconds  = "received_seconds"
	FigureSentBps          = "sent_bps"
	FigureSentBytes        = "sent_bytes"
	FigureSentSeconds      = "sent_seconds"
	FigureAbovePercent     = "above_percent"
	FigureRequestedBytes   = "requested_bytes"
	FigureSentProbePackets = "sent_packets"
)

// RefusalFigureKeys are every key Refusal.Figures may hold; the slice is
// the caller's own.
func RefusalFigureKeys() []string {
	return []string{
		FigureReleasedPackets, FigureLatePackets, FigureLatePercent, FigureLateMeanSeconds,
		FigureStalledPackets, FigureStallSeconds, FigureLostPackets,
		FigureHostBusyPercent, FigureHostStealPercent, FigureLoad1m, FigureLoad5m, FigureLoad15m, FigureCPUs,
		FigureWindowSeconds, FigureRequestedSeconds, FigureLimitSeconds, FigurePathSlackSeconds, FigureTolerancePercent,
		FigureReceivedBps, FigureReceivedBytes, FigureReceivedSeconds, FigureSentBps, FigureSentBytes, FigureSentSeconds,
		FigureAbovePercent, FigureRequestedBytes, FigureSentProbePackets,
	}
}

// Figure returns a figure and whether the refusal has it.
func (r Refusal) Figure(key string) (float64, bool) {
	v, ok := r.Figures[key]
	return v, ok
}

// Emulator reports whether the emulator's timing refused the sample (late
// releases or a stall): the refusals a host whose CPUs were taken away
// makes, as opposed to lost packets or a failure of ovpnperf.
func (r Refusal) Emulator() bool {
	return r.Kind == RefusalEmulatorLate || r.Kind == RefusalEmulatorStall
}

// Text is the sentence of the refusal, the one place it is written
// (Row.Error holds it).
func (r Refusal) Text() string {
	f := r.Figures
	var s string
	switch r.Kind {
	case RefusalEmulatorStall:
		s = fmt.Sprintf("the link emulator stalled during the sample (%d packets released more than %v late): figure not valid",
			uint64(f[FigureStalledPackets]), seconds(f[FigureStallSeconds]))
	case RefusalEmulatorLate:
		s = fmt.Sprintf("the link emulator fell behind during the sample (%d of %d packets released late, %v on average): figure not valid",
			uint64(f[FigureLatePackets]), uint64(f[FigureReleasedPackets]), seconds(f[FigureLateMeanSeconds]).Round(10*time.Microsecond))
	case RefusalEmulatorLost:
		s = fmt.Sprintf("the link emulator lost %d packets it could not handle during the sample: figure not valid", uint64(f[FigureLostPackets]))
	case RefusalNoValidSample:
		s = "no valid sample"
	case RefusalNoEcho:
		s = fmt.Sprintf("no echo came back (sent %d probes)", uint64(f[FigureSentProbePackets]))
	default:
		s = r.Detail
		if s == "" {
			s = r.Kind
		}
	}
	busy, okB := f[FigureHostBusyPercent]
	steal, okS := f[FigureHostStealPercent]
	if okB && okS && r.Detail == "" {
		s += fmt.Sprintf("; the host's CPUs were %.0f %% busy during it, %.1f %% of their time taken by the hypervisor (steal)", busy, steal)
	}
	if r.Tries > 0 {
		s += fmt.Sprintf(" (all %d tries of sample %d of %d invalid", r.Tries, r.Sample, r.Samples)
		if r.NotMeasured > 0 {
			s += fmt.Sprintf("; the row's %d later samples were not measured", r.NotMeasured)
		}
		s += ")"
	}
	return s
}

// String is Text, with the kind and the figures for logs of tests.
func (r Refusal) String() string {
	keys := make([]string, 0, len(r.Figures))
	for k := range r.Figures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%g", k, r.Figures[k])
	}
	return fmt.Sprintf("[%s%s] %s", r.Kind, b.String(), r.Text())
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Refuse marks the row invalid with a refusal, keeping the first one given
// (a row's first refusal is what ended it): Refusal holds it and Error its
// sentence.
func (r *Row) Refuse(rf Refusal) {
	r.Valid = false
	if r.Refusal != nil || r.Error != "" {
		return
	}
	r.Refusal = &rf
	r.Error = rf.Text()
}
