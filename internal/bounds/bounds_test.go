package bounds

import (
	"testing"
	"time"
)

func TestRanges(t *testing.T) {
	i := Int{Min: 1, Max: 50}
	if !i.Contains(1) || !i.Contains(50) || i.Contains(0) || i.Contains(51) || i.String() != "1–50" {
		t.Errorf("Int %v: wrong bounds or text %q", i, i.String())
	}
	d := Duration{Min: time.Second, Max: 5 * time.Minute, Whole: true}
	if !d.Contains(time.Second) || !d.Contains(5*time.Minute) || d.Contains(1500*time.Millisecond) || d.Contains(5*time.Minute+time.Second) || d.Contains(0) {
		t.Errorf("Duration %v: wrong bounds", d)
	}
	if (Duration{Min: 10 * time.Millisecond, Max: time.Hour}).Contains(15*time.Millisecond) != true {
		t.Error("a range without Whole refuses a fraction of a second")
	}
	for d, want := range map[time.Duration]string{0: "0s", time.Second: "1s", 5 * time.Minute: "5m", 24 * time.Hour: "24h", 90 * time.Second: "1m30s", 50 * time.Millisecond: "50ms"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
