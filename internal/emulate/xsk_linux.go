package emulate

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The AF_XDP backend: the emulator as a transparent layer-2 bump in the
// wire between two ports of its namespace (Config.XDP).
//
//	         wire namespace (no addresses, no bridge)
//	PortA ─► XDP: stamp, redirect ─► [ AF_XDP socket A ] ─► up lane ─┐
//	PortA ◄─ [ socket A: TX ] ◄─ copy ◄─ down lane ◄─ [ AF_XDP socket B ] ◄─ XDP ◄─ PortB
//	                                   └─► copy ─► [ socket B: TX ] ─► PortB
//
// Each port has an XDP program that stamps every frame with its receive
// time (metadata in front of the frame) and redirects it to the port's
// AF_XDP socket; each socket has its own UMEM. A lane (one direction, one
// OS thread) reads its ingress socket's RX ring, hands each frame to the
// scheduler (loss, delay ± jitter, order), and at release copies the frame
// into a TX frame of the egress socket's UMEM, returns the RX frame to the
// fill ring and kicks the egress socket with sendto. The up lane owns
// socket A's RX and fill rings and socket B's TX and completion rings; the
// down lane the other two halves, so no ring has two users.

const (
	// xskFrameSize is one UMEM chunk. XDP_PACKET_HEADROOM (256) of it is
	// the kernel's, the stamp lies in it, the frame follows.
	xskFrameSize = 2048
	// xskMaxFrame is the longest frame a chunk holds.
	xskMaxFrame = xskFrameSize - unix.XDP_PACKET_HEADROOM
	// xskTxFrames is each socket's TX part of its UMEM: frames copied for
	// sending and not yet completed (copy mode completes them within the
	// sendto that sends them).
	xskTxFrames = 2048
	// xskMaxRxFrames caps the frames a direction holds (128 MiB of UMEM).
	xskMaxRxFrames = 1 << 16
	// xskMinRxFrames is the least (32 MiB). 4096, what the lab gives its
	// NFQUEUE queues at least, ran out at 50 000 frames/s through 20 ms
	// here (fill ring empty, a few hundred frames per 200 000) when a
	// sender, descheduled on a loaded host, caught up in one burst: the
	// frames of the burst wait in the RX ring on top of those held.
	xskMinRxFrames = 1 << 14
	// xskReadBatch bounds how many frames one receive hands to the
	// scheduler before due releases go out.
	xskReadBatch = 256
	// xskKickTries bounds the sendto calls of one kick: a copy-mode send
	// handles up to its TX budget of frames per call (EAGAIN: more left).
	xskKickTries = 64
)

// wireFrames is how many frames a direction can hold, in its RX ring and
// held: everything in flight during the delay at 1 Gbit/s in full-size
// frames, doubled, as the lab sizes its NFQUEUE queues (QueueConfig.MaxLen
// when set), as a power of two between xskMinRxFrames and xskMaxRxFrames.
func wireFrames(qc QueueConfig) uint32 {
	n := uint64(qc.MaxLen)
	if n == 0 {
		n = uint64(1e9/8/1500*(qc.Delay+qc.Jitter).Seconds()) * 2
	}
	n = min(max(n, xskMinRxFrames), xskMaxRxFrames)
	return 1 << bits.Len64(n-1)
}

// xskRing is one of the four rings of an AF_XDP socket, mapped from the
// kernel. The kernel and this process share it as single producer, single
// consumer; the index words are read and written atomically.
type xskRing struct {
	mem      []byte
	producer *uint32
	consumer *uint32
	desc     unsafe.Pointer
	mask     uint32
	// the side this process writes, kept locally and published
	prod, cons uint32
}

