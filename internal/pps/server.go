package pps

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"
)

// Server echoes the probes of sessions it accepted.
type Server struct {
	// Addr is the UDP address to listen on, e.g. ":7007" (all addresses,
	// IPv4 and IPv6) or "198.51.100.2:7007".
	Addr   string
	Limits Limits
	// Once makes Serve return after the first session ends.
	Once bool
	// Workers is the number of sockets sharing the port (SO_REUSEPORT),
	// each served by its own goroutine; 0 picks GOMAXPROCS, at most 4.
	Workers int
	// OpenIn, if set, opens the sockets: Serve calls it with a function
	// that creates them. Labs use it to listen inside a network namespace
	// (netns.Do); a socket stays in the namespace it was created in.
	OpenIn func(open func() error) error
	// Events, if set, is told about sessions starting and ending. It is
	// called from the serving goroutines and must not block for long.
	Events func(Event)
	// Key, if set, is shared with trusted clients: their signed hellos
	// take precedence over unauthenticated ones (see control.go).
	Key []byte

	mu       sync.Mutex
	sessions map[uint32]*session
	byNonce  map[[16]byte]*session
	// signedSeen remembers the nonces of signed hellos until their time
	// can no longer pass the skew check, so that none is replayed.
	signedSeen map[[16]byte]time.Time
	ended      chan struct{}
	bound      chan net.Addr
}

// EventSchema names one line of `ovpnperf pps server --json`: an Event
// with the schema (written by the command).
const EventSchema = "ovpnperf/pps-event/v1"

// Event is something that happened to a session.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"event"` // "accepted", "refused", "finished", "expired", "evicted"
	// Authenticated marks a session opened by a signed hello.
	Authenticated bool          `json:"authenticated,omitempty"`
	Client        string        `json:"client"`
	Session       uint32        `json:"session,omitempty"`
	Params        *Params       `json:"params,omitempty"`
	Reason        string        `json:"reason,omitempty"`
	Report        *ServerReport `json:"report,omitempty"`
}

type session struct {
	id       uint32
	nonce    [16]byte
	client   netip.Addr
	params   Params
	accepted time.Time
	authed   bool
	// idleAt expires the session if no probe arrived by then.
	idleAt  time.Time
	cpuUser time.Duration
	cpuSys  time.Duration
	// echoUntil is the end of echoing, as Unix ns; reset to the finish
	// time when the client says it is done.
	echoUntil atomic.Int64
	removeAt  time.Time
	received  atomic.Uint64
	echoed    atomic.Uint64
	// series counts the probes of a one-way session by the second of the
	// client's clock they were sent in (the last bin takes anything later).
	series []atomic.Uint64
	report *ServerReport // set once finished
	// reportSeries is series as it was at the finish.
	reportSeries []uint64
	done         bool
}

// graceAfterDuration is how long past its duration (plus timeout) a session
// is echoed, for scheduling slack of the client.
const graceAfterDuration = 2 * time.Second

// LocalAddr blocks until the server is listening and returns its address,
// or returns nil if ctx ends first.
func (s *Server) LocalAddr(ctx context.Context) net.Addr {
	s.init()
	select {
	case a := <-s.bound:
		s.bound <- a
		return a
	case <-ctx.Done():
		return nil
	}
}

// Start runs Serve in the background and returns once the server listens
// (at most 10 s): its address, and stop, which ends it and returns Serve's
// error. When the server does not come up, Start returns why, and nothing
// is left running.
func (s *Server) Start(ctx context.Context) (addr net.Addr, stop func() error, err error) {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Serve(sctx) }()
	stop = func() error {
		cancel()
		return <-done
	}
	wctx, wcancel := context.WithTimeout(sctx, 10*time.Second)
	defer wcancel()
	if addr = s.LocalAddr(wctx); addr == nil {
		if err := stop(); err != nil {
			return nil, nil, err
		}
		return nil, nil, errors.New("pps server did not start listening within 10 s")
	}
	return addr, stop, nil
}

var initMu sync.Mutex

func (s *Server) init() {
	initMu.Lock()
	defer initMu.Unlock()
	if s.bound == nil {
		s.bound = make(chan net.Addr, 1)
		s.ended = make(chan struct{}, 1)
	}
}

