package lab

import "github.com/ovpnperf/ovpnperf/internal/lab/labpath"

// Emulation backends and the values of Path.Emulator (labpath).
const (
	BackendNone     = labpath.BackendNone
	BackendNetem    = labpath.BackendNetem
	BackendNFQueue  = labpath.BackendNFQueue
	BackendAFPacket = labpath.BackendAFPacket
	BackendAFXDP    = labpath.BackendAFXDP
	EmulatorAuto    = labpath.EmulatorAuto
)

// EmulatorNames are the values of Path.Emulator (and --emulator), in the
// order help texts list them; the slice is the caller's own.
func EmulatorNames() []string { return labpath.EmulatorNames() }

// CheckEmulatorName refuses a Path.Emulator that names no backend.
func CheckEmulatorName(name string) error { return labpath.CheckEmulatorName(name) }

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