func mapRing(fd int, off unix.XDPRingOffset, pgoff int64, entries uint32, descSize uintptr) (xskRing, error) {
	size := int(off.Desc) + int(entries)*int(descSize)
	mem, err := unix.Mmap(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return xskRing{}, err
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	r := xskRing{
		mem:      mem,
		producer: (*uint32)(unsafe.Add(base, off.Producer)),
		consumer: (*uint32)(unsafe.Add(base, off.Consumer)),
		desc:     unsafe.Add(base, off.Desc),
		mask:     entries - 1,
	}
	r.prod = atomic.LoadUint32(r.producer)
	r.cons = atomic.LoadUint32(r.consumer)
	return r, nil
}

func (r *xskRing) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.desc, uintptr(i&r.mask)*8))
}

func (r *xskRing) xdpDesc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.desc, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

func (r *xskRing) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}

// xsk is one port's AF_XDP socket, bound in copy mode to the port's queue
// 0, with its UMEM: rxFrames chunks for receiving, then xskTxFrames for
// sending.
type xsk struct {
	dev      string
	ifindex  int
	fd       int
	umem     []byte
	rxFrames uint32
	fill     xskRing // producer: the lane that reads rx
	rx       xskRing
	tx       xskRing // producer: the other lane
	comp     xskRing
	port     *xdpPort
}

// openXSK makes the socket of one port and attaches the port's XDP
// program. Any error names what the kernel refused.
func openXSK(dev string, rxFrames uint32, mode string) (_ *xsk, err error) {
	ifc, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, fmt.Errorf("wire port %s: %w", dev, err)
	}
	if ifc.MTU+14 > xskMaxFrame {
		return nil, fmt.Errorf("wire port %s: MTU %d is above the %d bytes an AF_XDP frame of this emulator holds", dev, ifc.MTU, xskMaxFrame-14)
	}
	s := &xsk{dev: dev, ifindex: ifc.Index, fd: -1, rxFrames: rxFrames}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	s.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening an AF_XDP socket: %w (the kernel needs CONFIG_XDP_SOCKETS)", err)
	}
	total := int(rxFrames+xskTxFrames) * xskFrameSize
	s.umem, err = unix.Mmap(-1, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("allocating %d MiB of UMEM for %s: %w", total>>20, dev, err)
	}
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(s.umem)))),
		Len:  uint64(total),
		Size: xskFrameSize,
	}
	if err := setsockoptRaw(s.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return nil, fmt.Errorf("registering the UMEM of %s (XDP_UMEM_REG): %w (it is locked memory: RLIMIT_MEMLOCK or CAP_IPC_LOCK)", dev, err)
	}
	for _, o := range []struct {
		opt     int
		entries uint32
	}{
		{unix.XDP_UMEM_FILL_RING, rxFrames},
		{unix.XDP_UMEM_COMPLETION_RING, xskTxFrames},
		{unix.XDP_RX_RING, rxFrames},
		{unix.XDP_TX_RING, xskTxFrames},
	} {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, o.opt, int(o.entries)); err != nil {
			return nil, fmt.Errorf("sizing an AF_XDP ring of %s (option %d): %w", dev, o.opt, err)
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockoptRaw(s.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return nil, fmt.Errorf("reading AF_XDP ring offsets (XDP_MMAP_OFFSETS): %w", err)
	}
	rings := []struct {
		r       *xskRing
		off     unix.XDPRingOffset
		pgoff   int64
		entries uint32
		size    uintptr
	}{
		{&s.fill, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, rxFrames, 8},
		{&s.comp, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, xskTxFrames, 8},
		{&s.rx, off.Rx, unix.XDP_PGOFF_RX_RING, rxFrames, unsafe.Sizeof(unix.XDPDesc{})},
		{&s.tx, off.Tx, unix.XDP_PGOFF_TX_RING, xskTxFrames, unsafe.Sizeof(unix.XDPDesc{})},
	}
	for _, r := range rings {
		if *r.r, err = mapRing(s.fd, r.off, r.pgoff, r.entries, r.size); err != nil {
			return nil, fmt.Errorf("mapping an AF_XDP ring of %s: %w", dev, err)
		}
	}
	// Every RX chunk goes to the kernel at once: the fill ring is as long
	// as the RX part of the UMEM, so it never overflows.
	for i := range rxFrames {
		*s.fill.addr(s.fill.prod) = uint64(i) * xskFrameSize
		s.fill.prod++
	}
	atomic.StoreUint32(s.fill.producer, s.fill.prod)
	// A copy-mode send handles TX_BATCH_SIZE (32) frames per call unless
	// told more; older kernels lack the option, and then kick loops.
	_ = unix.SetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, xskTxFrames)
	// Copy mode: veth has no zero-copy support, and copy mode works on any
	// device with native or generic XDP.
	if err := unix.Bind(s.fd, &unix.SockaddrXDP{Flags: unix.XDP_COPY, Ifindex: uint32(s.ifindex), QueueID: 0}); err != nil {
		return nil, fmt.Errorf("binding an AF_XDP socket to %s queue 0 in copy mode: %w", dev, err)
	}
	if s.port, err = newXDPPort(); err != nil {
		return nil, fmt.Errorf("wire port %s: %w", dev, err)
	}
	if err := s.port.register(s.fd); err != nil {
		return nil, fmt.Errorf("wire port %s: %w", dev, err)
	}
	if err := s.port.attach(s.ifindex, dev, mode); err != nil {
		return nil, err
	}
	return s, nil
}

