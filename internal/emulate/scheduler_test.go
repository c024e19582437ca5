package emulate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// fakeSink records the scheduler's verdicts in order.
type fakeSink struct {
	events []verdictEvent
}

type verdictEvent struct {
	accept bool // batch accept through id; false: single drop
	id     uint32
	at     int64
}

type recorder struct {
	s   *fakeSink
	now int64
}

func (r recorder) drop(id uint32) { r.s.events = append(r.s.events, verdictEvent{false, id, r.now}) }
func (r recorder) acceptThrough(id uint32) {
	r.s.events = append(r.s.events, verdictEvent{true, id, r.now})
}

const ms = int64(time.Millisecond)

// rel releases what is due at now and reports it sent at once, as a
// backend whose send takes no time would.
func rel(s *scheduler, now int64, r recorder) int {
	n := s.release(now, r)
	s.departedAll(now)
	return n
}

func TestSchedulerFIFOAndBatches(t *testing.T) {
	s := newScheduler(QueueConfig{Delay: 10 * time.Millisecond}, 1)
	var sink fakeSink
	for i := range 5 {
		now := int64(i) * ms
		s.arrive(now, uint32(100+i), 1000, recorder{&sink, now})
	}
	if n := rel(s, 9*ms, recorder{&sink, 9 * ms}); n != 0 {
		t.Fatalf("released %d packets before any was due", n)
	}
	if due, ok := s.next(); !ok || due != 10*ms {
		t.Fatalf("next due %d %v, want 10 ms", due, ok)
	}
	// At 12 ms, the packets that came at 0, 1 and 2 ms are due: one batch
	// through id 102.
	if n := rel(s, 12*ms, recorder{&sink, 12 * ms}); n != 3 {
		t.Fatalf("released %d, want 3", n)
	}
	if n := rel(s, 20*ms, recorder{&sink, 20 * ms}); n != 2 {
		t.Fatalf("released %d, want 2", n)
	}
	want := []verdictEvent{{true, 102, 12 * ms}, {true, 104, 20 * ms}}
	if len(sink.events) != len(want) {
		t.Fatalf("events %+v, want %+v", sink.events, want)
	}
	for i := range want {
		if sink.events[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, sink.events[i], want[i])
		}
	}
	c := s.c
	if c.Received != 5 || c.Released != 5 || c.ReceivedBytes != 5000 || c.ReleasedBytes != 5000 || c.Batches != 2 {
		t.Errorf("counters %+v", c)
	}
	// Lateness: released at 12 (due 10, 11, 12) and 20 (due 13, 14). The
	// tolerance is 1 ms: 12−10 = 2 ms, 20−13 = 7 ms and 20−14 = 6 ms are late.
	if c.Late != 3 || c.MaxLateness != 7*ms {
		t.Errorf("late %d max %v, want 3 and 7ms", c.Late, time.Duration(c.MaxLateness))
	}
	p50, _, n := s.res.quantiles()
	if n != 5 || p50 != 2*time.Millisecond {
		t.Errorf("median lateness %v of %d samples, want 2ms of 5", p50, n)
	}
}

// TestSchedulerJitterNeverReorders drives a dense stream (arrivals much
// closer than the jitter) through many release points and checks that the
// batch verdicts only ever move forward, that every packet is held at
// least Delay−Jitter, and that no packet is released before it is due.
func TestSchedulerJitterNeverReorders(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		s := newScheduler(QueueConfig{Delay: 20 * time.Millisecond, Jitter: 15 * time.Millisecond}, seed)
		rng := rand.New(rand.NewPCG(seed, 99))
		var sink fakeSink
		arrived := map[uint32]int64{}
		now := int64(0)
		id := uint32(0)
		for range 20000 {
			now += rng.Int64N(200 * int64(time.Microsecond))
			if rng.IntN(3) == 0 {
				rel(s, now, recorder{&sink, now})
				continue
			}
			id++
			arrived[id] = now
			s.arrive(now, id, 100, recorder{&sink, now})
		}
		rel(s, now+time.Minute.Nanoseconds(), recorder{&sink, now + time.Minute.Nanoseconds()})
		last := uint32(0)
		for _, ev := range sink.events {
			if !ev.accept {
				t.Fatalf("drop without loss configured: %+v", ev)
			}
			if ev.id <= last {
				t.Fatalf("seed %d: batch through %d after batch through %d", seed, ev.id, last)
			}
			if held := ev.at - arrived[ev.id]; held < 5*ms {
				t.Fatalf("seed %d: packet %d held %v, less than delay − jitter", seed, ev.id, time.Duration(held))
			}
			last = ev.id
		}
		if last != id || s.c.Released != uint64(id) {
			t.Errorf("seed %d: released through %d (%d packets), want %d", seed, last, s.c.Released, id)
		}
	}
}

