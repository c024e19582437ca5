package emulate

import (
	"fmt"
	"time"
)

// MaxLateShare is the share of a lab sample's releases that may be late
// (beyond the tolerance) before the sample is invalid: 1 %. The one rule
// that `lab run`, the recipes and `lab calibrate` (Carried) apply
// (docs/emulator.md, "When a measurement is not trusted"). Late releases
// are the emulator's view of a host that stalled: the stall that made
// them late held up the endpoints too, so a flow limited by its window
// loses more than the delay the late packets added (docs/emulator.md,
// "What late releases do to a figure").
const MaxLateShare = 0.01

// Lateness is what the emulator released during a sample and how late:
// releases, those later than the tolerance and later than StallLateness,
// and the late ones' lateness summed.
type Lateness struct {
	Released, Late, Stalled uint64
	LateDelay               time.Duration
}

// LatenessOf sums the queues' counters.
func LatenessOf(st Stats) Lateness {
	var l Lateness
	for _, q := range st.Queues {
		l.Released += q.Released
		l.Late += q.Late
		l.Stalled += q.Stalled
		l.LateDelay += q.LateDelay
	}
	return l
}

// Since is what was counted between before and l.
func (l Lateness) Since(before Lateness) Lateness {
	return Lateness{Released: l.Released - before.Released, Late: l.Late - before.Late,
		Stalled: l.Stalled - before.Stalled, LateDelay: l.LateDelay - before.LateDelay}
}

// TooLate reports whether more than MaxLateShare of the releases were late.
func (l Lateness) TooLate() bool {
	return l.Released > 0 && float64(l.Late) > MaxLateShare*float64(l.Released)
}

// MeanLate is how late the late releases were on average.
func (l Lateness) MeanLate() time.Duration {
	if l.Late == 0 {
		return 0
	}
	return l.LateDelay / time.Duration(l.Late)
}

// Judge returns why the releases l are not the path a sample asked for,
// or "" if they are: one stalled release is enough (a flow stalled that
// long sends little, so the late share can miss it), or too many late
// ones (TooLate).
func (l Lateness) Judge() string {
	if l.Stalled > 0 {
		return fmt.Sprintf("the link emulator stalled during the sample (%d packets released more than %v late): figure not valid", l.Stalled, StallLateness)
	}
	if l.TooLate() {
		return fmt.Sprintf("the link emulator fell behind during the sample (%d of %d packets released late, %v on average): figure not valid",
			l.Late, l.Released, l.MeanLate().Round(10*time.Microsecond))
	}
	return ""
}
