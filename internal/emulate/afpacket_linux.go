package emulate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The AF_PACKET backend: the emulator as a transparent layer-2 "bump in the
// wire" between two ports of a network namespace W that has no addresses
// and does not forward, so the kernel drops its own copy of every frame and
// only the emulator carries frames across.
//
//	              W ns (no addresses, forwarding off, not bridged)
//	port a ──► RX ring (TPACKET_V3) ─► loss? ─► hold(due) ─► sendmmsg ──► port b   up
//	port a ◄── sendmmsg ◄─ hold(due) ◄─ loss? ◄─ RX ring (TPACKET_V3) ◄── port b   down
//
// Each direction has one OS thread, one receive socket on its input port
// (a TPACKET_V3 ring, PACKET_IGNORE_OUTGOING so that it does not read the
// other direction's transmissions back) and one send socket on its output
// port (PACKET_QDISC_BYPASS). The link model is the NFQUEUE backend's
// scheduler, unchanged: the same loss, delay, jitter, order and lateness
// counting, the same Stats.
//
// Frames are copied out of the ring when read, into a byte ring of the
// direction's own (the hold buffer), and the ring's block goes back to
// the kernel at once. Holding frames in the ring itself (zero copy) does
// not work: for TPACKET_V3, poll reports the socket readable while the
// block before the kernel's current one is still the user's, so a thread
// that holds blocks for the delay would never sleep.
//
// A frame's delay counts from its kernel receive time (tpacket3_hdr
// tp_sec/tp_nsec, CLOCK_REALTIME, mapped onto the scheduler's monotonic
// clock for each block), not from when the thread read the block: the kernel
// hands over a block when it is full or when its retire timer expires
// (see retireTimeout), so frames can wait there a few milliseconds.
//
// If the process dies, its sockets close with it: frames in its hold
// buffer are gone, and frames that arrive afterwards find no reader and
// are dropped by W's kernel (no address, no forwarding, no bridge; Open
// refuses a namespace where that is not so). Nothing passes undelayed.

const (
	// ringBlockBytes is one TPACKET_V3 block: room for a 64 KiB GSO
	// aggregate, and ~170 full-size frames per wake-up when the rate
	// fills blocks before their timer.
	ringBlockBytes = 256 << 10
	// ringBlocks is the number of blocks: 16 MiB, about 130 ms of
	// 1 Gbit/s for the thread to read before the kernel drops.
	ringBlocks = 64
	// ringFrameBytes only makes the kernel's ring arithmetic agree
	// (tp_frame_nr); TPACKET_V3 packs frames of any size into blocks.
	ringFrameBytes = 2048
	// vnetHdrLen is struct virtio_net_hdr: the kernel writes it before
	// each frame and reads it before each frame sent, so checksum offload
	// (CHECKSUM_PARTIAL) and GSO aggregates cross the wire intact.
	vnetHdrLen = 10
	// sendSlots is how many frames one sendmmsg call takes.
	sendSlots = 256
	// defaultMinHoldBytes is the least hold buffer.
	defaultMinHoldBytes = 32 << 20
	// holdBytesPerSecond sizes the hold buffer beyond the minimum: what
	// arrives in twice the longest hold at 1 Gbit/s.
	holdBytesPerSecond = 125e6
	// ethPAll is ETH_P_ALL in network byte order, as socket(2) and bind(2)
	// want it.
	ethPAll = uint16(unix.ETH_P_ALL<<8) | uint16(unix.ETH_P_ALL>>8)
)

// holdBytes is the hold buffer of direction q.
func (c *AFPacketConfig) holdBytes(q QueueConfig) int {
	if c.HoldBytes > 0 {
		return c.HoldBytes
	}
	hold := 2 * (q.Delay + q.Jitter + 2*maxRetire)
	return max(defaultMinHoldBytes, int(hold.Seconds()*holdBytesPerSecond))
}

