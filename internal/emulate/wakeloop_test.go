package emulate

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeLane is a back-end direction over a list of arrivals and a fake
// clock: what has arrived by the clock's time is readable; released
// packets leave the moment they are released.
type fakeLane struct {
	t       *testing.T
	sched   *scheduler
	clock   *fakeWaiter
	batch   int
	stamped bool // arrivals carry a kernel stamp (their arrival time)

	arrivals []int64 // arrival times, ascending; ids are their indexes
	next     int     // first arrival not yet read
	held     []int64 // arrival time by id, of every packet read
	released []fakeRelease
	reads    int
	last     uint32 // last id released
	any      bool
}

type fakeRelease struct {
	id       uint32
	arrival  int64
	released int64
}

func (f *fakeLane) drop(uint32) { f.t.Fatal("drop without loss") }

func (f *fakeLane) acceptThrough(id uint32) {
	now := f.clock.t
	first := uint32(0)
	if f.any {
		first = f.last + 1
	}
	for i := first; i <= id; i++ {
		f.released = append(f.released, fakeRelease{i, f.held[i], now})
	}
	f.last, f.any = id, true
}

func (f *fakeLane) receive() (readResult, error) {
	f.reads++
	now := f.clock.t
	var r readResult
	for f.next < len(f.arrivals) && f.arrivals[f.next] <= now && r.packets < f.batch {
		at := f.arrivals[f.next]
		arrival := now
		if f.stamped {
			arrival = at
			r.stamped++
		}
		id := uint32(len(f.held))
		f.held = append(f.held, at)
		f.sched.arrive(arrival, id, 100, f)
		f.next++
		r.packets++
	}
	r.full = r.packets == f.batch
	if !r.full {
		r.emptied, r.emptiedAt = true, now
	}
	return r, nil
}

func (f *fakeLane) flush() error { f.sched.departedAll(f.clock.t); return nil }
func (f *fakeLane) publish()     {}

// pending is the first unread arrival, if any.
func (f *fakeLane) pending() (int64, bool) {
	if f.next < len(f.arrivals) {
		return f.arrivals[f.next], true
	}
	return 0, false
}

// fakeWaiter is a clock that jumps to the end of each wait: to the
// timeout, to the next arrival when waiting on the input, or to stopAt.
type fakeWaiter struct {
	t      int64
	stopAt int64
	lane   *fakeLane
	waits  []fakeWait
	err    error
	failed bool // the input reports an error when readable
}

type fakeWait struct {
	at, d int64
	input bool
}

func (w *fakeWaiter) now() int64 { return w.t }

func (w *fakeWaiter) wait(d int64, input bool) (wakeEvent, error) {
	w.waits = append(w.waits, fakeWait{w.t, d, input})
	if w.err != nil {
		return wakeEvent{}, w.err
	}
	end := w.t + d
	if input {
		if at, ok := w.lane.pending(); ok && at < end {
			w.t = max(w.t, at)
			if w.t >= w.stopAt {
				w.t = w.stopAt
				return wakeEvent{stop: true}, nil
			}
			return wakeEvent{input: true, failed: w.failed}, nil
		}
	}
	if end >= w.stopAt {
		w.t = w.stopAt
		return wakeEvent{stop: true}, nil
	}
	w.t = end
	return wakeEvent{}, nil
}

func newFakeLoop(t *testing.T, qc QueueConfig, arrivals []int64, stamped bool, stopAt int64) (*wakeLoop, *fakeLane, *fakeWaiter) {
	s := newScheduler(qc, 1)
	w := &fakeWaiter{stopAt: stopAt}
	f := &fakeLane{t: t, sched: s, clock: w, batch: 4, stamped: stamped, arrivals: arrivals}
	w.lane = f
	return &wakeLoop{name: "fake lane", sched: s, io: f, w: w}, f, w
}

