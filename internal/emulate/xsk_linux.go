package emulate

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The AF_XDP backend: the emulator as a transparent layer-2 bump in the
// wire between two ports of its namespace (Config.XDP).
//
//	         wire namespace (no addresses, no bridge)
//	PortA ─► XDP: stamp, redirect ─► socket A RX ─► up lane ─► socket B TX ─► PortB
//	PortA ◄─ socket A TX ◄─ down lane ◄─ socket B RX ◄─ XDP: stamp, redirect ◄─ PortB
//
// Each port has an XDP program that stamps every frame with its receive
// time (metadata in front of the frame) and redirects it to the port's
// AF_XDP socket. Both sockets share one UMEM (XDP_SHARED_UMEM, each with
// its own fill and completion rings): the first half of its chunks is the
// up lane's, the second the down lane's. A lane (one direction, one OS
// thread) reads its ingress socket's RX ring, hands each frame to the
// scheduler (loss, delay ± jitter, order) and at release puts the same
// chunk on the egress socket's TX ring and kicks it with sendto; the
// egress socket's completion ring gives the chunk back, and the lane
// returns it to the ingress fill ring. The up lane owns socket A's RX and
// fill rings and socket B's TX and completion rings, the down lane the
// other four, so no ring has two users, and no frame is copied in user
// space (docs/measurements.md#af_xdp-one-umem-no-copy).

const (
	// xskFrameSize is one UMEM chunk. XDP_PACKET_HEADROOM (256) of it is
	// the kernel's, the stamp lies in it, the frame follows.
	xskFrameSize = 2048
	// xskMaxFrame is the longest frame a chunk holds.
	xskMaxFrame = xskFrameSize - unix.XDP_PACKET_HEADROOM
	// xskMaxRxFrames caps the frames a direction holds (128 MiB of UMEM).
	xskMaxRxFrames = 1 << 16
	// xskMinRxFrames is the least (32 MiB): when a sender descheduled on
	// a loaded host catches up in one burst, the burst waits in the RX
	// ring on top of the frames held, and 4096 ran out
	// (docs/measurements.md#af_xdp-frames-per-direction).
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

// xskUmem is the UMEM both sockets share, unmapped when the last closes.
type xskUmem struct {
	mem  []byte
	refs int
}

func (u *xskUmem) release() error {
	if u.refs--; u.refs > 0 || u.mem == nil {
		return nil
	}
	err := unix.Munmap(u.mem)
	u.mem = nil
	return err
}

// xsk is one port's AF_XDP socket, bound in copy mode to the port's queue
// 0. It receives into its own chunks of the shared UMEM (frames of them,
// from base on) and sends the other lane's.
type xsk struct {
	dev     string
	ifindex int
	fd      int
	umem    *xskUmem
	base    uint64
	frames  uint32
	fill    xskRing // producer: the lane that reads rx
	rx      xskRing
	tx      xskRing // producer: the other lane
	comp    xskRing
	port    *xdpPort
}

// openXSKPair makes the two ports' sockets on one UMEM and attaches the
// ports' XDP programs, both in one mode. Any error names what the kernel
// refused.
func openXSKPair(devs [2]string, frames [2]uint32, mode string) (socks [2]*xsk, err error) {
	var ifs [2]*net.Interface
	for i, dev := range devs {
		if ifs[i], err = net.InterfaceByName(dev); err != nil {
			return socks, fmt.Errorf("wire port %s: %w", dev, err)
		}
		if ifs[i].MTU+14 > xskMaxFrame {
			return socks, fmt.Errorf("wire port %s: MTU %d is above the %d bytes an AF_XDP frame of this emulator holds", dev, ifs[i].MTU, xskMaxFrame-14)
		}
	}
	total := int(frames[0]+frames[1]) * xskFrameSize
	mem, err := unix.Mmap(-1, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return socks, fmt.Errorf("allocating %d MiB of UMEM: %w", total>>20, err)
	}
	umem := &xskUmem{mem: mem, refs: 1}
	defer func() {
		if err != nil {
			for _, s := range socks {
				if s != nil {
					s.close()
				}
			}
		}
		umem.release()
	}()
	for i := range socks {
		s := &xsk{dev: devs[i], ifindex: ifs[i].Index, fd: -1, frames: frames[i], base: uint64(i) * uint64(frames[0]) * xskFrameSize}
		if s.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
			return socks, fmt.Errorf("opening an AF_XDP socket: %w (the kernel needs CONFIG_XDP_SOCKETS)", err)
		}
		s.umem = umem
		umem.refs++
		socks[i] = s
		if i == 0 {
			reg := unix.XDPUmemReg{
				Addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))),
				Len:  uint64(total),
				Size: xskFrameSize,
			}
			if err := setsockoptRaw(s.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
				return socks, fmt.Errorf("registering the UMEM (XDP_UMEM_REG): %w (it is locked memory: RLIMIT_MEMLOCK or CAP_IPC_LOCK)", err)
			}
		}
		if err := s.mapRings(frames[i], frames[1-i]); err != nil {
			return socks, err
		}
		// A copy-mode send handles TX_BATCH_SIZE (32) frames per call
		// unless told more; older kernels lack the option, and then kick
		// loops.
		_ = unix.SetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, int(frames[1-i]))
		// Copy mode: veth has no zero-copy support, and copy mode works
		// on any device with native or generic XDP. The second socket
		// shares the first's UMEM (and its mode) on another device.
		sa := &unix.SockaddrXDP{Flags: unix.XDP_COPY, Ifindex: uint32(s.ifindex), QueueID: 0}
		if i == 1 {
			sa = &unix.SockaddrXDP{Flags: unix.XDP_SHARED_UMEM, Ifindex: uint32(s.ifindex), QueueID: 0, SharedUmemFD: uint32(socks[0].fd)}
		}
		if err := unix.Bind(s.fd, sa); err != nil {
			return socks, fmt.Errorf("binding an AF_XDP socket to %s queue 0 in copy mode (flags %#x): %w", s.dev, sa.Flags, err)
		}
	}
	for _, s := range socks {
		if s.port, err = newXDPPort(); err != nil {
			return socks, fmt.Errorf("wire port %s: %w", s.dev, err)
		}
		if err := s.port.register(s.fd); err != nil {
			return socks, fmt.Errorf("wire port %s: %w", s.dev, err)
		}
		if err := s.port.attach(s.ifindex, s.dev, mode); err != nil {
			return socks, err
		}
		// Both ports in one mode, so that a measurement has one answer.
		mode = s.port.mode
	}
	return socks, nil
}

