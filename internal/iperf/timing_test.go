package iperf

import (
	"strings"
	"testing"
	"time"
)

// Whether an echo answered, not its round trip, decides between the echo
// rule and the no-echo default: an echo of 0 ms (a LAN's round trip
// rounded to nothing) is sized like any other short path, not given the
// no-echo warm-up.
func TestRealPathTiming(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                string
		largest             time.Duration
		echoed              bool
		duration, omit, slk time.Duration
	}{
		{"no echo", 0, false, 0, NoEchoWarmup, 0},
		{"no echo, round trip ignored", 600 * time.Millisecond, false, 0, NoEchoWarmup, 0},
		{"0 ms echo", 0, true, 2 * time.Second, time.Second, 0},
		{"300 µs echo", 300 * time.Microsecond, true, 2 * time.Second, time.Second, 600 * time.Microsecond},
		{"620 ms echo", 620 * time.Millisecond, true, 13 * time.Second, 7 * time.Second, 1240 * time.Millisecond},
	} {
		d, w, slack := RealPathTiming(c.largest, c.echoed)
		if d != c.duration || w != c.omit || slack != c.slk {
			t.Errorf("%s: -t %v -O %v slack %v, want -t %v -O %v slack %v", c.name, d, w, slack, c.duration, c.omit, c.slk)
		}
	}
}

// The rules in words name the figures SampleTiming gives a path of no
// round trip: the help texts cannot drift from the rule.
func TestTimingRulesInWords(t *testing.T) {
	d, w := SampleTiming(0, 0, 0)
	if got := TimeRule(0); !strings.HasPrefix(got, d.String()+",") {
		t.Errorf("TimeRule(0) = %q, want it to start with the shortest sample %v", got, d)
	}
	if got := TimeRule(d + time.Second); !strings.HasPrefix(got, (d+time.Second).String()+",") {
		t.Errorf("TimeRule(%v) = %q, want that floor first", d+time.Second, got)
	}
	if got := WarmupRule(); !strings.HasSuffix(got, "at least "+w.String()) {
		t.Errorf("WarmupRule() = %q, want it to end with the least warm-up %v", got, w)
	}
}
