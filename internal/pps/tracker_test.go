package pps

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// sendBatch reserves n probes at nowNs and returns them.
func sendBatch(t *testing.T, tr *flowTracker, n int, nowNs int64) []Probe {
	t.Helper()
	first, got := tr.reserve(n, nowNs)
	if got != n {
		t.Fatalf("reserve(%d) gave %d", n, got)
	}
	ps := make([]Probe, n)
	for i := range ps {
		ps[i] = Probe{Seq: first + uint32(i), SentNs: uint64(nowNs)}
	}
	return ps
}

func TestTrackerAllEchoed(t *testing.T) {
	t.Parallel()
	tr := newFlowTracker(time.Second, 1024)
	ps := sendBatch(t, tr, 10, 0)
	for _, p := range ps {
		tr.received(p, 5*ms)
	}
	tr.resolve(6 * ms) // fully echoed batches resolve before the timeout
	if tr.outstanding() != 0 {
		t.Errorf("outstanding %d after all echoes", tr.outstanding())
	}
	want := Counters{Sent: 10, Received: 10}
	if tr.counters != want {
		t.Errorf("counters %+v, want %+v", tr.counters, want)
	}
	if q := tr.rtt.quantile(0.5); q != 5*time.Millisecond {
		t.Errorf("rtt p50 %v, want 5ms", q)
	}
}

func TestTrackerLossLateDuplicateReorderStray(t *testing.T) {
	t.Parallel()
	tr := newFlowTracker(time.Second, 1024)
	a := sendBatch(t, tr, 5, 0)        // seqs 0-4, second 0
	b := sendBatch(t, tr, 5, 1500*ms)  // seqs 5-9, second 1
	tr.received(a[1], 10*ms)           // in time
	tr.received(a[0], 11*ms)           // reordered: after seq 1
	tr.received(a[0], 12*ms)           // duplicate
	tr.received(a[2], 1000*ms)         // exactly at the timeout: late, lost
	tr.received(Probe{Seq: 99}, 13*ms) // never sent: stray
	tr.resolve(999 * ms)               // batch a not yet due
	if tr.counters.Lost != 0 {
		t.Fatalf("lost %d before the timeout", tr.counters.Lost)
	}
	tr.resolve(1000 * ms)      // a is due: seqs 2, 3, 4 lost
	tr.received(a[3], 1200*ms) // after resolution: late
	tr.received(a[1], 1200*ms) // after resolution, echoed before: rtt > timeout so late
	for _, p := range b[:4] {
		tr.received(p, 1600*ms)
	}
	tr.resolve(2500 * ms) // b due: seq 9 lost
	want := Counters{Sent: 10, Received: 6, Lost: 4, Late: 3, Duplicates: 1, Reordered: 1, Stray: 1}
	if tr.counters != want {
		t.Errorf("counters\n got %+v\nwant %+v", tr.counters, want)
	}
	if len(tr.series) != 2 {
		t.Fatalf("series %d seconds", len(tr.series))
	}
	s0, s1 := tr.series[0], tr.series[1]
	if s0.sent != 5 || s0.lost != 3 || s0.received != 2 {
		t.Errorf("second 0: %+v, want sent 5 lost 3 received 2", s0)
	}
	if s1.sent != 5 || s1.lost != 1 || s1.received != 4 {
		t.Errorf("second 1: %+v, want sent 5 lost 1 received 4", s1)
	}
	if s1.rttMin != 100*ms || s1.rttMax != 100*ms {
		t.Errorf("second 1 rtt %d..%d, want 100ms", s1.rttMin, s1.rttMax)
	}
	if tr.outstanding() != 0 {
		t.Errorf("outstanding %d", tr.outstanding())
	}
}

func TestTrackerUnreserve(t *testing.T) {
	t.Parallel()
	tr := newFlowTracker(time.Second, 1024)
	sendBatch(t, tr, 4, 0)
	first, _ := tr.reserve(8, ms)
	tr.unreserve(3) // only 5 of 8 went out
	if tr.next != first+5 || tr.counters.Sent != 9 || tr.series[0].sent != 9 {
		t.Errorf("next %d sent %d series %d, want %d, 9, 9", tr.next, tr.counters.Sent, tr.series[0].sent, first+5)
	}
	tr.unreserve(100) // more than the batch: drops the batch only
	if tr.next != 4 || tr.counters.Sent != 4 || len(tr.marks)-tr.markHead != 1 {
		t.Errorf("next %d sent %d marks %d", tr.next, tr.counters.Sent, len(tr.marks)-tr.markHead)
	}
	tr.resolve(2 * time.Second.Nanoseconds())
	if tr.counters.Lost != 4 {
		t.Errorf("lost %d, want 4 (unsent probes must not count)", tr.counters.Lost)
	}
}

