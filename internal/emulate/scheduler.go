package emulate

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// verdictSink receives the scheduler's decisions. The netlink backend turns
// them into NFQNL_MSG_VERDICT and NFQNL_MSG_VERDICT_BATCH messages; tests
// record them.
type verdictSink interface {
	// drop discards one packet (random loss).
	drop(id uint32)
	// acceptThrough releases every packet still held whose id is not after
	// id. It is only valid because the scheduler releases strictly in
	// arrival order, which is the kernel queue's order.
	acceptThrough(id uint32)
}

// held is one packet waiting for its release time.
type held struct {
	due  int64 // monotonic nanoseconds
	id   uint32
	size uint32
}

// fifo is a growable ring: of held packets in the scheduler, of held frames
// in the AF_PACKET backend. What feeds it (the kernel's queue length, the
// hold buffer) bounds it, so it reaches a steady size and stops allocating.
type fifo[T any] struct {
	buf  []T
	head int
	n    int
}

func (f *fifo[T]) len() int { return f.n }

func (f *fifo[T]) push(h T) {
	if f.n == len(f.buf) {
		nb := make([]T, max(2*len(f.buf), 1024))
		k := copy(nb, f.buf[f.head:])
		copy(nb[k:], f.buf[:f.head])
		f.buf, f.head = nb, 0
	}
	f.buf[(f.head+f.n)%len(f.buf)] = h
	f.n++
}

func (f *fifo[T]) front() *T { return &f.buf[f.head] }

// at is the i-th oldest element, 0 ≤ i < len.
func (f *fifo[T]) at(i int) *T { return &f.buf[(f.head+i)%len(f.buf)] }

func (f *fifo[T]) pop() T {
	h := f.buf[f.head]
	f.head = (f.head + 1) % len(f.buf)
	f.n--
	return h
}

// counters are the scheduler's running totals. The scheduler owns them and
// is their only writer; the netlink loop publishes copies for readers.
type counters struct {
	Received      uint64
	ReceivedBytes uint64
	Released      uint64
	ReleasedBytes uint64
	DroppedLoss   uint64
	Late          uint64
	LateDelay     int64  // the late releases' lateness, summed (nanoseconds)
	Stalled       uint64 // released more than StallLateness late
	MaxLateness   int64  // nanoseconds
	Batches       uint64
}

// reservoirSize is how many lateness samples are kept (Vitter's algorithm R:
// a uniform sample of every release so far).
const reservoirSize = 4096

// reservoir holds a uniform sample of lateness values. It is shared between
// the scheduler (writer) and the stats writer, hence the mutex; the
// scheduler takes it once per release batch, not per packet.
type reservoir struct {
	mu      sync.Mutex
	seen    uint64
	samples []int64
}

// quantiles returns the median and 99th percentile of the samples and how
// many samples there are.
func (r *reservoir) quantiles() (p50, p99 time.Duration, n int) {
	r.mu.Lock()
	s := slices.Clone(r.samples)
	r.mu.Unlock()
	if len(s) == 0 {
		return 0, 0, 0
	}
	slices.Sort(s)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(s)-1) + 0.5)
		return time.Duration(s[i])
	}
	return at(0.50), at(0.99), len(s)
}

// scheduler is the link model of one direction: random loss decided on
// arrival, then a delay of Delay ± Jitter (uniform), with release times kept
// non-decreasing so that packets leave in the order they came. Time is
// passed in by the caller (monotonic nanoseconds), so tests drive it with a
// fake clock.
type scheduler struct {
	delay     int64
	jitter    int64
	loss      float64 // percent
	tolerance int64
	rng       *rand.Rand
	// gather is how long after its head falls due a release waits for
	// the packets due right behind it (wakeAt), so that they leave in
	// one batch instead of one wake-up each.
	gather int64

	q       fifo[held]
	lastDue int64
	c       counters
	// departing holds the release times of the packets handed to the
	// kernel (release) whose departure the backend has not reported yet
	// (departed), oldest first: a batch leaves one packet after another
	// inside the backend's send, so its lateness is counted per packet,
	// when the send that carried it returned.
	departing fifo[int64]

	res        reservoir
	resPending []int64 // samples of the current release batch, added under one lock
}

func newScheduler(qc QueueConfig, seed uint64) *scheduler {
	s := &scheduler{
		delay:      int64(qc.Delay),
		jitter:     int64(qc.Jitter),
		loss:       qc.LossPercent,
		tolerance:  int64(qc.tolerance()),
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		gather:     int64(qc.gather()),
		resPending: make([]int64, 0, 256),
	}
	s.res.samples = make([]int64, 0, reservoirSize)
	return s
}

