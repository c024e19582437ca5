package emulate

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Why the whole process, not only the queue threads, runs real-time
// (Config.RealtimeProcess):
//
// A queue thread returning from ppoll goes through the Go runtime's
// exitsyscall, which must move the goroutine from _Gsyscall to _Grunning.
// Since Go 1.26, sysmon inspects every P in a system call on each of its
// ticks by taking the goroutine's scan bit (setBlockOnExitSyscall), and
// the GC takes it to scan a stack. While another thread holds that bit,
// exitsyscall spins in casgstatus, calling sched_yield. If the holder is
// a normal thread that the queue thread itself preempted on the same CPU
// (the queue thread wakes on a timer exactly when it must release), a
// SCHED_FIFO thread's sched_yield never lets it run: the queue thread
// spins until the load balancer moves the holder to the other CPU. On a
// busy 2-CPU host that took 10–50 ms, thousands of sched_yield calls from
// runtime.exitsyscall (ftrace, user stacks), and every packet due meanwhile
// was released late.
//
// With every thread of the process at the same SCHED_FIFO priority, a
// waking queue thread does not preempt a runtime thread that holds the
// bit, and a spinning one yields to it, so the bit is released within
// that thread's own few microseconds of work. The rest of the process
// must then be light (the lab's owner process is: the emulator, a stats
// file and a timer), because its threads are real-time too.

// rtThreads are the threads Run made real-time, with their previous
// scheduling attributes, to restore when Run ends.
type rtThreads struct {
	prev map[int]unix.SchedAttr
}

func newRTThreads() *rtThreads {
	return &rtThreads{prev: map[int]unix.SchedAttr{}}
}

// queueAttr is the queue threads' scheduling class, and that of the whole
// process under Config.RealtimeProcess. Reset-on-fork keeps child
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
	d, err := os.Open("/proc/self/task")
	if err != nil {
		return 1
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 1
	}
	want := queueAttr()
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
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