// openAFPacket opens the AF_PACKET backend for cfg (cfg.AFPacket set,
// validated) in the calling thread's network namespace (call it inside
// netns.Do). Frames arriving from now on wait in the rings until Run
// starts.
func openAFPacket(cfg Config) (_ *Emulator, err error) {
	w := cfg.AFPacket
	var qc [2]QueueConfig
	for _, q := range cfg.Queues {
		qc[q.Num] = q
	}
	pa, err := wirePort(w.PortA)
	if err != nil {
		return nil, err
	}
	pb, err := wirePort(w.PortB)
	if err != nil {
		return nil, err
	}
	if err := checkNoForwarding(); err != nil {
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("link emulator: eventfd: %w", err)
	}
	e := &Emulator{cfg: cfg, stopfd: efd, stampfd: -1, backend: BackendAFPacket}
	for i, d := range []struct{ in, out *net.Interface }{{pa, pb}, {pb, pa}} {
		seed := qc[i].Seed
		if seed == 0 {
			seed = rand.Uint64()
		}
		p, err := openPipe(qc[i], d.in, d.out, w.holdBytes(qc[i]), w.TX == TXRing, seed)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("link emulator: %w", err)
		}
		e.lanes = append(e.lanes, p)
	}
	return e, nil
}

// wirePort finds a port and checks that the kernel will not carry frames
// across on its own: it must be up, have no address (IPv6 link-local
// included) and not belong to a bridge or bond.
func wirePort(name string) (*net.Interface, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("link emulator: port %s: %w", name, err)
	}
	if ifi.Flags&net.FlagUp == 0 {
		return nil, fmt.Errorf("link emulator: port %s is down (ip link set %s up)", name, name)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("link emulator: port %s: %w", name, err)
	}
	if len(addrs) > 0 {
		return nil, fmt.Errorf("link emulator: port %s has address %s; a wire port must have none (and IPv6 off), or the kernel answers and forwards on its own", name, addrs[0])
	}
	if _, err := os.Stat("/sys/class/net/" + name + "/master"); err == nil {
		return nil, fmt.Errorf("link emulator: port %s belongs to a bridge or bond, which would carry frames across undelayed", name)
	}
	return ifi, nil
}

// checkNoForwarding refuses a namespace that routes: its kernel would
// forward its own copy of a frame addressed to a router in it. /proc/sys/net
// shows the namespace of the thread that opens the file.
func checkNoForwarding() error {
	for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // no IPv6
		}
		if err != nil {
			return fmt.Errorf("link emulator: %w", err)
		}
		if strings.TrimSpace(string(b)) != "0" {
			return fmt.Errorf("link emulator: %s is on in the wire namespace; the kernel would forward frames undelayed", f)
		}
	}
	return nil
}

// pipe is one direction: frames read from in's ring, held, sent out of out.
type pipe struct {
	cfg     QueueConfig
	in, out string
	rxfd    int
	txfd    int
	ring    []byte // mmapped RX ring
	blk     int    // next block to read
	sched   *scheduler
	nextID  uint32

	hold   holdBuf
	frames fifo[heldFrame] // held frames, in arrival order (the scheduler's order)

	// the current arrival, between alloc and the scheduler's decision
	dropped bool

	// send batch
	iov  []unix.Iovec
	msgs []unix.Mmsghdr
	ends []int // hold-buffer end of each frame of the batch
	nout int

	// TX ring (TXRing): frames are filled at txNext and marked
	// TP_STATUS_SEND_REQUEST; txMarked of them wait for the next kick.
	txRing   []byte
	txNext   int
	txMarked int
	txFull   uint64 // frames that found the ring full and went by sendmmsg

	// owned by the pipe's thread, published with the scheduler's counters
	truncated, holdFull, sendErrors uint64
	kernelTimestamps, lateOnArrival uint64

	statsMu          sync.Mutex
	ringDrops, freez uint64 // PACKET_STATISTICS, summed (the kernel resets on read)

	pub published
}

// retireTimeout is the TPACKET_V3 block retire timer: a block that has
// frames but is not full goes to the reader this long after it was opened.
// Frames can be read that much after they arrived, harmless while it is
// below the shortest hold: their delay counts from the kernel's stamp. The
// timer runs on jiffies (4 ms at HZ=250), so a block may wait up to one
// more tick.
func retireTimeout(q QueueConfig) time.Duration {
	return min(max((q.Delay-q.Jitter)/4, time.Millisecond), maxRetire)
}

// maxRetire bounds retireTimeout.
const maxRetire = 4 * time.Millisecond

