package verdict

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestOutcomeValid(t *testing.T) {
	t.Parallel()
	for _, o := range Outcomes() {
		if !o.Valid() {
			t.Errorf("%q not valid", o)
		}
	}
	for _, o := range []Outcome{"", "confirmed changed", "Confirmed"} {
		if o.Valid() {
			t.Errorf("%q valid", o)
		}
	}
}

func TestOf(t *testing.T) {
	t.Parallel()
	s := Of([]float64{3, 1, 2, 10})
	if s != (Spread{N: 4, Median: 2.5, Min: 1, Max: 10, RelRange: 9 / 2.5}) {
		t.Errorf("Of = %+v", s)
	}
	if Of(nil) != (Spread{}) {
		t.Error("Of(nil) not zero")
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	for _, tc := range []struct {
		xs               []float64
		median, min, max float64
		rel              float64
	}{
		{nil, nan, nan, nan, 0},
		{[]float64{5}, 5, 5, 5, 0},
		{[]float64{3, 1, 2}, 2, 1, 3, 1},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4, 1.2},
		{[]float64{48e6, 47e6, 49e6, 47.5e6, 48.5e6}, 48e6, 47e6, 49e6, 2.0 / 48},
		{[]float64{-4, 2}, -1, -4, 2, 6},
	} {
		in := slices.Clone(tc.xs)
		eq := func(name string, got, want float64) {
			t.Helper()
			if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want))) {
				t.Errorf("%s(%v) = %v, want %v", name, tc.xs, got, want)
			}
		}
		eq("Median", Median(tc.xs), tc.median)
		eq("Min", Min(tc.xs), tc.min)
		eq("Max", Max(tc.xs), tc.max)
		s := Of(tc.xs)
		if len(tc.xs) == 0 {
			if s != (Spread{}) {
				t.Errorf("Of(nil) = %+v", s)
			}
		} else {
			eq("Of.Median", s.Median, tc.median)
			eq("Of.RelRange", s.RelRange, tc.rel)
			if s.N != len(tc.xs) || s.Min != tc.min || s.Max != tc.max {
				t.Errorf("Of(%v) = %+v", tc.xs, s)
			}
		}
		if !slices.Equal(in, tc.xs) {
			t.Errorf("input reordered: %v → %v", in, tc.xs)
		}
	}
}

// percentile is the p-th percentile by linear interpolation between
// closest ranks (numpy's default, Excel's PERCENTILE.INC): the definition
// the run documents' medians were written with before Median and Of were
// one function.
func percentile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := p / 100 * float64(len(s)-1)
	lo, hi := int(math.Floor(pos)), int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// The one median is the middle value for an odd count and the mean of the
// two middle values for an even one, bit for bit the 50th percentile the
// documents recorded, so documents keep their figures; and within a
// rounding of the midpoint (lo+hi)/2 that Of took before.
func TestMedianIsPercentile50(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 12; n++ {
		for range 2000 {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = rng.Float64() * math.Pow(10, float64(rng.IntN(12)))
			}
			want := percentile(xs, 50)
			if got := Median(xs); got != want {
				t.Fatalf("n=%d: Median(%v) = %v, the 50th percentile is %v", n, xs, got, want)
			}
			if got := Of(xs).Median; got != want {
				t.Fatalf("n=%d: Of(%v).Median = %v, the 50th percentile is %v", n, xs, got, want)
			}
			s := slices.Clone(xs)
			slices.Sort(s)
			mid := s[n/2]
			if n%2 == 0 {
				mid = (s[n/2-1] + s[n/2]) / 2
			}
			if math.Abs(want-mid) > 1e-15*math.Abs(mid) {
				t.Fatalf("n=%d: the 50th percentile %v and the midpoint %v of %v differ beyond rounding", n, want, mid, xs)
			}
		}
	}
}

func TestSpreadOverlaps(t *testing.T) {
	t.Parallel()
	a := Of([]float64{10, 12, 11})
	b := Of([]float64{11.5, 13, 14})
	c := Of([]float64{20, 21})
	if !a.Overlaps(b) || !b.Overlaps(a) {
		t.Error("a, b overlap")
	}
	if a.Overlaps(c) || c.Overlaps(a) {
		t.Error("a, c do not overlap")
	}
	if a.Overlaps(Spread{}) {
		t.Error("empty overlaps")
	}
}

