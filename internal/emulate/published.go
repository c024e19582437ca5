package emulate

import (
	"sync/atomic"
	"time"
)

// published are the counters of one direction as readers see them, in
// every backend: NFQUEUE's queue, AF_PACKET's pipe and AF_XDP's lane each
// hold one. The direction's thread stores them after each loop iteration
// (store); readers load them (queueStats, for Stats and the stats file).
type published struct {
	received, receivedBytes, released, releasedBytes atomic.Uint64
	droppedLoss, late, batches, pending              atomic.Uint64
	stalled, lateOnArrival                           atomic.Uint64
	enobufs, verdictErrors, truncated                atomic.Uint64
	kernelTimestamps                                 atomic.Uint64
	maxLateness, lateDelay                           atomic.Int64
	realtime                                         atomic.Bool
}

// laneCounters are a backend's own counters beside the scheduler's, with
// the same meaning in every backend (zero where one has no such event).
type laneCounters struct {
	lateOnArrival, enobufs, verdictErrors, truncated, kernelTimestamps uint64
}

// store publishes the scheduler's counters and a backend's own.
func (p *published) store(s *scheduler, own laneCounters) {
	c := &s.c
	p.received.Store(c.Received)
	p.receivedBytes.Store(c.ReceivedBytes)
	p.released.Store(c.Released)
	p.releasedBytes.Store(c.ReleasedBytes)
	p.droppedLoss.Store(c.DroppedLoss)
	p.late.Store(c.Late)
	p.lateDelay.Store(c.LateDelay)
	p.stalled.Store(c.Stalled)
	p.lateOnArrival.Store(own.lateOnArrival)
	p.batches.Store(c.Batches)
	p.maxLateness.Store(c.MaxLateness)
	p.pending.Store(uint64(s.q.len()))
	p.enobufs.Store(own.enobufs)
	p.verdictErrors.Store(own.verdictErrors)
	p.truncated.Store(own.truncated)
	p.kernelTimestamps.Store(own.kernelTimestamps)
}

// queueStats are the published counters of a direction configured as cfg,
// with the lateness quantiles of its scheduler s; each backend adds the
// kernel's counters it has.
func (p *published) queueStats(cfg QueueConfig, s *scheduler) QueueStats {
	qs := QueueStats{
		Num:           cfg.Num,
		Delay:         cfg.Delay,
		Jitter:        cfg.Jitter,
		LossPercent:   cfg.LossPercent,
		Tolerance:     cfg.tolerance(),
		Received:      p.received.Load(),
		ReceivedBytes: p.receivedBytes.Load(),
		Released:      p.released.Load(),
		ReleasedBytes: p.releasedBytes.Load(),
		DroppedLoss:   p.droppedLoss.Load(),
		Pending:       p.pending.Load(),
		Batches:       p.batches.Load(),
		Late:          p.late.Load(),
		LateDelay:     time.Duration(p.lateDelay.Load()),
		LateOnArrival: p.lateOnArrival.Load(),
		Stalled:       p.stalled.Load(),
		MaxLateness:   time.Duration(p.maxLateness.Load()),
		ENOBUFS:       p.enobufs.Load(),
		VerdictErrors: p.verdictErrors.Load(),
		Truncated:     p.truncated.Load(),
		Realtime:      p.realtime.Load(),
		KernelStamped: p.kernelTimestamps.Load(),
	}
	qs.LatenessMedian, qs.LatenessP99, qs.LatenessSamples = s.res.quantiles()
	return qs
}
