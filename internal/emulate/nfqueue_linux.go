package emulate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// recvSlots is how many datagrams one recvmmsg call takes. The kernel
	// sends every queued packet as its own netlink datagram, so batching
	// happens here, not inside one buffer.
	recvSlots = 64
	// recvSlotBytes holds one packet message with a one-byte copy (about
	// 150 bytes: headers, ids, interfaces, hardware address, cap length).
	recvSlotBytes = 2048
	// copyRange is how much of each packet is copied to us. We only need
	// its length, which the kernel reports in NFQA_CAP_LEN when it cuts.
	copyRange = 1
	// outBytes is the verdict buffer: up to 2048 verdicts in one write.
	outBytes = 2048 * verdictMsgLen
	// timerSlack is the queue thread's timer slack (PR_SET_TIMERSLACK):
	// the default 50 µs would add up to that much to every release.
	timerSlack = time.Microsecond
	// rtPriority is the SCHED_FIFO priority of the queue threads: above
	// every normal thread, below the kernel's own RT threads (50 and up for
	// threaded interrupts).
	rtPriority = 10
	// bindTimeout and unbindTimeout bound the wait for the kernel's answer
	// to a config message. The unbind wait is short: closing the socket
	// unbinds anyway.
	bindTimeout   = 5 * time.Second
	unbindTimeout = time.Second
)

// epoch anchors the monotonic clock the scheduler runs on.
var epoch = time.Now()

func monotime() int64 { return int64(time.Since(epoch)) }

// queue is one netfilter queue bound to its own netlink socket, driven by
// one goroutine locked to its OS thread.
type queue struct {
	cfg   QueueConfig
	fd    int
	sched *scheduler
	seq   uint32

	// receive side: recvSlots datagrams of recvSlotBytes each
	rbuf []byte
	iov  []unix.Iovec
	msgs []unix.Mmsghdr

	// verdicts waiting to be written
	out []byte

	// owned by the queue thread, published with the scheduler's counters
	enobufs, verdictErrors, truncated, kernelTimestamps uint64
	lateOnArrival                                       uint64

	// for lazy reads (wakeLoop.lazyWindow)
	readPackets int // packets seen by the current read
	readStamped int // of which with a kernel timestamp

	// the config request in flight, answered by an NLMSG_ERROR
	waitSeq uint32
	acked   bool
	ackErr  int32

	pub published
}

// openQueue opens a netlink socket in the caller's network namespace, binds
// queue qc.Num to it and configures it.
//
// Roughly what `nfqnl_test` of libnetfilter_queue does at start:
// nfq_create_queue, nfq_set_mode(NFQNL_COPY_PACKET, 1),
// nfq_set_queue_maxlen, nfq_set_queue_flags (no FAIL_OPEN).
func openQueue(qc QueueConfig, rcvbuf int, seed uint64) (*queue, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("opening netfilter netlink socket: %w (the kernel needs CONFIG_NETFILTER_NETLINK_QUEUE)", err)
	}
	q := &queue{
		cfg:   qc,
		fd:    fd,
		sched: newScheduler(qc, seed),
		rbuf:  make([]byte, recvSlots*recvSlotBytes),
		iov:   make([]unix.Iovec, recvSlots),
		msgs:  make([]unix.Mmsghdr, recvSlots),
		out:   make([]byte, 0, outBytes),
	}
	for i := range q.msgs {
		q.iov[i].Base = &q.rbuf[i*recvSlotBytes]
		q.iov[i].SetLen(recvSlotBytes)
		q.msgs[i].Hdr.Iov = &q.iov[i]
		q.msgs[i].Hdr.SetIovlen(1)
	}
	if err := q.setup(rcvbuf); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return q, nil
}

func (q *queue) setup(rcvbuf int) error {
	if err := unix.Bind(q.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("binding netfilter netlink socket: %w", err)
	}
	// SO_RCVBUFFORCE goes past net.core.rmem_max (we run as root); fall
	// back to what rmem_max allows without CAP_NET_ADMIN.
	if err := unix.SetsockoptInt(q.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf); err != nil {
		if err := unix.SetsockoptInt(q.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf); err != nil {
			return fmt.Errorf("setting netlink receive buffer: %w", err)
		}
	}
	if err := unix.SetNonblock(q.fd, true); err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	p := queueParams{
		CopyRange: copyRange,
		MaxLen:    q.cfg.maxLen(),
		// With loss, every segment must be its own packet so that loss
		// hits single packets, not 64 KiB aggregates; without loss an
		// aggregate can go whole (fewer messages, no software checksum).
		GSO: q.cfg.LossPercent == 0,
	}
	err := q.request(appendBind(nil, q.cfg.Num, q.nextSeq(), p), bindTimeout)
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EBUSY):
		return fmt.Errorf("binding netfilter queue %d: %w (needs CAP_NET_ADMIN, and the queue must not be bound by another process)", q.cfg.Num, err)
	case err != nil:
		return fmt.Errorf("binding netfilter queue %d: %w", q.cfg.Num, err)
	}
	return nil
}

