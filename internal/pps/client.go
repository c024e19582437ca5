package pps

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Config is what a client run asks for.
type Config struct {
	// Server is the pps server's UDP address, host:port.
	Server string
	Params Params
	// Count bounds the probes sent over all flows; 0 = no bound but Duration.
	Count uint64
	// Window bounds the unresolved probes per flow (a power of two); the
	// sender waits when it is full. 0 = 4 Mi.
	Window uint32
	// HandshakeTimeout is how long to wait for the server's answer, over
	// all retransmissions (every half second). 0 = 3 s.
	HandshakeTimeout time.Duration
	// OpenIn, if set, opens the sockets: Run calls it with a function that
	// creates them. Labs use it to send from inside a network namespace
	// (netns.Do).
	OpenIn func(open func() error) error
	// Interval, if set, is called with each second of the series once its
	// losses are known (one timeout after the second ends).
	Interval func(Interval)
	// GSO sends each batch of probes as one UDP GSO write (UDP_SEGMENT)
	// instead of sendmmsg, where the kernel supports it; see gso_linux.go
	// for why a veth path then carries unsegmented packets.
	GSO bool
	// Key, if set, signs the hello so that a server with the same key
	// gives this test precedence over unauthenticated ones.
	Key []byte
}

// Errors of Run that callers may want to tell apart.
var (
	ErrNoServer = errors.New("no pps server answered")
	ErrRefused  = errors.New("the pps server refused the test")
)

// flow is one socket (source port) with its sender and receiver.
type flow struct {
	id   uint16
	conn *net.UDPConn
	bc   batchConn
	// gso is set while the flow sends with UDP GSO; gsoErr says why it
	// fell back to sendmmsg (read after the sender ended).
	gso    bool
	gsoErr error
	// lockThread keeps the sender on one OS thread.
	lockThread bool

	mu sync.Mutex
	t  *flowTracker
}

// Run performs the handshake with the server, sends probes within the
// accepted parameters, waits for the last echoes, closes the session and
// returns the result. If ctx ends while sending, Run stops early and returns
// the result so far with Interrupted set, and ctx's error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	c, err := dial(cfg)
	if err != nil {
		return nil, err
	}
	defer c.ctl.Close()
	if err := c.handshake(ctx); err != nil {
		return nil, err
	}
	defer c.closeFlows()
	if err := c.openFlows(); err != nil {
		return nil, err
	}
	flowErr := c.measure(ctx)
	c.summarize(ctx)
	c.finish(ctx)
	if flowErr != nil {
		return c.res, flowErr
	}
	if c.res.Interrupted {
		return c.res, ctx.Err()
	}
	return c.res, nil
}

// clientRun is one client run, from the handshake to the server's report.
type clientRun struct {
	cfg    Config
	raddr  *net.UDPAddr
	openIn func(open func() error) error
	// ctl carries the control messages; nonce and id name the session.
	ctl   *net.UDPConn
	nonce [16]byte
	id    uint32
	// wait bounds each control exchange (HandshakeTimeout).
	wait time.Duration
	// p is what the server accepted.
	p     Params
	flows []*flow
	res   *Result
	// epoch is when sending began; sendEndNs when it ended (ns after
	// epoch); seconds the number of whole intervals of the series.
	epoch     time.Time
	sendEndNs int64
	seconds   int
	rtt       histogram
}