func TestAboveNeedsSamples(t *testing.T) {
	t.Parallel()
	hi, lo := Of([]float64{10, 11, 12}), Of([]float64{1, 2, 3})
	if !Above(hi, lo) || Above(lo, hi) {
		t.Error("Above wrong on separated sets")
	}
	if Above(Of([]float64{10, 11}), lo) || Above(hi, Of([]float64{1, 2})) {
		t.Error("two samples counted as separated")
	}
	if Above(Of([]float64{3, 11, 12}), lo) {
		t.Error("touching sets counted as separated")
	}
}

func TestRatiosPairedAndUnpaired(t *testing.T) {
	t.Parallel()
	r := Ratios([]float64{10, 20, 30}, []float64{10, 20, 30})
	if !r.Paired || r.Lo != 1 || r.Hi != 1 || r.N != 3 {
		t.Errorf("paired: %+v", r)
	}
	// Load moved both sides together: the pairs see no spread.
	r = Ratios([]float64{9, 18, 27, 36}, []float64{10, 20, 30})
	if r.Paired || r.Lo != 9.0/30 || r.Hi != 36.0/10 || r.N != 3 {
		t.Errorf("unpaired: %+v", r)
	}
	if (Ratios(nil, []float64{1}) != Ratio{}) || (Ratios([]float64{1}, []float64{0}) != Ratio{}) {
		t.Error("empty or zero baseline gave a ratio")
	}
}

