package realnet

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
)

// The prediction path-bound rests on: OpenVPN 2.6's defaults (AES-256-GCM
// over UDP/IPv4, 52 bytes of overhead, mssfix 1492 mtu) against TCP
// outside, on a 1500-byte path and across a 1400-byte one (two fragments).
func TestPredict(t *testing.T) {
	f, err := overhead.New(overhead.DataChannel{}, overhead.Transport{Proto: "udp"})
	if err != nil {
		t.Fatal(err)
	}
	r, _, ov := Predict(f, 1500, 1500, false, false)
	want := (1440.0 - 52) / 1492 / ((1500.0 - 52) / 1500)
	if ov != 52 || math.Abs(r-want) > 1e-9 {
		t.Errorf("1500: ratio %.4f overhead %d, want %.4f and 52", r, ov, want)
	}
	r, basis, _ := Predict(f, 1400, 1500, false, false)
	want = (1440.0 - 52) / (1492 + 20) / ((1400.0 - 52) / 1400)
	if math.Abs(r-want) > 1e-9 {
		t.Errorf("1400: ratio %.4f (%s), want %.4f", r, basis, want)
	}
	if r, _, _ := Predict(f, 0, 1500, false, false); r != 0 {
		t.Errorf("unknown path MTU: ratio %v", r)
	}
}

// measure sizes its samples by the same rule as probe
// (iperf.RealPathTiming) at the largest echo round trip, 0 ms included,
// keeps what was given, and without an echo takes the defaults with no
// slack.
func TestSizeByEcho(t *testing.T) {
	for _, largest := range []time.Duration{0, 300 * time.Microsecond, 20 * time.Millisecond, 190 * time.Millisecond, 620 * time.Millisecond, 2 * time.Second} {
		spec := Spec{Omit: -1}
		how := sizeByEcho(&spec, largest, true, nil)
		d, w, slack := iperf.RealPathTiming(largest, true)
		if spec.Duration != max(MinDuration, d) || spec.Omit != w || spec.PathSlack != slack || !spec.echoed || !strings.Contains(how, "sized by the path") || !strings.Contains(how, "largest echo round trip") {
			t.Errorf("%v: -t %v -O %v slack %v (%s), the rule %v -O %v slack %v", largest, spec.Duration, spec.Omit, spec.PathSlack, how, d, w, slack)
		}
	}
	spec := Spec{Duration: 3 * time.Second, Omit: 0}
	if how := sizeByEcho(&spec, 620*time.Millisecond, true, nil); spec.Duration != 3*time.Second || spec.Omit != 0 || !strings.Contains(how, "as given") {
		t.Errorf("given: -t %v -O %v (%s)", spec.Duration, spec.Omit, how)
	}
	spec = Spec{Omit: -1}
	how := sizeByEcho(&spec, 0, false, []string{"10.0.0.1: 100% packet loss"})
	if spec.Duration != MinDuration || spec.Omit != iperf.NoEchoWarmup || spec.PathSlack != 0 || spec.echoed || !strings.Contains(how, "no ICMP echo") || !strings.Contains(how, "defaults") {
		t.Errorf("no echo: -t %v -O %v slack %v (%s)", spec.Duration, spec.Omit, spec.PathSlack, how)
	}
}
