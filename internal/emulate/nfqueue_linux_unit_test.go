package emulate

import (
	"os"
	"testing"
	"time"
)

// TestQueueDatagram feeds the captured packet message through the queue's
// receive path without a socket: with no delay the packet is released at
// once by one batch verdict naming its id.
func TestQueueDatagram(t *testing.T) {
	requireLittleEndian(t)
	raw, err := os.ReadFile("testdata/packet-ipv4-ping.bin")
	if err != nil {
		t.Fatal(err)
	}
	q := &queue{cfg: QueueConfig{Num: 0}, sched: newScheduler(QueueConfig{}, 1), out: make([]byte, 0, outBytes)}
	q.datagram(raw, false, 1000, 0)
	if q.sched.c.Received != 1 || q.sched.c.ReceivedBytes != 128 {
		t.Fatalf("counters %+v", q.sched.c)
	}
	q.sched.release(1000, q)
	want := appendVerdict(nil, 0, 1, true, nfAccept, 1)
	if string(q.out) != string(want) {
		t.Errorf("verdicts %x, want %x", q.out, want)
	}
	// A datagram cut short is counted, never fatal.
	q.datagram(raw[:40], true, 2000, 0)
	if q.truncated != 1 {
		t.Errorf("truncated %d, want 1", q.truncated)
	}
	// An error answer to a verdict is counted.
	e := []byte{0xfe, 0xff, 0xff, 0xff} // -ENOENT
	e = append(e, want[:nlmsgHdrLen]...)
	msg := appendNlmsg(nlmsgError, e)
	q.datagram(msg, false, 3000, 0)
	if q.verdictErrors != 1 {
		t.Errorf("verdict errors %d, want 1", q.verdictErrors)
	}
}

func appendNlmsg(typ uint16, payload []byte) []byte {
	b := make([]byte, nlmsgHdrLen, nlmsgHdrLen+len(payload))
	n := uint32(nlmsgHdrLen + len(payload))
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	b[4], b[5] = byte(typ), byte(typ>>8)
	return append(b, payload...)
}

// TestHotPathDoesNotAllocate runs the per-packet path (decode a packet
// message, hold it, release it with a batch verdict, publish counters)
// once the FIFO and the buffers have reached their size.
func TestHotPathDoesNotAllocate(t *testing.T) {
	requireLittleEndian(t)
	raw, err := os.ReadFile("testdata/packet-ipv4-ping.bin")
	if err != nil {
		t.Fatal(err)
	}
	q := &queue{cfg: QueueConfig{Num: 0, LossPercent: 5}, sched: newScheduler(QueueConfig{Delay: 1000, Jitter: 500, LossPercent: 5}, 1), out: make([]byte, 0, outBytes)}
	now := int64(0)
	step := func() {
		for range 8 {
			q.datagram(raw, false, now, 0)
		}
		now += 2000
		q.sched.release(now, q)
		q.out = q.out[:0] // what flush does after writing
		q.sched.departedAll(now)
		q.publish()
	}
	for range 10000 { // let the FIFO, reservoir and buffers grow first
		step()
	}
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Errorf("%v allocations per step of 8 packets", a)
	}
}

// BenchmarkHotPath is the userspace share of one packet's cost (decode,
// loss and jitter draws, FIFO, batch verdict encoding), without syscalls.
func BenchmarkHotPath(b *testing.B) {
	raw, err := os.ReadFile("testdata/packet-ipv4-ping.bin")
	if err != nil {
		b.Fatal(err)
	}
	q := &queue{cfg: QueueConfig{Num: 0}, sched: newScheduler(QueueConfig{Delay: 1000, Jitter: 500, LossPercent: 1}, 1), out: make([]byte, 0, outBytes)}
	b.ReportAllocs()
	now := int64(0)
	for i := range b.N {
		q.datagram(raw, false, now, 0)
		if i%16 == 15 {
			now += 2000
			q.sched.release(now, q)
			q.out = q.out[:0]
			q.sched.departedAll(now)
			q.publish()
		}
	}
}

// TestArrivalFromKernelStamp: the delay counts from the router's receive
// stamp when it is plausible, else from the read.
func TestArrivalFromKernelStamp(t *testing.T) {
	requireLittleEndian(t)
	raw, err := os.ReadFile("testdata/packet-ipv4-ping-stamped.bin")
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ := nextMessage(raw)
	p, _ := parsePacket(m.Payload)
	const delay = int64(20 * time.Millisecond)
	now := int64(100 * time.Second)
	for _, tc := range []struct {
		name    string
		stamp   int64 // where the stamp lands on the monotonic clock
		arrive  int64
		stamped uint64
		// already past its release time (+ the 2 ms tolerance) when read
		lateOnArrival uint64
	}{
		{"stamped 3 ms before the read", now - 3*ms, now - 3*ms, 1, 0},
		{"stamp after the read (clock step)", now + 5*ms, now, 0, 0},
		{"stamp 20 s old (clock step)", now - int64(20*time.Second), now, 0, 0},
		{"read 21 ms after its stamp: within the tolerance", now - 21*ms, now - 21*ms, 1, 0},
		{"read 23 ms after its stamp: late on arrival", now - 23*ms, now - 23*ms, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &queue{sched: newScheduler(QueueConfig{Delay: time.Duration(delay)}, 1), out: make([]byte, 0, outBytes)}
			q.datagram(raw, false, now, tc.stamp-p.Timestamp)
			due, ok := q.sched.next()
			if !ok || due != tc.arrive+delay {
				t.Errorf("due %v, want %v", time.Duration(due), time.Duration(tc.arrive+delay))
			}
			if q.kernelTimestamps != tc.stamped {
				t.Errorf("kernel stamps %d, want %d", q.kernelTimestamps, tc.stamped)
			}
			if q.lateOnArrival != tc.lateOnArrival {
				t.Errorf("late on arrival %d, want %d", q.lateOnArrival, tc.lateOnArrival)
			}
		})
	}
}