var errNoAck = errors.New("netlink request not acknowledged")

func (q *queue) nextSeq() uint32 {
	q.seq++
	return q.seq
}

// request sends one config message and waits for its ack. Packets that
// arrive meanwhile (the queue may already be bound) go to the scheduler as
// usual, so none is stranded.
func (q *queue) request(msg []byte, timeout time.Duration) error {
	q.waitSeq = binary.NativeEndian.Uint32(msg[8:]) // nlmsg_seq
	q.acked, q.ackErr = false, 0
	if err := q.write(msg); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	fds := []unix.PollFd{{Fd: int32(q.fd), Events: unix.POLLIN}}
	for !q.acked {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("no answer from the kernel within %v: %w", timeout, errNoAck)
		}
		ts := unix.NsecToTimespec(int64(left))
		if _, err := unix.Ppoll(fds, &ts, nil); err != nil && err != unix.EINTR {
			return fmt.Errorf("waiting for netlink answer: %w", err)
		}
		if _, err := q.receive(); err != nil {
			return err
		}
		q.sched.release(monotime(), q)
		if err := q.flush(); err != nil {
			return err
		}
	}
	q.waitSeq = 0
	if q.ackErr != 0 {
		return unix.Errno(-q.ackErr)
	}
	return nil
}

// write sends a buffer of netlink messages to the kernel, which handles
// them one after the other within this call.
func (q *queue) write(b []byte) error {
	for tries := 0; ; tries++ {
		err := rawWrite(q.fd, b)
		switch {
		case err == nil:
			return nil
		case err == unix.EINTR:
			continue
		case (err == unix.ENOBUFS || err == unix.ENOMEM || err == unix.EAGAIN) && tries < 100:
			time.Sleep(100 * time.Microsecond)
			continue
		}
		return fmt.Errorf("sending to netfilter queue %d: %w", q.cfg.Num, err)
	}
}

// flush writes the verdicts gathered so far. A verdict that cannot be sent
// is counted; the packets it concerned stay in the kernel queue until a
// later batch verdict releases them or the queue is unbound.
func (q *queue) flush() error {
	if len(q.out) == 0 {
		return nil
	}
	err := q.write(q.out)
	if err != nil {
		q.verdictErrors += uint64(len(q.out) / verdictMsgLen)
	}
	q.out = q.out[:0]
	// The kernel reinjected and forwarded the accepted packets inside
	// the write, one after another: each has left by now.
	q.sched.departedAll(monotime())
	return err
}

func (q *queue) drop(id uint32) {
	if len(q.out)+verdictMsgLen > cap(q.out) {
		q.flush()
	}
	q.out = appendVerdict(q.out, q.cfg.Num, q.nextSeq(), false, nfDrop, id)
}

func (q *queue) acceptThrough(id uint32) {
	if len(q.out)+verdictMsgLen > cap(q.out) {
		q.flush()
	}
	q.out = appendVerdict(q.out, q.cfg.Num, q.nextSeq(), true, nfAccept, id)
}

// receive takes every datagram waiting on the socket, up to recvSlots,
// without blocking, and hands them to the scheduler.
func (q *queue) receive() (readResult, error) {
	for {
		for i := range q.msgs {
			q.msgs[i].Hdr.Flags = 0
			q.msgs[i].Len = 0
		}
		r, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(q.fd),
			uintptr(unsafe.Pointer(&q.msgs[0])), uintptr(len(q.msgs)), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
		case unix.EAGAIN:
			return readResult{emptied: true, emptiedAt: monotime()}, nil
		case unix.EINTR:
			return readResult{}, nil
		case unix.ENOBUFS:
			// The socket overran: the kernel dropped packet messages (and
			// the packets, counted as user_dropped). Keep reading.
			q.enobufs++
			continue
		default:
			return readResult{}, fmt.Errorf("receiving from netfilter queue %d: %w", q.cfg.Num, errno)
		}
		// One clock reading gives both clocks: now on the monotonic one,
		// and the offset that maps the kernel's CLOCK_REALTIME receive
		// stamps onto it.
		t := time.Now()
		now := int64(t.Sub(epoch))
		offset := now - t.UnixNano()
		q.readPackets, q.readStamped = 0, 0
		for i := 0; i < int(r); i++ {
			m := &q.msgs[i]
			n := int(m.Len)
			trunc := m.Hdr.Flags&unix.MSG_TRUNC != 0 || n > recvSlotBytes
			q.datagram(q.rbuf[i*recvSlotBytes:i*recvSlotBytes+min(n, recvSlotBytes)], trunc, now, offset)
		}
		res := readResult{full: int(r) == len(q.msgs), packets: q.readPackets, stamped: q.readStamped}
		if !res.full {
			res.emptied, res.emptiedAt = true, now
		}
		return res, nil
	}
}