// frame is the UMEM bytes at addr.
func (s *xsk) frame(addr uint64, n uint32) []byte {
	return s.umem[addr : addr+uint64(n)]
}

// statistics reads the socket's drop counters (XDP_STATISTICS).
func (s *xsk) statistics() (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	err := getsockoptRaw(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st))
	return st, err
}

// close detaches the program first (from then on the port drops nothing
// into the socket: W's stack drops it), then releases socket and memory.
func (s *xsk) close() error {
	var errs []error
	if s.port != nil {
		errs = append(errs, s.port.close())
		s.port = nil
	}
	for _, r := range []*xskRing{&s.fill, &s.comp, &s.rx, &s.tx} {
		r.unmap()
	}
	if s.fd >= 0 {
		errs = append(errs, unix.Close(s.fd))
		s.fd = -1
	}
	if s.umem != nil {
		errs = append(errs, unix.Munmap(s.umem))
		s.umem = nil
	}
	return errors.Join(errs...)
}

func setsockoptRaw(fd, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockoptRaw(fd, opt int, p unsafe.Pointer, n uintptr) error {
	l := uint32(n)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// xskHeld is a frame in the ingress UMEM waiting for its release.
type xskHeld struct {
	addr uint64
	len  uint32
	id   uint32
}

// xskLane is one direction of the wire, driven by one OS thread.
type xskLane struct {
	cfg     QueueConfig
	sched   *scheduler
	in, out *xsk

	held       []xskHeld // ring in arrival order, as long as in's RX frames
	head, n    int
	seq        uint32   // id of the last arrival
	dropped    bool     // set by drop for the frame being handed over
	txFree     []uint64 // free TX chunks of out's UMEM
	monoOffset int64    // monotime − CLOCK_MONOTONIC: maps the XDP stamps

	lastRead, stamped, lateOnArrival, txErrors, txFull uint64
	lastReadAt                                         int64
	allStamped                                         bool
	readPackets, readStamped                           int

	pub published
	ts  unix.Timespec
	fds [2]unix.PollFd

	// the ingress socket's XDP_STATISTICS at the last read; the last
	// read is in close, so the final snapshot has them
	sockRead                             atomic.Bool
	sockDrops, sockFull, sockInvalidDesc atomic.Uint64
	sockFillEmpty                        atomic.Uint64
}

func newXSKLane(qc QueueConfig, in, out *xsk) *xskLane {
	seed := qc.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	l := &xskLane{
		cfg:   qc,
		sched: newScheduler(qc, seed),
		in:    in,
		out:   out,
		held:  make([]xskHeld, in.rxFrames),
	}
	for i := range uint32(xskTxFrames) {
		l.txFree = append(l.txFree, uint64(out.rxFrames+i)*xskFrameSize)
	}
	// One reading of both clocks, close together: bpf_ktime_get_ns is
	// CLOCK_MONOTONIC, monotime the runtime's reading of the same clock
	// from epoch.
	var ts unix.Timespec
	t0 := monotime()
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	t1 := monotime()
	l.monoOffset = (t0+t1)/2 - ts.Nano()
	return l
}

// drop is the scheduler's loss verdict on the frame being handed over.
func (l *xskLane) drop(uint32) { l.dropped = true }

// acceptThrough copies every held frame up to id into the egress socket's
// TX ring, gives the RX chunks back to the fill ring and kicks the send.
func (l *xskLane) acceptThrough(id uint32) {
	for l.n > 0 {
		h := l.held[l.head]
		if len(l.txFree) == 0 {
			l.kick()
			l.reap()
		}
		if k := len(l.txFree); k > 0 {
			a := l.txFree[k-1]
			l.txFree = l.txFree[:k-1]
			copy(l.out.frame(a, h.len), l.in.frame(h.addr, h.len))
			*l.out.tx.xdpDesc(l.out.tx.prod) = unix.XDPDesc{Addr: a, Len: h.len}
			l.out.tx.prod++
		} else {
			l.txFull++ // the egress device took nothing: the frame is lost
		}
		l.recycle(h.addr)
		l.head = (l.head + 1) & (len(l.held) - 1)
		l.n--
		if h.id == id {
			break
		}
	}
	atomic.StoreUint32(l.in.fill.producer, l.in.fill.prod)
	l.kick()
}

// recycle gives an RX chunk back to the kernel (published with the next
// store of the fill producer).
func (l *xskLane) recycle(addr uint64) {
	*l.in.fill.addr(l.in.fill.prod) = addr &^ (xskFrameSize - 1)
	l.in.fill.prod++
}

// kick publishes the TX ring and has the kernel send it: in copy mode the
// frames go out (and through the egress veth into the next namespace)
// within the sendto call.
func (l *xskLane) kick() {
	tx := &l.out.tx
	atomic.StoreUint32(tx.producer, tx.prod)
	for range xskKickTries {
		if atomic.LoadUint32(tx.consumer) == tx.prod {
			return
		}
		_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(l.out.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
		default:
			l.txErrors++
			return
		}
	}
}

// reap takes the completed TX chunks back.
func (l *xskLane) reap() {
	c := &l.out.comp
	prod := atomic.LoadUint32(c.producer)
	for ; c.cons != prod; c.cons++ {
		l.txFree = append(l.txFree, *c.addr(c.cons))
	}
	atomic.StoreUint32(c.consumer, c.cons)
}

// receive hands up to xskReadBatch frames of the RX ring to the scheduler
// and returns how many it took.
func (l *xskLane) receive() int {
	rx := &l.in.rx
	prod := atomic.LoadUint32(rx.producer)
	n := min(int(prod-rx.cons), xskReadBatch)
	if n == 0 {
		l.lastReadAt = monotime()
		return 0
	}
	now := monotime()
	l.readPackets, l.readStamped = 0, 0
	for range n {
		d := *rx.xdpDesc(rx.cons)
		rx.cons++
		arrival := now
		l.readPackets++
		if d.Addr >= stampBytes && d.Addr%xskFrameSize >= stampBytes {
			st := (*uint64)(unsafe.Pointer(&l.in.umem[d.Addr-stampBytes]))
			// A chunk's stamp is cleared once read, so a frame the program
			// could not stamp never shows an older frame's time.
			if v := int64(*st); v != 0 {
				if a := v + l.monoOffset; a <= now && a > now-maxBackdate {
					arrival = a
					l.readStamped++
					l.stamped++
				}
				*st = 0
			}
		}
		if now-arrival > l.sched.delay-l.sched.jitter+l.sched.tolerance {
			l.lateOnArrival++
		}
		l.seq++
		l.dropped = false
		l.sched.arrive(arrival, l.seq, d.Len, l)
		if l.dropped {
			l.recycle(d.Addr)
			continue
		}
		l.held[(l.head+l.n)&(len(l.held)-1)] = xskHeld{addr: d.Addr, len: d.Len, id: l.seq}
		l.n++
	}
	atomic.StoreUint32(rx.consumer, rx.cons)
	atomic.StoreUint32(l.in.fill.producer, l.in.fill.prod)
	l.allStamped = l.readStamped == l.readPackets
	if n < xskReadBatch {
		l.lastReadAt = now
	}
	return n
}

// run is the lane's loop, the same as an NFQUEUE queue's (queue.run):
// receive what is waiting, release what is due, sleep in a raw ppoll until
// the next frame arrives, the head is due or stopfd becomes readable.
// With every frame stamped by the XDP program the lane reads lazily (see
// queue.lazyWindow).
func (l *xskLane) run(stopfd int) error {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(timerSlack), 0, 0, 0)
	attr := queueAttr()
	l.pub.realtime.Store(unix.SchedSetAttr(0, &attr, 0) == nil)
	l.fds[0] = unix.PollFd{Fd: int32(l.in.fd), Events: unix.POLLIN}
	l.fds[1] = unix.PollFd{Fd: int32(stopfd), Events: unix.POLLIN}
	readable := true
	for {
		n := 0
		if readable {
			n = l.receive()
		}
		l.sched.release(monotime(), l)
		l.reap()
		l.publish()
		if n == xskReadBatch {
			readable = true
			continue
		}
		fds := l.fds[:]
		wake := int64(-1)
		if due, ok := l.sched.next(); ok {
			wake = due
			if w := l.lazyWindow(); w > 0 {
				wake = min(wake, l.lastReadAt+w)
				fds = l.fds[1:]
			}
		}
		lazy := len(fds) == 1
		d := maxIdleSleep
		if wake >= 0 {
			d = wake - monotime()
			if d <= 0 {
				readable = lazy
				continue
			}
		}
		l.ts = unix.NsecToTimespec(d)
		l.fds[0].Revents, l.fds[1].Revents = 0, 0
		if err := rawPpoll(fds, &l.ts); err != nil && err != unix.EINTR {
			return fmt.Errorf("wire %s → %s: ppoll: %w", l.in.dev, l.out.dev, err)
		}
		if l.fds[1].Revents != 0 {
			return nil
		}
		readable = lazy || l.fds[0].Revents != 0
	}
}

// lazyWindow is queue.lazyWindow for the XDP program's stamps.
func (l *xskLane) lazyWindow() int64 {
	if !l.allStamped {
		return 0
	}
	minDelay := l.sched.delay - l.sched.jitter
	if minDelay < int64(time.Millisecond) {
		return 0
	}
	return min(minDelay/2, maxLazy)
}

func (l *xskLane) publish() {
	c := &l.sched.c
	p := &l.pub
	p.received.Store(c.Received)
	p.receivedBytes.Store(c.ReceivedBytes)
	p.released.Store(c.Released)
	p.releasedBytes.Store(c.ReleasedBytes)
	p.droppedLoss.Store(c.DroppedLoss)
	p.late.Store(c.Late)
	p.stalled.Store(c.Stalled)
	p.lateOnArrival.Store(l.lateOnArrival)
	p.batches.Store(c.Batches)
	p.maxLateness.Store(c.MaxLateness)
	p.pending.Store(uint64(l.sched.q.len()))
	p.verdictErrors.Store(l.txErrors + l.txFull)
	p.kernelTimestamps.Store(l.stamped)
}

// queueStats are the lane's counters as a queue's. The socket's drops are
// the kernel's: no free chunk in the fill ring (or a frame too long) as
// queue drops, a full RX ring as "user dropped"; TX errors and frames the
// egress device did not take are verdict errors.
func (l *xskLane) queueStats([]kernelQueue) QueueStats {
	p := &l.pub
	qs := QueueStats{
		Num:           l.cfg.Num,
		Delay:         l.cfg.Delay,
		Jitter:        l.cfg.Jitter,
		LossPercent:   l.cfg.LossPercent,
		Tolerance:     l.cfg.tolerance(),
		Received:      p.received.Load(),
		ReceivedBytes: p.receivedBytes.Load(),
		Released:      p.released.Load(),
		ReleasedBytes: p.releasedBytes.Load(),
		DroppedLoss:   p.droppedLoss.Load(),
		Pending:       p.pending.Load(),
		Batches:       p.batches.Load(),
		Late:          p.late.Load(),
		LateOnArrival: p.lateOnArrival.Load(),
		Stalled:       p.stalled.Load(),
		MaxLateness:   time.Duration(p.maxLateness.Load()),
		VerdictErrors: p.verdictErrors.Load(),
		Realtime:      p.realtime.Load(),
		KernelStamped: p.kernelTimestamps.Load(),
	}
	qs.LatenessMedian, qs.LatenessP99, qs.LatenessSamples = l.sched.res.quantiles()
	l.readSocket()
	qs.KernelRead = l.sockRead.Load()
	qs.KernelQueueDrops = l.sockDrops.Load()
	qs.KernelUserDropped = l.sockFull.Load()

	qs.VerdictErrors += l.sockInvalidDesc.Load()
	qs.setBehind()
	return qs
}

// readSocket reads the ingress socket's drop counters while it is open.
func (l *xskLane) readSocket() {
	if l.in.fd < 0 {
		return
	}
	st, err := l.in.statistics()
	if err != nil {
		return
	}
	l.sockDrops.Store(st.Rx_dropped)
	l.sockFull.Store(st.Rx_ring_full)
	l.sockInvalidDesc.Store(st.Tx_invalid_descs)
	l.sockRead.Store(true)
}

// close releases the lane's ingress socket (and its port's program); the
// other lane releases the egress one. The threads must have stopped.
func (l *xskLane) close() error {
	l.publish()
	l.readSocket()
	if err := l.in.close(); err != nil {
		return fmt.Errorf("closing wire port %s: %w", l.in.dev, err)
	}
	return nil
}

// openXDP opens the AF_XDP backend for cfg (cfg.XDP set, validated).
func openXDP(cfg Config) (_ *Emulator, err error) {
	var qc [2]QueueConfig
	for _, q := range cfg.Queues {
		qc[q.Num] = q
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("link emulator: eventfd: %w", err)
	}
	e := &Emulator{cfg: cfg, stopfd: efd, stampfd: -1, backend: BackendAFXDP}
	var socks [2]*xsk
	defer func() {
		if err != nil {
			for _, s := range socks {
				if s != nil {
					s.close()
				}
			}
			unix.Close(efd)
		}
	}()
	mode := cfg.XDP.XDPMode
	for i, dev := range []string{cfg.XDP.PortA, cfg.XDP.PortB} {
		if socks[i], err = openXSK(dev, wireFrames(qc[i]), mode); err != nil {
			return nil, fmt.Errorf("link emulator: %w", err)
		}
		// Both ports in one mode, so that a measurement has one answer.
		mode = socks[i].port.mode
	}
	e.xdpMode = mode
	e.lanes = []lane{
		newXSKLane(qc[0], socks[0], socks[1]),
		newXSKLane(qc[1], socks[1], socks[0]),
	}
	return e, nil
}
