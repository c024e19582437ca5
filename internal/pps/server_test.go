package pps

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// recordConn is a batchConn that records what the server writes.
type recordConn struct{ sent []ipv4.Message }

func (r *recordConn) ReadBatch([]ipv4.Message, int) (int, error) { return 0, net.ErrClosed }
func (r *recordConn) WriteBatch(ms []ipv4.Message, _ int) (int, error) {
	for _, m := range ms {
		b := append([]byte(nil), m.Buffers[0]...)
		r.sent = append(r.sent, ipv4.Message{Buffers: [][]byte{b}, Addr: m.Addr})
	}
	return len(ms), nil
}

func newTestServer() *Server {
	s := &Server{Limits: Limits{MaxDuration: 5 * time.Second, MaxFlows: 4, MaxSize: 1500, MaxTimeout: time.Second, MaxSessions: 2}}
	s.init()
	s.sessions = map[uint32]*session{}
	s.byNonce = map[[16]byte]*session{}
	s.signedSeen = map[[16]byte]time.Time{}
	return s
}

var testClient = &net.UDPAddr{IP: net.ParseIP("192.0.2.2"), Port: 40000}

func hello(nonce byte, p Params) []byte {
	b, _ := (&Control{Version: Version, Type: MsgHello, Nonce: [16]byte{nonce}, Params: p}).Marshal()
	return b
}

