// Package verdict holds ovpnperf's evidence rules: what a set of samples
// must show before a claim about them is "confirmed", and the typed
// outcome every recipe verdict and every `lab run` finding carries.
//
// The rules exist once, here, so that a claim is judged the same way
// wherever it is made:
//
//   - No verdict rests on fewer than MinSamples samples: one sample has no
//     spread to judge by.
//   - A "no difference" claim needs a baseline with MinSamples samples and
//     a measured resolution that could have shown the difference: every
//     ratio the samples allow must lie inside the claimed window, so a
//     difference as large as the window would have been seen (the ipv6
//     recipe's rule).
//   - A "limited to X" claim needs X to be what binds on this path: when
//     the path's own rate is near X, the measurement cannot tell the two
//     limits apart, and the claim is NotTested there.
//   - A claim is judged on the quantity it names (rates, not cipher names;
//     the buffer it states, not the one the kernel granted).
//
// docs/evidence.md is the one explanation of these rules for users and
// developers; change it with them.
//
// The package is a leaf: it knows samples and ratios, not reports, so that
// both the measure types and the commands can use it.
package verdict

import (
	"fmt"
	"math"
	"slices"
)

// Outcome is the conclusion about one claim.
type Outcome string

// Outcomes.
const (
	// Confirmed: the measurement agrees with the claim, and could have
	// disagreed.
	Confirmed Outcome = "confirmed"
	// Changed: the claim's direction holds, its size clearly differs.
	Changed Outcome = "changed"
	// Refuted: the measurement contradicts the claim beyond the spread.
	Refuted Outcome = "refuted"
	// Noise: the samples' spread (or their number) hides the answer.
	Noise Outcome = "noise"
	// NotTested: this path or setup cannot decide the claim (a missing
	// baseline, a limit that is not the binding one); the reason says why.
	NotTested Outcome = "not tested here"
)

// Outcomes lists every outcome, for validation and tables; the slice is
// the caller's own.
func Outcomes() []Outcome { return []Outcome{Confirmed, Changed, Refuted, Noise, NotTested} }

// Valid reports whether o is one of Outcomes (the empty outcome is not).
func (o Outcome) Valid() bool {
	for _, x := range Outcomes() {
		if o == x {
			return true
		}
	}
	return false
}

// MinSamples is how many samples each side needs before a verdict rests
// on it. docs/evidence.md explains the rules and what their chances are:
// with 3 samples a side and no real difference, Above holds by chance in 1
// of 20 rounds (1 in 10 either way: of the 20 equally likely orders of six
// samples, one puts all of a above all of b); all three pair ratios of
// Within land on the same side by chance in 1 of 8 cases per side (three
// coin tosses).
const MinSamples = 3

// Spread summarises repeated samples of one quantity: the one summary
// the evidence rules, the documents (run rows, tune rounds, compare) and
// the text use. Its JSON keys are part of those documents.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// RelRange is (Max − Min) / |Median|: 0.05 means the samples lie
	// within 5 % of the median's size. 0 when the median is 0.
	RelRange float64 `json:"rel_range"`
}

