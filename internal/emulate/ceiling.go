package emulate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/emulate/ceilingdoc"
)

// The ceiling: the highest packet rate the emulation backend carries on a
// host, measured by `ovpnperf lab calibrate` (package lab runs it) and
// recorded in DefaultCeilingPath, which `lab status` and the documents of `lab
// run` report. A lab's figures are only as good as its emulator: a lab
// whose packet rate nears the ceiling measures the host, not the path.

// CeilingSchema identifies the record.
const CeilingSchema = "ovpnperf/emulator-ceiling/v1"

// DefaultCeilingPath is where the host's record lives. The command writes
// elsewhere only when told (--record); package lab reads the path its Env
// names, this one unless told otherwise.
const DefaultCeilingPath = "/var/lib/ovpnperf/emulator-ceiling.json"

// The criteria of a step, the same as BenchmarkRateBoth's "held".
const (
	// HeldMaxLateShare is the share of releases that may be late (beyond
	// the tolerance) for a rate to count as held: 0.01 %.
	HeldMaxLateShare = 0.0001
	// HeldMaxLatenessP99 is the p99 release lateness a held rate stays
	// below.
	HeldMaxLatenessP99 = time.Millisecond
	// MinSentShare is the share of the offered rate the senders must
	// reach: below it the host's senders, not the backend, were the limit.
	MinSentShare = 0.98
)

// OutcomeFromStats is a direction judged by the emulator's own counters of
// its queue, as BenchmarkRateBoth judges it.
func OutcomeFromStats(f FlowResult, q QueueStats) ceilingdoc.DirectionOutcome {
	return OutcomeFromStatsSince(f, QueueStats{}, q)
}

// OutcomeFromStatsSince is OutcomeFromStats of what the emulator counted
// between two snapshots of its queue's stats, before and after (a warm-up
// before them left out). Its lateness p99 and maximum are after's: they
// cover everything since the emulator started.
func OutcomeFromStatsSince(f FlowResult, before, after QueueStats) ceilingdoc.DirectionOutcome {
	drops := func(q QueueStats) uint64 { return q.KernelQueueDrops + q.KernelUserDropped + q.ENOBUFS }
	return ceilingdoc.DirectionOutcome{
		Sent: f.Sent, Received: f.Received, SentPPS: f.SentRate(),
		Released: after.Released - before.Released, Late: after.Late - before.Late,
		Stalled: after.Stalled - before.Stalled, Tolerance: after.Tolerance,
		LateDelay:   after.LateDelay - before.LateDelay,
		LatenessP99: after.LatenessP99, MaxLateness: after.MaxLateness,
		Drops:     drops(after) - drops(before),
		Reordered: f.Reordered, LatenessFrom: "emulator",
	}
}

// OutcomeFromDelays is a direction judged at the receiver, for a backend
// that keeps no counters (netem): each datagram's one-way delay minus
// delay is its lateness. It includes the host's forwarding and the
// sender's batching, so it is never below the emulator's own figure.
func OutcomeFromDelays(f FlowResult, delay, tolerance time.Duration) ceilingdoc.DirectionOutcome {
	o := ceilingdoc.DirectionOutcome{Sent: f.Sent, Received: f.Received, SentPPS: f.SentRate(), Tolerance: tolerance,
		Released: uint64(f.Received), Drops: uint64(f.RcvbufDrops), Reordered: f.Reordered, LatenessFrom: "receiver"}
	late := make([]time.Duration, len(f.Delays))
	for i, d := range f.Delays {
		l := max(d-delay, 0)
		late[i] = l
		if l > tolerance {
			o.Late++
			o.LateDelay += l
		}
		if l > StallLateness {
			o.Stalled++
		}
		o.MaxLateness = max(o.MaxLateness, l)
	}
	if len(late) > 0 {
		slices.Sort(late)
		o.LatenessP99 = late[int(0.99*float64(len(late)-1)+0.5)]
	}
	return o
}

// Held reports whether direction o held rate by BenchmarkRateBoth's
// definition: every packet arrived, no kernel drop, p99 lateness below
// 1 ms, at most 0.01 % late, the sender at 98 % of the rate. why names the
// first criterion missed.
//
// With a tolerance of at most 1 ms, at most 0.01 % later than it already
// puts the p99 below 1 ms: the late share of the counted releases decides,
// and the p99 figure (which may cover more, see LatenessP99) is judged
// only with a larger tolerance.
func Held(o ceilingdoc.DirectionOutcome, rate float64) (ok bool, why string) {
	if why := basic(o, rate); why != "" {
		return false, why
	}
	if o.LateShare() > HeldMaxLateShare {
		return false, fmt.Sprintf("%.3f %% late", 100*o.LateShare())
	}
	if o.Tolerance > HeldMaxLatenessP99 && o.LatenessP99 >= HeldMaxLatenessP99 {
		return false, fmt.Sprintf("p99 lateness %v", o.LatenessP99.Round(time.Microsecond))
	}
	return true, ""
}

