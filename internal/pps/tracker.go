package pps

import (
	"math/bits"
	"time"
)

// flowTracker accounts for the probes of one flow. The sender reserves
// sequence numbers before it sends them (so that an echo can never arrive
// for a number the tracker does not know yet), the receiver records echoes,
// and resolve declares lost what stayed unanswered for the timeout.
//
// Outstanding sequence numbers [base, next) live in a ring bitmap of window
// bits: bit set = echoed. Batches are recorded as marks (end seq, send time)
// in send order, so that resolve knows when each number's timeout expires
// without storing a time per probe. A probe whose echo arrives after its
// timeout counts as lost and late, never as received.
//
// flowTracker is not safe for concurrent use; flow wraps it in a mutex.
type flowTracker struct {
	timeoutNs int64
	window    uint32 // power of two
	bits      []uint64
	base      uint32 // lowest unresolved seq
	next      uint32 // next seq to reserve
	marks     []mark
	markHead  int

	maxRecv  uint32
	anyRecv  bool
	counters Counters
	rtt      histogram
	series   []second
}

// mark records that seqs up to end (exclusive) were sent at sentNs.
type mark struct {
	end    uint32
	sentNs int64
}

// second holds the counters of one second of the run: sent and lost by the
// second the probe was sent in, received by the second its echo arrived in.
type second struct {
	sent, received, lost uint64
	rttSum               float64
	rttMin, rttMax       int64
}

// Counters are the totals of a flow or of a run.
type Counters struct {
	Sent     uint64 `json:"sent"`
	Received uint64 `json:"received"`
	Lost     uint64 `json:"lost"`
	// Late counts echoes that arrived after their timeout (already lost).
	Late uint64 `json:"late"`
	// Duplicates counts extra copies of an echo already received.
	Duplicates uint64 `json:"duplicates"`
	// Reordered counts echoes that arrived after an echo of a later probe.
	Reordered uint64 `json:"reordered"`
	// Stray counts packets that looked like echoes of probes never sent.
	Stray uint64 `json:"stray"`
}

func (c *Counters) add(o Counters) {
	c.Sent += o.Sent
	c.Received += o.Received
	c.Lost += o.Lost
	c.Late += o.Late
	c.Duplicates += o.Duplicates
	c.Reordered += o.Reordered
	c.Stray += o.Stray
}

const defaultWindow = 1 << 22

func newFlowTracker(timeout time.Duration, window uint32) *flowTracker {
	if window == 0 {
		window = defaultWindow
	}
	if window&(window-1) != 0 || window < 64 {
		panic("pps: window must be a power of two ≥ 64")
	}
	return &flowTracker{
		timeoutNs: int64(timeout),
		window:    window,
		bits:      make([]uint64, window/64),
	}
}

func secondOf(ns int64) int {
	if ns < 0 {
		return 0
	}
	return int(ns / int64(time.Second))
}

func (t *flowTracker) sec(i int) *second {
	for len(t.series) <= i {
		t.series = append(t.series, second{})
	}
	return &t.series[i]
}

// reserve hands out up to n consecutive sequence numbers sent at nowNs and
// returns the first one and how many it gave; fewer than n when the window
// is full of unresolved probes (or the 32-bit sequence space is used up).
func (t *flowTracker) reserve(n int, nowNs int64) (first uint32, got int) {
	free := int64(t.window) - int64(t.next-t.base)
	room := int64(^uint32(0)) - int64(t.next)
	got = int(min(int64(n), free, room))
	if got <= 0 {
		return t.next, 0
	}
	first = t.next
	for s := first; s != first+uint32(got); s++ {
		t.clearBit(s)
	}
	t.next += uint32(got)
	t.marks = append(t.marks, mark{end: t.next, sentNs: nowNs})
	t.counters.Sent += uint64(got)
	t.sec(secondOf(nowNs)).sent += uint64(got)
	return first, got
}

// sentOneWay records n probes of a one-way test sent at nowNs, numbered
// from t.next. Nothing is awaited for them: the server counts what arrives.
func (t *flowTracker) sentOneWay(n int, nowNs int64) {
	t.next += uint32(n)
	t.base = t.next
	t.counters.Sent += uint64(n)
	t.sec(secondOf(nowNs)).sent += uint64(n)
}

