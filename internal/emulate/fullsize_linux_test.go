package emulate

import (
	"slices"
	"testing"
	"time"
)

// TestFullSizeBothWays sends full-size UDP datagrams of one flow each way
// at 20 000 packets a second, fast enough that releases come closer
// together than releaseGap and the queue threads release them in groups:
// up with delay and jitter, down with delay and loss. Up, every packet
// must arrive, in order, none earlier than delay − jitter, with the
// jitter visible in the delays. Down, about the configured share must be lost,
// each packet decided alone (one queue message per packet), and what
// arrives in order. Neither direction may lose a packet in the kernel.
// The bounds are generous: the machine is shared.
func TestFullSizeBothWays(t *testing.T) {
	n := newTestNet(t)
	const (
		delay  = 10 * time.Millisecond
		jitter = 3 * time.Millisecond
		loss   = 10.0
		count  = 20000
		rate   = 20000 // per second and direction: 1 s each
	)
	// Its own process, as in the lab: the senders here would otherwise
	// share its Go runtime.
	stop := startEmulatorProcess(t, n.R, Config{Queues: []QueueConfig{
		{Num: queueUp, Delay: delay, Jitter: jitter, Seed: 1},
		{Num: queueDown, Delay: delay, LossPercent: loss, Seed: 2},
	}}).stop
	var down FlowResult
	var derr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		down, derr = SendFlow(benchFlow(n.B, n.A, testAddrA, rate, count, fullSizePayload))
	}()
	up, err := SendFlow(benchFlow(n.A, n.B, testAddrB, rate, count, fullSizePayload))
	<-done
	if err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	st := stop()
	qu, qd := st.Queues[0], st.Queues[1]
	t.Logf("up: %d sent, %d received, %d releases in %d verdicts, lateness p99 %v max %v; down: %d sent, %d received, %d dropped on purpose",
		up.Sent, up.Received, qu.Released, qu.Batches, qu.LatenessP99, qu.MaxLateness, down.Sent, down.Received, qd.DroppedLoss)

	// Up: everything, in order, delayed by delay ± jitter.
	if up.Received != up.Sent || up.RcvbufDrops != 0 {
		t.Errorf("up: %d of %d received (receiver dropped %d) on a path without loss", up.Received, up.Sent, up.RcvbufDrops)
	}
	if up.Reordered != 0 {
		t.Errorf("up: %d packets reordered within one flow", up.Reordered)
	}
	d := slices.Clone(up.Delays)
	slices.Sort(d)
	// The send stamp is taken before a packet leaves, so a measured delay
	// can only be longer than the emulator's.
	if len(d) == 0 || d[0] < delay-jitter {
		t.Fatalf("up: shortest one-way delay %v is below %v − %v", quantile(d, 0), delay, jitter)
	}
	// Order is kept, so at this rate a packet mostly waits as long as the
	// longest-delayed one before it: the median lies towards delay +
	// jitter, well above delay (it would be near delay without jitter).
	// The upper bound leaves room for a shared machine's wake-ups.
	if med := quantile(d, 0.5); med < delay+jitter/2 || med > delay+jitter+5*time.Millisecond {
		t.Errorf("up: median one-way delay %v: want between %v and %v + 5ms with %v ± %v kept in order", med, delay+jitter/2, delay+jitter, delay, jitter)
	}

	// Down: loss per packet, what arrives in order.
	if qd.Received != uint64(down.Sent) {
		t.Errorf("down: %d queue messages for %d packets: with loss every packet must be its own", qd.Received, down.Sent)
	}
	lost := 100 * float64(down.Sent-down.Received) / float64(down.Sent)
	if lost < loss-2 || lost > loss+2 || down.RcvbufDrops != 0 {
		t.Errorf("down: %.2f %% lost (receiver dropped %d), configured %v %%", lost, down.RcvbufDrops, loss)
	}
	if qd.DroppedLoss != uint64(down.Sent-down.Received) {
		t.Errorf("down: emulator dropped %d on purpose, %d missing at the receiver", qd.DroppedLoss, down.Sent-down.Received)
	}
	if down.Reordered != 0 {
		t.Errorf("down: %d packets reordered within one flow", down.Reordered)
	}
	for _, q := range st.Queues {
		if q.KernelQueueDrops+q.KernelUserDropped+q.ENOBUFS+q.Truncated+q.VerdictErrors != 0 {
			t.Errorf("queue %d: kernel drops %d/%d, enobufs %d, truncated %d, verdict errors %d", q.Num, q.KernelQueueDrops, q.KernelUserDropped, q.ENOBUFS, q.Truncated, q.VerdictErrors)
		}
	}
}
