// Package cpuacct accounts the CPU time that processes (openvpn, iperf3)
// spend during a measurement, so that throughput can be set against its
// cost: CPU-seconds per GB moved. On a 2-core machine where the client,
// the server and the emulator share the cores, Mbit/s alone says little;
// CPU-seconds per GB says what each side paid for it.
//
// Running processes are read from /proc/<pid>/stat (utime, stime, and the
// cutime/cstime of children they have waited for) before and after:
//
//	a, _ := cpuacct.Snapshot(serverPid, clientPid)
//	… measure …
//	b, _ := cpuacct.Snapshot(serverPid, clientPid)
//	secs, _ := cpuacct.Delta(a, b)            // CPU-seconds per pid
//	perGB := cpuacct.PerGB(secs[serverPid], bytesMoved)
//
// A process that has exited and been waited for (an iperf3 client) has no
// /proc entry left; ExitedSeconds reads its rusage from os.ProcessState.
// Work the kernel does outside any process's account (softirq packet
// processing, DCO crypto) shows only in the machine-wide figures of
// ReadSystem and SystemDelta.
//
// Programs started with `ip netns exec NS PROG` keep the pid of the started
// command: ip switches namespace and then execs PROG without forking, so
// cmd.Process.Pid is openvpn's (or iperf3's) own pid. TestNetnsExecOpenVPN
// and TestNetnsExecKeepsPid check this against the installed iproute2.
package cpuacct

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// atClkTck is AT_CLKTCK in the ELF auxiliary vector: the kernel's USER_HZ,
// which is where glibc's sysconf(_SC_CLK_TCK) reads it from.
const atClkTck = 17

var clockTicks = sync.OnceValue(func() int64 {
	if auxv, err := unix.Auxv(); err == nil {
		for _, kv := range auxv {
			if kv[0] == atClkTck && kv[1] > 0 {
				return int64(kv[1])
			}
		}
	}
	// USER_HZ is 100 on every Linux architecture Go supports.
	return 100
})

// ClockTicks returns the unit of the times in /proc/<pid>/stat, in ticks
// per second (sysconf(_SC_CLK_TCK), 100 on Linux).
func ClockTicks() int64 { return clockTicks() }

func ticks(n uint64) time.Duration {
	hz := uint64(ClockTicks())
	return time.Duration(n/hz)*time.Second + time.Duration(n%hz)*time.Second/time.Duration(hz)
}

// Times is one process's CPU account at one moment.
type Times struct {
	Pid  int
	Comm string
	// State is the process state letter (stat field 3): R, S, D, Z …
	State byte
	// StartTicks is the process start time since boot (stat field 22),
	// which tells a reused pid from the original process.
	StartTicks uint64
	// User and System are the process's own times, all threads summed.
	User, System time.Duration
	// ChildUser and ChildSystem are the times of children the process has
	// waited for (scripts openvpn runs, for example).
	ChildUser, ChildSystem time.Duration
}

// Total is the process's own CPU time.
func (t Times) Total() time.Duration { return t.User + t.System }

// TotalWithChildren adds the waited-for children's time.
func (t Times) TotalWithChildren() time.Duration {
	return t.User + t.System + t.ChildUser + t.ChildSystem
}

// ErrGone says a process has exited (or its pid was reused) between two
// samples, so its CPU time over the interval is unknown.
var ErrGone = errors.New("process gone")

// Read returns the CPU account of one process.
func Read(pid int) (Times, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Times{}, fmt.Errorf("reading CPU time of pid %d: %w", pid, ErrGone)
		}
		return Times{}, fmt.Errorf("reading CPU time of pid %d: %w", pid, err)
	}
	t, err := ParseStat(b)
	if err != nil {
		return Times{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return t, nil
}

// ParseStat parses the contents of /proc/<pid>/stat (proc(5)).
func ParseStat(b []byte) (Times, error) {
	// "PID (COMM) S PPID …": COMM may hold spaces and parentheses, so the
	// fields start after the last ')'.
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 1 || closing < open {
		return Times{}, errors.New("no (comm) field")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Times{}, fmt.Errorf("pid: %w", err)
	}
	f := bytes.Fields(b[closing+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	const (
		utime     = 14 - 3
		stime     = 15 - 3
		cutime    = 16 - 3
		cstime    = 17 - 3
		starttime = 22 - 3
	)
	if len(f) <= starttime {
		return Times{}, fmt.Errorf("%d fields, want at least 22", len(f)+2)
	}
	var v [5]uint64
	for i, idx := range []int{utime, stime, cutime, cstime, starttime} {
		// cutime and cstime are signed in the kernel's format but never
		// negative in practice.
		n, err := strconv.ParseUint(string(f[idx]), 10, 64)
		if err != nil {
			return Times{}, fmt.Errorf("field %d: %w", idx+3, err)
		}
		v[i] = n
	}
	return Times{
		Pid:         pid,
		Comm:        string(b[open+1 : closing]),
		State:       f[0][0],
		User:        ticks(v[0]),
		System:      ticks(v[1]),
		ChildUser:   ticks(v[2]),
		ChildSystem: ticks(v[3]),
		StartTicks:  v[4],
	}, nil
}

// Sample is the CPU account of several processes at one moment.
type Sample struct {
	Taken time.Time
	Procs map[int]Times
}

// Snapshot reads the CPU account of each pid. It fails if any is gone.
func Snapshot(pids ...int) (Sample, error) {
	s := Sample{Taken: time.Now(), Procs: make(map[int]Times, len(pids))}
	for _, pid := range pids {
		t, err := Read(pid)
		if err != nil {
			return Sample{}, err
		}
		s.Procs[pid] = t
	}
	return s, nil
}

// Delta returns the CPU-seconds (own plus waited-for children, user plus
// system) each process of a spent until b. A pid missing from b, or reused
// by another process in between, is an error wrapping ErrGone.
func Delta(a, b Sample) (map[int]float64, error) {
	out := make(map[int]float64, len(a.Procs))
	for pid, ta := range a.Procs {
		tb, ok := b.Procs[pid]
		if !ok {
			return nil, fmt.Errorf("pid %d (%s) not in the later sample: %w", pid, ta.Comm, ErrGone)
		}
		if tb.StartTicks != ta.StartTicks {
			return nil, fmt.Errorf("pid %d (%s) was replaced by %s: %w", pid, ta.Comm, tb.Comm, ErrGone)
		}
		d := tb.TotalWithChildren() - ta.TotalWithChildren()
		if d < 0 {
			return nil, fmt.Errorf("pid %d (%s): CPU time went backwards (samples swapped?)", pid, ta.Comm)
		}
		out[pid] = d.Seconds()
	}
	return out, nil
}

// ExitedSeconds returns the CPU-seconds (user plus system) of a process
// that has been waited for, including its own waited-for children: the
// rusage wait4 returned. Use it for programs that exit at the end of a
// measurement, such as an iperf3 client.
func ExitedSeconds(ps *os.ProcessState) float64 {
	if ps == nil {
		return 0
	}
	return (ps.UserTime() + ps.SystemTime()).Seconds()
}

// PerGB returns CPU-seconds per gigabyte (10^9 bytes) moved. Nothing moved
// gives 0, which callers must not report as a cost: a measurement that
// moved no bytes is invalid anyway.
func PerGB(cpuSeconds float64, bytes uint64) float64 {
	if bytes == 0 {
		return 0
	}
	return cpuSeconds / (float64(bytes) / 1e9)
}
