package emulate

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
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
		// Threads that were real-time before (another test's queue
		// thread, say) are left as they are; the ones it changed run
		// below the queue threads.
		if _, changed := r.prev[tid]; !changed {
			continue
		}
		if a, err := unix.SchedGetAttr(tid, 0); err == nil && a.Priority != processPriority {
			t.Errorf("thread %d has priority %d after the sweep, want %d", tid, a.Priority, processPriority)
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

// A queue thread must take its CPU from any other thread of its own
// process: under RunProcess the queue threads run at rtPriority and every
// other thread of the process (the runtime's, the stats writer's) one step
// below. Equal priorities let a 1.5 ms stats snapshot hold a waking queue
// thread off its CPU (processAttr).
func TestEmulatorProcessQueueThreadsAbove(t *testing.T) {
	if processPriority >= rtPriority {
		t.Fatalf("processPriority %d is not below rtPriority %d", processPriority, rtPriority)
	}
	n := newTestNet(t)
	stop := n.startEmulatorProcess(t, Config{Queues: []QueueConfig{
		{Num: queueUp, Delay: 10 * time.Millisecond},
		{Num: queueDown, Delay: 10 * time.Millisecond},
	}})
	pid := helperPid(t)
	// The first snapshot exists; give the ticker one sweep (StatsInterval).
	time.Sleep(2 * StatsInterval)
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	queues, others := 0, 0
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // the thread ended
		}
		switch {
		case a.Policy == unix.SCHED_FIFO && a.Priority == rtPriority:
			queues++
		case a.Policy == unix.SCHED_FIFO && a.Priority == processPriority:
			others++
		default:
			t.Errorf("thread %d: policy %d priority %d, want SCHED_FIFO at %d (queue) or %d", tid, a.Policy, a.Priority, rtPriority, processPriority)
		}
	}
	if queues != 2 || others == 0 {
		t.Errorf("%d threads at the queue threads' priority (want 2, one per queue), %d below it", queues, others)
	}
	if st := stop(); !st.RealtimeProcess {
		t.Errorf("final stats %+v: not a real-time process", st)
	}
}

// helperPid is the emulator process startEmulatorProcess started: the
// test binary's child running the same executable (ip netns exec execs
// it in place).
func helperPid(t *testing.T) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && link == exe {
			if found != 0 {
				t.Fatalf("two emulator processes: %d and %d", found, pid)
			}
			found = pid
		}
	}
	if found == 0 {
		t.Fatal("no emulator process found")
	}
	return found
}