// maxBackdate bounds how far a kernel receive stamp may lie before the
// read: beyond it the stamp is taken for a clock step, not a backlog.
const maxBackdate = int64(10 * time.Second)

// datagram handles the netlink messages of one received datagram, read at
// now (monotonic); offset maps kernel CLOCK_REALTIME stamps onto that clock.
func (q *queue) datagram(b []byte, trunc bool, now, offset int64) {
	if trunc {
		q.truncated++
	}
	for len(b) > 0 {
		m, rest, err := nextMessage(b)
		if err != nil {
			// Only a cut datagram ends like this; its packet (if any)
			// will be released by the next batch verdict.
			if !trunc {
				q.truncated++
			}
			return
		}
		b = rest
		switch m.Type {
		case nfqType(nfqnlMsgPacket):
			p, err := parsePacket(m.Payload)
			if err != nil {
				q.truncated++
				continue
			}
			// The delay counts from the router's receive time when the
			// kernel stamped the packet, so time spent in our socket
			// buffer is not added to it.
			arrival := now
			q.readPackets++
			// A stamp that does not fit (a clock step; a delivery time on
			// another clock) counts as none, which also keeps lazy reads
			// off.
			if a := p.Timestamp + offset; p.Timestamp != 0 && a <= now && a > now-maxBackdate {
				arrival = a
				q.readStamped++
				q.kernelTimestamps++
			}
			if now-arrival > q.sched.delay-q.sched.jitter+q.sched.tolerance {
				q.lateOnArrival++
			}
			q.sched.arrive(arrival, p.ID, p.Len, q)
		case nlmsgError:
			errno, seq, err := parseError(m.Payload)
			if err != nil {
				continue
			}
			if q.waitSeq != 0 && seq == q.waitSeq {
				q.acked, q.ackErr = true, errno
			} else if errno != 0 {
				q.verdictErrors++
			}
		}
	}
}

// publish copies the counters for readers.
func (q *queue) publish() {
	q.pub.store(q.sched, laneCounters{q.lateOnArrival, q.enobufs, q.verdictErrors, q.truncated, q.kernelTimestamps})
}

// run is the queue's thread: the wake loop on the netlink socket.
func (q *queue) run(stopfd int) error {
	lockLaneThread(&q.pub)
	l := wakeLoop{
		name:  fmt.Sprintf("netfilter queue %d", q.cfg.Num),
		sched: q.sched,
		io:    q,
		w:     newPollWaiter(q.fd, stopfd),
	}
	return l.run()
}

// close unbinds the queue (the kernel drops what it still holds for us)
// and closes the socket. The queue thread must have stopped.
func (q *queue) close() error {
	err := q.request(appendUnbind(nil, q.cfg.Num, q.nextSeq()), unbindTimeout)
	if errors.Is(err, errNoAck) {
		// The answer can be lost in a socket overrun; closing the socket
		// unbinds the queue all the same.
		err = nil
	}
	q.publish()
	if cerr := unix.Close(q.fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("unbinding netfilter queue %d: %w", q.cfg.Num, err)
	}
	return nil
}

// rawPpoll is ppoll(2) as the lane threads call it. Their own system
// calls (ppoll, recvmmsg, the verdict write, the wire sends) bypass the Go
// runtime's syscall bookkeeping: to the runtime the goroutine is running,
// not in a system call. Through syscall.Syscall the thread would spend
// nearly all its time "in a system call", and since Go 1.26 sysmon then,
// on each of its ticks, takes the goroutine's scan bit to inspect it and
// retakes the P of a goroutine that has not been rescheduled for 10 ms (a
// lane goroutine never is). That kept sysmon polling, made every wake-up
// go through exitsyscall's slow path, and a wake-up that found the scan
// bit taken spun in sched_yield (see rtprocess_linux.go;
// docs/measurements.md#raw-system-calls-and-sysmon). A raw call
// costs the runtime nothing it relies on: a goroutine the runtime wants
// stopped (GC, sysmon's 10 ms preemption) gets SIGURG, which interrupts
// ppoll with EINTR, and stops at its next function call.
func rawPpoll(fds []unix.PollFd, ts *unix.Timespec) error {
	var p unsafe.Pointer
	if len(fds) > 0 {
		p = unsafe.Pointer(&fds[0])
	}
	_, _, errno := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(p), uintptr(len(fds)), uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// rawWrite is write(2) as the queue thread calls it (see rawPpoll).
func rawWrite(fd int, b []byte) error {
	_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if errno != 0 {
		return errno
	}
	return nil
}