func openPipe(qc QueueConfig, in, out *net.Interface, holdBytes int, txRing bool, seed uint64) (*pipe, error) {
	p := &pipe{
		cfg:  qc,
		in:   in.Name,
		out:  out.Name,
		rxfd: -1, txfd: -1,
		sched: newScheduler(qc, seed),
		iov:   make([]unix.Iovec, sendSlots),
		msgs:  make([]unix.Mmsghdr, sendSlots),
		ends:  make([]int, sendSlots),
	}
	p.hold.buf = make([]byte, holdBytes)
	for i := range p.msgs {
		p.msgs[i].Hdr.Iov = &p.iov[i]
		p.msgs[i].Hdr.SetIovlen(1)
	}
	if err := p.openRX(in); err != nil {
		p.close()
		return nil, err
	}
	if err := p.openTX(out, txRing); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// packetSocket opens an AF_PACKET socket and says what is missing when it
// cannot.
func packetSocket(proto uint16) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(proto))
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return -1, fmt.Errorf("opening an AF_PACKET socket: %w (needs CAP_NET_RAW)", err)
	case errors.Is(err, unix.EAFNOSUPPORT):
		return -1, fmt.Errorf("opening an AF_PACKET socket: %w (the kernel needs CONFIG_PACKET)", err)
	case err != nil:
		return -1, fmt.Errorf("opening an AF_PACKET socket: %w", err)
	}
	return fd, nil
}

// setPacketOpt sets one SOL_PACKET option, naming the option and the
// kernel that has it when the kernel does not.
func setPacketOpt(fd, opt, v int, name, since string) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, opt, v); err != nil {
		return fmt.Errorf("AF_PACKET socket: setting %s: %w (needs Linux %s or later)", name, err, since)
	}
	return nil
}

// openRX opens the receive socket and its ring on in.
//
// Roughly what a TPACKET_V3 capture does (tcpdump, libpcap's
// pcap-linux.c), with the vnet header and outgoing frames ignored.
func (p *pipe) openRX(in *net.Interface) error {
	fd, err := packetSocket(ethPAll)
	if err != nil {
		return err
	}
	p.rxfd = fd
	if err := setPacketOpt(fd, unix.PACKET_VERSION, unix.TPACKET_V3, "PACKET_VERSION TPACKET_V3", "3.2"); err != nil {
		return err
	}
	// The other direction's frames leave by this port; without this the
	// ring would read them back as if they had arrived.
	if err := setPacketOpt(fd, unix.PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING", "4.20"); err != nil {
		return err
	}
	if err := setPacketOpt(fd, unix.PACKET_VNET_HDR, 1, "PACKET_VNET_HDR", "3.13"); err != nil {
		return err
	}
	req := unix.TpacketReq3{
		Block_size:     ringBlockBytes,
		Block_nr:       ringBlocks,
		Frame_size:     ringFrameBytes,
		Frame_nr:       ringBlocks * (ringBlockBytes / ringFrameBytes),
		Retire_blk_tov: uint32(retireTimeout(p.cfg) / time.Millisecond),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return fmt.Errorf("AF_PACKET socket: PACKET_RX_RING of %d × %d bytes: %w", req.Block_nr, req.Block_size, err)
	}
	p.ring, err = unix.Mmap(fd, 0, ringBlocks*ringBlockBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_LOCKED)
	if err != nil {
		// MAP_LOCKED fails under a low RLIMIT_MEMLOCK; the ring is
		// kernel memory and never swapped anyway.
		p.ring, err = unix.Mmap(fd, 0, ringBlocks*ringBlockBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if err != nil {
		p.ring = nil
		return fmt.Errorf("AF_PACKET socket: mapping the RX ring: %w", err)
	}
	// Bound last, so that the ring exists before frames flow.
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: ethPAll, Ifindex: in.Index}); err != nil {
		return fmt.Errorf("AF_PACKET socket: binding to %s: %w", in.Name, err)
	}
	// Discard statistics of before the bind.
	unix.GetsockoptTpacketStatsV3(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	return nil
}

// TX ring geometry (TXRing): 4096 frames of 2048 bytes. A frame's data
// starts txDataOff bytes in (TPACKET2_HDRLEN − sizeof(struct sockaddr_ll),
// where tpacket_snd looks without PACKET_TX_HAS_OFF): the vnet header,
// then the frame.
const (
	txFrameBytes = 2048
	txFrames     = 4096
	txBlockBytes = 64 << 10
	txDataOff    = 32
)

// openTX opens the send socket on out. Protocol 0: it receives nothing.
func (p *pipe) openTX(out *net.Interface, ring bool) error {
	fd, err := packetSocket(0)
	if err != nil {
		return err
	}
	p.txfd = fd
	if err := setPacketOpt(fd, unix.PACKET_VNET_HDR, 1, "PACKET_VNET_HDR", "3.13"); err != nil {
		return err
	}
	// Straight to the driver: a wire has no queue of its own, and the
	// frames were paced by the scheduler already.
	if err := setPacketOpt(fd, unix.PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS", "3.14"); err != nil {
		return err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 16<<20); err != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<20)
	}
	if ring {
		if err := setPacketOpt(fd, unix.PACKET_VERSION, unix.TPACKET_V2, "PACKET_VERSION TPACKET_V2", "2.6.27"); err != nil {
			return err
		}
		// A frame the kernel cannot send is skipped, not left blocking
		// the ring.
		if err := setPacketOpt(fd, unix.PACKET_LOSS, 1, "PACKET_LOSS", "2.6.31"); err != nil {
			return err
		}
		req := unix.TpacketReq{Block_size: txBlockBytes, Block_nr: txFrames * txFrameBytes / txBlockBytes, Frame_size: txFrameBytes, Frame_nr: txFrames}
		if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
			return fmt.Errorf("AF_PACKET socket: PACKET_TX_RING of %d × %d bytes: %w", req.Frame_nr, req.Frame_size, err)
		}
		var err error
		if p.txRing, err = unix.Mmap(fd, 0, txFrames*txFrameBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			p.txRing = nil
			return fmt.Errorf("AF_PACKET socket: mapping the TX ring: %w", err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: out.Index}); err != nil {
		return fmt.Errorf("AF_PACKET socket: binding to %s: %w", out.Name, err)
	}
	return nil
}

