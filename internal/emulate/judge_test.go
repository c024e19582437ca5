package emulate

import (
	"testing"
	"time"
)

// The share lab samples are judged by: more than 1 % late.
func TestLatenessTooLate(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	for _, c := range []struct {
		name string
		l    Lateness
		want bool
	}{
		{"1 % late", Lateness{Released: 10000, Late: 100, LateDelay: 100 * 2 * ms}, false},
		{"just over 1 % late", Lateness{Released: 10000, Late: 101, LateDelay: 101 * 2 * ms}, true},
		{"nothing released", Lateness{}, false},
	} {
		if got := c.l.TooLate(); got != c.want {
			t.Errorf("%s: TooLate = %v, want %v", c.name, got, c.want)
		}
	}
}

// LatenessOf sums the queues, Since subtracts.
func TestLatenessOfSince(t *testing.T) {
	t.Parallel()
	st := Stats{Queues: []QueueStats{
		{Released: 10, Late: 2, Stalled: 1, LateDelay: 3 * time.Millisecond},
		{Released: 5, Late: 1, LateDelay: time.Millisecond},
	}}
	l := LatenessOf(st)
	if l != (Lateness{Released: 15, Late: 3, Stalled: 1, LateDelay: 4 * time.Millisecond}) {
		t.Errorf("LatenessOf = %+v", l)
	}
	d := l.Since(Lateness{Released: 5, Late: 1, LateDelay: time.Millisecond})
	if d != (Lateness{Released: 10, Late: 2, Stalled: 1, LateDelay: 3 * time.Millisecond}) || d.MeanLate() != 1500*time.Microsecond {
		t.Errorf("Since = %+v, mean late %v", d, d.MeanLate())
	}
}