func lastReply(t *testing.T, rc *recordConn) *Control {
	t.Helper()
	if len(rc.sent) == 0 {
		t.Fatal("no reply")
	}
	c, err := ParseControl(rc.sent[len(rc.sent)-1].Buffers[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServerSessions(t *testing.T) {
	t.Parallel()
	s := newTestServer()
	rc := &recordConn{}
	now := time.Now()
	p := Params{RatePPS: 10, Size: 18, Duration: time.Minute, Flows: 1, Timeout: time.Second}
	s.control(rc, hello(1, p), testClient, now)
	acc := lastReply(t, rc)
	if acc.Type != MsgAccept || acc.Params.Duration != 5*time.Second || acc.Limits.MaxFlows != 4 || acc.Nonce != [16]byte{1} {
		t.Fatalf("reply %+v", acc)
	}
	// A retransmitted hello gets the same session.
	s.control(rc, hello(1, p), testClient, now)
	if again := lastReply(t, rc); again.Session != acc.Session {
		t.Errorf("retransmitted hello got session %d, first %d", again.Session, acc.Session)
	}
	// The same nonce from another address is refused.
	other := &net.UDPAddr{IP: net.ParseIP("192.0.2.9"), Port: 1}
	s.control(rc, hello(1, p), other, now)
	if r := lastReply(t, rc); r.Type != MsgRefuse {
		t.Errorf("nonce replay from another host: %v", r.Type)
	}
	s.control(rc, hello(2, p), testClient, now)
	s.control(rc, hello(3, p), testClient, now)
	if r := lastReply(t, rc); r.Type != MsgRefuse || r.Reason == "" {
		t.Errorf("third session with MaxSessions 2: %+v", r)
	}
	// Finish needs the session's nonce and address.
	fin := func(nonce byte, id uint32, from net.Addr) *Control {
		b, _ := (&Control{Version: Version, Type: MsgFinish, Nonce: [16]byte{nonce}, Session: id}).Marshal()
		s.control(rc, b, from, now.Add(time.Second))
		return lastReply(t, rc)
	}
	if r := fin(9, acc.Session, testClient); r.Type != MsgRefuse {
		t.Errorf("finish with the wrong nonce: %v", r.Type)
	}
	if r := fin(1, acc.Session, other); r.Type != MsgRefuse {
		t.Errorf("finish from another host: %v", r.Type)
	}
	r := fin(1, acc.Session, testClient)
	if r.Type != MsgReport || r.Session != acc.Session {
		t.Fatalf("finish: %+v", r)
	}
	ss := s.sessions[acc.Session]
	if ss.echoUntil.Load() > now.Add(time.Second).UnixNano() {
		t.Error("session still echoes after finish")
	}
	// Sessions are forgotten once their time is up.
	s.reap(now.Add(time.Hour))
	if len(s.sessions) != 0 || len(s.byNonce) != 0 {
		t.Errorf("%d sessions, %d nonces left after expiry", len(s.sessions), len(s.byNonce))
	}
}

// FuzzServerControl feeds arbitrary datagrams to the server's control
// handler. It must not panic, must answer only with well-formed messages
// carrying the request's nonce, and never with more bytes than it received.
func FuzzServerControl(f *testing.F) {
	for _, c := range sampleControls {
		b, _ := c.Marshal()
		f.Add(b)
	}
	f.Add(append([]byte("oPPS\x09\x01"), make([]byte, 16)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := newTestServer()
		rc := &recordConn{}
		s.control(rc, b, testClient, time.Now())
		for _, m := range rc.sent {
			out := m.Buffers[0]
			if len(out) > len(b) {
				t.Fatalf("answered %d bytes with %d", len(b), len(out))
			}
			c, err := ParseControl(out)
			if err != nil {
				t.Fatalf("server sent a malformed reply: %v", err)
			}
			if [16]byte(b[6:22]) != c.Nonce {
				t.Fatalf("reply nonce differs from request")
			}
			if ap := m.Addr.(*net.UDPAddr).AddrPort(); netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) != netip.MustParseAddrPort("192.0.2.2:40000") {
				t.Fatalf("reply to %v", m.Addr)
			}
		}
	})
}

// TestServerOneWaySeries: a one-way session's counts by send second are
// served in pages after the finish, only to the client that opened it.
func TestServerOneWaySeries(t *testing.T) {
	t.Parallel()
	s := newTestServer()
	rc := &recordConn{}
	now := time.Now()
	p := Params{Size: 18, Duration: 60 * time.Second, Flows: 1, Timeout: time.Second, OneWay: true}
	s.control(rc, hello(1, p), testClient, now)
	acc := lastReply(t, rc)
	if acc.Type != MsgAccept || !acc.Params.OneWay {
		t.Fatalf("reply %+v", acc)
	}
	ss := s.sessions[acc.Session]
	// Duration capped at 5 s: bins 0..4 and one for later.
	if len(ss.series) != 6 {
		t.Fatalf("%d bins for 5 s", len(ss.series))
	}
	series := func(nonce byte, from uint32, addr net.Addr) *Control {
		b, _ := (&Control{Version: Version, Type: MsgSeries, Nonce: [16]byte{nonce}, Session: acc.Session, SeriesFrom: from}).Marshal()
		s.control(rc, b, addr, now)
		return lastReply(t, rc)
	}
	if r := series(1, 0, testClient); r.Type != MsgRefuse {
		t.Errorf("series before finish: %v", r.Type)
	}
	for i := range 6 {
		ss.series[i].Add(uint64(100 + i))
	}
	fin, _ := (&Control{Version: Version, Type: MsgFinish, Nonce: [16]byte{1}, Session: acc.Session}).Marshal()
	s.control(rc, fin, testClient, now)
	ss.series[0].Add(1000) // after the finish: not reported
	if r := series(2, 0, testClient); r.Type != MsgRefuse {
		t.Errorf("series with another nonce: %v", r.Type)
	}
	if r := series(1, 0, &net.UDPAddr{IP: net.ParseIP("192.0.2.9"), Port: 1}); r.Type != MsgRefuse {
		t.Errorf("series from another host: %v", r.Type)
	}
	r := series(1, 0, testClient)
	if r.Type != MsgSeriesData || r.SeriesTotal != 6 || len(r.Series) != 6 || r.Series[0] != 100 || r.Series[5] != 105 {
		t.Errorf("series page: %+v", r)
	}
	if r := series(1, 4, testClient); r.SeriesFrom != 4 || len(r.Series) != 2 {
		t.Errorf("page from 4: %+v", r)
	}
	if r := series(1, 99, testClient); r.SeriesFrom != 6 || len(r.Series) != 0 {
		t.Errorf("page past the end: %+v", r)
	}
}