// TestSchedulerJitterSpread checks the delay distribution when packets are
// sparse (so ordering never stretches them): uniform over Delay ± Jitter,
// mean Delay, nothing outside the range.
func TestSchedulerJitterSpread(t *testing.T) {
	const delay, jitter = 50 * ms, 10 * ms
	s := newScheduler(QueueConfig{Delay: time.Duration(delay), Jitter: time.Duration(jitter)}, 7)
	var sink fakeSink
	const n = 20000
	var sum float64
	lo, hi := int64(math.MaxInt64), int64(0)
	for i := range n {
		now := int64(i) * time.Second.Nanoseconds() // far apart
		s.arrive(now, uint32(i+1), 1, recorder{&sink, now})
		due, _ := s.next()
		d := due - now
		sum += float64(d)
		lo, hi = min(lo, d), max(hi, d)
		rel(s, due, recorder{&sink, due})
	}
	if lo < delay-jitter || hi > delay+jitter {
		t.Errorf("delays from %v to %v, outside 50±10 ms", time.Duration(lo), time.Duration(hi))
	}
	if lo > delay-jitter+ms/5 || hi < delay+jitter-ms/5 {
		t.Errorf("delays from %v to %v do not cover 50±10 ms", time.Duration(lo), time.Duration(hi))
	}
	// Uniform over 20 ms: sd 5.77 ms, sd of the mean over 20000 ≈ 41 µs.
	if mean := sum / n; math.Abs(mean-float64(delay)) > 5*41e3 {
		t.Errorf("mean delay %v, want 50 ms", time.Duration(mean))
	}
	if s.c.Late != 0 || s.c.MaxLateness != 0 {
		t.Errorf("released exactly on time but counted late %d, max %d", s.c.Late, s.c.MaxLateness)
	}
}

// TestSchedulerLoss checks the loss share against binomial bounds and that
// drops are single verdicts given at once, never covered by a batch.
func TestSchedulerLoss(t *testing.T) {
	for _, tc := range []struct {
		loss float64
		n    int
	}{{10, 100000}, {1, 100000}, {50, 20000}, {0, 10000}, {100, 1000}} {
		s := newScheduler(QueueConfig{Delay: 0, LossPercent: tc.loss}, uint64(tc.n)+uint64(tc.loss))
		var sink fakeSink
		for i := range tc.n {
			now := int64(i) * 1000
			s.arrive(now, uint32(i+1), 1, recorder{&sink, now})
			if i%7 == 0 {
				rel(s, now, recorder{&sink, now})
			}
		}
		end := int64(tc.n) * 1000
		rel(s, end, recorder{&sink, end})
		p := tc.loss / 100
		mean := float64(tc.n) * p
		sd := math.Sqrt(float64(tc.n) * p * (1 - p))
		got := float64(s.c.DroppedLoss)
		if math.Abs(got-mean) > 5*sd+0.5 {
			t.Errorf("loss %v%%: dropped %v of %d, want %v ± %v", tc.loss, got, tc.n, mean, 5*sd)
		}
		if s.c.Released+s.c.DroppedLoss != uint64(tc.n) {
			t.Errorf("loss %v%%: released %d + dropped %d ≠ %d", tc.loss, s.c.Released, s.c.DroppedLoss, tc.n)
		}
		// Replay the verdicts against a model of the kernel queue: every
		// id must get exactly one verdict, drops before any batch covers
		// them.
		decided := make([]bool, tc.n+1)
		through := uint32(0)
		for _, ev := range sink.events {
			if ev.accept {
				for id := through + 1; id <= ev.id; id++ {
					decided[id] = true
				}
				through = ev.id
				continue
			}
			if ev.id <= through || decided[ev.id] {
				t.Fatalf("loss %v%%: drop of %d already released or dropped", tc.loss, ev.id)
			}
			decided[ev.id] = true
		}
		for id := 1; id <= tc.n; id++ {
			if !decided[id] {
				t.Fatalf("loss %v%%: packet %d never got a verdict", tc.loss, id)
			}
		}
	}
}

func TestFIFOWrapAndGrow(t *testing.T) {
	var f fifo[held]
	next, want := uint32(0), uint32(0)
	rng := rand.New(rand.NewPCG(5, 5))
	for range 100000 {
		if f.len() == 0 || rng.IntN(5) < 3 {
			f.push(held{id: next})
			next++
			continue
		}
		if h := f.pop(); h.id != want {
			t.Fatalf("popped %d, want %d", h.id, want)
		}
		want++
	}
	for f.len() > 0 {
		if h := f.pop(); h.id != want {
			t.Fatalf("popped %d, want %d", h.id, want)
		}
		want++
	}
	if want != next {
		t.Errorf("popped %d of %d", want, next)
	}
}

