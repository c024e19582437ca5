package pps

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

func TestGSOBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ size, want int }{
		{MinSize, gsoSegments}, {1400, 46}, {MaxSize, 1}, {30000, 2},
	} {
		if got := gsoBatch(tc.size); got != tc.want {
			t.Errorf("gsoBatch(%d) = %d, want %d", tc.size, got, tc.want)
		}
		if gsoBatch(tc.size)*tc.size > gsoMaxBytes && tc.size <= gsoMaxBytes {
			t.Errorf("gsoBatch(%d) exceeds one datagram", tc.size)
		}
	}
}

// Each segment of a GSO write is a whole probe: what the kernel cuts at
// every size bytes must decode as consecutive probes with padding intact.
func TestFillGSOSegments(t *testing.T) {
	t.Parallel()
	const size, n = 40, 5
	buf := make([]byte, 8*size)
	b := fillGSO(buf, size, n, Probe{Session: 7, Flow: 2, Seq: 0xfffffffe, SentNs: 12345})
	if len(b) != n*size {
		t.Fatalf("%d bytes for %d probes of %d", len(b), n, size)
	}
	for i := range n {
		seg := b[i*size : (i+1)*size]
		p, err := DecodeProbe(seg)
		if err != nil {
			t.Fatalf("segment %d: %v", i, err)
		}
		want := Probe{Session: 7, Flow: 2, Seq: 0xfffffffe + uint32(i), SentNs: 12345}
		if p != want {
			t.Errorf("segment %d: %+v, want %+v", i, p, want)
		}
		if !bytes.Equal(seg[MinSize:], make([]byte, size-MinSize)) {
			t.Errorf("segment %d: padding not zero", i)
		}
	}
}

// Over loopback (which takes GSO packets and segments them at the
// receiving socket) every probe of a GSO run arrives as its own datagram.
func TestLoopbackGSO(t *testing.T) {
	testenv.Exclusive(t)
	leakCheck(t)
	addr, _ := startServer(t, DefaultLimits())
	for _, oneWay := range []bool{false, true} {
		res, err := Run(context.Background(), Config{
			Server: addr,
			Params: Params{RatePPS: 20000, Size: 64, Duration: time.Second, Flows: 2, Timeout: 500 * time.Millisecond, OneWay: oneWay},
			GSO:    true,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("one-way %v: sent %d, received %d, lost %d, server %+v, warnings %v", oneWay, res.Sent, res.Received, res.Lost, res.ServerReport, res.Warnings)
		if len(res.Warnings) > 0 {
			t.Errorf("warnings: %v", res.Warnings)
		}
		if res.Sent < 5000 || res.Received != res.Sent || res.ServerReport == nil || res.ServerReport.Received != res.Sent {
			t.Errorf("one-way %v: sent %d, received %d, server %+v: want every probe as its own datagram", oneWay, res.Sent, res.Received, res.ServerReport)
		}
	}
}

// A probe larger than the path's MTU cannot be a GSO segment: once the
// client knows the path MTU, the GSO write fails, and the flow says so and
// goes on with sendmmsg, whose datagrams the kernel fragments. The first
// probe, sent with DF before the router's "fragmentation needed" taught the
// client the path MTU, is lost with or without GSO.
func TestLabGSOFallsBack(t *testing.T) {
	l := labtest.New(t, labpath.Path{MTU: 1400})
	port := labServer(t, l, lab.ServerV4())
	res, err := Run(context.Background(), Config{
		Server: net.JoinHostPort(lab.ServerV4().String(), strconv.Itoa(port)),
		Params: Params{RatePPS: 1000, Size: 1400, Duration: time.Second, Flows: 1, Timeout: time.Second},
		OpenIn: inNetns(l, lab.Client),
		GSO:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d received %d, warnings %v", res.Sent, res.Received, res.Warnings)
	// A busy machine may add a "could not keep up" warning; the fallback
	// must be reported exactly once whatever else is.
	fellBack := 0
	for _, w := range res.Warnings {
		if strings.Contains(w, "sendmmsg, not GSO") {
			fellBack++
		}
	}
	if fellBack != 1 {
		t.Errorf("warnings %q, want one saying the flow fell back to sendmmsg", res.Warnings)
	}
	if res.Sent < 500 || res.Received+1 < res.Sent {
		t.Errorf("sent %d, received %d after falling back", res.Sent, res.Received)
	}
}