// dial resolves the server and opens the control socket.
func dial(cfg Config) (*clientRun, error) {
	raddr, err := net.ResolveUDPAddr("udp", cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", cfg.Server, err)
	}
	c := &clientRun{cfg: cfg, raddr: raddr, openIn: cfg.OpenIn, wait: cfg.HandshakeTimeout}
	if c.openIn == nil {
		c.openIn = func(open func() error) error { return open() }
	}
	if c.wait <= 0 {
		c.wait = 3 * time.Second
	}
	err = c.openIn(func() (err error) {
		c.ctl, err = net.DialUDP("udp", nil, raddr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s is unreachable: %w", raddr, err)
	}
	_, _ = rand.Read(c.nonce[:])
	return c, nil
}

// handshake asks for the test and checks that the server accepted what
// was asked (it may only shorten the duration).
func (c *clientRun) handshake(ctx context.Context) error {
	cfg, raddr := c.cfg, c.raddr
	acc, err := exchange(ctx, c.ctl, &Control{Version: Version, Type: MsgHello, Nonce: c.nonce, Params: cfg.Params, Key: cfg.Key}, MsgAccept, c.wait)
	if err != nil {
		if errors.Is(err, errExchangeTimeout) {
			return fmt.Errorf("%w the handshake at udp %s within %v: start `ovpnperf pps server` there, and check that udp port %d is open", ErrNoServer, raddr, c.wait, raddr.Port)
		}
		return err
	}
	c.id, c.p = acc.Session, acc.Params
	c.res = &Result{Server: raddr.String(), Session: acc.Session, Requested: cfg.Params, Params: acc.Params, Count: cfg.Count}
	p := acc.Params
	if p.Size != cfg.Params.Size || p.Flows != cfg.Params.Flows || p.Timeout != cfg.Params.Timeout ||
		p.RatePPS != cfg.Params.RatePPS || p.Duration > cfg.Params.Duration || p.Duration <= 0 {
		return fmt.Errorf("the pps server at %s accepted parameters other than those asked for (%+v, asked %+v)", raddr, p, cfg.Params)
	}
	if p.OneWay != cfg.Params.OneWay {
		// A server older than one-way tests accepted it as an echo test;
		// close that session before saying so, and send nothing.
		_, _ = exchange(ctx, c.ctl, &Control{Version: Version, Type: MsgFinish, Nonce: c.nonce, Session: c.id}, MsgReport, c.wait)
		return fmt.Errorf("the pps server at %s does not offer one-way tests (it predates them): update it, or test without --one-way", raddr)
	}
	if p.Duration < cfg.Params.Duration {
		c.res.Warnings = append(c.res.Warnings, fmt.Sprintf("the server caps the duration at %v", p.Duration))
	}
	return nil
}

// openFlows opens one socket per flow (through OpenIn), with GSO where
// asked for and possible.
func (c *clientRun) openFlows() error {
	p := c.p
	c.flows = make([]*flow, p.Flows)
	return c.openIn(func() error {
		for i := range c.flows {
			conn, err := net.DialUDP("udp", nil, c.raddr)
			if err != nil {
				return fmt.Errorf("opening flow %d to %s: %w", i, c.raddr, err)
			}
			setBuffers(conn, 4<<20)
			f := &flow{id: uint16(i), conn: conn, bc: newBatchConn(conn), t: newFlowTracker(p.Timeout, c.cfg.Window),
				// A thread per sender only while there are no more
				// senders than the Go scheduler runs at once: beyond,
				// locked threads would take turns at the cost of a
				// thread switch each.
				lockThread: p.Flows <= runtime.GOMAXPROCS(0)}
			c.flows[i] = f
			if c.cfg.GSO {
				if err := gsoFits(conn, p.Size); err != nil {
					f.gsoErr = err
				} else if err := enableGSO(conn, p.Size); err != nil {
					f.gsoErr = err
				} else {
					f.gso = true
				}
			}
		}
		return nil
	})
}

func (c *clientRun) closeFlows() {
	for _, f := range c.flows {
		if f != nil {
			f.conn.Close()
		}
	}
}

// measure runs the senders and receivers, resolves losses as timeouts
// pass, reports each finished second, and returns the first error of a
// flow. It sets sendEndNs, seconds and the client's CPU.
func (c *clientRun) measure(ctx context.Context) error {
	p, res := c.p, c.res
	res.Start = time.Now()
	c.epoch = res.Start
	u0, s0 := cpuTime()
	var flowErr error
	var errMu sync.Mutex
	sendCtx, stopSending := context.WithTimeout(ctx, p.Duration)
	defer stopSending()
	fail := func(err error) {
		errMu.Lock()
		if flowErr == nil {
			flowErr = err
		}
		errMu.Unlock()
		stopSending()
	}
	sendDone, sentUntil, receivers := c.start(sendCtx, fail)

	// Resolve losses, report finished seconds, and end when every probe is
	// echoed or its timeout has passed.
	timeoutNs := int64(p.Timeout)
	emitted := 0
	emit := func(upTo int, sendEndNs int64, final bool) {
		for ; emitted < upTo; emitted++ {
			iv := mergeSecond(c.flows, emitted, sendEndNs, final && emitted == upTo-1)
			res.Series = append(res.Series, iv)
			if c.cfg.Interval != nil {
				c.cfg.Interval(iv)
			}
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	c.sendEndNs = -1
	wake := sendDone // nil once seen closed, so the loop does not spin
	if p.OneWay {
		// Nothing comes back: give the last probes one timeout to reach
		// the server (unless interrupted), then ask it what it counted.
		<-sendDone
		c.sendEndNs = *sentUntil
		sleepUntil(ctx, c.epoch.Add(time.Duration(c.sendEndNs+timeoutNs)))
	}
	for !p.OneWay {
		select {
		case <-tick.C:
		case <-wake:
			wake = nil
		}
		nowNs := int64(time.Since(c.epoch))
		outstanding := 0
		for _, f := range c.flows {
			f.mu.Lock()
			f.t.resolve(nowNs)
			outstanding += f.t.outstanding()
			f.mu.Unlock()
		}
		if c.sendEndNs < 0 {
			select {
			case <-sendDone:
				c.sendEndNs = *sentUntil
			default:
			}
		}
		if c.sendEndNs >= 0 && (outstanding == 0 || nowNs >= c.sendEndNs+timeoutNs) {
			for _, f := range c.flows {
				f.mu.Lock()
				f.t.resolve(max(nowNs, c.sendEndNs+timeoutNs))
				f.mu.Unlock()
			}
			break
		}
		// Second i is final once every probe sent in it is resolved.
		ready := int((nowNs - timeoutNs) / int64(time.Second))
		if c.sendEndNs < 0 && ready > 0 {
			emit(ready, -1, false)
		}
	}
	// Whole seconds, and the rest as a last interval unless it is a sliver
	// (under 50 ms), which joins the second before it.
	c.seconds = int((c.sendEndNs - 50*int64(time.Millisecond) + int64(time.Second) - 1) / int64(time.Second))
	if !p.OneWay {
		emit(max(c.seconds, emitted, 1), c.sendEndNs, true)
	}
	wall := time.Since(c.epoch)
	u1, s1 := cpuTime()
	res.CPU = cpuOf(u1-u0, s1-s0, wall)

	// Stop the receivers (no echo is awaited any more).
	for _, f := range c.flows {
		_ = f.conn.SetReadDeadline(time.Now())
	}
	receivers.Wait()
	errMu.Lock()
	defer errMu.Unlock()
	return flowErr
}

// start runs a sender per flow (and a receiver, unless one-way), each with
// its share of the rate and of Count. sendDone closes when every sender
// has stopped; *sentUntil (read after that) is when, in ns after epoch.
func (c *clientRun) start(sendCtx context.Context, fail func(error)) (sendDone chan struct{}, sentUntil *int64, receivers *sync.WaitGroup) {
	p, cfg := c.p, c.cfg
	var senders sync.WaitGroup
	receivers = &sync.WaitGroup{}
	rate := float64(p.RatePPS) / float64(p.Flows)
	for i, f := range c.flows {
		quota := uint64(0)
		if cfg.Count > 0 {
			quota = cfg.Count / uint64(p.Flows)
			if uint64(i) < cfg.Count%uint64(p.Flows) {
				quota++
			}
			if quota == 0 {
				continue
			}
		}
		if !p.OneWay {
			receivers.Add(1)
			go func() {
				defer receivers.Done()
				if err := f.receive(c.epoch, c.id, p.Size); err != nil {
					fail(err)
				}
			}()
		}
		senders.Add(1)
		go func() {
			defer senders.Done()
			if err := f.send(sendCtx, c.epoch, c.id, p.Size, rate, quota, p.OneWay); err != nil {
				fail(err)
			}
		}()
	}
	sendDone = make(chan struct{})
	sentUntil = new(int64)
	go func() {
		senders.Wait()
		*sentUntil = int64(time.Since(c.epoch))
		close(sendDone)
	}()
	return sendDone, sentUntil, receivers
}

// summarize adds up the flows' counters and RTTs and adds the warnings the
// figures call for.
func (c *clientRun) summarize(ctx context.Context) {
	p, res, cfg := c.p, c.res, c.cfg
	res.SendSeconds = float64(c.sendEndNs) / 1e9
	for _, f := range c.flows {
		res.Counters.add(f.t.counters)
		res.Flows = append(res.Flows, f.t.counters)
		c.rtt.merge(&f.t.rtt)
	}
	res.summarize(&c.rtt)
	if cfg.GSO {
		for _, f := range c.flows {
			if f.gsoErr != nil {
				res.Warnings = append(res.Warnings, fmt.Sprintf("flow %d sent with sendmmsg, not GSO: %v", f.id, f.gsoErr))
			}
		}
	}
	if p.RatePPS > 0 && res.SendSeconds > 0 && res.SentPPSMean < 0.95*float64(p.RatePPS) &&
		(cfg.Count == 0 || res.Sent < cfg.Count) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the client sent %.0f pps, short of the %d pps asked for: it could not keep up (busy CPU?)", res.SentPPSMean, p.RatePPS))
	}
	if ctx.Err() != nil {
		res.Interrupted = true
	}
}

// finish closes the session; the server reports what it saw (and, for a
// one-way test, its per-second counts, which make the series).
func (c *clientRun) finish(ctx context.Context) {
	res := c.res
	fctx := context.WithoutCancel(ctx)
	rep, err := exchange(fctx, c.ctl, &Control{Version: Version, Type: MsgFinish, Nonce: c.nonce, Session: c.id}, MsgReport, c.wait)
	if err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the server did not report its counters: %v", err))
	} else {
		res.ServerReport = &rep.Report
		cpu := cpuOf(rep.Report.CPUUser, rep.Report.CPUSystem, rep.Report.Elapsed)
		res.ServerCPU = &cpu
	}
	if !c.p.OneWay {
		return
	}
	var counts []uint64
	if err == nil {
		counts, err = readSeries(fctx, c.ctl, c.nonce, c.id, c.wait)
		if err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("the server did not send its per-second counts: %v", err))
		}
	}
	res.oneWay(c.flows, counts, c.sendEndNs, c.seconds)
	for _, iv := range res.Series {
		if c.cfg.Interval != nil {
			c.cfg.Interval(iv)
		}
	}
	res.summarize(&c.rtt)
}

