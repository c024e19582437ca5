package measure

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/emulate/ceilingdoc"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// HostInfo describes the machine a report was measured on: enough to tell
// whether two reports can be compared.
type HostInfo struct {
	// Kernel is the running kernel's release (uname -r).
	Kernel string `json:"kernel"`
	// Arch is the machine (uname -m).
	Arch     string `json:"arch"`
	CPUModel string `json:"cpu_model"`
	// CPUs is the number of online processors the kernel lists.
	CPUs int `json:"cpus"`
	// AESNI is true when the CPU has AES instructions (x86 "aes" flag,
	// arm64 "aes" feature), which decides the cost of AES-GCM and -CBC.
	AESNI bool `json:"aes_ni"`
	// OpenVPNVersion and Iperf3Version are the first lines of
	// `openvpn --version` and `iperf3 --version`, empty when not installed,
	// "unknown (…)" when the program did not answer within a few seconds.
	OpenVPNVersion string `json:"openvpn_version"`
	Iperf3Version  string `json:"iperf3_version"`
	// EmulationBackend is how the lab emulated delay and loss ("netem",
	// "nfqueue", or "none"); set by the caller, which knows.
	EmulationBackend string `json:"emulation_backend"`
	// EmulationBackendWhy says why the lab used that backend: asked for
	// (--emulator), or what auto found on this host.
	EmulationBackendWhy string `json:"emulation_backend_why,omitempty"`
	// EmulationCeiling is what this host's `lab calibrate` record says
	// about that backend's ceiling (measured, stale or not measured);
	// absent without emulation. Set by the caller with the backend.
	EmulationCeiling *ceilingdoc.Report `json:"emulation_ceiling,omitempty"`
}

// CollectHost reads the kernel, CPU and program versions of this machine.
// A program that is not installed leaves its version empty; only an
// unreadable /proc/cpuinfo or failing uname is an error.
func CollectHost(ctx context.Context) (HostInfo, error) {
	var h HostInfo
	var err error
	if h.Kernel, h.Arch, err = hostinfo.Kernel(); err != nil {
		return h, err
	}
	cpu, err := hostinfo.ReadCPU()
	if err != nil {
		return h, err
	}
	h.CPUModel, h.CPUs, h.AESNI = cpu.Model, cpu.Count, cpu.AES()
	if h.CPUs == 0 {
		h.CPUs = runtime.NumCPU()
	}
	// Both asked at once: two programs that hang cost one time limit.
	iperf3 := make(chan string, 1)
	go func() { iperf3 <- firstLineOf(ctx, "iperf3", "--version") }()
	h.OpenVPNVersion = firstLineOf(ctx, "openvpn", "--version")
	h.Iperf3Version = <-iperf3
	return h, nil
}

// firstLineOf runs argv and returns the first line of its output, or ""
// if the program is missing or prints nothing, or says it is unknown when
// the program does not answer within runner.VersionTimeout. openvpn
// --version exits with status 1 on some releases, so the status is not
// looked at.
func firstLineOf(ctx context.Context, argv ...string) string {
	if runner.Require(argv[0]) != nil {
		return ""
	}
	out, err := runner.RunBounded(ctx, runner.VersionTimeout, argv...)
	var te *runner.TimeoutError
	if errors.As(err, &te) {
		return fmt.Sprintf("unknown (`%s` did not answer within %v)", strings.Join(argv, " "), te.Limit)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// String is the one-line host description printed above tables.
func (h HostInfo) String() string {
	aes := "no AES-NI"
	if h.AESNI {
		aes = "AES-NI"
	}
	s := fmt.Sprintf("%s, %d CPUs, %s; %s", orUnknown(h.CPUModel), h.CPUs, aes,
		strings.Join(strings.Fields("Linux "+h.Kernel+" "+h.Arch), " "))
	if h.OpenVPNVersion != "" {
		f := strings.Fields(h.OpenVPNVersion)
		if len(f) >= 2 {
			s += "; OpenVPN " + f[1]
		}
	}
	if h.Iperf3Version != "" {
		f := strings.Fields(h.Iperf3Version)
		if len(f) >= 2 {
			s += "; iperf3 " + f[1]
		}
	}
	if h.EmulationBackend != "" {
		s += "; emulation " + h.EmulationBackend
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown CPU"
	}
	return s
}
