package pps

import (
	"context"
	"net"
	"testing"
	"time"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func signedHello(nonce byte, p Params, key []byte, at time.Time) []byte {
	b, _ := (&Control{Version: Version, Type: MsgHello, Nonce: [16]byte{nonce}, Params: p, Key: key, SentAt: at}).Marshal()
	return b
}

func from(ip string) *net.UDPAddr { return &net.UDPAddr{IP: net.ParseIP(ip), Port: 40000} }

// One source gets at most MaxPerSource unauthenticated sessions; another
// source still gets one.
func TestServerLimitsSessionsPerSource(t *testing.T) {
	s := newTestServer()
	s.Limits.MaxSessions, s.Limits.MaxPerSource = 8, 2
	rc := &recordConn{}
	now := time.Now()
	p := Params{RatePPS: 10, Size: 18, Duration: time.Minute, Flows: 1, Timeout: time.Second}
	for n := byte(1); n <= 10; n++ {
		s.control(rc, hello(n, p), from("192.0.2.66"), now)
	}
	if len(s.sessions) != 2 {
		t.Fatalf("%d sessions from one source, want 2", len(s.sessions))
	}
	s.control(rc, hello(20, p), from("192.0.2.2"), now)
	if r := lastReply(t, rc); r.Type != MsgAccept {
		t.Fatalf("a client from another source after a flood: %v %s", r.Type, r.Reason)
	}
}

// A session that never sends a probe is expired after IdleTimeout plus its
// timeout; one that sends keeps running.
func TestServerExpiresIdleSessions(t *testing.T) {
	s := newTestServer()
	s.Limits.IdleTimeout = 2 * time.Second
	rc := &recordConn{}
	now := time.Now()
	p := Params{RatePPS: 10, Size: 18, Duration: time.Minute, Flows: 1, Timeout: time.Second}
	s.control(rc, hello(1, p), from("192.0.2.66"), now)
	s.control(rc, hello(2, p), testClient, now)
	busy := lastReply(t, rc).Session
	s.sessions[busy].received.Add(1)
	s.reap(now.Add(2900 * time.Millisecond))
	if len(s.sessions) != 2 {
		t.Fatalf("sessions expired before idle time + timeout: %d left", len(s.sessions))
	}
	s.reap(now.Add(3100 * time.Millisecond))
	if len(s.sessions) != 1 || s.sessions[busy] == nil {
		t.Fatalf("after the idle time want only the session that sent probes, have %d", len(s.sessions))
	}
}

// A signed hello takes a full table's unauthenticated session; a wrong
// key, a stale time and a replay are refused; signed sessions are never
// evicted.
func TestServerAuthenticatedPrecedence(t *testing.T) {
	s := newTestServer()
	s.Key = testKey
	s.Limits.MaxSessions, s.Limits.MaxPerSource = 2, 2
	var events []Event
	s.Events = func(e Event) { events = append(events, e) }
	rc := &recordConn{}
	now := time.Now()
	p := Params{RatePPS: 10, Size: 18, Duration: time.Minute, Flows: 1, Timeout: time.Second}
	s.control(rc, hello(1, p), from("192.0.2.66"), now)
	s.control(rc, hello(2, p), from("192.0.2.67"), now)
	s.control(rc, hello(3, p), testClient, now)
	if r := lastReply(t, rc); r.Type != MsgRefuse {
		t.Fatalf("unauthenticated hello into a full table: %v", r.Type)
	}
	s.control(rc, signedHello(4, p, []byte("another key, not the server's!!"), now), testClient, now)
	if r := lastReply(t, rc); r.Type != MsgRefuse {
		t.Fatalf("hello signed with another key: %v", r.Type)
	}
	s.control(rc, signedHello(5, p, testKey, now.Add(-time.Hour)), testClient, now)
	if r := lastReply(t, rc); r.Type != MsgRefuse {
		t.Fatalf("hello signed an hour ago: %v", r.Type)
	}
	good := signedHello(6, p, testKey, now)
	s.control(rc, good, testClient, now)
	acc := lastReply(t, rc)
	if acc.Type != MsgAccept {
		t.Fatalf("signed hello into a full table: %v %s", acc.Type, acc.Reason)
	}
	if len(s.sessions) != 2 || !s.sessions[acc.Session].authed {
		t.Fatalf("want the signed session beside one unauthenticated: %d sessions", len(s.sessions))
	}
	evicted := false
	for _, e := range events {
		evicted = evicted || e.Kind == "evicted"
	}
	if !evicted {
		t.Error("no evicted event")
	}
	// A retransmission of the same hello gets the same session.
	s.control(rc, good, testClient, now)
	if r := lastReply(t, rc); r.Type != MsgAccept || r.Session != acc.Session {
		t.Errorf("retransmitted signed hello: %v", r.Type)
	}
	// The same bytes sent again from elsewhere, after the session ended,
	// are a replay.
	delete(s.sessions, acc.Session)
	delete(s.byNonce, [16]byte{6})
	s.control(rc, good, from("192.0.2.99"), now)
	if r := lastReply(t, rc); r.Type != MsgRefuse {
		t.Errorf("replayed signed hello: %v", r.Type)
	}
	// Signed sessions are never evicted for another signed one.
	s.control(rc, signedHello(7, p, testKey, now), testClient, now)
	s.control(rc, signedHello(8, p, testKey, now), testClient, now)
	s.control(rc, signedHello(9, p, testKey, now), testClient, now)
	if r := lastReply(t, rc); r.Type != MsgRefuse {
		t.Errorf("third signed hello with two signed sessions running: %v", r.Type)
	}
}

// Must show 4, over real sockets: a flood of unauthenticated hellos from
// one source does not stop a client from another source from running a
// test, nor, when the flood comes from every slot's worth of sources, an
// authenticated client.
func TestLoopbackHelloFloodDoesNotLockOut(t *testing.T) {
	leakCheck(t)
	limits := DefaultLimits()
	limits.MaxSessions = 4
	s := &Server{Addr: "127.0.0.1:0", Limits: limits, Key: testKey}
	addr := serveForTest(t, s).String()
	flood := func(src string, n int) {
		t.Helper()
		c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)}, mustResolve(t, addr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		p := Params{RatePPS: 10, Size: 18, Duration: 300 * time.Second, Flows: 1, Timeout: 10 * time.Second}
		for i := range n {
			b, _ := (&Control{Version: Version, Type: MsgHello, Nonce: [16]byte{byte(i), byte(i >> 8), 0xf1}, Params: p}).Marshal()
			_, _ = c.Write(b)
		}
		time.Sleep(200 * time.Millisecond) // let the server read them
	}
	p := Params{RatePPS: 500, Size: MinSize, Duration: 500 * time.Millisecond, Flows: 1, Timeout: 500 * time.Millisecond}

	flood("127.0.0.66", 1000)
	res, err := Run(context.Background(), Config{Server: addr, Params: p})
	if err != nil {
		t.Fatalf("unauthenticated client from 127.0.0.1 after a flood from 127.0.0.66: %v", err)
	}
	if res.Received == 0 {
		t.Fatalf("no echoes after the flood: %+v", res)
	}

	// Now every slot: two sessions each from two more sources.
	flood("127.0.0.67", 50)
	flood("127.0.0.68", 50)
	if _, err := Run(context.Background(), Config{Server: addr, Params: p}); err == nil {
		t.Log("unauthenticated client found a free slot (an earlier flood session expired)")
	}
	res, err = Run(context.Background(), Config{Server: addr, Params: p, Key: testKey})
	if err != nil {
		t.Fatalf("authenticated client with every slot taken by a flood: %v", err)
	}
	if res.Received == 0 {
		t.Fatalf("authenticated client got no echoes: %+v", res)
	}
}

func mustResolve(t *testing.T, addr string) *net.UDPAddr {
	t.Helper()
	a, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
