package cpuacct

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// SystemTimes is the machine's CPU account from the first line of
// /proc/stat, summed over all CPUs.
//
// Per-process times miss work the kernel does outside any process's
// account: softirq processing of packets (forwarding in the router
// namespace, tun and UDP receive), much of which lands on ksoftirqd or on
// whatever process was interrupted, and in-kernel crypto with OpenVPN's
// data channel offload (DCO), which openvpn's own utime/stime never see.
// The system-wide figure catches all of it, and also everything else the
// machine runs: read it on an otherwise idle machine.
type SystemTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal time.Duration
}

// Busy is the CPU time spent on anything but idling and waiting for I/O.
// (Guest time is already part of User.)
func (t SystemTimes) Busy() time.Duration {
	return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal
}

// Total is all the CPU time the account covers, idle included.
func (t SystemTimes) Total() time.Duration { return t.Busy() + t.Idle + t.IOWait }

// BusyShareSince is the share (0–1) of the CPU time between a and t that
// was busy; steal counts as busy (those cycles were not ours to use), and 0
// when no time passed.
func (t SystemTimes) BusyShareSince(a SystemTimes) float64 {
	total := t.Total() - a.Total()
	if total <= 0 {
		return 0
	}
	return float64(t.Busy()-a.Busy()) / float64(total)
}

// StealShareSince is the share (0–1) of the CPU time between a and t that
// the hypervisor gave to others (steal): time this machine's vCPUs did not
// run at all, 0 on bare metal and when no time passed.
func (t SystemTimes) StealShareSince(a SystemTimes) float64 {
	total := t.Total() - a.Total()
	if total <= 0 {
		return 0
	}
	return float64(t.Steal-a.Steal) / float64(total)
}

// ReadSystem reads /proc/stat.
func ReadSystem() (SystemTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return SystemTimes{}, err
	}
	return ParseProcStat(b)
}

// ParseProcStat parses the aggregate "cpu" line of /proc/stat (proc(5)):
// "cpu  user nice system idle iowait irq softirq steal guest guest_nice",
// in clock ticks.
func ParseProcStat(b []byte) (SystemTimes, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return SystemTimes{}, fmt.Errorf("/proc/stat cpu line has %d fields, want at least 9", len(f))
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return SystemTimes{}, fmt.Errorf("/proc/stat cpu field %d: %w", i+1, err)
			}
			v[i] = n
		}
		return SystemTimes{
			User: ticks(v[0]), Nice: ticks(v[1]), System: ticks(v[2]), Idle: ticks(v[3]),
			IOWait: ticks(v[4]), IRQ: ticks(v[5]), SoftIRQ: ticks(v[6]), Steal: ticks(v[7]),
		}, nil
	}
	return SystemTimes{}, errors.New("/proc/stat has no aggregate cpu line")
}

// SystemDelta returns the machine's busy CPU-seconds and the softirq part
// of it between two readings.
func SystemDelta(a, b SystemTimes) (busySeconds, softirqSeconds float64) {
	return (b.Busy() - a.Busy()).Seconds(), (b.SoftIRQ - a.SoftIRQ).Seconds()
}
