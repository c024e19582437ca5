// Package hostinfo reads the facts about this machine that documents and
// judgements name: the kernel release and architecture, what
// /proc/cpuinfo says about the processors, and the load average. Each is
// read in this one place. Host is the machine as documents describe it.
package hostinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// Kernel returns the running kernel's release (uname -r) and machine
// architecture (uname -m).
func Kernel() (release, arch string, err error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:]), nil
}

// KernelRelease is Kernel's release, "" when uname fails.
func KernelRelease() string {
	r, _, _ := Kernel()
	return r
}

// CPU is what /proc/cpuinfo says: the processors it lists, and the model
// and flags of the first.
type CPU struct {
	// Model is the first "model name" (x86), else the "Hardware" line
	// (some arm boards).
	Model string
	// Count is the number of "processor" entries.
	Count int
	// Flags are the first processor's "flags" (x86) or "Features"
	// (arm64).
	Flags map[string]bool
}

// AES reports whether the first processor lists the aes flag (AES-NI on
// x86, the ARMv8 crypto extension on arm64).
func (c CPU) AES() bool { return c.Flags["aes"] }

// ReadCPU reads /proc/cpuinfo.
func ReadCPU() (CPU, error) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return CPU{Flags: map[string]bool{}}, err
	}
	return ParseCPUInfo(b), nil
}

// ParseCPUInfo parses the text of /proc/cpuinfo.
func ParseCPUInfo(b []byte) CPU {
	c := CPU{Flags: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	flagsSeen := false
	var hardware string
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "processor":
			c.Count++
		case "model name":
			if c.Model == "" {
				c.Model = val
			}
		case "Hardware":
			hardware = val
		case "flags", "Features":
			if !flagsSeen {
				flagsSeen = true
				for _, f := range strings.Fields(val) {
					c.Flags[f] = true
				}
			}
		}
	}
	if c.Model == "" {
		c.Model = hardware
	}
	return c
}

// LoadAvg returns the 1, 5 and 15 minute load averages of /proc/loadavg.
func LoadAvg() ([3]float64, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return [3]float64{}, err
	}
	l, err := fs.LoadAvg()
	if err != nil {
		return [3]float64{}, err
	}
	return [3]float64{l.Load1, l.Load5, l.Load15}, nil
}

// CPUCount is the number of processors /proc/cpuinfo lists, as documents'
// host.cpus has it; 0 when it cannot be read.
func CPUCount() int {
	c, _ := ReadCPU()
	return c.Count
}