// mapRings sizes and maps the socket's four rings: fill and RX for the
// frames it receives into, TX and completion for the other lane's, and
// gives every one of its chunks to the kernel at once (the fill ring is
// as long as the chunks, so it never overflows).
func (s *xsk) mapRings(own, other uint32) error {
	for _, o := range []struct {
		opt     int
		entries uint32
	}{
		{unix.XDP_UMEM_FILL_RING, own},
		{unix.XDP_UMEM_COMPLETION_RING, other},
		{unix.XDP_RX_RING, own},
		{unix.XDP_TX_RING, other},
	} {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, o.opt, int(o.entries)); err != nil {
			return fmt.Errorf("sizing an AF_XDP ring of %s (option %d): %w", s.dev, o.opt, err)
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockoptRaw(s.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return fmt.Errorf("reading AF_XDP ring offsets (XDP_MMAP_OFFSETS): %w", err)
	}
	for _, r := range []struct {
		r       *xskRing
		off     unix.XDPRingOffset
		pgoff   int64
		entries uint32
		size    uintptr
	}{
		{&s.fill, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, own, 8},
		{&s.comp, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, other, 8},
		{&s.rx, off.Rx, unix.XDP_PGOFF_RX_RING, own, unsafe.Sizeof(unix.XDPDesc{})},
		{&s.tx, off.Tx, unix.XDP_PGOFF_TX_RING, other, unsafe.Sizeof(unix.XDPDesc{})},
	} {
		var err error
		if *r.r, err = mapRing(s.fd, r.off, r.pgoff, r.entries, r.size); err != nil {
			return fmt.Errorf("mapping an AF_XDP ring of %s: %w", s.dev, err)
		}
	}
	for i := range own {
		*s.fill.addr(s.fill.prod) = s.base + uint64(i)*xskFrameSize
		s.fill.prod++
	}
	atomic.StoreUint32(s.fill.producer, s.fill.prod)
	return nil
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
		errs = append(errs, s.umem.release())
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

	umem       []byte    // the shared UMEM, read for the stamps
	held       []xskHeld // ring in arrival order, as long as in's RX frames
	head, n    int
	seq        uint32 // id of the last arrival
	txDone     uint32 // the egress TX ring's consumer at the last departed count
	dropped    bool   // set by drop for the frame being handed over
	monoOffset int64  // monotime − CLOCK_MONOTONIC: maps the XDP stamps

	stamped, lateOnArrival, txErrors uint64

	pub published

	// the ingress socket's XDP_STATISTICS at the last read; the last
	// read is in close, so the final snapshot has them. sockMu orders
	// the reads (Stats, from any goroutine) with close, which closes the
	// descriptor they read.
	sockMu                               sync.Mutex
	sockRead                             atomic.Bool
	sockDrops, sockFull, sockInvalidDesc atomic.Uint64
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
		umem:  in.umem.mem,
		held:  make([]xskHeld, in.frames),
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

// acceptThrough puts every held frame up to id on the egress socket's TX
// ring and kicks the send; the chunks come back through the egress
// completion ring (reap). The TX ring is as long as the ingress chunks, so
// it never overflows.
func (l *xskLane) acceptThrough(id uint32) {
	tx := &l.out.tx
	for l.n > 0 {
		h := l.held[l.head]
		*tx.xdpDesc(tx.prod) = unix.XDPDesc{Addr: h.addr, Len: h.len}
		tx.prod++
		l.head = (l.head + 1) & (len(l.held) - 1)
		l.n--
		if h.id == id {
			break
		}
	}
	l.kick()
	l.reap()
}

// recycle gives an RX chunk back to the kernel (published with the next
// store of the fill producer).
func (l *xskLane) recycle(addr uint64) {
	*l.in.fill.addr(l.in.fill.prod) = addr &^ (xskFrameSize - 1)
	l.in.fill.prod++
}

// kick publishes the TX ring and has the kernel send it: in copy mode the
// frames go out (and through the egress veth into the next namespace)
// within the sendto call, up to the socket's TX budget per call. After
// each call the frames the kernel took from the ring count as departed
// then (scheduler.departed).
func (l *xskLane) kick() {
	tx := &l.out.tx
	atomic.StoreUint32(tx.producer, tx.prod)
	l.countSent()
	for tries := 0; l.txDone != tx.prod && tries < xskKickTries; tries++ {
		_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(l.out.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		l.countSent()
		switch e {
		case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
		default:
			l.txErrors++
			return
		}
	}
}

// countSent counts the frames the kernel has taken from the TX ring since
// the last call as departed now.
func (l *xskLane) countSent() {
	if c := atomic.LoadUint32(l.out.tx.consumer); c != l.txDone {
		l.sched.departed(monotime(), int(c-l.txDone))
		l.txDone = c
	}
}

// reap gives the chunks the egress socket has sent back to the ingress
// fill ring.
func (l *xskLane) reap() {
	c := &l.out.comp
	prod := atomic.LoadUint32(c.producer)
	if c.cons == prod {
		return
	}
	for ; c.cons != prod; c.cons++ {
		l.recycle(*c.addr(c.cons))
	}
	atomic.StoreUint32(c.consumer, c.cons)
	atomic.StoreUint32(l.in.fill.producer, l.in.fill.prod)
}

// receive hands up to xskReadBatch frames of the RX ring to the scheduler.
func (l *xskLane) receive() (readResult, error) {
	rx := &l.in.rx
	prod := atomic.LoadUint32(rx.producer)
	n := min(int(prod-rx.cons), xskReadBatch)
	if n == 0 {
		return readResult{emptied: true, emptiedAt: monotime()}, nil
	}
	now := monotime()
	res := readResult{packets: n, full: n == xskReadBatch}
	for range n {
		d := *rx.xdpDesc(rx.cons)
		rx.cons++
		arrival := now
		if d.Addr >= stampBytes && d.Addr%xskFrameSize >= stampBytes {
			st := (*uint64)(unsafe.Pointer(&l.umem[d.Addr-stampBytes]))
			// A chunk's stamp is cleared once read, so a frame the program
			// could not stamp never shows an older frame's time.
			if v := int64(*st); v != 0 {
				if a := v + l.monoOffset; a <= now && a > now-maxBackdate {
					arrival = a
					res.stamped++
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
	if !res.full {
		res.emptied, res.emptiedAt = true, now
	}
	return res, nil
}

// flush gives the sent chunks back to the fill ring (acceptThrough has
// sent the frames already).
func (l *xskLane) flush() error {
	l.reap()
	return nil
}

// run is the lane's thread: the wake loop on the ingress socket. With
// every frame stamped by the XDP program it reads lazily.
func (l *xskLane) run(stopfd int) error {
	lockLaneThread(&l.pub)
	w := wakeLoop{
		name:  fmt.Sprintf("wire %s → %s", l.in.dev, l.out.dev),
		sched: l.sched,
		io:    l,
		w:     newPollWaiter(l.in.fd, stopfd),
	}
	return w.run()
}

func (l *xskLane) publish() {
	l.pub.store(l.sched, laneCounters{lateOnArrival: l.lateOnArrival, verdictErrors: l.txErrors, kernelTimestamps: l.stamped})
}

// queueStats are the lane's counters as a queue's. The socket's drops are
// the kernel's: no free chunk in the fill ring (or a frame too long) as
// queue drops, a full RX ring as "user dropped"; TX errors (sendto, and
// descriptors the kernel refused) are verdict errors.
func (l *xskLane) queueStats([]kernelQueue) QueueStats {
	qs := l.pub.queueStats(l.cfg, l.sched)
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
	l.sockMu.Lock()
	defer l.sockMu.Unlock()
	l.readSocketLocked()
}

func (l *xskLane) readSocketLocked() {
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
	l.sockMu.Lock()
	defer l.sockMu.Unlock()
	l.readSocketLocked()
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
	defer func() {
		if err != nil {
			unix.Close(efd)
		}
	}()
	socks, err := openXSKPair([2]string{cfg.XDP.PortA, cfg.XDP.PortB}, [2]uint32{wireFrames(qc[0]), wireFrames(qc[1])}, cfg.XDP.XDPMode)
	if err != nil {
		return nil, fmt.Errorf("link emulator: %w", err)
	}
	e.xdpMode = socks[0].port.mode
	e.lanes = []lane{
		newXSKLane(qc[0], socks[0], socks[1]),
		newXSKLane(qc[1], socks[1], socks[0]),
	}
	return e, nil
}
