package hostinfo

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/emulate/ceilingdoc"
)

// Host describes the machine a report was measured on: enough to tell
// whether two reports can be compared.
type Host struct {
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

// String is the one-line host description printed above tables.
func (h Host) String() string {
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