// Serve listens and echoes until ctx ends (or, with Once, the first session
// ends). It returns nil when stopped by ctx or Once.
func (s *Server) Serve(ctx context.Context) error {
	s.init()
	if s.Limits == (Limits{}) {
		s.Limits = DefaultLimits()
	}
	s.sessions = map[uint32]*session{}
	s.byNonce = map[[16]byte]*session{}
	s.signedSeen = map[[16]byte]time.Time{}
	workers := s.Workers
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), 4)
	}
	lc := net.ListenConfig{Control: reusePort}
	var conns []*net.UDPConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	open := func() error {
		// SO_REUSEPORT would let a second server of the same user join
		// this port's group silently and take half of every session's
		// probes. Binding once without it first fails if anything holds
		// the port, and gives the port to bind the group to.
		probe, err := net.ListenPacket("udp", s.Addr)
		if err != nil {
			return fmt.Errorf("listening on udp %s: %w", s.Addr, err)
		}
		addr := probe.LocalAddr().String()
		probe.Close()
		for range workers {
			pc, err := lc.ListenPacket(ctx, "udp", addr)
			if err != nil {
				return fmt.Errorf("listening on udp %s: %w", s.Addr, err)
			}
			c := pc.(*net.UDPConn)
			conns = append(conns, c)
			setBuffers(c, 4<<20)
		}
		return nil
	}
	var err error
	if s.OpenIn != nil {
		err = s.OpenIn(open)
	} else {
		err = open()
	}
	if err != nil {
		return err
	}
	s.bound <- conns[0].LocalAddr()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.serveConn(c); err != nil && ctx.Err() == nil {
				errs <- err
				cancel()
			}
		}()
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-errs:
			break loop
		case <-s.ended:
			if s.Once {
				break loop
			}
		case now := <-tick.C:
			s.reap(now)
		}
	}
	cancel()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	return err
}

// reap forgets sessions whose time is up, and those that never sent a
// probe within their idle time.
func (s *Server) reap(now time.Time) {
	s.mu.Lock()
	var expired []*session
	for n, t := range s.signedSeen {
		if now.Sub(t) > 2*signedHelloSkew {
			delete(s.signedSeen, n)
		}
	}
	for id, ss := range s.sessions {
		idle := !ss.done && ss.received.Load() == 0 && now.After(ss.idleAt)
		if now.After(ss.removeAt) || idle {
			delete(s.sessions, id)
			delete(s.byNonce, ss.nonce)
			if !ss.done {
				ss.done = true
				expired = append(expired, ss)
			}
		}
	}
	s.mu.Unlock()
	for _, ss := range expired {
		r := ss.makeReport(now)
		s.event(Event{Kind: "expired", Client: ss.client.String(), Session: ss.id, Report: &r, Authenticated: ss.authed})
		s.signalEnd()
	}
}

func (s *Server) signalEnd() {
	select {
	case s.ended <- struct{}{}:
	default:
	}
}

func (s *Server) event(e Event) {
	if s.Events != nil {
		e.Time = time.Now()
		s.Events(e)
	}
}

func (ss *session) makeReport(now time.Time) ServerReport {
	u, sy := cpuTime()
	return ServerReport{
		Received:  ss.received.Load(),
		Echoed:    ss.echoed.Load(),
		CPUUser:   u - ss.cpuUser,
		CPUSystem: sy - ss.cpuSys,
		Elapsed:   now.Sub(ss.accepted),
	}
}