// arrive takes a packet that the kernel has just queued. It is dropped at
// once (loss) or held until its release time.
func (s *scheduler) arrive(now int64, id, size uint32, out verdictSink) {
	s.c.Received++
	s.c.ReceivedBytes += uint64(size)
	if s.loss > 0 && (s.loss >= 100 || s.rng.Float64()*100 < s.loss) {
		s.c.DroppedLoss++
		out.drop(id)
		return
	}
	d := s.delay
	if s.jitter > 0 {
		d += s.rng.Int64N(2*s.jitter+1) - s.jitter
		if d < 0 {
			d = 0
		}
	}
	due := now + d
	// Never release a packet before one that came earlier: this keeps the
	// order (a real link does not reorder either) and is what makes "accept
	// everything up to id N" a correct release.
	if due < s.lastDue {
		due = s.lastDue
	}
	s.lastDue = due
	s.q.push(held{due: due, id: id, size: size})
}

// next returns the release time of the oldest held packet.
func (s *scheduler) next() (due int64, ok bool) {
	if s.q.len() == 0 {
		return 0, false
	}
	return s.q.front().due, true
}

// wakeAt is when the thread should wake to release the oldest held
// packet: the release time of the last packet due within the gather
// window after it. A lone packet wakes the thread at its own time; in a
// dense stream one wake-up releases every packet due within the window,
// none early, the first at most the window late.
func (s *scheduler) wakeAt() (at int64, ok bool) {
	head, ok := s.next()
	if !ok || s.gather <= 0 {
		return head, ok
	}
	n := s.q.len()
	limit := head + s.gather
	// Release times never decrease along the FIFO: binary search for
	// the last one within the limit (the head is).
	lo, hi := 0, n
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if s.q.at(mid).due <= limit {
			lo = mid
		} else {
			hi = mid
		}
	}
	return s.q.at(lo).due, true
}

// release lets go of every packet due at now, with one batch verdict.
// Their lateness is counted when the backend reports them sent
// (departed), not here.
func (s *scheduler) release(now int64, out verdictSink) int {
	n := 0
	var last uint32
	for s.q.len() > 0 && s.q.front().due <= now {
		h := s.q.pop()
		s.c.ReleasedBytes += uint64(h.size)
		s.departing.push(h.due)
		last = h.id
		n++
	}
	if n == 0 {
		return 0
	}
	s.c.Released += uint64(n)
	s.c.Batches++
	out.acceptThrough(last)
	return n
}

// departed counts the lateness of the n oldest packets released and not
// yet counted: the backend's send that carried them returned at at. A
// send's packets leave one after another inside it (on a veth the
// receiving namespace's stack runs there too), so at is each packet's
// departure or later, by at most the time the same send took for the
// packets after it.
func (s *scheduler) departed(at int64, n int) {
	n = min(n, s.departing.len())
	for range n {
		late := at - s.departing.pop()
		if late > s.tolerance {
			s.c.Late++
			s.c.LateDelay += late
			if late > int64(StallLateness) {
				s.c.Stalled++
			}
		}
		if late > s.c.MaxLateness {
			s.c.MaxLateness = late
		}
		s.sample(late)
	}
	s.flushSamples()
}

// departedAll is departed for every packet released and not yet counted.
func (s *scheduler) departedAll(at int64) { s.departed(at, s.departing.len()) }

// sample offers one lateness value to the reservoir (algorithm R). The
// random index is drawn here, without the lock; only accepted samples are
// buffered for flushSamples.
func (s *scheduler) sample(v int64) {
	s.res.seen++ // only the scheduler writes seen
	if s.res.seen <= reservoirSize {
		s.resPending = append(s.resPending, v, -1)
		return
	}
	j := s.rng.Uint64N(s.res.seen)
	if j < reservoirSize {
		s.resPending = append(s.resPending, v, int64(j))
	}
}

func (s *scheduler) flushSamples() {
	if len(s.resPending) == 0 {
		return
	}
	s.res.mu.Lock()
	for i := 0; i < len(s.resPending); i += 2 {
		v, j := s.resPending[i], s.resPending[i+1]
		if j < 0 {
			s.res.samples = append(s.res.samples, v)
		} else {
			s.res.samples[j] = v
		}
	}
	s.res.mu.Unlock()
	s.resPending = s.resPending[:0]
}