// Carried reports whether direction o carried rate as a valid lab
// sample needs it: every packet arrived, no kernel drop, the sender at 98 %
// of the rate, no stall and at most MaxLateShare late (Lateness.Judge, the
// rule lab samples are judged by).
func Carried(o ceilingdoc.DirectionOutcome, rate float64) (ok bool, why string) {
	if why := basic(o, rate); why != "" {
		return false, why
	}
	if o.Stalled > 0 {
		return false, fmt.Sprintf("%d releases stalled (over %v late)", o.Stalled, StallLateness)
	}
	if (Lateness{Released: o.Released, Late: o.Late}).TooLate() {
		return false, fmt.Sprintf("%.2f %% late", 100*o.LateShare())
	}
	return true, ""
}

// basic is the criteria Held and Carried share: the sender reached the
// rate, every packet arrived, the kernel dropped none.
func basic(o ceilingdoc.DirectionOutcome, rate float64) string {
	switch {
	case o.SentPPS < MinSentShare*rate:
		return fmt.Sprintf(ceilingdoc.SenderShort+" %.0f pps", o.SentPPS)
	case o.Received < o.Sent:
		return fmt.Sprintf("%d of %d packets arrived", o.Received, o.Sent)
	case o.Drops > 0:
		return fmt.Sprintf("%d kernel drops", o.Drops)
	}
	return ""
}

// JudgeStep sets step s's Held, Carried and Why from its directions: Why
// says why it was not carried or, if it was, why it did not hold.
func JudgeStep(s *ceilingdoc.Step) {
	s.Held, s.Carried = true, true
	var heldWhy, carriedWhy string
	for i, d := range s.Directions {
		dir := []string{"up", "down"}[i]
		if ok, why := Held(d, s.RatePPS); !ok && heldWhy == "" {
			s.Held, heldWhy = false, dir+": "+why
		}
		if ok, why := Carried(d, s.RatePPS); !ok && carriedWhy == "" {
			s.Carried, carriedWhy = false, dir+": "+why
		}
	}
	s.Why = heldWhy
	if !s.Carried {
		s.Why = carriedWhy
	}
}

// ParseCeiling parses b, the record at path (`lab calibrate` writes it).
func ParseCeiling(path string, b []byte) (ceilingdoc.Ceiling, error) {
	var c ceilingdoc.Ceiling
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if c.Schema != CeilingSchema {
		return c, fmt.Errorf("%s: schema %q, want %s", path, c.Schema, CeilingSchema)
	}
	if why := c.Check(); why != "" {
		return ceilingdoc.Ceiling{}, fmt.Errorf("%s: %s: not a record lab calibrate writes", path, why)
	}
	return c, nil
}

// Ceiling report statuses.
const (
	CeilingMeasured    = "measured"
	CeilingStale       = "stale"
	CeilingNotMeasured = "not measured"
)

// ReportCeiling judges record c for backend on a host running kernel with
// cpus processors; err is the error of reading or parsing the record
// (os.ErrNotExist: there is none). how is the command that measures it,
// for the summary of a missing or stale record.
func ReportCeiling(c ceilingdoc.Ceiling, err error, backend, kernel string, cpus int, how string) ceilingdoc.Report {
	r := ceilingdoc.Report{Backend: backend, Status: CeilingNotMeasured,
		Summary: fmt.Sprintf("emulator: %s, ceiling not measured on this host: %s", backend, how)}
	if errors.Is(err, os.ErrNotExist) {
		return r
	}
	if err != nil {
		r.Summary = fmt.Sprintf("emulator: %s, ceiling record unreadable (%v): %s", backend, err, how)
		return r
	}
	r.Record = &c
	switch {
	case c.Backend != backend:
		r.Status = CeilingStale
		r.Summary = fmt.Sprintf("emulator: %s, ceiling not measured for it (the record is of %s): %s", backend, c.Backend, how)
		return r
	case c.Kernel != kernel || c.CPUs != cpus:
		r.Status = CeilingStale
		r.Summary = fmt.Sprintf("emulator: %s, ceiling record is stale (measured on kernel %s with %d CPUs, this host runs %s with %d): %s",
			backend, c.Kernel, c.CPUs, kernel, cpus, how)
		return r
	}
	r.Status = CeilingMeasured
	r.Busy = c.CPUs > 0 && c.LoadBefore[0] >= float64(c.CPUs)/2
	held := "held none of the rates tried"
	if c.HeldPPS > 0 {
		held = "held " + groupThousands(c.HeldPPS) + " pps/direction"
	}
	carried := "none with at most 1 % late"
	if c.CarriedPPS > 0 {
		carried = "at most 1 % late up to " + groupThousands(c.CarriedPPS) + " pps"
		if c.SenderShortAtEnd() {
			carried += " (above it the load generator fell short, not the emulator)"
		}
	}
	r.Summary = fmt.Sprintf("emulator: %s, %s (%d B, %v), %s, measured %s at load %.2f",
		backend, held, c.PacketBytes, c.Delay, carried, c.Time.UTC().Format("2006-01-02"), c.LoadBefore[0])
	if r.Busy {
		r.Summary += fmt.Sprintf(" on %d CPUs: a busy host, the figures are likely low (measure again when idle)", c.CPUs)
	}
	return r
}

// groupThousands prints 25000 as "25 000".
func groupThousands(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}
