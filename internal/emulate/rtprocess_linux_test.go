package emulate

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// policies returns the scheduling policy of every thread of the process.
func policies(t *testing.T) map[int]uint32 {
	t.Helper()
	tids, err := threadIDs()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]uint32{}
	for _, tid := range tids {
		if a, err := unix.SchedGetAttr(tid, 0); err == nil {
			out[tid] = a.Policy
		}
	}
	return out
}

// sweep makes every thread of the process real-time, including one that
// runs a goroutine locked after the first sweep (a new thread, or a reused
// one), and restore gives each its policy back.
func TestRealtimeProcessSweepAndRestore(t *testing.T) {
	testenv.RequireRoot(t)
	before := policies(t)
	r := newRTThreads()
	if missed := r.sweep(); missed != 0 {
		t.Fatalf("sweep could not change %d threads", missed)
	}
	restored := false
	defer func() {
		if !restored {
			r.restore()
		}
	}()
	// A thread the runtime starts after the sweep is normal until the
	// next sweep (reset-on-fork), never real-time without the flag.
	started, release := make(chan int), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		started <- unix.Gettid()
		<-release
	}()
	newTid := <-started
	defer close(release)
	if a, err := unix.SchedGetAttr(newTid, 0); err == nil && a.Policy == unix.SCHED_FIFO && a.Flags&unix.SCHED_FLAG_RESET_ON_FORK == 0 {
		t.Errorf("a thread started after the sweep inherited SCHED_FIFO without reset-on-fork")
	}
	if missed := r.sweep(); missed != 0 {
		t.Fatalf("second sweep could not change %d threads", missed)
	}
	for tid, p := range policies(t) {
		if p != unix.SCHED_FIFO {
			t.Errorf("thread %d has policy %d after the sweep, want SCHED_FIFO", tid, p)
		}
	}
	r.restore()
	restored = true
	for tid, p := range policies(t) {
		if was, ok := before[tid]; ok && p != was {
			t.Errorf("thread %d has policy %d after restore, had %d", tid, p, was)
		}
		if tid == newTid && p != unix.SCHED_NORMAL {
			t.Errorf("the thread started later has policy %d after restore, want SCHED_NORMAL", p)
		}
	}
}

// The queue threads block in raw system calls, which the runtime does not
// see as such: a stop-the-world (here a GC) must still get them to stop,
// also while no packet arrives and a queue sleeps with nothing held. With
// preemption signals on (the default) they do so at once; the 100 ms cap
// on an idle sleep, which bounds it with signals off, is not exercised.
func TestGCWithIdleQueues(t *testing.T) {
	n := newTestNet(t)
	n.startEmulator(t, Config{Queues: []QueueConfig{{Num: queueUp, Delay: time.Millisecond}, {Num: queueDown}}})
	time.Sleep(50 * time.Millisecond) // the queue threads are asleep in ppoll
	for i := 0; i < 5; i++ {
		start := time.Now()
		runtime.GC()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("GC %d took %v with idle queue threads", i, d)
		}
	}
	ping(t, n.A, testAddrB, "-c", "3", "-i", "0.05", "-W", "1")
}
