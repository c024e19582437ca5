package emulate

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/netns"
)

// parsePing reads the summary of iputils ping -q.
func parsePing(out string) (pingResult, error) {
	var r pingResult
	found := false
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "packets transmitted") {
			if _, err := fmt.Sscanf(line, "%d packets transmitted, %d received", &r.sent, &r.received); err != nil {
				return r, fmt.Errorf("ping summary %q: %w", line, err)
			}
			found = true
		}
		if rest, ok := strings.CutPrefix(line, "rtt min/avg/max/mdev = "); ok {
			f := strings.Split(strings.TrimSuffix(rest, " ms"), "/")
			if len(f) != 4 {
				return r, fmt.Errorf("ping rtt line %q", line)
			}
			var v [3]time.Duration
			for i := range v {
				ms, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					return r, fmt.Errorf("ping rtt line %q: %w", line, err)
				}
				v[i] = time.Duration(ms * float64(time.Millisecond))
			}
			r.min, r.avg, r.max = v[0], v[1], v[2]
		}
	}
	if !found {
		return r, fmt.Errorf("no ping summary")
	}
	return r, nil
}

func TestParsePing(t *testing.T) {
	// Captured from iputils-ping 20221126 (Debian 12).
	out := "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.\n\n--- 127.0.0.1 ping statistics ---\n" +
		"3 packets transmitted, 3 received, 0% packet loss, time 39ms\n" +
		"rtt min/avg/max/mdev = 0.012/0.020/0.025/0.005 ms\n"
	r, err := parsePing(out)
	if err != nil {
		t.Fatal(err)
	}
	want := pingResult{sent: 3, received: 3, min: 12 * time.Microsecond, avg: 20 * time.Microsecond, max: 25 * time.Microsecond}
	if r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	if _, err := parsePing("ping: connect: Network is unreachable\n"); err == nil {
		t.Error("no error for output without summary")
	}
}

// TestDelayRoundTrip pings across the emulated path with 25 ms each way:
// every round trip must take at least the 50 ms set, and not much more.
func TestDelayRoundTrip(t *testing.T) {
	n := newTestNet(t)
	_, statsPath := n.startEmulator(t, Config{Queues: []QueueConfig{
		{Num: queueUp, Delay: 25 * time.Millisecond},
		{Num: queueDown, Delay: 25 * time.Millisecond},
	}})
	r := ping(t, n.A, testAddrB, "-c", "20", "-i", "0.02", "-W", "2")
	if r.received != r.sent {
		t.Errorf("lost %d of %d pings on a path without loss", r.sent-r.received, r.sent)
	}
	// Lower bound is strict: the emulator never releases early. The upper
	// bound is generous: the machine is shared.
	if r.min < 50*time.Millisecond {
		t.Errorf("min RTT %v is below the 50 ms set", r.min)
	}
	if r.avg > 80*time.Millisecond {
		t.Errorf("average RTT %v is far above the 50 ms set", r.avg)
	}
	t.Logf("RTT min/avg/max %v/%v/%v", r.min, r.avg, r.max)
	time.Sleep(2 * StatsInterval)
	s, err := readStats(statsPath)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Running || s.Backend != Backend || len(s.Queues) != 2 {
		t.Fatalf("stats: %+v", s)
	}
	for _, q := range s.Queues {
		if q.Received != uint64(r.sent) && q.Num == queueUp {
			t.Errorf("queue %d received %d packets, ping sent %d", q.Num, q.Received, r.sent)
		}
		if q.Released != q.Received || q.DroppedLoss != 0 || q.Pending != 0 {
			t.Errorf("queue %d: received %d released %d dropped %d pending %d", q.Num, q.Received, q.Released, q.DroppedLoss, q.Pending)
		}
		// Every released packet's lateness counted, once, when its
		// verdict was written.
		if q.LatenessSamples != int(min(q.Released, reservoirSize)) {
			t.Errorf("queue %d: %d lateness samples for %d released packets", q.Num, q.LatenessSamples, q.Released)
		}
		// ping -s 56: 84 bytes from the IP header on.
		if q.Received > 0 && q.ReceivedBytes != 84*q.Received {
			t.Errorf("queue %d: %d bytes for %d packets, want 84 each", q.Num, q.ReceivedBytes, q.Received)
		}
		if !q.KernelRead {
			t.Errorf("queue %d: kernel counters not read", q.Num)
		}
		// The emulator turns kernel receive stamps on; the delay then
		// counts from the router's receive time.
		if q.KernelStamped == 0 {
			t.Errorf("queue %d: no packet carried a kernel receive stamp", q.Num)
		}
		t.Logf("queue %d: lateness median %v p99 %v max %v, late %d, behind %v, %d of %d kernel-stamped", q.Num, q.LatenessMedian, q.LatenessP99, q.MaxLateness, q.Late, q.Behind, q.KernelStamped, q.Received)
	}
}

