package pps

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// checkOneWay checks the invariants of a one-way result: the server counted
// by the client's seconds, the series adds up, and no RTT is claimed.
func checkOneWay(t *testing.T, res *Result) {
	t.Helper()
	if !res.Params.OneWay {
		t.Fatal("the result is not of a one-way test")
	}
	if res.ServerReport == nil {
		t.Fatal("no server report")
	}
	if res.ServerReport.Echoed != 0 {
		t.Errorf("the server echoed %d probes of a one-way test", res.ServerReport.Echoed)
	}
	if res.Received != res.ServerReport.Received {
		t.Errorf("series sums to %d received, the server's total is %d", res.Received, res.ServerReport.Received)
	}
	if res.Received+res.Lost != res.Sent+res.Duplicates {
		t.Errorf("received %d + lost %d != sent %d + duplicates %d", res.Received, res.Lost, res.Sent, res.Duplicates)
	}
	var sent, recv, lost uint64
	for _, iv := range res.Series {
		sent += iv.Sent
		recv += iv.Received
		lost += iv.Lost
		if iv.RTTMeanUs != 0 {
			t.Errorf("interval %v–%v claims an RTT in a one-way test", iv.StartS, iv.EndS)
		}
	}
	if sent != res.Sent || recv != res.Received || lost != res.Lost {
		t.Errorf("series sums sent %d received %d lost %d, totals %d %d %d", sent, recv, lost, res.Sent, res.Received, res.Lost)
	}
	if res.RTTP50Us != 0 || res.RTTMaxUs != 0 {
		t.Errorf("rtt p50 %v max %v in a one-way test", res.RTTP50Us, res.RTTMaxUs)
	}
}

func TestLoopbackOneWay(t *testing.T) {
	testenv.Exclusive(t)
	leakCheck(t)
	addr, _ := startServer(t, DefaultLimits())
	var lines []Interval
	res, err := Run(context.Background(), Config{
		Server:   addr,
		Params:   Params{RatePPS: 2000, Size: MinSize, Duration: 2500 * time.Millisecond, Flows: 2, Timeout: 200 * time.Millisecond, OneWay: true},
		Interval: func(iv Interval) { lines = append(lines, iv) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d, server received %d, lost %d, series %+v", res.Sent, res.Received, res.Lost, res.Series)
	checkOneWay(t, res)
	if res.Sent < 2500 || res.Lost != 0 {
		t.Errorf("sent %d lost %d over loopback at 2000 pps, want about 5000 and none lost", res.Sent, res.Lost)
	}
	if len(res.Series) != 3 || len(lines) != 3 {
		t.Errorf("series of %d intervals, callback saw %d, want 3", len(res.Series), len(lines))
	}
	for _, iv := range res.Series[:len(res.Series)-1] {
		if iv.Received != iv.Sent {
			t.Errorf("second %v: sent %d, server counted %d of them", iv.StartS, iv.Sent, iv.Received)
		}
	}
}

// The series is longer than one page, and the run is bounded by --count.
func TestLoopbackOneWayPagesAndCount(t *testing.T) {
	leakCheck(t)
	addr, _ := startServer(t, DefaultLimits())
	res, err := Run(context.Background(), Config{
		Server: addr,
		Params: Params{RatePPS: 0, Size: 64, Duration: 60 * time.Second, Flows: 3, Timeout: 100 * time.Millisecond, OneWay: true},
		Count:  3000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 3000 {
		t.Errorf("sent %d, want exactly --count 3000", res.Sent)
	}
	checkOneWay(t, res)
	// 60 s + 1 bins: three pages of series data were read.
	if res.ServerReport.Received == 0 {
		t.Error("the server counted nothing")
	}
}

// A server that echoes whatever it is asked (one that predates one-way
// tests answers an accept without the flag) must not get load.
func TestOneWayAgainstOldServer(t *testing.T) {
	leakCheck(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	probes := make(chan int, 1)
	go func() {
		buf := make([]byte, 2048)
		n := 0
		defer func() { probes <- n }()
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if IsProbe(buf[:k]) {
				n++
				continue
			}
			c, err := ParseControl(buf[:k])
			if err != nil {
				continue
			}
			var r *Control
			switch c.Type {
			case MsgHello:
				r = &Control{Version: Version, Type: MsgAccept, Nonce: c.Nonce, Session: 9, Params: c.Params, Limits: DefaultLimits()}
			case MsgFinish:
				r = &Control{Version: Version, Type: MsgReport, Nonce: c.Nonce, Session: 9}
			default:
				continue
			}
			b, _ := r.Marshal()
			if r.Type == MsgAccept {
				b = b[:len(b)-1] // no flags byte, as before one-way tests
			}
			_, _ = pc.WriteTo(b, from)
		}
	}()
	_, err = Run(context.Background(), Config{
		Server: pc.LocalAddr().String(),
		Params: Params{RatePPS: 1000, Size: MinSize, Duration: time.Second, Flows: 1, Timeout: time.Second, OneWay: true},
	})
	if err == nil {
		t.Fatal("a one-way run against a server without one-way tests succeeded")
	}
	t.Log(err)
	pc.Close()
	if n := <-probes; n != 0 {
		t.Errorf("the client sent %d probes to a server that did not accept a one-way test", n)
	}
}

// TestLabOneWayLoss: one-way loss is the loss of the way up alone.
func TestLabOneWayLoss(t *testing.T) {
	testenv.Exclusive(t)
	l := labtest.New(t, labpath.Path{Up: labpath.Link{LossPercent: 5}, Down: labpath.Link{LossPercent: 5}})
	port := labServer(t, l, lab.ServerV4())
	p := Params{RatePPS: 2000, Size: MinSize, Duration: 5 * time.Second, Flows: 2, Timeout: time.Second, OneWay: true}
	res := labRun(t, l, lab.ServerV4(), port, p)
	dropped := checkEmulator(t, l)
	t.Logf("sent %d, server received %d, lost %d (%.2f%%), emulator dropped %d", res.Sent, res.Received, res.Lost, res.LossPercent, dropped)
	checkOneWay(t, res)
	if res.Sent < 5000 {
		t.Fatalf("sent only %d probes", res.Sent)
	}
	if math.Abs(res.LossPercent-5) > 1.5 {
		t.Errorf("loss %.2f%%, want 5 ± 1.5 %% (one direction only)", res.LossPercent)
	}
}
