// Package bounds is the type of an option's range: the whole numbers or
// durations a flag accepts. The package that owns an option returns its
// range from a function (experiment.RepeatRange, watch.EveryRange, …);
// the flag that sets it, its help text and the owner's own check read that
// one value.
package bounds

import (
	"fmt"
	"strings"
	"time"
)

// Int is the whole numbers an option accepts, Min to Max.
type Int struct{ Min, Max int }

// Contains reports whether n is in the range.
func (r Int) Contains(n int) bool { return n >= r.Min && n <= r.Max }

// String is the range as help texts show it: "1–50".
func (r Int) String() string { return fmt.Sprintf("%d–%d", r.Min, r.Max) }

// Duration is the durations an option accepts, Min to Max; Whole accepts
// whole seconds only (iperf3's -t and -O take seconds).
type Duration struct {
	Min, Max time.Duration
	Whole    bool
}

// Contains reports whether d is in the range (and whole seconds when the
// range asks for them).
func (r Duration) Contains(d time.Duration) bool {
	return d >= r.Min && d <= r.Max && (!r.Whole || d%time.Second == 0)
}

// String is the range as help texts show it: "1s–5m".
func (r Duration) String() string {
	return FormatDuration(r.Min) + "–" + FormatDuration(r.Max)
}

// FormatDuration writes d as people type it on a command line: "5m", not
// Go's "5m0s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
