package pps

import (
	"math"
	"math/bits"
	"time"
)

// histogram records durations with a relative error below 1/128 (0.8 %) in
// fixed memory: values below 256 ns exactly, above that in 128 linear
// sub-buckets per power of two (the layout of an HDR histogram with 7
// significant bits). Values above maxHistNs are clamped.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    float64
	// sumSq is the sum of the squared values (ns²) for the standard
	// deviation, which ping reports as mdev and probe as jitter.
	sumSq float64
	min   int64
	max   int64
}

const (
	subBits     = 7
	subCount    = 1 << subBits // 128
	maxHistBits = 40           // 2^40 ns ≈ 18 min
	maxHistNs   = 1<<maxHistBits - 1
	histBuckets = 2*subCount + (maxHistBits-subBits-1)*subCount
)

func bucketOf(v int64) int {
	if v < 0 {
		v = 0
	}
	if v > maxHistNs {
		v = maxHistNs
	}
	if v < 2*subCount {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (subBits + 1)
	m := int(v >> shift) // in [subCount, 2*subCount)
	return 2*subCount + (shift-1)*subCount + (m - subCount)
}

// bucketValue is the midpoint of bucket i.
func bucketValue(i int) int64 {
	if i < 2*subCount {
		return int64(i)
	}
	shift := (i-2*subCount)/subCount + 1
	m := int64((i-2*subCount)%subCount + subCount)
	return m<<shift + (1<<shift)/2
}

func (h *histogram) add(d time.Duration) {
	v := int64(d)
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
	h.sumSq += float64(v) * float64(v)
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
	h.sumSq += o.sumSq
}

// quantile returns the value at quantile q (0..1): the smallest recorded
// bucket whose cumulative count reaches ceil(q·n), clamped to [min, max];
// quantile 0 is the minimum and 1 the maximum, exactly.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return time.Duration(h.min)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank >= h.n {
		return time.Duration(h.max)
	}
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			return time.Duration(min(max(bucketValue(i), h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// stddev is the population standard deviation of the recorded values (as
// iputils ping computes its mdev).
func (h *histogram) stddev() time.Duration {
	if h.n == 0 {
		return 0
	}
	m := h.sum / float64(h.n)
	return time.Duration(math.Sqrt(max(h.sumSq/float64(h.n)-m*m, 0)))
}