// tpacketHdrV1 is the block header of a TPACKET_V3 block (struct
// tpacket_block_desc with its tpacket_hdr_v1).
type tpacketBlock struct {
	version, toPriv uint32
	hdr             unix.TpacketHdrV1
}

// receive takes every block the kernel has handed over, in ring order,
// copies its frames into the hold buffer, gives the block back and hands
// the frames to the scheduler. It reads the whole ring, so no batch is
// ever full, and the loop reads it on every pass, never lazily.
func (p *pipe) receive() (readResult, error) {
	var now, offset int64
	for {
		b := p.ring[p.blk*ringBlockBytes : (p.blk+1)*ringBlockBytes]
		bd := (*tpacketBlock)(unsafe.Pointer(&b[0]))
		if atomic.LoadUint32(&bd.hdr.Block_status)&unix.TP_STATUS_USER == 0 {
			return readResult{}, nil
		}
		// One clock reading per block gives both clocks: now on the
		// monotonic one, and the offset that maps the kernel's
		// CLOCK_REALTIME receive stamps onto it. Per block, not per
		// read: every frame of a block the kernel has handed over was
		// stamped before this reading, but a block handed over while
		// the read goes on holds frames stamped after an earlier one,
		// which the check below would take for a clock step
		// (docs/measurements.md#one-clock-reading-per-ring-block).
		t := time.Now()
		now = int64(t.Sub(epoch))
		offset = now - t.UnixNano()
		off := int(bd.hdr.Offset_to_first_pkt)
		for range bd.hdr.Num_pkts {
			if off+unix.SizeofTpacket3Hdr > len(b) {
				p.truncated++
				break
			}
			h := (*unix.Tpacket3Hdr)(unsafe.Pointer(&b[off]))
			p.frame(b, off, h, now, offset)
			if h.Next_offset == 0 {
				break
			}
			off += int(h.Next_offset)
		}
		atomic.StoreUint32(&bd.hdr.Block_status, unix.TP_STATUS_KERNEL)
		p.blk = (p.blk + 1) % ringBlocks
	}
}