func TestTrackerWindowFull(t *testing.T) {
	t.Parallel()
	tr := newFlowTracker(time.Second, 64)
	sendBatch(t, tr, 60, 0)
	if _, got := tr.reserve(10, 0); got != 4 {
		t.Errorf("reserve in a window with 4 free gave %d", got)
	}
	if _, got := tr.reserve(1, 0); got != 0 {
		t.Errorf("reserve in a full window gave %d", got)
	}
	tr.resolve(time.Second.Nanoseconds())
	if _, got := tr.reserve(64, 2*time.Second.Nanoseconds()); got != 64 {
		t.Errorf("after resolving, reserve gave %d, want the whole window", got)
	}
	// The ring wrapped: old bits must have been cleared.
	if tr.countBits(tr.base, tr.next) != 0 {
		t.Errorf("reused window slots still marked echoed")
	}
}

// TestTrackerRandomLoss sends 200k probes through a synthetic path that
// drops 5 % at random and reorders some, and checks the books balance.
func TestTrackerRandomLoss(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	tr := newFlowTracker(100*time.Millisecond, 1<<16)
	var dropped uint64
	now := int64(0)
	var pending []Probe
	for range 200000 / 50 {
		for _, p := range sendBatch(t, tr, 50, now) {
			if r.Float64() < 0.05 {
				dropped++
				continue
			}
			pending = append(pending, p)
		}
		now += ms / 10
		r.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
		for _, p := range pending {
			tr.received(p, now)
		}
		pending = pending[:0]
		tr.resolve(now)
	}
	tr.resolve(now + 100*ms)
	c := tr.counters
	if c.Lost != dropped || c.Received+c.Lost != c.Sent || c.Late != 0 || c.Duplicates != 0 {
		t.Errorf("counters %+v, dropped %d", c, dropped)
	}
	if got := 100 * float64(c.Lost) / float64(c.Sent); math.Abs(got-5) > 0.5 {
		t.Errorf("loss %.2f%%, want ≈5%%", got)
	}
	if c.Reordered == 0 {
		t.Error("shuffled arrivals were not counted as reordered")
	}
}

func TestHistogramQuantiles(t *testing.T) {
	t.Parallel()
	var h histogram
	for i := 1; i <= 100000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := q * 100000 * 1e3
		got := float64(h.quantile(q))
		if math.Abs(got-want)/want > 0.01 {
			t.Errorf("q%v = %v, want %v ±1%%", q, time.Duration(got), time.Duration(want))
		}
	}
	if h.quantile(0) != time.Microsecond || h.quantile(1) != 100*time.Millisecond {
		t.Errorf("min %v max %v", h.quantile(0), h.quantile(1))
	}
	var h2 histogram
	h2.add(7)
	h2.merge(&h)
	if h2.n != 100001 || h2.min != 7 {
		t.Errorf("merge: n %d min %d", h2.n, h2.min)
	}
	for v := int64(0); v < 1<<20; v = v*5/4 + 1 {
		if b := bucketValue(bucketOf(v)); math.Abs(float64(b-v)) > float64(v)/128+1 {
			t.Errorf("bucket of %d is %d", v, b)
		}
	}
	if bucketOf(math.MaxInt64) >= histBuckets || bucketOf(-1) != 0 {
		t.Error("clamping")
	}
}

// The standard deviation is ping's mdev: 10, 20, 30 ms have 8.165 ms, and
// merging keeps it.
func TestHistogramStdDev(t *testing.T) {
	t.Parallel()
	var a, b histogram
	a.add(10 * time.Millisecond)
	a.add(20 * time.Millisecond)
	b.add(30 * time.Millisecond)
	a.merge(&b)
	if got := a.stddev(); math.Abs(got.Seconds()*1e3-8.165) > 0.001 {
		t.Errorf("stddev %v, want 8.165ms", got)
	}
	var one histogram
	one.add(5 * time.Millisecond)
	if one.stddev() != 0 || (&histogram{}).stddev() != 0 {
		t.Error("stddev of one value or none is not 0")
	}
}