func addrIP(a net.Addr) netip.Addr {
	if u, ok := a.(*net.UDPAddr); ok {
		ip, _ := netip.AddrFromSlice(u.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// serveConn is the echo loop of one socket.
func (s *Server) serveConn(c *net.UDPConn) error {
	bc := newBatchConn(c)
	in := newMessages(batchLen, 1<<16)
	out := make([]ipv4.Message, batchLen)
	for i := range out {
		out[i].Buffers = make([][]byte, 1)
	}
	var cached *session // the session of the previous probe
	for {
		n, err := bc.ReadBatch(in, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if isTransient(err) {
				continue
			}
			return fmt.Errorf("receiving: %w", err)
		}
		now := time.Now()
		nowNs := now.UnixNano()
		nout := 0
		for i := range in[:n] {
			b := in[i].Buffers[0][:in[i].N]
			switch {
			case IsProbe(b):
				id := probeSession(b)
				if cached == nil || cached.id != id {
					s.mu.Lock()
					cached = s.sessions[id]
					s.mu.Unlock()
				}
				if cached == nil || addrIP(in[i].Addr) != cached.client {
					continue
				}
				cached.received.Add(1)
				if cached.series != nil {
					// One-way: count by the second the client sent it in.
					sec := min(probeSentNs(b)/uint64(time.Second), uint64(len(cached.series)-1))
					cached.series[sec].Add(1)
					continue
				}
				if nowNs > cached.echoUntil.Load() {
					continue
				}
				cached.echoed.Add(1)
				out[nout].Buffers[0] = b
				out[nout].Addr = in[i].Addr
				nout++
			case IsControl(b):
				s.control(bc, b, in[i].Addr, now)
				cached = nil
			}
		}
		if nout > 0 {
			_, err := writeAll(bc, out[:nout])
			if err != nil && !isTransient(err) {
				if errors.Is(err, net.ErrClosed) {
					return nil
				}
				return fmt.Errorf("echoing: %w", err)
			}
		}
	}
}

// control answers one control message.
func (s *Server) control(bc batchConn, b []byte, from net.Addr, now time.Time) {
	c, err := ParseControl(b)
	if err != nil {
		return // malformed: no answer, nothing to amplify
	}
	reply := func(r *Control) {
		r.Version = Version
		r.Nonce = c.Nonce
		out, err := r.Marshal()
		if err != nil {
			return
		}
		_, _ = bc.WriteBatch([]ipv4.Message{{Buffers: [][]byte{out}, Addr: from}}, 0)
	}
	client := addrIP(from)
	if c.Version != Version {
		// Answer only a request padded as ours are, so that the
		// refusal is never larger than what caused it.
		if (c.Type == MsgHello || c.Type == MsgFinish) && len(b) >= requestLen {
			reply(&Control{Type: MsgRefuse, Reason: fmt.Sprintf("protocol version %d not supported, this server speaks %d", c.Version, Version)})
		}
		return
	}
	switch c.Type {
	case MsgHello:
		authed := false
		if c.Signed {
			if reason := s.checkSigned(c, now); reason != "" {
				reply(&Control{Type: MsgRefuse, Reason: reason})
				s.event(Event{Kind: "refused", Client: from.String(), Reason: reason, Params: &c.Params})
				return
			}
			authed = true
		}
		ss, reason, evicted := s.accept(c, client, now, authed)
		if evicted != nil {
			r := evicted.makeReport(now)
			s.event(Event{Kind: "evicted", Client: evicted.client.String(), Session: evicted.id, Report: &r,
				Reason: "made room for an authenticated client"})
			s.signalEnd()
		}
		if ss == nil {
			reply(&Control{Type: MsgRefuse, Reason: reason})
			s.event(Event{Kind: "refused", Client: from.String(), Reason: reason, Params: &c.Params})
			return
		}
		reply(&Control{Type: MsgAccept, Session: ss.id, Params: ss.params, Limits: s.Limits})
		if reason == "" { // a retransmitted hello has reason "again"
			s.event(Event{Kind: "accepted", Client: from.String(), Session: ss.id, Params: &ss.params, Authenticated: authed})
		}
	case MsgFinish:
		s.mu.Lock()
		ss := s.sessions[c.Session]
		if ss == nil || ss.nonce != c.Nonce || ss.client != client {
			s.mu.Unlock()
			reply(&Control{Type: MsgRefuse, Reason: "no such session"})
			return
		}
		first := ss.report == nil
		if first {
			ss.echoUntil.Store(now.UnixNano())
			r := ss.makeReport(now)
			ss.report = &r
			for i := range ss.series {
				ss.reportSeries = append(ss.reportSeries, ss.series[i].Load())
			}
			ss.done = true
			ss.removeAt = now.Add(5 * time.Second) // answers retransmitted finishes
		}
		r := *ss.report
		s.mu.Unlock()
		reply(&Control{Type: MsgReport, Session: ss.id, Report: r})
		if first {
			s.event(Event{Kind: "finished", Client: from.String(), Session: ss.id, Report: &r})
			s.signalEnd()
		}
	case MsgSeries:
		s.mu.Lock()
		ss := s.sessions[c.Session]
		if ss == nil || ss.nonce != c.Nonce || ss.client != client || ss.report == nil || !ss.params.OneWay {
			s.mu.Unlock()
			reply(&Control{Type: MsgRefuse, Reason: "no such finished one-way session"})
			return
		}
		total := uint32(len(ss.reportSeries))
		from := min(c.SeriesFrom, total)
		page := ss.reportSeries[from:min(from+seriesPage, total)]
		s.mu.Unlock()
		reply(&Control{Type: MsgSeriesData, Session: ss.id, SeriesFrom: from, SeriesTotal: total, Series: page})
	}
}

// checkSigned refuses a signed hello this server cannot trust: no key
// here, a wrong MAC, a stale time or a nonce seen before (replayed). The
// nonce of an authentic hello is remembered.
func (s *Server) checkSigned(c *Control, now time.Time) string {
	switch {
	case len(s.Key) == 0:
		return "this server has no key; start it with --key-file, or run the client without one"
	case !c.Verify(s.Key):
		return "authentication failed: the client's key differs from the server's"
	case c.SentAt.Sub(now).Abs() > signedHelloSkew:
		return fmt.Sprintf("authenticated hello sent %v from this server's clock, more than %v: check the clocks", c.SentAt.Sub(now).Round(time.Second), signedHelloSkew)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.signedSeen[c.Nonce]; seen {
		if ss := s.byNonce[c.Nonce]; ss != nil && !ss.done {
			return "" // a retransmission of a live session's hello
		}
		return "authenticated hello replayed"
	}
	s.signedSeen[c.Nonce] = now
	return ""
}

// accept validates a hello and creates its session. A retransmitted hello
// (same nonce, same client) gets the same session with reason "again".
// An authenticated hello that finds the table full evicts the
// unauthenticated session that has received least (returned, already
// removed), so that a flood of hellos cannot lock out a trusted client.
func (s *Server) accept(c *Control, client netip.Addr, now time.Time, authed bool) (ss *session, reason string, evicted *session) {
	p, err := s.Limits.Check(c.Params)
	if err != nil {
		return nil, err.Error(), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.byNonce[c.Nonce]; ss != nil {
		if ss.client == client && !ss.done {
			return ss, "again", nil
		}
		return nil, "nonce already used", nil
	}
	if !authed && s.Limits.MaxPerSource > 0 {
		n := 0
		for _, o := range s.sessions {
			if o.client == client && !o.done && !o.authed {
				n++
			}
		}
		if n >= s.Limits.MaxPerSource {
			return nil, fmt.Sprintf("busy: %d sessions from %s running, at most %d per address", n, client, s.Limits.MaxPerSource), nil
		}
	}
	if len(s.sessions) >= s.Limits.MaxSessions {
		freed := false
		if authed {
			evicted, freed = s.evictLocked()
		}
		if !freed {
			return nil, fmt.Sprintf("busy: %d sessions running, try later", len(s.sessions)), nil
		}
	}
	var id uint32
	for id == 0 || s.sessions[id] != nil {
		var b [4]byte
		_, _ = rand.Read(b[:])
		id = binary.BigEndian.Uint32(b[:])
	}
	ss = &session{id: id, nonce: c.Nonce, client: client, params: p, accepted: now, authed: authed}
	idle := s.Limits.IdleTimeout
	if idle <= 0 {
		idle = DefaultLimits().IdleTimeout
	}
	ss.idleAt = now.Add(idle + p.Timeout)
	ss.cpuUser, ss.cpuSys = cpuTime()
	if p.OneWay {
		// One bin per second of the duration, and one for what comes later.
		ss.series = make([]atomic.Uint64, int((p.Duration+time.Second-1)/time.Second)+1)
	}
	end := now.Add(p.Duration + p.Timeout + graceAfterDuration)
	ss.echoUntil.Store(end.UnixNano())
	ss.removeAt = end.Add(time.Second)
	s.sessions[id] = ss
	s.byNonce[c.Nonce] = ss
	return ss, "", evicted
}

// evictLocked removes the unauthenticated session that has received the
// fewest probes (a hello-only flood first) and returns it, or nil if every
// session is authenticated. A finished session (kept only to answer a
// retransmitted finish) goes before any running one; it was reported
// already, so only a running victim is returned. s.mu is held.
func (s *Server) evictLocked() (running *session, freed bool) {
	var victim *session
	for _, o := range s.sessions {
		if o.authed {
			continue
		}
		if victim == nil || (o.done && !victim.done) ||
			(o.done == victim.done && o.received.Load() < victim.received.Load()) {
			victim = o
		}
	}
	if victim == nil {
		return nil, false
	}
	delete(s.sessions, victim.id)
	delete(s.byNonce, victim.nonce)
	if victim.done {
		return nil, true
	}
	victim.done = true
	victim.echoUntil.Store(0)
	return victim, true
}