// Of summarises samples. Without samples every field is 0 (not NaN, so
// that it can be written as JSON). The input is not modified.
func Of(samples []float64) Spread {
	if len(samples) == 0 {
		return Spread{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	sp := Spread{N: len(s), Median: sortedMedian(s), Min: s[0], Max: s[len(s)-1]}
	if sp.Median != 0 {
		sp.RelRange = (sp.Max - sp.Min) / math.Abs(sp.Median)
	}
	return sp
}

// Median returns the middle value of samples, the mean of the two middle
// values for an even count; NaN for no samples. The input is not modified.
func Median(samples []float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return sortedMedian(s)
}

// sortedMedian is the median of sorted, non-empty s. The mean of the two
// middle values is taken as lo + (hi−lo)/2, the linear interpolation at
// the 50th percentile, which the documents have always recorded (it can
// differ from (lo+hi)/2 in the last bit).
func sortedMedian(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	lo, hi := s[n/2-1], s[n/2]
	return lo + (hi-lo)*0.5
}

// Min returns the smallest sample; NaN for no samples.
func Min(samples []float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	return slices.Min(samples)
}

// Max returns the largest sample; NaN for no samples.
func Max(samples []float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	return slices.Max(samples)
}

// Overlaps reports whether the min–max ranges of two sets of samples
// overlap: when they do, a difference of medians may be noise.
func (s Spread) Overlaps(o Spread) bool {
	if s.N == 0 || o.N == 0 {
		return false
	}
	return s.Min <= o.Max && o.Min <= s.Max
}

// Enough reports whether there are MinSamples samples.
func (s Spread) Enough() bool { return s.N >= MinSamples }

// Above reports whether a lies above b beyond the spread of both: the
// lowest a exceeds the highest b, with enough samples on each side.
func Above(a, b Spread) bool { return a.Enough() && b.Enough() && a.Min > b.Max }

// Ratio is the ratio a/b of two sample sets: the median and the range the
// samples allow.
type Ratio struct {
	Median, Lo, Hi float64
	// N is the number of pairs (or of samples of the smaller side).
	N int
	// Paired is true when the range comes from interleaved pairs.
	Paired bool
}

// Ratios divides a by b. Samples taken in interleaved rounds share the
// machine's load moment by moment, so when both sides have the same
// number of samples the ratio of each pair is taken and the range is that
// of the pairs (steadier than the ratio of medians); otherwise the range
// is the widest the two spreads allow (min a / max b … max a / min b).
func Ratios(a, b []float64) Ratio {
	if len(a) == 0 || len(b) == 0 {
		return Ratio{}
	}
	if len(a) == len(b) {
		var rs []float64
		for i := range a {
			if b[i] > 0 {
				rs = append(rs, a[i]/b[i])
			}
		}
		if len(rs) == 0 {
			return Ratio{}
		}
		s := Of(rs)
		return Ratio{Median: s.Median, Lo: s.Min, Hi: s.Max, N: s.N, Paired: true}
	}
	sa, sb := Of(a), Of(b)
	if sb.Min <= 0 || sb.Median <= 0 {
		return Ratio{}
	}
	return Ratio{Median: sa.Median / sb.Median, Lo: sa.Min / sb.Max, Hi: sa.Max / sb.Min, N: min(sa.N, sb.N)}
}

// Enough reports whether the ratio rests on MinSamples pairs.
func (r Ratio) Enough() bool { return r.N >= MinSamples }

// String is "×1.02 (0.98–1.05, 5 pairs)", or "no ratio" without a pair
// (a baseline of 0 bit/s).
func (r Ratio) String() string {
	if r.N == 0 {
		return "no ratio"
	}
	kind := "samples"
	if r.Paired {
		kind = "pairs"
	}
	return fmt.Sprintf("×%.2f (%.2f–%.2f over %d %s)", r.Median, r.Lo, r.Hi, r.N, kind)
}

// Faster judges "a is faster than b by at least minRatio" (1: faster at
// all): Confirmed when a is above b beyond the spread and the ratio of the
// medians reaches minRatio, Changed when above but by less, Refuted when
// b is above a, Noise otherwise. A side with fewer than MinSamples
// samples is never above the other. It returns the ratio of the medians.
func Faster(a, b []float64, minRatio float64) (Outcome, float64) {
	sa, sb := Of(a), Of(b)
	var r float64
	if sb.Median > 0 {
		r = sa.Median / sb.Median
	}
	switch {
	case Above(sa, sb) && r >= minRatio:
		return Confirmed, r
	case Above(sb, sa):
		return Refuted, r
	case Above(sa, sb):
		return Changed, r
	}
	return Noise, r
}

// Window is where a claim puts the ratio x/baseline: [Lo, Hi]. Use
// math.Inf(1) for no upper end.
type Window struct{ Lo, Hi float64 }

// Unchanged is the window of "no difference beyond tol": [1-tol, 1+tol].
func Unchanged(tol float64) Window { return Window{1 - tol, 1 + tol} }

// NotBelow is the window of "not lower by more than tol": [1-tol, ∞).
func NotBelow(tol float64) Window { return Window{1 - tol, math.Inf(1)} }

// Judgement is the result of Within: the outcome, the ratio it rests on,
// and which side of the window the samples fell on when outside it.
type Judgement struct {
	Outcome Outcome
	Ratio   Ratio
	// Below and Above say the whole range lies below / above the window.
	Below, Above bool
	// Why explains a Noise or NotTested outcome in words.
	Why string
	// Short is, when too few samples decided a Noise outcome, how many
	// there were and how many were needed; Why is its String.
	Short *Shortfall
}

// Kinds of a shortfall (Shortfall.Kind).
const (
	// ShortSamples: the judged side has N valid samples.
	ShortSamples = "samples"
	// ShortBaseline: the baseline has N valid samples.
	ShortBaseline = "baseline"
	// ShortRatios: both sides have enough samples but only N pairs give a
	// ratio.
	ShortRatios = "ratios"
	// ShortZeroBaseline: as ShortRatios, because Zero of the baseline's
	// Of samples are 0 bit/s, to which no ratio can be taken.
	ShortZeroBaseline = "zero-baseline"
)

// Shortfall is why a judgement had too few samples to decide, as data.
type Shortfall struct {
	Kind string
	// N is what there was (samples or ratios, by Kind), Needed what a
	// verdict needs (MinSamples).
	N, Needed int
	// Zero of the baseline's Of samples are 0 bit/s (ShortZeroBaseline).
	Zero, Of int
}

// String is the shortfall in words: the one place these sentences are
// written.
func (s Shortfall) String() string {
	switch s.Kind {
	case ShortBaseline:
		return fmt.Sprintf("the baseline has %d valid samples, a comparison needs %d", s.N, s.Needed)
	case ShortZeroBaseline:
		return fmt.Sprintf("%d of the baseline's %d samples are 0 bit/s, and no ratio can be taken to 0: %d ratios, a verdict needs %d", s.Zero, s.Of, s.N, s.Needed)
	case ShortRatios:
		return fmt.Sprintf("%d ratios, a verdict needs %d", s.N, s.Needed)
	}
	return fmt.Sprintf("%d valid samples, a verdict needs %d", s.N, s.Needed)
}

// SamplesShort is the shortfall of samples when they are fewer than
// MinSamples, else nil.
func SamplesShort(samples []float64) *Shortfall {
	if len(samples) >= MinSamples {
		return nil
	}
	return &Shortfall{Kind: ShortSamples, N: len(samples), Needed: MinSamples}
}

// short is a Noise judgement for shortfall s.
func short(r Ratio, s Shortfall) Judgement {
	return Judgement{Outcome: Noise, Ratio: r, Why: s.String(), Short: &s}
}

// Within judges "x/baseline lies in w", the shape of every "no
// difference", "about the same", "keeps N % of" claim:
//
//   - no baseline at all: NotTested (nothing to compare with);
//   - fewer than MinSamples samples of the baseline, of x, or pairs: Noise;
//   - every ratio the samples allow inside w: Confirmed: a difference
//     outside w would have shown, so the data could have refuted it;
//   - every ratio below or above w: Changed, with Below/Above set (the
//     caller makes it Refuted where that side contradicts the claim);
//   - otherwise the spread is wider than the window can resolve: Noise.
func Within(x, baseline []float64, w Window) Judgement {
	if len(baseline) == 0 {
		return Judgement{Outcome: NotTested, Why: "no baseline to compare with: it has no valid sample"}
	}
	r := Ratios(x, baseline)
	if len(baseline) < MinSamples {
		return short(r, Shortfall{Kind: ShortBaseline, N: len(baseline), Needed: MinSamples})
	}
	if len(x) < MinSamples {
		return short(r, Shortfall{Kind: ShortSamples, N: len(x), Needed: MinSamples})
	}
	if !r.Enough() {
		return short(r, ratioShortfall(baseline, r))
	}
	switch {
	case r.Lo >= w.Lo && r.Hi <= w.Hi:
		return Judgement{Outcome: Confirmed, Ratio: r}
	case r.Hi < w.Lo:
		return Judgement{Outcome: Changed, Ratio: r, Below: true}
	case r.Lo > w.Hi:
		return Judgement{Outcome: Changed, Ratio: r, Above: true}
	}
	return Judgement{Outcome: Noise, Ratio: r, Why: fmt.Sprintf("the ratios spread %.2f–%.2f across the claimed window %s, too wide to resolve it", r.Lo, r.Hi, w)}
}

// ratioShortfall says why r, taken against baseline, rests on fewer than
// MinSamples pairs although both sides have enough samples: a ratio to a
// baseline sample of 0 bit/s is no figure.
func ratioShortfall(baseline []float64, r Ratio) Shortfall {
	zero := 0
	for _, b := range baseline {
		if b <= 0 {
			zero++
		}
	}
	if zero > 0 {
		return Shortfall{Kind: ShortZeroBaseline, N: r.N, Needed: MinSamples, Zero: zero, Of: len(baseline)}
	}
	return Shortfall{Kind: ShortRatios, N: r.N, Needed: MinSamples}
}

// String is "×0.90–×1.10" or "≥×0.90".
func (w Window) String() string {
	if math.IsInf(w.Hi, 1) {
		return fmt.Sprintf("≥×%.2f", w.Lo)
	}
	return fmt.Sprintf("×%.2f–×%.2f", w.Lo, w.Hi)
}

// Margins of a "limited to X" claim, as multiples of X.
type Margins struct {
	// Over: a held flow's samples stay at most Over × X (headers and
	// timing make a held flow sit a little below or above X).
	Over float64
	// Under: a flow X binds has its median at least Under × X; below,
	// something else holds it back.
	Under float64
	// Free: with every sample above Free × X, X did not limit the flow
	// at all (Refuted). Between Over and Free: Changed (above the rule,
	// not free of it).
	Free float64
}

// BindingShare is how close to the path's own rate a limit may be before
// the path, not the limit, may be what holds the flow: a limit at 80 % of
// the path's rate or above is NotTested on that path.
const BindingShare = 0.8

// LimitedTo judges "this flow is limited to limit" from its samples.
// pathRate is the path's own rate in the flow's direction (0: unlimited).
//
//   - fewer than MinSamples samples: Noise;
//   - limit ≥ BindingShare × pathRate: NotTested (the path binds as low,
//     so a flow held near the limit does not show which holds it);
//   - every sample ≤ Over × limit and median ≥ Under × limit: Confirmed;
//   - every sample ≤ Over × limit, median lower: Changed (below: held by
//     something else);
//   - every sample > Free × limit: Refuted;
//   - every sample > Over × limit: Changed (above the limit, not free);
//   - otherwise Noise.
func LimitedTo(samples []float64, limit, pathRate float64, m Margins) (Outcome, string) {
	s := Of(samples)
	switch {
	case limit <= 0:
		return NotTested, "no limit to judge against"
	case !s.Enough():
		return Noise, Shortfall{Kind: ShortSamples, N: s.N, Needed: MinSamples}.String()
	case pathRate > 0 && limit >= BindingShare*pathRate:
		return NotTested, fmt.Sprintf("the limit (%.3g Mbit/s) is %.0f %% of the path's own %.3g Mbit/s, so a flow held near it does not show which of the two binds",
			limit/1e6, 100*limit/pathRate, pathRate/1e6)
	case s.Max <= m.Over*limit && s.Median >= m.Under*limit:
		return Confirmed, "held at the limit"
	case s.Max <= m.Over*limit:
		return Changed, "held well below the limit: something else holds the flow"
	case s.Min > m.Free*limit:
		return Refuted, "every sample is above the limit: it does not hold the flow"
	case s.Min > m.Over*limit:
		return Changed, "above the limit in every sample, but not free of it"
	}
	return Noise, "the samples straddle the limit's margins"
}
