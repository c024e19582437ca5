package emulate

import (
	"strings"
	"testing"
	"time"
)

// The rule lab samples are judged by: more than 1 % late, or one stall.
func TestLatenessJudge(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		name string
		l    Lateness
		want string // "" = valid; else a part of the reason
	}{
		{"1 % late", Lateness{Released: 10000, Late: 100, LateDelay: 100 * 2 * ms}, ""},
		{"just over 1 % late", Lateness{Released: 10000, Late: 101, LateDelay: 101 * 2 * ms},
			"(101 of 10000 packets released late, 2ms on average)"},
		{"one stall", Lateness{Released: 10000, Late: 1, Stalled: 1, LateDelay: 60 * ms}, "1 packets released more than 50ms late"},
		{"nothing released", Lateness{}, ""},
	} {
		got := c.l.Judge()
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: Judge = %q, want %q", c.name, got, c.want)
		}
	}
}

// LatenessOf sums the queues, Since subtracts.
func TestLatenessOfSince(t *testing.T) {
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
