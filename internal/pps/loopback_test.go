package pps

import (
	"context"
	"errors"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// leakCheck fails the test if goroutines started during it outlive it (the
// server's and the client's). Register it first: cleanups run last-first.
func leakCheck(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

// startServer runs a Server on an ephemeral loopback port for the test.
func startServer(t *testing.T, limits Limits) (addr string, events chan Event) {
	return startServerOn(t, "127.0.0.1:0", limits)
}

func startServerOn(t *testing.T, listen string, limits Limits) (addr string, events chan Event) {
	t.Helper()
	events = make(chan Event, 64)
	s := &Server{Addr: listen, Limits: limits, Events: func(e Event) {
		select {
		case events <- e:
		default:
		}
	}}
	return serveForTest(t, s).String(), events
}

// serveForTest runs s until the test ends (failing it if Serve returns an
// error) and returns the address it listens on.
func serveForTest(t testing.TB, s *Server) net.Addr {
	t.Helper()
	a, stop, err := s.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return a
}

func TestLoopbackNoLossAtModestRate(t *testing.T) {
	testenv.Exclusive(t)
	leakCheck(t)
	addr, events := startServer(t, DefaultLimits())
	var lines []Interval
	res, err := Run(context.Background(), Config{
		Server:   addr,
		Params:   Params{RatePPS: 2000, Size: MinSize, Duration: 1500 * time.Millisecond, Flows: 2, Timeout: time.Second},
		Interval: func(iv Interval) { lines = append(lines, iv) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d received %d lost %d late %d pps_median %.0f rtt p50 %.1fus p99 %.1fus cpu %.1f%%",
		res.Sent, res.Received, res.Lost, res.Late, res.PPSMedian, res.RTTP50Us, res.RTTP99Us, res.CPU.Percent)
	if res.Sent == 0 || res.Received != res.Sent || res.Lost != 0 {
		t.Errorf("sent %d received %d lost %d, want all echoed", res.Sent, res.Received, res.Lost)
	}
	// 2000 pps for 1.5 s; allow wide slack for a loaded machine, but the
	// pacer must neither flood nor starve.
	if res.Sent < 1500 || res.Sent > 3100 {
		t.Errorf("sent %d probes, want about 3000", res.Sent)
	}
	if len(res.Series) != 2 || len(lines) != 2 {
		t.Errorf("series has %d intervals, callback saw %d, want 2", len(res.Series), len(lines))
	}
	var sum uint64
	for _, iv := range res.Series {
		sum += iv.Sent
	}
	if sum != res.Sent {
		t.Errorf("series sums to %d sent, total %d", sum, res.Sent)
	}
	if res.RTTP50Us <= 0 || res.RTTP99Us < res.RTTP50Us {
		t.Errorf("rtt p50 %v p99 %v", res.RTTP50Us, res.RTTP99Us)
	}
	if res.ServerReport == nil {
		t.Fatal("no server report")
	}
	if res.ServerReport.Received != res.Sent || res.ServerReport.Echoed != res.Sent {
		t.Errorf("server received %d echoed %d, client sent %d", res.ServerReport.Received, res.ServerReport.Echoed, res.Sent)
	}
	if kinds := waitEvent(t, events, "finished"); !kinds["accepted"] {
		t.Errorf("server events %v, want accepted and finished", kinds)
	}
}

// waitEvent collects the server's events until one of kind want arrives
// (failing the test after 5 s) and returns the kinds seen. The server
// reports a session's end after it answered the client, so that event may
// come a moment after Run returned.
func waitEvent(t *testing.T, events chan Event, want string) map[string]bool {
	t.Helper()
	kinds := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for !kinds[want] {
		select {
		case ev := <-events:
			kinds[ev.Kind] = true
		case <-deadline:
			t.Fatalf("no %q event from the server (saw %v)", want, kinds)
		}
	}
	return kinds
}

func TestLoopbackCountBoundsTheRun(t *testing.T) {
	leakCheck(t)
	addr, _ := startServer(t, DefaultLimits())
	res, err := Run(context.Background(), Config{
		Server: addr,
		Params: Params{RatePPS: 0, Size: 512, Duration: 10 * time.Second, Flows: 3, Timeout: time.Second},
		Count:  1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 1000 {
		t.Errorf("sent %d, want exactly --count 1000", res.Sent)
	}
	if res.SendSeconds > 5 {
		t.Errorf("took %.1fs to send 1000 probes as fast as possible", res.SendSeconds)
	}
	if res.Received+res.Lost != res.Sent {
		t.Errorf("received %d + lost %d != sent %d", res.Received, res.Lost, res.Sent)
	}
}

func TestNoServerIsAQuickClearError(t *testing.T) {
	leakCheck(t)
	// A port nothing listens on: the kernel answers port unreachable.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	start := time.Now()
	_, err = Run(context.Background(), Config{Server: addr, Params: Params{RatePPS: 1000, Size: MinSize, Duration: time.Second, Flows: 1, Timeout: time.Second}})
	if !errors.Is(err, ErrNoServer) {
		t.Fatalf("err = %v, want ErrNoServer", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to give up", d)
	}
	t.Log(err)
}

func TestSilentPeerIsNoServer(t *testing.T) {
	leakCheck(t)
	// Something listens but does not speak the protocol: no probe may be
	// sent to it, only the handshake.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 70000)
		n := 0
		probes := 0
		for {
			_ = pc.SetReadDeadline(time.Now().Add(2 * time.Second))
			m, _, err := pc.ReadFrom(buf)
			if err != nil {
				break
			}
			n++
			if IsProbe(buf[:m]) {
				probes++
			}
		}
		got <- probes
	}()
	_, err = Run(context.Background(), Config{Server: pc.LocalAddr().String(), Params: Params{RatePPS: 1000, Size: MinSize, Duration: time.Second, Flows: 1, Timeout: time.Second}})
	if !errors.Is(err, ErrNoServer) {
		t.Fatalf("err = %v, want ErrNoServer", err)
	}
	t.Log(err)
	if p := <-got; p != 0 {
		t.Errorf("client sent %d probes to a host that never accepted", p)
	}
}

func TestServerRefusesOutOfLimits(t *testing.T) {
	leakCheck(t)
	addr, events := startServer(t, Limits{MaxDuration: 2 * time.Second, MaxFlows: 2, MaxSize: 1500, MaxTimeout: 2 * time.Second, MaxSessions: 4})
	_, err := Run(context.Background(), Config{Server: addr, Params: Params{RatePPS: 10, Size: MinSize, Duration: time.Second, Flows: 3, Timeout: time.Second}})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("err = %v, want ErrRefused", err)
	}
	t.Log(err)
	if e := <-events; e.Kind != "refused" {
		t.Errorf("event %q, want refused", e.Kind)
	}
	// Duration is capped, not refused.
	res, err := Run(context.Background(), Config{Server: addr, Params: Params{RatePPS: 100, Size: MinSize, Duration: time.Hour, Flows: 1, Timeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Params.Duration != 2*time.Second || len(res.Warnings) == 0 {
		t.Errorf("accepted duration %v, warnings %q; want capped at 2s with a warning", res.Params.Duration, res.Warnings)
	}
	if res.SendSeconds > 2.5 {
		t.Errorf("sent for %.1fs beyond the server's 2s cap", res.SendSeconds)
	}
}

func TestServerSurvivesGarbage(t *testing.T) {
	leakCheck(t)
	addr, _ := startServer(t, DefaultLimits())
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	junk := [][]byte{
		{}, {'o'}, []byte("oPPS"), append([]byte("oPPS\x01\x01"), make([]byte, 10)...),
		append([]byte("oPPS\x01\x07"), make([]byte, 200)...),
		append([]byte("oPPS\x01\x03\xff"), make([]byte, 30)...),
		[]byte("pd0123456789abcdef"), make([]byte, 1400),
	}
	for _, j := range junk {
		_, _ = c.Write(j)
	}
	res, err := Run(context.Background(), Config{Server: addr, Params: Params{RatePPS: 500, Size: MinSize, Duration: 300 * time.Millisecond, Flows: 1, Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Received == 0 {
		t.Error("server stopped echoing after garbage")
	}
}

// BenchmarkLoopback floods a server on loopback from one flow for 2 s and
// reports the rates; with -cpuprofile it shows where the generator and the
// echo server spend their time.
//
//	go test -run XXX -bench Loopback -benchtime 1x ./internal/pps
func BenchmarkLoopback(b *testing.B) {
	addr, _ := startServer(&testing.T{}, DefaultLimits())
	for range b.N {
		res, err := Run(context.Background(), Config{Server: addr, Params: Params{RatePPS: 0, Size: MinSize, Duration: 2 * time.Second, Flows: 1, Timeout: time.Second}})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.SentPPSMean, "sent-pps")
		b.ReportMetric(res.PPSMedian, "echo-pps")
		b.ReportMetric(res.CPU.Percent, "client-cpu-%")
	}
}

// TestDualStackServer: the default server listens on all addresses with one
// IPv6 socket, which also receives IPv4 (as v4-mapped addresses) and must
// answer each client in its own family.
func TestDualStackServer(t *testing.T) {
	leakCheck(t)
	addr, _ := startServerOn(t, ":0", DefaultLimits())
	_, port, _ := net.SplitHostPort(addr)
	for _, host := range []string{"127.0.0.1", "::1"} {
		if host == "::1" {
			c, err := net.ListenPacket("udp6", "[::1]:0")
			if err != nil {
				// The IPv6 half is what the test is for.
				testenv.SkipOrFail(t, "no IPv6 loopback here: %v", err)
			}
			c.Close()
		}
		res, err := Run(context.Background(), Config{Server: net.JoinHostPort(host, port),
			Params: Params{RatePPS: 1000, Size: 512, Duration: 500 * time.Millisecond, Flows: 2, Timeout: time.Second}})
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if res.Sent == 0 || res.Received != res.Sent {
			t.Errorf("%s: sent %d received %d", host, res.Sent, res.Received)
		}
	}
}

// TestInterruptedRun: cancelling the context stops sending early; the
// result so far comes back with the context's error, and the server's
// session is closed.
func TestInterruptedRun(t *testing.T) {
	leakCheck(t)
	addr, events := startServer(t, DefaultLimits())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(700*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, Config{Server: addr, Params: Params{RatePPS: 1000, Size: MinSize, Duration: time.Minute, Flows: 1, Timeout: 200 * time.Millisecond}})
	if !errors.Is(err, context.Canceled) || res == nil || !res.Interrupted {
		t.Fatalf("err %v, result %v", err, res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to stop", d)
	}
	if res.Sent == 0 || res.Received+res.Lost != res.Sent || res.ServerReport == nil {
		t.Errorf("sent %d received %d lost %d, server report %v", res.Sent, res.Received, res.Lost, res.ServerReport)
	}
	waitEvent(t, events, "finished")
}

// TestSecondServerOnSamePortFails: the server's sockets share their port
// with SO_REUSEPORT, but a second server must not join them.
func TestSecondServerOnSamePortFails(t *testing.T) {
	leakCheck(t)
	addr, _ := startServer(t, DefaultLimits())
	s := &Server{Addr: addr}
	err := s.Serve(context.Background())
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second server on %s: %v, want address in use", addr, err)
	}
	t.Log(err)
}
