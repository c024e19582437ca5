package cryptobench

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPUTime reads the CPU time (user + system) a process has used so
// far, in nanoseconds, from its POSIX CPU clock. Unlike times(2), which
// openssl speed uses and which counts in 10 ms ticks, the clock includes
// the time of the current slice, so that a 0.1 s measurement is not off by
// up to a tenth.
func processCPUTime(pid int) (time.Duration, error) {
	// Equivalent to clock_getcpuclockid(pid) in glibc:
	// MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) = (~pid << 3) | 2.
	clock := int32((^pid)<<3 | 2)
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}