// TestWakeLoopReleasesOnTime: in eager and in lazy mode every packet
// leaves in order, never early, and no later than the gather window; the
// loop sleeps between releases instead of spinning, and lazy mode stops
// watching the input.
func TestWakeLoopReleasesOnTime(t *testing.T) {
	const delay = 20 * ms
	qc := QueueConfig{Delay: 20 * 1e6}
	gather := int64(qc.gather())
	var arrivals []int64
	for i := range 200 {
		// bursts of 7 (more than a batch) every 3 ms, and a lone packet
		at := int64(i/7)*3*ms + int64(i%7)*1000
		arrivals = append(arrivals, at)
	}
	arrivals = append(arrivals, 500*ms)
	for _, stamped := range []bool{false, true} {
		l, f, w := newFakeLoop(t, qc, arrivals, stamped, 600*ms)
		if err := l.run(); err != nil {
			t.Fatalf("stamped %v: %v", stamped, err)
		}
		if len(f.released) != len(arrivals) {
			t.Fatalf("stamped %v: released %d of %d", stamped, len(f.released), len(arrivals))
		}
		for i, r := range f.released {
			if r.id != uint32(i) {
				t.Fatalf("stamped %v: release %d is packet %d", stamped, i, r.id)
			}
			due := r.arrival + delay
			if r.released < due || r.released > due+gather {
				t.Errorf("stamped %v: packet %d arrived %d, released %d, due %d (gather %d)", stamped, i, r.arrival, r.released, due, gather)
			}
		}
		lazy := 0
		for _, wt := range w.waits {
			if wt.d <= 0 {
				t.Errorf("stamped %v: waited %d ns at %d", stamped, wt.d, wt.at)
			}
			if !wt.input {
				lazy++
				// The input holds what arrives meanwhile: a lazy
				// sleep lasts at most the window.
				if wt.d > maxLazy {
					t.Errorf("stamped %v: left the input unread for %d ns at %d", stamped, wt.d, wt.at)
				}
			}
		}
		if stamped != (lazy > 0) {
			t.Errorf("stamped %v: %d of %d waits left the input alone", stamped, lazy, len(w.waits))
		}
		// A lone packet after a quiet spell: with nothing held the loop
		// sleeps at most maxIdleSleep at a time.
		if n := len(w.waits); n > 2*len(arrivals)+int(600*ms/maxIdleSleep)+10 {
			t.Errorf("stamped %v: %d waits for %d packets", stamped, n, len(arrivals))
		}
	}
}

// TestWakeLoopReadsFullBatchesAtOnce: a full batch is read again before
// any sleep, and a timer wake-up in eager mode skips the read unless the
// back-end reads every pass.
func TestWakeLoopReadsFullBatchesAtOnce(t *testing.T) {
	qc := QueueConfig{Delay: 10 * 1e6}
	arrivals := make([]int64, 10) // ten at once: three reads of up to 4
	for _, every := range []bool{false, true} {
		l, f, w := newFakeLoop(t, qc, arrivals, false, 50*ms)
		l.readEveryPass = every
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
		if len(w.waits) == 0 || w.waits[0].at != 0 {
			t.Fatalf("every %v: waits %+v", every, w.waits)
		}
		if len(f.released) != 10 {
			t.Fatalf("every %v: released %d", every, len(f.released))
		}
		// Reads before the first wait: 4 + 4 + 2.
		// After it: one per wait that ended (timeouts included with every).
		wantReads := 3
		if every {
			wantReads += len(w.waits) - 1 // the last wait ends in stop
		}
		if f.reads != wantReads {
			t.Errorf("every %v: %d reads, want %d (waits %d)", every, f.reads, wantReads, len(w.waits))
		}
	}
}

// TestWakeLoopEnds: stop ends the loop without an error; a failed wait
// and, where the back-end asks for it, a failed input end it with one.
func TestWakeLoopEnds(t *testing.T) {
	qc := QueueConfig{Delay: time.Millisecond}
	l, _, w := newFakeLoop(t, qc, nil, false, 0)
	if err := l.run(); err != nil || len(w.waits) != 1 {
		t.Errorf("stop: %v after %d waits", err, len(w.waits))
	}

	l, _, w = newFakeLoop(t, qc, nil, false, 10*ms)
	w.err = errors.New("EBADF")
	if err := l.run(); err == nil || !strings.Contains(err.Error(), "fake lane: ppoll: EBADF") {
		t.Errorf("failed wait: %v", err)
	}

	for _, inputErrors := range []bool{false, true} {
		l, f, w := newFakeLoop(t, qc, []int64{ms}, false, 10*ms)
		l.inputErrors = inputErrors
		w.failed = true
		err := l.run()
		if inputErrors != (err != nil) {
			t.Errorf("inputErrors %v: %v", inputErrors, err)
		}
		if !inputErrors && len(f.released) != 1 {
			t.Errorf("inputErrors off: released %d of 1", len(f.released))
		}
	}
}

func TestWakeLoopLazyWindow(t *testing.T) {
	for _, tc := range []struct {
		delay, jitter int64
		stamped       bool
		every         bool
		want          int64
	}{
		{20 * ms, 0, true, false, 2 * ms},
		{2 * ms, 0, true, false, ms},
		{20 * ms, 19500 * 1000, true, false, 0},
		{ms / 2, 0, true, false, 0},
		{0, 0, true, false, 0},
		{20 * ms, 0, false, false, 0},
		{20 * ms, 0, true, true, 0},
	} {
		qc := QueueConfig{Delay: time.Duration(tc.delay), Jitter: time.Duration(tc.jitter)}
		l := &wakeLoop{sched: newScheduler(qc, 1), allStamped: tc.stamped, readEveryPass: tc.every}
		if got := l.lazyWindow(); got != tc.want {
			t.Errorf("%+v: window %d, want %d", tc, got, tc.want)
		}
	}
}