// mergeSecond sums second i over the flows. The last interval ends when
// sending ended and takes everything after second i: the echoes that
// arrived after sending ended, and a sliver of sending merged into it.
func mergeSecond(flows []*flow, i int, sendEndNs int64, last bool) Interval {
	iv := Interval{StartS: float64(i), EndS: float64(i + 1)}
	if last && sendEndNs >= 0 {
		iv.EndS = max(float64(sendEndNs)/1e9, iv.StartS)
	}
	var rttSum float64
	for _, f := range flows {
		f.mu.Lock()
		for j := i; j < len(f.t.series); j++ {
			s := f.t.series[j]
			iv.Sent += s.sent
			iv.Lost += s.lost
			if s.received > 0 {
				if iv.Received == 0 || float64(s.rttMin)/1e3 < iv.RTTMinUs {
					iv.RTTMinUs = float64(s.rttMin) / 1e3
				}
				iv.RTTMaxUs = max(iv.RTTMaxUs, float64(s.rttMax)/1e3)
				iv.Received += s.received
				rttSum += s.rttSum
			}
			if !last {
				break
			}
		}
		f.mu.Unlock()
	}
	if iv.Received > 0 {
		iv.RTTMeanUs = rttSum / float64(iv.Received) / 1e3
	}
	if d := iv.EndS - iv.StartS; d > 0 {
		iv.PPS = float64(iv.Received) / d
		iv.SentPPS = float64(iv.Sent) / d
	}
	if iv.Sent > 0 {
		iv.LossPercent = 100 * float64(iv.Lost) / float64(iv.Sent)
	}
	return iv
}

