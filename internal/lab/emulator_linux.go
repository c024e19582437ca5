package lab

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ovpnperf/ovpnperf/internal/emulate"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/netns"
)

// emulatorConfig is the userspace emulator of a lab of path p and backend:
// one queue per emulated direction behind NFQUEUE, or both directions of
// the wire (a direction with nothing to emulate crosses it undelayed).
func emulatorConfig(p labpath.Path, backend string) emulate.Config {
	var cfg emulate.Config
	for _, d := range []struct {
		num  uint16
		link labpath.Link
	}{{queueUp, p.Up}, {queueDown, p.Down}} {
		if !d.link.Emulated() && !WireBackend(backend) {
			continue
		}
		cfg.Queues = append(cfg.Queues, emulate.QueueConfig{
			Num: d.num, Delay: d.link.Delay, Jitter: d.link.Jitter, LossPercent: d.link.LossPercent,
			MaxLen: queueLen(p, d.link), Tolerance: p.LateTolerance,
		})
	}
	// Port A is the client's side: queue 0, up, is what the client sends.
	switch backend {
	case labpath.BackendAFPacket:
		cfg.AFPacket = &emulate.AFPacketConfig{PortA: wireClientIf, PortB: wireRouterIf}
	case labpath.BackendAFXDP:
		cfg.XDP = &emulate.XDPConfig{PortA: wireClientIf, PortB: wireRouterIf}
	}
	return cfg
}

// openEmulator opens the lab's userspace emulator: the NFQUEUE queues in
// the owner's own namespace (the router's), a wire backend's sockets in
// the lab's wire namespace, where they stay.
func openEmulator(name string, p labpath.Path, backend string) (*emulate.Emulator, error) {
	cfg := emulatorConfig(p, backend)
	if !WireBackend(backend) {
		return emulate.Open(cfg)
	}
	var e *emulate.Emulator
	err := netns.Do(NamespaceName(name, Wire), func() error {
		var err error
		e, err = emulate.Open(cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s emulator in %s: %w", backend, NamespaceName(name, Wire), err)
	}
	return e, nil
}

// runEmulator runs the lab's userspace emulator until ctx ends. It runs in
// the owner process, inside the router namespace. The owner process is the
// emulator's own: its other work is a timer and the signal handler, so all
// of it may run real-time (Emulator.RunProcess).
func runEmulator(ctx context.Context, e *emulate.Emulator, statsPath string) error {
	return e.RunProcess(ctx, statsPath)
}

// queueLen sizes the kernel queue for a direction: everything in flight
// during the delay at the link's rate (or at 1 Gbit/s when unshaped) in
// full-size packets, doubled, with a floor of 4096 packets.
func queueLen(p labpath.Path, l labpath.Link) uint32 {
	rate := l.RateBitsPerSec
	if rate == 0 {
		rate = 1e9
	}
	n := uint64(float64(rate)/8/1500*(l.Delay+l.Jitter).Seconds()) * 2
	if n < 4096 {
		n = 4096
	}
	return uint32(n)
}

// Stats returns the userspace emulator's counters for this lab. Labs that
// use netem or no emulation have none; Backend says which.
func (l *Lab) Stats() (emulate.Stats, error) {
	path := filepath.Join(l.Dir(), "stats.json")
	b, err := inputfile.ReadFile(context.Background(), path, statsKind)
	if err != nil {
		return emulate.Stats{}, fmt.Errorf("reading emulator stats %s: %s", path, inputfile.Reason(err))
	}
	return emulate.ParseStats(path, b)
}
