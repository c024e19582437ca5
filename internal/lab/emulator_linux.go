package lab

import (
	"context"
	"path/filepath"

	"github.com/ovpnperf/ovpnperf/internal/emulate"
)

// runEmulator runs the userspace emulator for the lab's emulated directions
// until ctx ends. It runs in the owner process, inside the router namespace.
func runEmulator(ctx context.Context, p Path, statsPath string) error {
	var cfg emulate.Config
	for _, d := range []struct {
		num  uint16
		link Link
	}{{queueUp, p.Up}, {queueDown, p.Down}} {
		if !d.link.Emulated() {
			continue
		}
		cfg.Queues = append(cfg.Queues, emulate.QueueConfig{
			Num: d.num, Delay: d.link.Delay, Jitter: d.link.Jitter, LossPercent: d.link.LossPercent,
			MaxLen: queueLen(p, d.link), Tolerance: p.LateTolerance,
		})
	}
	// The owner process is the emulator's own: its other work is a timer
	// and the signal handler, so all of it may run real-time.
	return emulate.RunProcess(ctx, cfg, statsPath)
}

// queueLen sizes the kernel queue for a direction: everything in flight
// during the delay at the link's rate (or at 1 Gbit/s when unshaped) in
// full-size packets, doubled, with a floor of 4096 packets.
func queueLen(p Path, l Link) uint32 {
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
	return emulate.ReadStats(filepath.Join(l.Dir(), "stats.json"))
}
