package emulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// procQueues is the kernel's per-namespace queue table. thread-self, not
// self: a caller inside netns.Do has switched only its own thread.
const procQueues = "/proc/thread-self/net/netfilter/nfnetlink_queue"

// Emulator is a running set of queues. Open binds them; Run drives them.
type Emulator struct {
	cfg     Config
	lanes   []lane // one per direction: NFQUEUE queues or AF_XDP wire lanes
	backend string // Backend or BackendAFXDP
	xdpMode string // the AF_XDP backend's attach mode
	stopfd  int
	stampfd int // keeps kernel receive timestamps on; -1 if it could not

	procMu  sync.Mutex
	proc    *os.File // opened in the emulator's namespace, read with pread
	procBuf []byte

	// rtThreads, set by RunProcess, makes every thread of the process
	// real-time while Run runs; rtProcess says all were at the last sweep.
	rtThreads *rtThreads
	rtProcess atomic.Bool

	closeOnce sync.Once
	closeErr  error
	running   bool
}

// lane is one direction of the link, driven by its own thread: a netfilter
// queue (queue) or one direction of the AF_XDP wire (xskLane).
type lane interface {
	// run drives the lane until stopfd becomes readable or it fails.
	run(stopfd int) error
	// queueStats returns its counters; kq is the namespace's NFQUEUE
	// table, which only a netfilter queue reads.
	queueStats(kq []kernelQueue) QueueStats
	// close releases what the lane holds, after run has returned.
	close() error
}

// Open binds the configured queues to netlink sockets in the calling
// thread's network namespace (call it inside netns.Do to emulate in
// another namespace; the sockets stay there). Packets the kernel queues from
// now on are held and released by the emulator once Run starts; until then
// they wait in the socket buffer.
func Open(cfg Config) (*Emulator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.XDP != nil {
		return openXDP(cfg)
	}
	if cfg.AFPacket != nil {
		return openAFPacket(cfg)
	}
	rcvbuf := cfg.SocketBufferBytes
	if rcvbuf == 0 {
		rcvbuf = DefaultSocketBufferBytes
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("link emulator: eventfd: %w", err)
	}
	e := &Emulator{cfg: cfg, backend: Backend, stopfd: efd, stampfd: enableRxTimestamps(), procBuf: make([]byte, 0, 64<<10)}
	// Without the proc file the kernel's drop counters are unknown; the
	// emulator still runs and reports kernel_read=false.
	e.proc, _ = os.Open(procQueues)
	// The kernel answers a bind of a queue held by another socket with
	// EPERM, which reads like a missing capability; say what it is.
	for _, k := range e.readKernel() {
		for _, qc := range cfg.Queues {
			if k.Num == qc.Num {
				e.Close()
				return nil, fmt.Errorf("link emulator: netfilter queue %d is already bound by netlink port %d in this network namespace (is another ovpnperf emulator running?)", k.Num, k.PortID)
			}
		}
	}
	for _, qc := range cfg.Queues {
		seed := qc.Seed
		if seed == 0 {
			seed = rand.Uint64()
		}
		q, err := openQueue(qc, rcvbuf, seed)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("link emulator: %w", err)
		}
		e.lanes = append(e.lanes, q)
	}
	return e, nil
}

// Run drives the queues until ctx is cancelled, a queue fails or the stats
// file cannot be written, writing a stats snapshot to statsPath (if not
// empty) every StatsInterval. It then stops the queues, closes the emulator
// (unbinding the queues) and writes a last snapshot with Running false.
// Run can be called once.
func (e *Emulator) Run(ctx context.Context, statsPath string) error {
	if e.running {
		return errors.New("link emulator: Run called twice")
	}
	e.running = true
	var wg sync.WaitGroup
	errc := make(chan error, len(e.lanes))
	for _, q := range e.lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.run(e.stopfd); err != nil {
				errc <- err
			}
		}()
	}
	sweep := func() {}
	if rt := e.rtThreads; rt != nil {
		defer rt.restore()
		sweep = func() { e.rtProcess.Store(rt.sweep() == 0) }
		sweep()
	}
	tick := time.NewTicker(StatsInterval)
	defer tick.Stop()
	var err error
	write := func(running bool) {
		if statsPath == "" {
			return
		}
		if werr := writeStats(statsPath, e.snapshot(running)); werr != nil && err == nil {
			err = werr
		}
	}
	// A stats file that cannot be written is fatal from the start: the lab
	// would take a silent emulator for a healthy one.
	write(true)
