package tune

import (
	"strings"
	"testing"
)

var both = []string{"up", "down"}

func mbit(xs ...float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * 1e6
	}
	return out
}

// Must show 2: a best is reported only when it beats the default beyond
// the spread; otherwise "nothing beats the default". Crafted samples on
// both sides of the line.
func TestDecide(t *testing.T) {
	def := Samples{"up": mbit(17, 18, 19), "down": mbit(17, 18, 19)}
	for _, tc := range []struct {
		name  string
		best  Samples
		found bool
		want  string
	}{
		{"clearly faster both ways", Samples{"up": mbit(19.5, 20, 21), "down": mbit(20, 21, 22)}, true, "beats the default"},
		{"faster one way, same the other", Samples{"up": mbit(19.1, 20, 21), "down": mbit(17, 18, 19)}, true, "beats the default"},
		{"higher median but ranges overlap", Samples{"up": mbit(18.9, 21, 22), "down": mbit(18.5, 20, 21)}, false, "nothing beats the default"},
		{"touching: best's slowest equals default's fastest", Samples{"up": mbit(19, 25, 26), "down": mbit(19, 25, 26)}, false, "nothing beats the default"},
		{"faster up but slower down beyond the spread", Samples{"up": mbit(25, 26, 27), "down": mbit(10, 11, 12)}, false, "nothing beats the default"},
		{"far faster but only two samples", Samples{"up": mbit(50, 51), "down": mbit(50, 51)}, false, "too few samples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide("c3", tc.best, def, both)
			if v.Found != tc.found || !strings.Contains(v.Message, tc.want) {
				t.Errorf("Decide = %+v, want found=%v and %q in the message", v, tc.found, tc.want)
			}
		})
	}
	// The default stalled (no valid sample up); the best worked at the
	// same times: it wins that direction. With only two samples it does not.
	stalled := Samples{"down": mbit(17, 18, 19)}
	if v := Decide("c1", Samples{"up": mbit(60, 61, 62), "down": mbit(17, 18, 19)}, stalled, both); !v.Found || !strings.Contains(v.Message, "no valid sample") {
		t.Errorf("default stalled: %+v", v)
	}
	if v := Decide("c1", Samples{"up": mbit(60, 61), "down": mbit(17, 18, 19)}, stalled, both); v.Found {
		t.Errorf("default stalled, best with 2 samples: %+v", v)
	}
	if v := Decide("default", def, def, both); v.Found || !strings.Contains(v.Message, "nothing beats the default") {
		t.Errorf("a search that never moved: %+v", v)
	}
}
