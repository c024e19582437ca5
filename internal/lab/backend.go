package lab

import (
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Emulation backends, as State.Backend and host.emulation_backend name them.
const (
	BackendNone    = "none"    // no delay, jitter or loss configured
	BackendNetem   = "netem"   // the kernel's sch_netem
	BackendNFQueue = "nfqueue" // ovpnperf's userspace emulator behind iptables NFQUEUE
	// BackendAFPacket and BackendAFXDP are the userspace emulator as a
	// layer-2 bump in the wire on the client segment, in the lab's wire
	// namespace, on AF_PACKET or AF_XDP sockets (docs/emulator.md).
	BackendAFPacket = "afpacket"
	BackendAFXDP    = "afxdp"
)

// EmulatorAuto asks for this host's default backend: netem where the kernel
// has it, else nfqueue.
const EmulatorAuto = "auto"

// EmulatorNames are the values of Path.Emulator (and --emulator), in the
// order help texts list them.
var EmulatorNames = []string{EmulatorAuto, BackendNFQueue, BackendNetem, BackendAFPacket, BackendAFXDP}

// CheckEmulatorName refuses a Path.Emulator that names no backend; "" is
// auto. Whether this host has the backend is EmulationChoice's question.
func CheckEmulatorName(name string) error {
	if name == "" {
		return nil
	}
	for _, n := range EmulatorNames {
		if name == n {
			return nil
		}
	}
	return usage.Errorf("--emulator %q: want one of %s", name, strings.Join(EmulatorNames, ", "))
}

// UserspaceBackend reports whether backend is ovpnperf's own emulator, which
// runs in the lab's owner and writes counters (Lab.Stats) that judge a
// sample.
func UserspaceBackend(backend string) bool {
	return backend == BackendNFQueue || WireBackend(backend)
}

// WireBackend reports whether backend is a bump in the wire, which gives the
// lab its wire namespace.
func WireBackend(backend string) bool {
	return backend == BackendAFPacket || backend == BackendAFXDP
}
