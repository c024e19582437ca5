package runner

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// StartTicks returns a process's start time in clock ticks since boot (field
// 22 of /proc/PID/stat). Together with the pid it names one process for good:
// a recycled pid has another start time, so labs and clusters record both and
// never signal a process they did not start.
func StartTicks(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Alive reports whether the process pid with this start time (0: any) still
// runs; a zombie counts as gone.
func Alive(pid int, ticks uint64) bool {
	if pid <= 0 {
		return false
	}
	f, err := statFields(pid)
	if err != nil || len(f) < 20 {
		return false
	}
	if ticks != 0 {
		if t, err := strconv.ParseUint(f[19], 10, 64); err != nil || t != ticks {
			return false
		}
	}
	return f[0] != "Z"
}

// statFields returns the fields of /proc/PID/stat after the command name,
// which may itself contain spaces and parentheses: they start behind the
// last ')'.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return strings.Fields(s[i+1:]), nil
}