loop:
	for err == nil {
		select {
		case <-ctx.Done():
			break loop
		case err = <-errc:
			break loop
		case <-tick.C:
			// The runtime may have started threads since the last sweep.
			sweep()
			write(true)
		}
	}
	e.stop()
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	// The kernel counters disappear with the queues: read them first. The
	// rest is read after Close, which may still take in a few packets.
	kq := e.readKernel()
	cerr := e.Close()
	if statsPath != "" {
		if werr := writeStats(statsPath, e.snapshotWith(false, kq)); werr != nil && err == nil {
			err = werr
		}
	}
	return errors.Join(err, cerr)
}

// stop wakes every queue thread through the eventfd; it stays readable, so
// each thread sees it.
func (e *Emulator) stop() {
	var one [8]byte
	one[0] = 1 // host byte order on little-endian; any non-zero value wakes
	unix.Write(e.stopfd, one[:])
}

// enableRxTimestamps opens a socket that asks for receive timestamps. Its
// only purpose is that while any socket does, the kernel stamps every
// packet it receives (a host-wide switch, also thrown by tcpdump), so that
// NFQA_TIMESTAMP tells the emulator when a packet reached the router.
func enableRxTimestamps() int {
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			unix.Close(fd)
			continue
		}
		return fd
	}
	return -1
}

// Stats returns the current counters.
func (e *Emulator) Stats() Stats { return e.snapshot(true) }

func (e *Emulator) snapshot(running bool) Stats { return e.snapshotWith(running, e.readKernel()) }

func (e *Emulator) snapshotWith(running bool, kq []kernelQueue) Stats {
	s := Stats{Backend: e.backend, XDPMode: e.xdpMode, Time: time.Now(), Running: running, RealtimeProcess: e.rtProcess.Load()}
	for _, l := range e.lanes {
		qs := l.queueStats(kq)
		s.Behind = s.Behind || qs.Behind
		s.Queues = append(s.Queues, qs)
	}
	return s
}

// queueStats are the queue's published counters, with the kernel's for it
// from kq.
func (q *queue) queueStats(kq []kernelQueue) QueueStats {
	qs := q.pub.queueStats(q.cfg, q.sched)
	for _, k := range kq {
		if k.Num == q.cfg.Num {
			qs.KernelRead = true
			qs.KernelQueueDrops = k.Dropped
			qs.KernelUserDropped = k.UserDropped
			qs.KernelQueued = k.Total
		}
	}
	qs.setBehind()
	return qs
}

// readKernel reads the namespace's queue table through the file opened by
// Open, from offset 0 each time (seq_file regenerates it).
func (e *Emulator) readKernel() []kernelQueue {
	e.procMu.Lock()
	defer e.procMu.Unlock()
	if e.proc == nil {
		return nil
	}
	b := e.procBuf[:cap(e.procBuf)]
	n, err := e.proc.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return nil
	}
	qs, err := parseKernelQueues(b[:n])
	if err != nil {
		return nil
	}
	return qs
}

// Close unbinds the queues and releases the sockets. The kernel drops the
// packets it still holds for them. Close is idempotent; call it after Run
// has returned (Run closes on its own).
func (e *Emulator) Close() error {
	e.closeOnce.Do(func() {
		var errs []error
		for _, l := range e.lanes {
			errs = append(errs, l.close())
		}
		e.procMu.Lock()
		if e.proc != nil {
			errs = append(errs, e.proc.Close())
			e.proc = nil
		}
		e.procMu.Unlock()
		errs = append(errs, unix.Close(e.stopfd))
		if e.stampfd >= 0 {
			unix.Close(e.stampfd)
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}