// frame takes one frame of a block: hdr at off in block b.
func (p *pipe) frame(b []byte, off int, h *unix.Tpacket3Hdr, now, offset int64) {
	start := off + int(h.Mac) - vnetHdrLen
	end := off + int(h.Mac) + int(h.Snaplen)
	if h.Snaplen < h.Len || start < off || end > len(b) {
		// Cut by the block size: it cannot be sent on whole.
		p.truncated++
		return
	}
	at, ok := p.hold.alloc(end - start)
	if !ok {
		p.holdFull++
		return
	}
	copy(p.hold.buf[at:], b[start:end])
	arrival := now
	// A stamp that does not fit (a clock step) counts as none.
	if a := int64(h.Sec)*1e9 + int64(h.Nsec) + offset; h.Sec != 0 && a <= now && a > now-maxBackdate {
		arrival = a
		p.kernelTimestamps++
	}
	if now-arrival > p.sched.delay-p.sched.jitter+p.sched.tolerance {
		p.lateOnArrival++
	}
	id := p.nextID
	p.nextID++
	p.dropped = false
	p.sched.arrive(arrival, id, h.Snaplen, p)
	if p.dropped {
		p.hold.unalloc()
		return
	}
	p.frames.push(heldFrame{id: id, off: int32(at), len: int32(end - start)})
}

// drop is the scheduler's loss decision for the frame being taken.
func (p *pipe) drop(id uint32) { p.dropped = true }

// acceptThrough queues every held frame up to id for sending, keeping
// their order across the TX ring and sendmmsg.
func (p *pipe) acceptThrough(id uint32) {
	for p.frames.len() > 0 && int32(p.frames.front().id-id) <= 0 {
		f := p.frames.pop()
		if p.txRing != nil && int(f.len) <= txFrameBytes-txDataOff && p.txSlot() {
			if p.nout > 0 {
				p.send() // earlier frames first
			}
			slot := p.txRing[p.txNext*txFrameBytes : (p.txNext+1)*txFrameBytes]
			copy(slot[txDataOff:], p.hold.buf[f.off:f.off+f.len])
			h := (*unix.Tpacket2Hdr)(unsafe.Pointer(&slot[0]))
			h.Len = uint32(f.len)
			atomic.StoreUint32(&h.Status, unix.TP_STATUS_SEND_REQUEST)
			p.txNext = (p.txNext + 1) % txFrames
			p.txMarked++
			p.hold.free(int(f.off+f.len), 1)
			if p.txMarked == sendSlots {
				p.kick()
			}
			continue
		}
		if p.txMarked > 0 {
			p.kick() // earlier frames first
		}
		if p.nout == sendSlots {
			p.send()
		}
		p.iov[p.nout].Base = &p.hold.buf[f.off]
		p.iov[p.nout].SetLen(int(f.len))
		p.ends[p.nout] = int(f.off + f.len)
		p.nout++
	}
}

// send hands the batch to the kernel with sendmmsg, which copies each
// frame into a socket buffer and passes it to the output port's driver
// (which, for a veth, delivers it to the peer within the call), then frees
// the frames' hold space. A frame the kernel refuses is counted and
// dropped, never retried late.
func (p *pipe) send() {
	done := 0
	for done < p.nout {
		r, _, errno := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(p.txfd),
			uintptr(unsafe.Pointer(&p.msgs[done])), uintptr(p.nout-done), unix.MSG_DONTWAIT, 0, 0)
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			// The first frame failed (ENOBUFS, EMSGSIZE, ENETDOWN):
			// count it, go on with the next.
			p.sendErrors++
			done++
			p.sched.departed(monotime(), 1)
			continue
		}
		done += int(r)
		// The frames this call took have left, one after another
		// inside it.
		p.sched.departed(monotime(), int(r))
	}
	// Frames leave the hold buffer in order; the last one's end is the
	// new tail.
	p.hold.free(p.ends[p.nout-1], p.nout)
	p.nout = 0
}

// txSlot says the ring's next frame is free: the kernel has sent it and
// freed its socket buffer. If it is not, it kicks what is marked and looks
// again; a frame that still finds it taken goes by sendmmsg.
func (p *pipe) txSlot() bool {
	h := (*unix.Tpacket2Hdr)(unsafe.Pointer(&p.txRing[p.txNext*txFrameBytes]))
	if atomic.LoadUint32(&h.Status) == unix.TP_STATUS_AVAILABLE {
		return true
	}
	if p.txMarked > 0 {
		p.kick()
		if atomic.LoadUint32(&h.Status) == unix.TP_STATUS_AVAILABLE {
			return true
		}
	}
	p.txFull++
	return false
}

