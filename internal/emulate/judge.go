package emulate

import "time"

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
// A sample is refused for that, or for one stalled release (a flow stalled
// that long sends little, so the late share can miss it): the judgement
// and its figures are experiment.JudgeEmulator's.
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