// TestIPv6 sends pings over IPv6 through the same queues (ip6tables rules
// name the same queue numbers).
func TestIPv6(t *testing.T) {
	n := newTestNet(t)
	e, _ := n.startEmulator(t, Config{Queues: []QueueConfig{
		{Num: queueUp, Delay: 10 * time.Millisecond},
		{Num: queueDown, Delay: 10 * time.Millisecond},
	}})
	r := ping(t, n.A, testAddrB6, "-6", "-c", "10", "-i", "0.01", "-W", "2")
	if r.received != r.sent || r.min < 20*time.Millisecond {
		t.Errorf("ping over IPv6: %+v, want all back after at least 20 ms", r)
	}
	up := e.Stats().Queues[0]
	// ping -s 56 over IPv6: 40 + 8 + 56 = 104 bytes.
	if up.Received < uint64(r.sent) || up.ReceivedBytes%104 != 0 {
		t.Errorf("up queue saw %d packets, %d bytes; want %d packets of 104 bytes", up.Received, up.ReceivedBytes, r.sent)
	}
}

// TestLoss sends pings through a 10 % loss on the way up. With 400 pings
// the number lost is binomial(400, 0.1): mean 40, sd 6; accepting 16–70 is
// beyond four standard deviations either side.
func TestLoss(t *testing.T) {
	n := newTestNet(t)
	e, _ := n.startEmulator(t, Config{Queues: []QueueConfig{
		{Num: queueUp, LossPercent: 10},
		{Num: queueDown},
	}})
	r := ping(t, n.A, testAddrB, "-c", "400", "-i", "0.002", "-W", "1")
	lost := r.sent - r.received
	if lost < 16 || lost > 70 {
		t.Errorf("lost %d of %d pings, want about 10%%", lost, r.sent)
	}
	// Wait for the counters of the last packets to be published.
	var up QueueStats
	for range 50 {
		up = e.Stats().Queues[0]
		if up.Received >= uint64(r.sent) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if up.DroppedLoss != uint64(lost) {
		t.Errorf("emulator dropped %d, ping lost %d", up.DroppedLoss, lost)
	}
	if up.Released+up.DroppedLoss != up.Received {
		t.Errorf("received %d = released %d + dropped %d does not hold", up.Received, up.Released, up.DroppedLoss)
	}
	t.Logf("lost %d of %d (%.1f%%)", lost, r.sent, 100*float64(lost)/float64(r.sent))
}

// TestNoListenerDrops checks the safety property the lab relies on: with
// the emulator gone, queued traffic is dropped, not passed undelayed.
func TestNoListenerDrops(t *testing.T) {
	n := newTestNet(t)
	r := ping(t, n.A, testAddrB, "-c", "3", "-i", "0.05", "-W", "1")
	if r.received != 0 {
		t.Errorf("%d pings crossed without an emulator", r.received)
	}
}

// TestQueueBusy binds the same queue twice in one namespace: the second
// Open must fail and say why.
func TestQueueBusy(t *testing.T) {
	n := newTestNet(t)
	n.startEmulator(t, Config{Queues: []QueueConfig{{Num: queueUp}}})
	err := netns.Do(n.R, func() error {
		e, err := Open(Config{Queues: []QueueConfig{{Num: queueUp}}})
		if err == nil {
			e.Close()
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "already bound") {
		t.Errorf("second bind: %v, want an 'already bound' error", err)
	}
}

// TestJitterKeepsOrder runs a fast ping stream through 20 ms ± 15 ms of
// jitter. The queue never reorders, so no release may find its packet gone
// (a verdict error) and every packet must come back.
func TestJitterKeepsOrder(t *testing.T) {
	n := newTestNet(t)
	e, _ := n.startEmulator(t, Config{Queues: []QueueConfig{
		{Num: queueUp, Delay: 20 * time.Millisecond, Jitter: 15 * time.Millisecond},
		{Num: queueDown},
	}})
	r := ping(t, n.A, testAddrB, "-c", "200", "-i", "0.002", "-W", "2")
	if r.received != r.sent {
		t.Errorf("lost %d of %d", r.sent-r.received, r.sent)
	}
	if r.min < 5*time.Millisecond || r.max < 20*time.Millisecond {
		t.Errorf("RTT min %v max %v: jitter of 20±15 ms not applied", r.min, r.max)
	}
	st := e.Stats()
	for _, q := range st.Queues {
		if q.VerdictErrors != 0 || q.Truncated != 0 {
			t.Errorf("queue %d: %d verdict errors, %d truncated", q.Num, q.VerdictErrors, q.Truncated)
		}
	}
}

// TestGoroutinesEnd checks that a stopped emulator leaves no goroutine
// behind.
func TestGoroutinesEnd(t *testing.T) {
	before := runtime.NumGoroutine()
	// Cleanups run last-in first-out: registered first, this check runs
	// after the emulator has stopped and the namespaces are gone.
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if g := runtime.NumGoroutine(); g > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines left over (before: %d)\n%s", g, before, buf[:runtime.Stack(buf, true)])
		}
	})
	n := newTestNet(t)
	n.startEmulator(t, Config{Queues: []QueueConfig{{Num: queueUp, Delay: time.Millisecond}, {Num: queueDown}}})
	ping(t, n.A, testAddrB, "-c", "3", "-i", "0.01", "-W", "1")
}