// kick makes the kernel send every frame marked in the TX ring, in ring
// order, within this call (MSG_DONTWAIT: it does not wait for the frames'
// socket buffers to be freed).
func (p *pipe) kick() {
	for {
		_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(p.txfd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			p.sendErrors++
		}
		break
	}
	// The marked frames went (or failed) inside the call.
	p.sched.departed(monotime(), p.txMarked)
	p.txMarked = 0
}

// flush sends what acceptThrough queued.
func (p *pipe) flush() error {
	if p.nout > 0 {
		p.send()
	}
	if p.txMarked > 0 {
		p.kick()
	}
	return nil
}

// publish copies the counters for readers.
func (p *pipe) publish() {
	p.pub.store(p.sched, laneCounters{p.lateOnArrival, p.holdFull, p.sendErrors, p.truncated, p.kernelTimestamps})
}

// run is the direction's thread: the wake loop on the ring, read on
// every pass; a receive socket that fails (its port gone) ends it.
func (p *pipe) run(stopfd int) error {
	lockLaneThread(&p.pub)
	l := wakeLoop{
		name:          fmt.Sprintf("afpacket %s→%s", p.in, p.out),
		sched:         p.sched,
		io:            p,
		w:             newPollWaiter(p.rxfd, stopfd),
		readEveryPass: true,
		inputErrors:   true,
	}
	return l.run()
}

// kernelStats adds the kernel's ring counters since the last call:
// frames dropped because no block was free, and how often the ring froze.
func (p *pipe) kernelStats() (drops uint64, ok bool) {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	if p.rxfd < 0 {
		return p.ringDrops, true
	}
	st, err := unix.GetsockoptTpacketStatsV3(p.rxfd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return p.ringDrops, false
	}
	p.ringDrops += uint64(st.Drops)
	p.freez += uint64(st.Freeze_q_cnt)
	return p.ringDrops, true
}

// close releases the direction's sockets and rings, after run has
// returned; frames still held are dropped.
func (p *pipe) close() error {
	p.publish()
	p.kernelStats()
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	var errs []error
	for _, m := range []*[]byte{&p.ring, &p.txRing} {
		if *m != nil {
			errs = append(errs, unix.Munmap(*m))
			*m = nil
		}
	}
	for _, fd := range []*int{&p.rxfd, &p.txfd} {
		if *fd >= 0 {
			errs = append(errs, unix.Close(*fd))
			*fd = -1
		}
	}
	return errors.Join(errs...)
}

// queueStats returns the direction's counters. The NFQUEUE fields carry
// their AF_PACKET counterparts: frames the hold buffer had no room for
// (ENOBUFS), frames the kernel refused to send (VerdictErrors), frames cut
// by the ring's block size (Truncated), frames the ring dropped because
// every block was the reader's (KernelQueueDrops).
func (p *pipe) queueStats([]kernelQueue) QueueStats {
	qs := p.pub.queueStats(p.cfg, p.sched)
	qs.setBehind()
	return qs
}

// holdBuf is a byte ring that holds frames from their arrival to their
// release, both in arrival order: a frame is a contiguous range; one that
// does not fit before the end starts again at 0.
type holdBuf struct {
	buf        []byte
	head, tail int // next write; start of the oldest frame
	n          int // frames held
	lastHead   int // head before the last alloc, for unalloc
}

// alloc reserves size bytes and returns their offset.
func (h *holdBuf) alloc(size int) (int, bool) {
	if h.n == 0 {
		h.head, h.tail = 0, 0
	}
	at := -1
	switch {
	case h.n == 0 || h.head > h.tail:
		// Free: [head, len) and [0, tail).
		if len(h.buf)-h.head >= size {
			at = h.head
		} else if h.tail > size {
			at = 0
		}
	case h.head < h.tail:
		// Free: [head, tail); strictly more, so that head == tail only
		// when empty.
		if h.tail-h.head > size {
			at = h.head
		}
	}
	if at < 0 {
		return 0, false
	}
	h.lastHead = h.head
	h.head = at + size
	h.n++
	return at, true
}

// unalloc takes back the last alloc (a frame dropped for loss).
func (h *holdBuf) unalloc() {
	h.head = h.lastHead
	h.n--
}

// free releases the k oldest frames, the last of which ends at end.
func (h *holdBuf) free(end, k int) {
	h.tail = end
	h.n -= k
}

// heldFrame is one frame in the hold buffer.
type heldFrame struct {
	id       uint32
	off, len int32
}
