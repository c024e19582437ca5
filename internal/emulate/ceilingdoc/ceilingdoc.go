// Package ceilingdoc holds the record `ovpnperf lab calibrate` writes
// about the emulator's ceiling on a host, and the report on it that `lab
// status` and the run documents carry: the types only, with what reading
// them needs, so that the documents' packages (measure, report) do not
// link the emulator and its eBPF library. Measuring and judging a rate
// (what held, what was carried) stays in internal/emulate, which takes
// and returns these types; every package names them here, ceilingdoc.X.
package ceilingdoc

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

// SenderShort opens the reason of a step whose sender fell short of the
// rate: the emulator's judgement writes it, Ceiling.SenderShortAtEnd reads it.
const SenderShort = "sender reached"

// Ceiling is the record of one calibration.
type Ceiling struct {
	Schema  string    `json:"schema"`
	Backend string    `json:"backend"`
	Time    time.Time `json:"time"`
	// Kernel (uname -r) and CPUs (online processors) of the host: a record
	// of another kernel or CPU count is stale.
	Kernel  string   `json:"kernel"`
	CPUs    int      `json:"cpus"`
	Version string   `json:"ovpnperf_version"`
	Argv    []string `json:"argv"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute
	// figures; LoadAfter includes the calibration's own load.
	LoadBefore [3]float64 `json:"load_before"`
	LoadAfter  [3]float64 `json:"load_after"`
	// The load: PacketBytes IPv4 packets (UDP) both ways at once, each way
	// through Delay, a release later than Tolerance counting as late, each
	// rate for StepDuration.
	PacketBytes  int           `json:"packet_bytes"`
	Delay        time.Duration `json:"delay_ns"`
	Tolerance    time.Duration `json:"tolerance_ns"`
	StepDuration time.Duration `json:"step_duration_ns"`
	// HeldPPS is the highest rate per direction that held (Step.Held), 0
	// when none did; CarriedPPS the highest carried (Step.Carried).
	HeldPPS    float64 `json:"held_pps_per_direction"`
	CarriedPPS float64 `json:"carried_pps_per_direction"`
	// SenderLimited is true when the rate after CarriedPPS failed because
	// the load generator fell short of it: the emulator's ceiling lies
	// higher than the calibration could offer.
	SenderLimited bool `json:"sender_limited"`
	// Steps are the rates tried, ascending, until one was not carried in
	// any of its tries.
	Steps []Step `json:"steps"`
}

// Step is one rate tried.
type Step struct {
	RatePPS float64 `json:"rate_pps_per_direction"`
	Held    bool    `json:"held"`
	Carried bool    `json:"carried"`
	// Why says which criterion the step missed first ("" when held).
	Why string `json:"why,omitempty"`
	// Tries is how often the rate was offered: a rate not carried is
	// tried again (up to 3 times in all), and the step is its last try.
	Tries      int                 `json:"tries"`
	Directions [2]DirectionOutcome `json:"directions"` // up, down
}

// DirectionOutcome is what one direction of a two-way load saw.
type DirectionOutcome struct {
	Sent     int     `json:"sent"`
	Received int     `json:"received"`
	SentPPS  float64 `json:"sent_pps"`
	// Released, Late and Stalled count the backend's releases, those later
	// than Tolerance and those later than StallLateness.
	Released  uint64        `json:"released"`
	Late      uint64        `json:"late"`
	Stalled   uint64        `json:"stalled"`
	Tolerance time.Duration `json:"tolerance_ns"`
	// LateDelay is the late releases' lateness, summed.
	LateDelay time.Duration `json:"late_delay_ns"`
	// LatenessP99 and MaxLateness are the emulator's since it started
	// (lab calibrate: its warm-up included, which the counters above
	// leave out), or the receiver's.
	LatenessP99 time.Duration `json:"lateness_p99_ns"`
	MaxLateness time.Duration `json:"max_lateness_ns"`
	// Drops are packets the kernel dropped before or in the backend
	// (queue overflow, socket overrun, ENOBUFS); Reordered datagrams
	// arrived after one sent later.
	Drops     uint64 `json:"drops"`
	Reordered int    `json:"reordered"`
	// LatenessFrom says where the lateness figures come from: "emulator"
	// (its own release counters) or "receiver" (one-way delay at the
	// receiver minus the configured delay, for a backend without counters).
	LatenessFrom string `json:"lateness_from"`
}

// LateShare is the share of releases that were late.
func (o DirectionOutcome) LateShare() float64 {
	if o.Released == 0 {
		return 0
	}
	return float64(o.Late) / float64(o.Released)
}

// Summarize sets HeldPPS and CarriedPPS from the steps.
func (c *Ceiling) Summarize() {
	c.HeldPPS, c.CarriedPPS = 0, 0
	for _, s := range c.Steps {
		if s.Held {
			c.HeldPPS = max(c.HeldPPS, s.RatePPS)
		}
		if s.Carried {
			c.CarriedPPS = max(c.CarriedPPS, s.RatePPS)
		}
	}
	c.SenderLimited = c.SenderShortAtEnd()
}

// SenderShortAtEnd says whether the last step failed because a sender
// fell short (from the steps, so records written before the field say it
// too).
func (c Ceiling) SenderShortAtEnd() bool {
	n := len(c.Steps)
	return n > 0 && !c.Steps[n-1].Carried && strings.Contains(c.Steps[n-1].Why, SenderShort)
}

// Check says what in a record read from disk no calibration writes: a
// name with control characters (it reaches the line lab status prints),
// a negative or absurd count, rate, size, load or duration.
func (c Ceiling) Check() string {
	for _, f := range []struct{ name, v string }{{"backend", c.Backend}, {"kernel", c.Kernel}, {"ovpnperf_version", c.Version}} {
		if len(f.v) > 256 || strings.IndexFunc(f.v, unicode.IsControl) >= 0 {
			return fmt.Sprintf("%s %.40q", f.name, f.v)
		}
	}
	if c.CPUs < 0 || c.CPUs > 1<<16 || c.PacketBytes < 0 || c.PacketBytes > 1<<16 {
		return fmt.Sprintf("cpus %d, packet_bytes %d", c.CPUs, c.PacketBytes)
	}
	if c.Delay < 0 || c.Tolerance < 0 || c.StepDuration < 0 {
		return fmt.Sprintf("delay %v, tolerance %v, step duration %v", c.Delay, c.Tolerance, c.StepDuration)
	}
	pps := []float64{c.HeldPPS, c.CarriedPPS}
	for _, st := range c.Steps {
		pps = append(pps, st.RatePPS)
	}
	for _, v := range pps {
		if v < 0 || v > 1e9 {
			return fmt.Sprintf("a rate of %g pps", v)
		}
	}
	for _, v := range append(c.LoadBefore[:], c.LoadAfter[:]...) {
		if v < 0 || v > 1e6 {
			return fmt.Sprintf("a load average of %g", v)
		}
	}
	return ""
}

// Report is what `lab status` and the documents measured across a
// lab say about the backend's ceiling on this host.
type Report struct {
	Backend string `json:"backend"`
	// Status is "measured", "stale" (the record is of another kernel or
	// CPU count, or of another backend) or "not measured".
	Status string `json:"status"`
	// Summary is the line people read.
	Summary string `json:"summary"`
	// Busy is true when the host's 1-minute load before the calibration
	// was at least half its CPU count: the figures are likely low.
	Busy bool `json:"busy,omitempty"`
	// Record is the calibration's record (also when stale).
	Record *Ceiling `json:"record,omitempty"`
}
