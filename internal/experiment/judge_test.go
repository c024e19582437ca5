package experiment

import (
	"errors"
	"strings"
	"testing"
)

// judge decides whether a sample counts, from the emulator's counters
// before and after it.
func TestJudgeSample(t *testing.T) {
	base := emuCounters{Released: 1000, Late: 5, Lost: 1, Stalled: 2}
	after := func(released, late, lost, stalled uint64) emuCounters {
		return emuCounters{Released: base.Released + released, Late: base.Late + late, Lost: base.Lost + lost, Stalled: base.Stalled + stalled}
	}
	for _, c := range []struct {
		name  string
		after emuCounters
		want  string // "" = valid; else a part of the reason
	}{
		{"on time", after(10000, 0, 0, 0), ""},
		{"a few late, under 1 %", after(10000, 99, 0, 0), ""},
		{"more than 1 % late", after(10000, 101, 0, 0), "101 of 10000 packets released late"},
		{"lost one", after(10000, 0, 1, 0), "lost 1 packets"},
		// A stall of the emulator stalls the flow too: few packets pass,
		// so the late share stays small, yet the path did not behave as
		// configured.
		{"one stalled packet, share of late small", after(10000, 3, 0, 1), "1 packets released more than 50ms late"},
		{"nothing released", after(0, 0, 0, 0), ""},
	} {
		got := judge(base, c.after)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: judge = %q, want %q", c.name, got, c.want)
		}
		if got != "" && !errors.Is(invalidSample(got), ErrInvalidSample) {
			t.Errorf("%s: reason does not read as an invalid sample", c.name)
		}
	}
}