// send paces probes: quota 0 means no count bound, rate 0 as fast as the
// socket takes them.
//
// A one-way flow numbers its probes without reserving them in the tracker:
// no echo is awaited, so nothing bounds how many are outstanding.
func (f *flow) send(ctx context.Context, epoch time.Time, session uint32, size int, rate float64, quota uint64, oneWay bool) error {
	batch := sendBatchLen
	if rate > 0 {
		// About a millisecond of probes per system call.
		batch = int(min(max(rate/1000, 1), sendBatchLen))
	}
	if f.lockThread {
		// On one OS thread the goroutine no longer hops between threads
		// around its long sendmmsg calls, which raises the rate
		// (docs/measurements.md#the-pps-sender-one-os-thread-256-probes-per-call).
		// It is no namespace switch; see Run for when.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	msgs := newMessages(batch, size)
	var gbuf []byte
	if f.gso {
		batch = gsoBatch(size)
		if rate > 0 {
			batch = int(min(max(rate/1000, 1), float64(batch)))
		}
		gbuf = make([]byte, batch*size)
		msgs = newMessages(batch, size) // the fallback's
	}
	gsoWrites := 0
	// Backlog the pacer catches up after a stall (the machine was busy, a
	// timer fired late): up to 250 ms worth, sent back to back in batches;
	// beyond that it gives up on the missed probes rather than burst.
	maxBacklog := uint64(max(rate/4, float64(batch)))
	var sent uint64
	var forgiven float64 // probes the pacer gave up on after stalls
	for {
		if ctx.Err() != nil || (quota > 0 && sent >= quota) {
			return nil
		}
		now := time.Now()
		elapsed := now.Sub(epoch)
		n := batch
		if rate > 0 {
			due := elapsed.Seconds()*rate - forgiven - float64(sent)
			if due < 1 {
				next := time.Duration((float64(sent) + forgiven + 1) / rate * 1e9)
				sleepUntil(ctx, epoch.Add(next))
				continue
			}
			if due > float64(maxBacklog) {
				forgiven += due - float64(maxBacklog)
				due = float64(maxBacklog)
			}
			n = min(batch, int(due))
		}
		if quota > 0 {
			n = int(min(uint64(n), quota-sent))
		}
		nowNs := int64(elapsed)
		f.mu.Lock()
		var first uint32
		var got int
		if oneWay {
			first, got = f.t.next, int(min(uint64(n), uint64(^uint32(0)-f.t.next)))
		} else {
			first, got = f.t.reserve(n, nowNs)
		}
		f.mu.Unlock()
		if got == 0 {
			sleepUntil(ctx, now.Add(time.Millisecond)) // window full
			continue
		}
		var k int
		var err error
		if f.gso {
			_, err = f.conn.Write(fillGSO(gbuf, size, got, Probe{Session: session, Flow: f.id, Seq: first, SentNs: uint64(nowNs)}))
			if err == nil {
				k = got
				gsoWrites++
			} else if isGSOUnsupported(err) {
				// The segment does not fit the path (its MTU may
				// also have shrunk since), or the device refuses GSO:
				// send this batch and the rest with sendmmsg, which
				// needs the socket option off again.
				f.gso = false
				f.gsoErr = fmt.Errorf("GSO write %d failed: %w", gsoWrites+1, err)
				if derr := enableGSO(f.conn, 0); derr != nil {
					return fmt.Errorf("sending flow %d: turning GSO off after %v: %w", f.id, f.gsoErr, derr)
				}
				err = nil
			}
		}
		if !f.gso {
			for i := range got {
				Probe{Session: session, Flow: f.id, Seq: first + uint32(i), SentNs: uint64(nowNs)}.Encode(msgs[i].Buffers[0])
			}
			k, err = writeAll(f.bc, msgs[:got])
		}
		if oneWay {
			f.mu.Lock()
			f.t.sentOneWay(k, nowNs)
			f.mu.Unlock()
		} else if k < got {
			f.mu.Lock()
			f.t.unreserve(got - k)
			f.mu.Unlock()
		}
		sent += uint64(k)
		if err != nil {
			if !isTransient(err) {
				return fmt.Errorf("sending flow %d: %w", f.id, err)
			}
			// A refused or unreachable destination shows as lost probes;
			// back off so as not to spin.
			sleepUntil(ctx, time.Now().Add(time.Millisecond))
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// receive records echoes until the socket's read deadline is set to the past.
func (f *flow) receive(epoch time.Time, session uint32, size int) error {
	msgs := newMessages(batchLen, size+1)
	probes := make([]Probe, 0, batchLen)
	for {
		n, err := f.bc.ReadBatch(msgs, 0)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if isTransient(err) {
				continue
			}
			return fmt.Errorf("receiving flow %d: %w", f.id, err)
		}
		nowNs := int64(time.Since(epoch))
		probes = probes[:0]
		stray := 0
		for i := range msgs[:n] {
			p, err := DecodeProbe(msgs[i].Buffers[0][:msgs[i].N])
			if err != nil || p.Session != session || p.Flow != f.id || msgs[i].N != size {
				stray++
				continue
			}
			probes = append(probes, p)
		}
		f.mu.Lock()
		for _, p := range probes {
			f.t.received(p, nowNs)
		}
		f.t.counters.Stray += uint64(stray)
		f.mu.Unlock()
	}
}

// readSeries reads the per-second counts of a finished one-way session,
// one page per exchange.
func readSeries(ctx context.Context, c *net.UDPConn, nonce [16]byte, session uint32, wait time.Duration) ([]uint64, error) {
	var counts []uint64
	for {
		r, err := exchange(ctx, c, &Control{Version: Version, Type: MsgSeries, Nonce: nonce, Session: session, SeriesFrom: uint32(len(counts))}, MsgSeriesData, wait)
		if err != nil {
			return nil, err
		}
		if r.SeriesFrom != uint32(len(counts)) || r.SeriesTotal > 1<<20 {
			return nil, fmt.Errorf("the server answered with a page from second %d of %d, asked from %d", r.SeriesFrom, r.SeriesTotal, len(counts))
		}
		counts = append(counts, r.Series...)
		if uint32(len(counts)) >= r.SeriesTotal {
			return counts, nil
		}
		if len(r.Series) == 0 {
			return nil, fmt.Errorf("the server sent an empty page at second %d of %d", len(counts), r.SeriesTotal)
		}
	}
}

// oneWay fills the series and counters of a one-way run from the probes
// each flow sent per second and the server's counts of probes received by
// the second they were sent in (nil if it did not send them). n is the
// number of intervals, as in echo mode. r.Sent is already summed.
func (r *Result) oneWay(flows []*flow, counts []uint64, sendEndNs int64, n int) {
	n = max(n, 1)
	for i := range n {
		iv := mergeSecond(flows, i, sendEndNs, i == n-1)
		if counts != nil {
			for j := i; j < len(counts) && (j == i || i == n-1); j++ {
				iv.Received += counts[j]
			}
			iv.Lost = iv.Sent - min(iv.Received, iv.Sent)
			if d := iv.EndS - iv.StartS; d > 0 {
				iv.PPS = float64(iv.Received) / d
			}
			if iv.Sent > 0 {
				iv.LossPercent = 100 * float64(iv.Lost) / float64(iv.Sent)
			}
		}
		r.Series = append(r.Series, iv)
	}
	for _, iv := range r.Series {
		r.Received += iv.Received
	}
	if counts != nil {
		// More received than sent means duplicates on the path; the
		// server cannot tell which, so they are counted here.
		r.Lost = r.Sent - min(r.Received, r.Sent)
		r.Duplicates = r.Received - min(r.Received, r.Sent)
	}
}

var errExchangeTimeout = errors.New("no answer")

// exchange sends req and waits for a reply of type want carrying the same
// nonce, retransmitting every half second within wait. A refusal is an error.
func exchange(ctx context.Context, c *net.UDPConn, req *Control, want MsgType, wait time.Duration) (*Control, error) {
	b, err := req.Marshal()
	if err != nil {
		return nil, err
	}
	tries := max(int(wait/(500*time.Millisecond)), 1)
	buf := make([]byte, 2048)
	for range tries {
		if _, err := c.Write(b); err != nil {
			return nil, describeNetErr(c.RemoteAddr(), err)
		}
		deadline := time.Now().Add(wait / time.Duration(tries))
		_ = c.SetReadDeadline(deadline)
		for {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			n, err := c.Read(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				return nil, describeNetErr(c.RemoteAddr(), err)
			}
			r, err := ParseControl(buf[:n])
			if err != nil || r.Nonce != req.Nonce {
				continue // not ours
			}
			switch {
			case r.Type == MsgRefuse:
				return nil, fmt.Errorf("%w: %s", ErrRefused, r.Reason)
			case r.Version != Version:
				return nil, fmt.Errorf("the pps server at %s speaks protocol version %d, this client %d", c.RemoteAddr(), r.Version, Version)
			case r.Type == want && (want != MsgReport || r.Session == req.Session):
				return r, nil
			}
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	return nil, errExchangeTimeout
}

// describeNetErr turns socket errors of the handshake into sentences.
func describeNetErr(to net.Addr, err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w at udp %s: connection refused, nothing listens on that port (start `ovpnperf pps server` there)", ErrNoServer, to)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Errorf("%s is unreachable: %w", to, err)
	}
	return fmt.Errorf("talking to %s: %w", to, err)
}
