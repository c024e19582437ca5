package realnet

import (
	"math"
	"testing"

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
