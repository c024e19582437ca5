package emulate

import (
	"context"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// RunProcess is Open, Emulator.Run and Close for a process that exists for
// the emulator: the lab's owner (lab.RunOwner) and the benchmarks' helper
// process. Besides the queue threads it sets two things that belong to the
// whole process, which only such a process's entry point decides: one
// spare Go P per queue (reserveProcs) and, while the emulator runs, every
// thread of the process real-time (below). Emulator.Run alone, for callers
// that share their process with other work, sets neither. Only a light
// process may call it: any busy goroutine in it would run real-time too.
func RunProcess(ctx context.Context, cfg Config, statsPath string) error {
	e, err := Open(cfg)
	if err != nil {
		return err
	}
	return e.RunProcess(ctx, statsPath)
}

// RunProcess is RunProcess for an emulator the caller opened, for example
// inside netns.Do so that its sockets live in another namespace than the
// process: Run with the process-wide settings above. It closes e.
func (e *Emulator) RunProcess(ctx context.Context, statsPath string) error {
	defer reserveProcs(len(e.lanes))()
	e.rtThreads = newRTThreads()
	return e.Run(ctx, statsPath) // closes e
}

// reserveProcs raises GOMAXPROCS by n and returns the undo. Each queue
// thread sleeps in ppoll and needs a Go P for a few microseconds when it
// wakes. If every P is busy with other goroutines (a benchmark's sender,
// a caller's work), the real-time thread would wait for a normal-priority
// one: n queues get Ps of their own.
func reserveProcs(n int) (undo func()) {
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + n)
	return func() {
		if runtime.GOMAXPROCS(0) == procs+n {
			runtime.GOMAXPROCS(procs)
		}
	}
}

// Why the whole process, not only the queue threads, runs real-time
// (RunProcess):
//
// The queue threads make raw system calls (see rawPpoll), so the runtime
// sees a goroutine that never yields. sysmon preempts such a goroutine
// every 10 ms, and so does every GC: the queue goroutine, locked to its
// thread, parks, and another thread of the process must run the scheduler
// to hand it back its P before it can release the next packet. At normal
// priority that other thread waits behind OpenVPN and iperf3 on a busy
// host; at the queue threads' priority it runs within microseconds, and as
// an equal it never preempts a queue thread's release. (This is read from
// the Go 1.26 runtime's source, retake and schedule; it was not traced.) The same held for
// the failure this code was written against, before the calls were raw:
// a queue thread spinning in runtime.exitsyscall (sched_yield) on a scan
// bit that a preempted normal-priority sysmon held, 10–50 ms at a time.
//
// The gain beside the raw calls' own is small
// (docs/measurements.md#the-real-time-process). The rest of the process
// must be light (the lab's owner process is: the emulator, a stats file
// and a timer), because its threads are real-time too.

// rtThreads are the threads Run made real-time, with their previous
// scheduling attributes, to restore when Run ends.
type rtThreads struct {
	prev map[int]unix.SchedAttr
}

func newRTThreads() *rtThreads {
	return &rtThreads{prev: map[int]unix.SchedAttr{}}
}

// queueAttr is the queue threads' scheduling class, and that of the whole
// process under RunProcess. Reset-on-fork keeps child
// processes and new threads off it; sweep catches new threads.
func queueAttr() unix.SchedAttr {
	return unix.SchedAttr{
		Size:     unix.SizeofSchedAttr,
		Policy:   unix.SCHED_FIFO,
		Priority: rtPriority,
		Flags:    unix.SCHED_FLAG_RESET_ON_FORK,
	}
}

// sweep makes every thread of the process that is not real-time yet
// real-time, and returns how many threads of the process are not (it
// could not change them).
func (r *rtThreads) sweep() (missed int) {
	tids, err := threadIDs()
	if err != nil {
		return 1
	}
	want := queueAttr()
	for _, tid := range tids {
		cur, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // the thread ended
		}
		if cur.Policy == unix.SCHED_FIFO || cur.Policy == unix.SCHED_RR {
			continue // a queue thread, or one swept before
		}
		if err := unix.SchedSetAttr(tid, &want, 0); err != nil {
			missed++
			continue
		}
		if _, seen := r.prev[tid]; !seen {
			r.prev[tid] = *cur
		}
	}
	return missed
}

// restore gives every thread that sweep changed and that still belongs to
// the process its previous scheduling attributes.
func (r *rtThreads) restore() {
	for tid, attr := range r.prev {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); err != nil {
			continue // gone; the number may belong to another process now
		}
		attr.Size = unix.SizeofSchedAttr
		_ = unix.SchedSetAttr(tid, &attr, 0)
	}
	clear(r.prev)
}

// threadIDs lists the threads of the process.
func threadIDs() ([]int, error) {
	d, err := os.Open("/proc/self/task")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(names))
	for _, name := range names {
		if tid, err := strconv.Atoi(name); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