// TestQueueFullIsBehind holds 200 ms of a 1000 pps ping stream in a kernel
// queue of 16 packets: the kernel must drop the overflow (not pass it),
// and the emulator must report that it fell behind.
func TestQueueFullIsBehind(t *testing.T) {
	n := newTestNet(t)
	e, _ := n.startEmulator(t, Config{Queues: []QueueConfig{
		{Num: queueUp, Delay: 200 * time.Millisecond, MaxLen: 16},
		{Num: queueDown},
	}})
	r := ping(t, n.A, testAddrB, "-c", "100", "-i", "0.001", "-W", "2")
	if r.received == r.sent || r.received == 0 {
		t.Errorf("%d of %d pings came back, want some lost to the full queue", r.received, r.sent)
	}
	if r.received > 0 && r.min < 200*time.Millisecond {
		t.Errorf("min RTT %v: a packet passed without its delay", r.min)
	}
	st := e.Stats()
	up := st.Queues[0]
	if !up.KernelRead || up.KernelQueueDrops == 0 || !up.Behind || !st.Behind {
		t.Errorf("queue full but stats say %+v", up)
	}
	t.Logf("kernel queue drops %d, received %d, released %d", up.KernelQueueDrops, up.Received, up.Released)
}

// TestSocketOverrunIsBehind lets packets pile up in a tiny socket buffer
// before the emulator starts reading: the kernel drops what does not fit
// (user_dropped), the socket reports ENOBUFS, and the emulator says it is
// behind.
func TestSocketOverrunIsBehind(t *testing.T) {
	n := newTestNet(t)
	var e *Emulator
	if err := netns.Do(n.R, func() error {
		var err error
		e, err = Open(Config{SocketBufferBytes: 1, Queues: []QueueConfig{{Num: queueUp}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Nobody reads yet: 50 pings fill the socket buffer (the kernel's
	// minimum, about 2 KiB, holds a few packet messages).
	ping(t, n.A, testAddrB, "-c", "50", "-i", "0.002", "-W", "0.1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, "") }()
	var up QueueStats
	for range 100 {
		up = e.Stats().Queues[0]
		if up.ENOBUFS > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if up.ENOBUFS == 0 || up.KernelUserDropped == 0 || !up.Behind {
		t.Errorf("socket overrun not reported: %+v", up)
	}
	if up.Received+up.KernelUserDropped != 50 {
		t.Errorf("received %d + dropped by the kernel %d, want 50", up.Received, up.KernelUserDropped)
	}
	t.Logf("received %d, kernel user_dropped %d, enobufs %d", up.Received, up.KernelUserDropped, up.ENOBUFS)
}

// TestStatsUnwritable: a stats file that cannot be written stops the
// emulator with an error instead of running unobserved.
func TestStatsUnwritable(t *testing.T) {
	n := newTestNet(t)
	var e *Emulator
	if err := netns.Do(n.R, func() error {
		var err error
		e, err = Open(Config{Queues: []QueueConfig{{Num: queueUp}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(context.Background(), filepath.Join(t.TempDir(), "missing", "stats.json")) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("no error for an unwritable stats file")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run kept going without its stats file")
	}
}
