package measure

import (
	"math"
	"slices"
)

// Median returns the middle value (the mean of the two middle values for
// an even count); NaN for no values. The input is not modified.
func Median(xs []float64) float64 { return Percentile(xs, 50) }

// Min returns the smallest value; NaN for no values.
func Min(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Min(xs)
}

// Max returns the largest value; NaN for no values.
func Max(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Max(xs)
}

// Percentile returns the p-th percentile (0–100) by linear interpolation
// between closest ranks (the method of numpy's default and of Excel's
// PERCENTILE.INC); NaN for no values or p outside 0–100.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 || p < 0 || p > 100 || math.IsNaN(p) {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return s[lo]
	}
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// Spread summarizes repeated samples of one quantity.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// RelRange is (Max − Min) / Median: 0.05 means the samples lie within
	// 5 % of the median's size. 0 when the median is 0.
	RelRange float64 `json:"rel_range"`
}

// Summarize computes the Spread of xs. Without samples every field is 0
// (not NaN, so that it can be written as JSON).
func Summarize(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := Spread{N: len(xs), Median: Median(xs), Min: Min(xs), Max: Max(xs)}
	if s.Median != 0 {
		s.RelRange = (s.Max - s.Min) / math.Abs(s.Median)
	}
	return s
}

// Overlaps reports whether the min–max ranges of two sets of samples
// overlap: when they do, a difference of medians may be noise.
func (s Spread) Overlaps(o Spread) bool {
	if s.N == 0 || o.N == 0 {
		return false
	}
	return s.Min <= o.Max && o.Min <= s.Max
}
