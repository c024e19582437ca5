package runner

import "github.com/ovpnperf/ovpnperf/internal/cpuacct"

// StartTicks returns a process's start time in clock ticks since boot (field
// 22 of /proc/PID/stat). Together with the pid it names one process for good:
// a recycled pid has another start time, so labs and clusters record both and
// never signal a process they did not start.
func StartTicks(pid int) (uint64, error) {
	t, err := cpuacct.Read(pid)
	return t.StartTicks, err
}

// Alive reports whether the process pid with this start time (0: any) still
// runs; a zombie counts as gone.
func Alive(pid int, ticks uint64) bool {
	if pid <= 0 {
		return false
	}
	t, err := cpuacct.Read(pid)
	return err == nil && (ticks == 0 || t.StartTicks == ticks) && t.State != 'Z'
}