func TestReservoirUniform(t *testing.T) {
	s := newScheduler(QueueConfig{}, 3)
	var sink fakeSink
	// 100 000 releases with lateness 0..99 999 ns: the sample's median
	// should be near 50 000 and its p99 near 99 000.
	for i := range 100000 {
		now := int64(i)
		s.arrive(0, uint32(i+1), 1, recorder{&sink, 0})
		s.q.front().due = 0
		rel(s, now, recorder{&sink, now})
	}
	p50, p99, n := s.res.quantiles()
	if n != reservoirSize {
		t.Fatalf("%d samples, want %d", n, reservoirSize)
	}
	if p50 < 45000 || p50 > 55000 || p99 < 97000 || p99 > 100000 {
		t.Errorf("median %d p99 %d, want about 50000 and 99000", p50, p99)
	}
}

func TestTolerance(t *testing.T) {
	for _, tc := range []struct {
		q    QueueConfig
		want time.Duration
	}{
		{QueueConfig{}, time.Millisecond},
		{QueueConfig{Delay: 5 * time.Millisecond}, time.Millisecond},
		{QueueConfig{Delay: 50 * time.Millisecond}, 5 * time.Millisecond},
		{QueueConfig{Delay: 50 * time.Millisecond, Tolerance: 200 * time.Microsecond}, 200 * time.Microsecond},
	} {
		if got := tc.q.tolerance(); got != tc.want {
			t.Errorf("%+v: tolerance %v, want %v", tc.q, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"fine", Config{Queues: []QueueConfig{{Num: 0, Delay: time.Millisecond}, {Num: 1, LossPercent: 100}}}, true},
		{"empty", Config{}, false},
		{"twice", Config{Queues: []QueueConfig{{Num: 3}, {Num: 3}}}, false},
		{"negative delay", Config{Queues: []QueueConfig{{Delay: -1}}}, false},
		{"loss over 100", Config{Queues: []QueueConfig{{LossPercent: 100.5}}}, false},
		{"loss NaN", Config{Queues: []QueueConfig{{LossPercent: math.NaN()}}}, false},
		{"huge jitter", Config{Queues: []QueueConfig{{Jitter: time.Hour}}}, false},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.name, err)
		}
	}
}

// A release far beyond the tolerance is late and a stall; one just beyond
// it is only late.
func TestSchedulerStall(t *testing.T) {
	var sink fakeSink
	s := newScheduler(QueueConfig{Delay: 5 * time.Millisecond}, 1)
	s.arrive(0, 1, 100, recorder{&sink, 0})
	s.arrive(0, 2, 100, recorder{&sink, 0})
	rel(s, 5*ms+2*ms, recorder{&sink, 7 * ms}) // 2 ms late
	if s.c.Late != 2 || s.c.Stalled != 0 {
		t.Fatalf("2 ms late: late %d stalled %d, want 2 and 0", s.c.Late, s.c.Stalled)
	}
	s.arrive(10*ms, 3, 100, recorder{&sink, 10 * ms})
	rel(s, 15*ms+int64(StallLateness)+ms, recorder{&sink, 0})
	if s.c.Late != 3 || s.c.Stalled != 1 {
		t.Fatalf("stall: late %d stalled %d, want 3 and 1", s.c.Late, s.c.Stalled)
	}
	// The late releases' lateness, summed: 2 ms twice, then the stall.
	if want := 4*ms + int64(StallLateness) + ms; s.c.LateDelay != want {
		t.Errorf("late delay %v, want %v", time.Duration(s.c.LateDelay), time.Duration(want))
	}
}

// A batch leaves one packet after another inside the backend's send, so
// lateness is counted when the send that carried a packet returned
// (departed), not when the batch was handed over: ten packets released
// on time and sent 300 µs apiece, three to a send call, count the seven
// that left more than the 1 ms tolerance after their release time as
// late, the last 3 ms.
func TestSchedulerLatenessPerDeparture(t *testing.T) {
	s := newScheduler(QueueConfig{Delay: 5 * time.Millisecond, Tolerance: time.Millisecond}, 1)
	var sink fakeSink
	for id := range uint32(10) {
		s.arrive(0, id+1, 100, recorder{&sink, 0})
	}
	if n := s.release(5*ms, recorder{&sink, 5 * ms}); n != 10 {
		t.Fatalf("released %d, want 10", n)
	}
	if s.c.Released != 10 || s.c.Late != 0 || s.c.MaxLateness != 0 {
		t.Fatalf("counted before any departure: %+v", s.c)
	}
	const per = 300 * int64(time.Microsecond)
	for sent := 0; sent < 10; {
		k := min(3, 10-sent)
		sent += k
		s.departed(5*ms+int64(sent)*per, k)
	}
	if s.c.Late != 7 || s.c.MaxLateness != 10*per || s.c.Stalled != 0 {
		t.Errorf("late %d, max %v, stalled %d; want 7, 3ms, 0", s.c.Late, time.Duration(s.c.MaxLateness), s.c.Stalled)
	}
	// Only the late ones add to the late delay, each its own lateness:
	// three 1.8 ms, three 2.7 ms, one 3 ms.
	if want := 3*6*per + 3*9*per + 10*per; s.c.LateDelay != want {
		t.Errorf("late delay %v, want %v", time.Duration(s.c.LateDelay), time.Duration(want))
	}
	if _, p99, k := s.res.quantiles(); k != 10 || p99 != time.Duration(10*per) {
		t.Errorf("%d lateness samples, p99 %v; want 10, 3ms", k, p99)
	}
	// Nothing is counted twice, and a report beyond what was released
	// counts nothing.
	s.departed(time.Minute.Nanoseconds(), 5)
	if s.c.Late != 7 || s.departing.len() != 0 {
		t.Errorf("after an extra report: late %d, %d waiting", s.c.Late, s.departing.len())
	}
}