// unreserve gives back the last n numbers of the latest reservation, which
// the sender could not send.
func (t *flowTracker) unreserve(n int) {
	if n <= 0 || len(t.marks) == t.markHead {
		return
	}
	m := &t.marks[len(t.marks)-1]
	prevEnd := t.base
	if len(t.marks)-1 > t.markHead {
		prevEnd = t.marks[len(t.marks)-2].end
	}
	n = min(n, int(m.end-prevEnd))
	t.next -= uint32(n)
	m.end = t.next
	t.counters.Sent -= uint64(n)
	t.sec(secondOf(m.sentNs)).sent -= uint64(n)
	if m.end == prevEnd {
		t.marks = t.marks[:len(t.marks)-1]
	}
}

func (t *flowTracker) bit(s uint32) bool {
	i := s & (t.window - 1)
	return t.bits[i/64]&(1<<(i%64)) != 0
}

func (t *flowTracker) setBit(s uint32) {
	i := s & (t.window - 1)
	t.bits[i/64] |= 1 << (i % 64)
}

func (t *flowTracker) clearBit(s uint32) {
	i := s & (t.window - 1)
	t.bits[i/64] &^= 1 << (i % 64)
}

// countBits counts set bits for seqs in [from, to).
func (t *flowTracker) countBits(from, to uint32) int {
	n := 0
	for s := from; s != to; {
		i := s & (t.window - 1)
		if i%64 == 0 && to-s >= 64 {
			n += bits.OnesCount64(t.bits[i/64])
			s += 64
			continue
		}
		if t.bit(s) {
			n++
		}
		s++
	}
	return n
}

// received records the echo of p arriving at nowNs.
func (t *flowTracker) received(p Probe, nowNs int64) {
	rtt := nowNs - int64(p.SentNs)
	s := p.Seq
	switch {
	case s >= t.next:
		t.counters.Stray++ // never sent
		return
	case s < t.base: // already resolved: echoed before, or counted lost
		if rtt >= t.timeoutNs {
			t.counters.Late++
		} else {
			t.counters.Duplicates++
		}
		return
	case t.bit(s):
		t.counters.Duplicates++
		return
	case rtt >= t.timeoutNs:
		// Not resolved yet, but its time is up: resolve will count it lost.
		t.counters.Late++
		return
	}
	t.setBit(s)
	t.counters.Received++
	if t.anyRecv && s < t.maxRecv {
		t.counters.Reordered++
	} else {
		t.maxRecv, t.anyRecv = s, true
	}
	t.rtt.add(time.Duration(rtt))
	sec := t.sec(secondOf(nowNs))
	if sec.received == 0 || rtt < sec.rttMin {
		sec.rttMin = rtt
	}
	sec.rttMax = max(sec.rttMax, rtt)
	sec.received++
	sec.rttSum += float64(rtt)
}

// resolve pops batches that are fully echoed, and declares lost the
// unanswered probes of batches sent at least the timeout before nowNs.
func (t *flowTracker) resolve(nowNs int64) {
	for t.markHead < len(t.marks) {
		m := t.marks[t.markHead]
		got := t.countBits(t.base, m.end)
		want := int(m.end - t.base)
		if got < want {
			if nowNs-m.sentNs < t.timeoutNs {
				break
			}
			lost := uint64(want - got)
			t.counters.Lost += lost
			t.sec(secondOf(m.sentNs)).lost += lost
		}
		t.base = m.end
		t.markHead++
	}
	// Compact the mark queue once its dead head dominates.
	if t.markHead > 1024 && t.markHead*2 > len(t.marks) {
		n := copy(t.marks, t.marks[t.markHead:])
		t.marks = t.marks[:n]
		t.markHead = 0
	}
}

// outstanding is the number of probes neither echoed nor declared lost.
func (t *flowTracker) outstanding() int { return int(t.next - t.base) }

// lastSentNs is the send time of the latest batch, or -1 if none.
func (t *flowTracker) lastSentNs() int64 {
	if len(t.marks) == t.markHead {
		return -1
	}
	return t.marks[len(t.marks)-1].sentNs
}
