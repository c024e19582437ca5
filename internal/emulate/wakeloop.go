package emulate

import (
	"fmt"
	"time"
)

// The wake loop is what every back-end's direction thread runs (NFQUEUE
// queue, AF_XDP lane, AF_PACKET pipe); only reading arrivals and handing
// released packets to the kernel differ:
//
//	┌─► receive: what arrived ─► scheduler.arrive (loss, due time)
//	│   scheduler.release(now) ─► the back-end's verdictSink ─► flush ─► publish
//	│   a full batch? read again at once
//	│   sleep until the scheduler's wakeAt, an arrival (eager) or the end of
//	│   the lazy window, or stop
//	└───────────────────────────────────────────────────────────────────┘
//
// The release timing that tests and `lab calibrate` judge is decided here,
// once for all three.

// maxIdleSleep caps a sleep with nothing held. The runtime stops a
// goroutine in a raw system call by signalling it (EINTR); should signals
// be off (GODEBUG=asyncpreemptoff=1), the cap still bounds how long a GC
// waits for an idle lane thread.
const maxIdleSleep = int64(100 * time.Millisecond)

// maxLazy caps the lazy window: the input (socket buffer, RX ring) must
// hold everything that arrives meanwhile (2 ms at 100 000 packets/s is
// 200 messages).
const maxLazy = int64(2 * time.Millisecond)

// readResult is what one receive did, as far as the loop cares.
type readResult struct {
	// full: the read took a whole batch and more may be waiting; the loop
	// reads again before it sleeps.
	full bool
	// emptied: the read found the input empty at emptiedAt (monotonic
	// nanoseconds), so what is still unread arrived after it.
	emptied   bool
	emptiedAt int64
	// packets read, and how many of them carried a kernel receive stamp.
	packets, stamped int
}

// laneIO is one direction of a back-end as the wake loop drives it.
type laneIO interface {
	// verdictSink takes the scheduler's release decisions.
	verdictSink
	// receive hands what has arrived, at most one batch, to the scheduler
	// without blocking.
	receive() (readResult, error)
	// flush hands the kernel what the last release decided.
	flush() error
	// publish copies the counters for readers.
	publish()
}

// wakeEvent is what ended a wait; none set is a timeout or an
// interrupted wait (EINTR).
type wakeEvent struct {
	input  bool // the input is readable (or failed)
	failed bool // the input reported an error (POLLERR, POLLNVAL)
	stop   bool // stop was asked for
}

// waiter is the loop's clock and sleep: the monotonic clock and a raw
// ppoll on the input and the stop descriptor in the back-ends
// (pollWaiter), a fake clock in tests.
type waiter interface {
	now() int64
	// wait sleeps up to d nanoseconds, until stop, or, with input, until
	// the input is readable.
	wait(d int64, input bool) (wakeEvent, error)
}

// wakeLoop drives one direction until stop or a failure.
type wakeLoop struct {
	name  string // for errors: "netfilter queue 0", "wire a → b"
	sched *scheduler
	io    laneIO
	w     waiter
	// readEveryPass reads the input on every pass, timer wake-ups
	// included, and never lazily: for a ring the kernel hands over in
	// place (AF_PACKET's), where a read that finds nothing costs one load.
	readEveryPass bool
	// inputErrors ends the loop when the input reports an error: a packet
	// socket's port has gone. A netlink socket reports its overruns that
	// way, which its receive counts, so NFQUEUE leaves this off.
	inputErrors bool

	lastRead   int64 // when a read last found the input empty
	allStamped bool  // every packet of the last read had a kernel stamp
}

// run is the loop. A timer wake-up in eager mode skips the receive:
// nothing new arrived.
func (l *wakeLoop) run() error {
	readable := true
	for {
		full := false
		if readable || l.readEveryPass {
			r, err := l.io.receive()
			if err != nil {
				return err
			}
			full = r.full
			if r.packets > 0 {
				l.allStamped = r.stamped == r.packets
			}
			if r.emptied {
				l.lastRead = r.emptiedAt
			}
		}
		l.sched.release(l.w.now(), l.io)
		ferr := l.io.flush()
		l.io.publish()
		if ferr != nil {
			return ferr
		}
		if full {
			readable = true
			continue // more may be waiting
		}
		// Sleep until the head of the FIFO is due. Eager mode also wakes
		// for every arrival; lazy mode leaves the input alone for a while
		// and reads what piled up when it wakes.
		input := true
		wake := int64(-1)
		if due, ok := l.sched.wakeAt(); ok {
			wake = due
			if w := l.lazyWindow(); w > 0 {
				wake = min(wake, l.lastRead+w)
				input = false
			}
		}
		d := maxIdleSleep
		if wake >= 0 {
			d = wake - l.w.now()
			if d <= 0 {
				readable = !input
				continue
			}
		}
		ev, err := l.w.wait(d, input)
		if err != nil {
			return fmt.Errorf("%s: ppoll: %w", l.name, err)
		}
		if ev.stop {
			return nil
		}
		if l.inputErrors && ev.failed {
			return fmt.Errorf("%s: receive socket failed (port gone?)", l.name)
		}
		readable = !input || ev.input
	}
}

// lazyWindow is how long the thread may leave the input unread. A packet
// not yet read arrived after lastRead, so it cannot fall due before
// lastRead + Delay − Jitter; reading within half of that keeps every
// release on time, as long as arrivals are timed by the kernel's receive
// stamp rather than by when they are read. Without stamps (none enabled,
// router-made packets), or with too short a delay, the window is 0: the
// thread wakes for every arrival.
func (l *wakeLoop) lazyWindow() int64 {
	if l.readEveryPass || !l.allStamped {
		return 0
	}
	minDelay := l.sched.delay - l.sched.jitter
	if minDelay < int64(time.Millisecond) {
		return 0
	}
	return min(minDelay/2, maxLazy)
}