// TestSchedulerGather drives the scheduler as a lane's thread does: it
// wakes at wakeAt and releases what is due. A lone packet wakes it at its
// own release time. A dense stream (a packet every 20 µs, 20 ms ± 1 ms of
// jitter) leaves in batches, each holding every packet due within the
// gather window of its first, with no packet released before it is due
// or more than the window late, the batch verdicts in arrival order, and
// the counters (released, batches, late, the lateness samples) matching
// what was released.
func TestSchedulerGather(t *testing.T) {
	qc := QueueConfig{Delay: 20 * time.Millisecond, Jitter: time.Millisecond, Tolerance: time.Millisecond}
	gather := int64(qc.gather())
	if gather <= 0 || gather > int64(qc.Tolerance)/5 {
		t.Fatalf("gather window %v for a tolerance of %v", time.Duration(gather), qc.Tolerance)
	}
	s := newScheduler(qc, 3)
	var sink fakeSink
	s.arrive(0, 1, 100, recorder{&sink, 0})
	if at, _ := s.wakeAt(); at != s.q.front().due {
		t.Fatalf("lone packet: wake at %v, due at %v", time.Duration(at), time.Duration(s.q.front().due))
	}
	rel(s, time.Minute.Nanoseconds(), recorder{&sink, time.Minute.Nanoseconds()})
	s = newScheduler(qc, 3)
	sink = fakeSink{}
	const n, every = 20000, 20 * int64(time.Microsecond)
	due := map[uint32]int64{}
	next := time.Minute.Nanoseconds() // the first arrival
	id := uint32(0)
	for released := 0; released < n; {
		at, ok := s.wakeAt()
		if id < n && (!ok || next <= at) {
			id++
			s.arrive(next, id, 100, recorder{&sink, next})
			due[id] = s.q.at(s.q.len() - 1).due
			next += every
			continue
		}
		before := len(sink.events)
		first := s.q.front().due
		k := rel(s, at, recorder{&sink, at})
		if k == 0 || len(sink.events) != before+1 {
			t.Fatalf("wake at %v released %d packets in %d verdicts", time.Duration(at), k, len(sink.events)-before)
		}
		ev := sink.events[len(sink.events)-1]
		if due[ev.id] > at || at-first > gather {
			t.Fatalf("batch through %d at %v: its last due at %v, its first at %v (window %v)",
				ev.id, time.Duration(at), time.Duration(due[ev.id]), time.Duration(first), time.Duration(gather))
		}
		// Everything due within the window of the first went.
		if h, ok := s.next(); ok && h <= first+gather {
			t.Fatalf("batch at %v left a packet due at %v, within the window of %v", time.Duration(at), time.Duration(h), time.Duration(first))
		}
		released += k
	}
	last := uint32(0)
	for _, ev := range sink.events {
		if !ev.accept || ev.id <= last {
			t.Fatalf("verdict %+v after a batch through %d", ev, last)
		}
		last = ev.id
	}
	c := s.c
	if c.Released != n || c.Batches != uint64(len(sink.events)) || c.Late != 0 || c.MaxLateness > gather {
		t.Errorf("counters %+v (gather %v)", c, time.Duration(gather))
	}
	if _, _, k := s.res.quantiles(); k != reservoirSize {
		t.Errorf("%d lateness samples, want %d", k, reservoirSize)
	}
	// Dense enough that batches hold several packets each: the point.
	if per := float64(n) / float64(c.Batches); per < 3 {
		t.Errorf("%.1f packets per batch", per)
	}
	t.Logf("%d packets in %d batches, max lateness %v", n, c.Batches, time.Duration(c.MaxLateness))
}
