package lab

import "github.com/ovpnperf/ovpnperf/internal/lab/labpath"

// UserspaceBackend reports whether backend is ovpnperf's own emulator, which
// runs in the lab's owner and writes counters (Lab.Stats) that judge a
// sample.
func UserspaceBackend(backend string) bool {
	return backend == labpath.BackendNFQueue || WireBackend(backend)
}

// WireBackend reports whether backend is a bump in the wire, which gives the
// lab its wire namespace.
func WireBackend(backend string) bool {
	return backend == labpath.BackendAFPacket || backend == labpath.BackendAFXDP
}