func TestFaster(t *testing.T) {
	t.Parallel()
	b := []float64{100, 101, 102}
	for _, tc := range []struct {
		name string
		a    []float64
		min  float64
		want Outcome
	}{
		{"separated and enough", []float64{120, 121, 122}, 1.1, Confirmed},
		{"separated, just short of min", []float64{110, 111, 112}, 1.1, Changed},
		{"separated, just reaching min", []float64{112.2, 112.2, 112.2}, 1.1, Confirmed},
		{"slower beyond spread", []float64{90, 91, 92}, 1.0, Refuted},
		{"overlapping", []float64{101.5, 120, 130}, 1.0, Noise},
		{"two samples", []float64{200, 200}, 1.0, Noise},
	} {
		if got, r := Faster(tc.a, b, tc.min); got != tc.want {
			t.Errorf("%s: %s (%v), want %s", tc.name, got, r, tc.want)
		}
	}
	if got, _ := Faster([]float64{200, 200, 200}, []float64{100, 100}, 1); got != Noise {
		t.Errorf("short baseline: %s", got)
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	base := []float64{100, 100, 100}
	w := Unchanged(0.1)
	for _, tc := range []struct {
		name       string
		x, base    []float64
		want       Outcome
		below, abv bool
	}{
		{"inside", []float64{95, 100, 105}, base, Confirmed, false, false},
		{"at the low edge", []float64{90, 95, 100}, base, Confirmed, false, false},
		{"just past the low edge", []float64{89.9, 95, 100}, base, Noise, false, false},
		{"below beyond the spread", []float64{80, 85, 89}, base, Changed, true, false},
		{"above beyond the spread", []float64{111, 115, 120}, base, Changed, false, true},
		{"straddling", []float64{80, 100, 120}, base, Noise, false, false},
		{"missing baseline", []float64{100, 100, 100}, nil, NotTested, false, false},
		{"short baseline", []float64{100, 100, 100}, []float64{100, 100}, Noise, false, false},
		{"empty baseline", []float64{100, 100, 100}, []float64{}, NotTested, false, false},
		{"short x", []float64{100, 100}, base, Noise, false, false},
	} {
		j := Within(tc.x, tc.base, w)
		if j.Outcome != tc.want || j.Below != tc.below || j.Above != tc.abv {
			t.Errorf("%s: %+v, want %s below=%v above=%v", tc.name, j, tc.want, tc.below, tc.abv)
		}
		if (j.Outcome == Noise || j.Outcome == NotTested) && j.Why == "" {
			t.Errorf("%s: %s without a reason", tc.name, j.Outcome)
		}
	}
	// A wide spread is noise even when the medians agree: the resolution
	// could not have shown a 10 % difference.
	j := Within([]float64{70, 100, 130, 100}, []float64{100, 100, 100}, w)
	if j.Outcome != Noise {
		t.Errorf("wide spread: %+v", j)
	}
	// NotBelow has no upper end.
	if j := Within([]float64{300, 300, 300}, base, NotBelow(0.1)); j.Outcome != Confirmed {
		t.Errorf("NotBelow faster: %+v", j)
	}
	if j := Within([]float64{89, 89, 89}, base, NotBelow(0.1)); j.Outcome != Changed || !j.Below {
		t.Errorf("NotBelow slower: %+v", j)
	}
	if s := NotBelow(0.1).String(); s != "≥×0.90" {
		t.Errorf("window string %q", s)
	}
	if math.IsInf(Unchanged(0.1).Hi, 1) {
		t.Error("Unchanged has no upper end")
	}
}

func TestLimitedTo(t *testing.T) {
	t.Parallel()
	m := Margins{Over: 1.1, Under: 0.6, Free: 1.5}
	const limit = 1e6
	for _, tc := range []struct {
		name string
		s    []float64
		path float64
		want Outcome
	}{
		{"held", []float64{0.9e6, 0.95e6, 1.0e6}, 20e6, Confirmed},
		{"held, top at the margin", []float64{0.9e6, 0.95e6, 1.1e6}, 20e6, Confirmed},
		{"one sample over the margin", []float64{0.9e6, 0.95e6, 1.11e6}, 20e6, Noise},
		{"median at Under", []float64{0.5e6, 0.6e6, 0.7e6}, 20e6, Confirmed},
		{"median below Under", []float64{0.5e6, 0.59e6, 0.7e6}, 20e6, Changed},
		{"free", []float64{1.6e6, 2e6, 3e6}, 20e6, Refuted},
		{"just not free", []float64{1.5e6, 2e6, 3e6}, 20e6, Changed},
		{"two samples", []float64{1e6, 1e6}, 20e6, Noise},
		{"no path rate: limit binds", []float64{1e6, 1e6, 1e6}, 0, Confirmed},
		{"limit just under the binding share", []float64{1e6, 1e6, 1e6}, limit / 0.79, Confirmed},
		{"limit at the binding share", []float64{1e6, 1e6, 1e6}, limit / BindingShare, NotTested},
		{"limit above the path", []float64{1e6, 1e6, 1e6}, 0.9e6, NotTested},
	} {
		got, why := LimitedTo(tc.s, limit, tc.path, m)
		if got != tc.want || why == "" {
			t.Errorf("%s: %s (%s), want %s", tc.name, got, why, tc.want)
		}
	}
	if got, _ := LimitedTo([]float64{1, 1, 1}, 0, 0, m); got != NotTested {
		t.Errorf("no limit: %s", got)
	}
}

// A judgement short of samples says so as data (Judgement.Short), and
// its Why is the shortfall's sentence (Shortfall.String, the renderer,
// whose sentences are checked here too).
func TestShortfall(t *testing.T) {
	t.Parallel()
	w := Unchanged(0.1)
	for _, c := range []struct {
		name        string
		x, baseline []float64
		want        Shortfall
		text        string
	}{
		{"two samples", []float64{1, 1}, []float64{1, 1, 1}, Shortfall{Kind: ShortSamples, N: 2, Needed: MinSamples}, "2 valid samples, a verdict needs 3"},
		{"baseline of two", []float64{1, 1, 1}, []float64{1, 1}, Shortfall{Kind: ShortBaseline, N: 2, Needed: MinSamples}, "the baseline has 2 valid samples, a comparison needs 3"},
		{"baseline of zeros", []float64{1, 1, 1}, []float64{0, 0, 0}, Shortfall{Kind: ShortZeroBaseline, N: 0, Needed: MinSamples, Zero: 3, Of: 3}, "3 of the baseline's 3 samples are 0 bit/s, and no ratio can be taken to 0: 0 ratios, a verdict needs 3"},
	} {
		j := Within(c.x, c.baseline, w)
		if j.Outcome != Noise || j.Short == nil || *j.Short != c.want || j.Why != j.Short.String() {
			t.Errorf("%s: %+v, want shortfall %+v", c.name, j, c.want)
			continue
		}
		if got := c.want.String(); got != c.text {
			t.Errorf("Shortfall.String(%+v) = %q, want %q", c.want, got, c.text)
		}
	}
	if j := Within([]float64{1, 1, 1}, []float64{1, 1, 1}, w); j.Short != nil {
		t.Errorf("enough samples, shortfall %+v", j.Short)
	}
	if s := SamplesShort([]float64{1, 1, 1}); s != nil {
		t.Errorf("SamplesShort of 3: %+v", s)
	}
}
