package emulate

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lockLaneThread prepares the calling goroutine's thread for a wake loop
// and records in pub whether it runs real-time.
//
// ppoll's timeout is an hrtimer, so the thread wakes within microseconds of
// the due time (Go's own timers round to the millisecond when the process
// is idle). The goroutine therefore keeps its OS thread locked and never
// unlocks it: the thread, with its lowered timer slack, ends with the
// goroutine instead of going back to the scheduler's pool.
func lockLaneThread(pub *published) {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(timerSlack), 0, 0, 0)
	// A link does not wait for the CPU: with the host busy (iperf3,
	// openvpn, other tests) a normal thread wakes milliseconds late. The
	// thread sleeps nearly all the time, and the kernel's RT throttling
	// (sched_rt_runtime_us) bounds it if it ever does not.
	attr := queueAttr()
	pub.realtime.Store(unix.SchedSetAttr(0, &attr, 0) == nil)
}

// pollWaiter is the wake loop's waiter on a lane's input descriptor and
// the emulator's stop descriptor, with rawPpoll (see there why raw). Its
// descriptors and timeout live in it, not on the stack of each wait.
type pollWaiter struct {
	fds [2]unix.PollFd
	ts  unix.Timespec
}

func newPollWaiter(input, stop int) *pollWaiter {
	return &pollWaiter{fds: [2]unix.PollFd{
		{Fd: int32(input), Events: unix.POLLIN},
		{Fd: int32(stop), Events: unix.POLLIN},
	}}
}

func (p *pollWaiter) now() int64 { return monotime() }

func (p *pollWaiter) wait(d int64, input bool) (wakeEvent, error) {
	fds := p.fds[:]
	if !input {
		fds = p.fds[1:]
	}
	p.ts = unix.NsecToTimespec(d)
	p.fds[0].Revents, p.fds[1].Revents = 0, 0
	if err := rawPpoll(fds, &p.ts); err != nil && err != unix.EINTR {
		return wakeEvent{}, err
	}
	r := p.fds[0].Revents
	return wakeEvent{
		input:  r != 0,
		failed: r&(unix.POLLERR|unix.POLLNVAL) != 0,
		stop:   p.fds[1].Revents != 0,
	}, nil
}
