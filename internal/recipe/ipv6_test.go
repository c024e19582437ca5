package recipe

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// The arithmetic against OpenVPN 2.6's documented example (mssfix 1492
// mtu → inner MSS 1400 for IPv4, 1380 for IPv6 over IPv4 UDP with GCM)
// and against the sizes a full packet must come to.
func TestIPv6Budget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		innerIPv6, ts        bool
		mss, payload, wire   int
		goodputAt50MbpsKbits int
	}{
		{false, true, 1400, 1388, 1492, 46082},
		{true, true, 1380, 1368, 1492, 45418},
		{false, false, 1400, 1400, 1492, 46480},
		{true, false, 1380, 1380, 1492, 45816},
	} {
		b := ipv6DefaultBudget(tc.innerIPv6, tc.ts)
		if b.MSS() != tc.mss || b.Payload() != tc.payload || b.Wire() != tc.wire {
			t.Errorf("inner IPv6 %v, timestamps %v: MSS %d payload %d wire %d, want %d %d %d", tc.innerIPv6, tc.ts, b.MSS(), b.Payload(), b.Wire(), tc.mss, tc.payload, tc.wire)
		}
		if got := int(b.Goodput(50e6) / 1000); got != tc.goodputAt50MbpsKbits {
			t.Errorf("inner IPv6 %v, timestamps %v: goodput at 50 Mbit/s %d kbit/s, want %d", tc.innerIPv6, tc.ts, got, tc.goodputAt50MbpsKbits)
		}
	}
	// A tun-mtu below what mssfix allows limits the MSS instead.
	b := ipv6DefaultBudget(true, true)
	b.TunMTU = 1400
	if b.MSS() != 1340 {
		t.Errorf("tun-mtu 1400, IPv6: MSS %d, want 1340", b.MSS())
	}
}

func ipv6Row(network, variant, dir string, mbit ...float64) measure.Row {
	r := measure.Row{Network: network, Variant: variant, Direction: dir, Valid: true, CPUSecondsPerGB: map[string]float64{}}
	for _, s := range mbit {
		r.AddSample(s * 1e6)
	}
	r.Summarize()
	return r
}

func TestInterleavedRatios(t *testing.T) {
	t.Parallel()
	a := ipv6Row("", "a", "up", 90, 50, 99)
	b := ipv6Row("", "b", "up", 100, 50, 100)
	for _, tc := range []struct {
		a, b        measure.Row
		starved     float64
		med, lo, hi float64
		n           int
	}{
		{a, b, 0, 0.99, 0.9, 1, 3},
		// The starved middle pair is left out.
		{a, b, 0.9, 0.945, 0.9, 0.99, 2},
		// A failed sample: no pairs, the ranges' bounds.
		{ipv6Row("", "c", "up", 50, 100), b, 0, 0.75, 0.5, 2, 2},
		{ipv6Row("", "c", "up", 50, 100), b, 0.9, 1, 1, 1, 1},
	} {
		med, lo, hi, n := interleavedRatios(&tc.a, &tc.b, tc.starved)
		if n != tc.n || math.Abs(med-tc.med) > 1e-9 || math.Abs(lo-tc.lo) > 1e-9 || math.Abs(hi-tc.hi) > 1e-9 {
			t.Errorf("%v / %v (starved %v): med %v lo %v hi %v n %d, want %v %v %v %d", tc.a.SamplesBps, tc.b.SamplesBps, tc.starved, med, lo, hi, n, tc.med, tc.lo, tc.hi, tc.n)
		}
	}
}

func TestIPv6Verdicts(t *testing.T) {
	t.Parallel()
	probes := map[string]ipv6MSSProbe{"ipv4": {1388, 1388, true}, "ipv6": {1368, 1368, true}}
	v6 := ipv6Variant + experiment.InnerIPv6Suffix
	for _, tc := range []struct {
		name            string
		v4, v6          []float64
		probes          map[string]ipv6MSSProbe
		clamp, pub, ari verdict.Outcome // outcomes of the up direction
	}{
		{"as predicted", []float64{46.1, 46.0, 46.2, 46.1, 45.9}, []float64{45.4, 45.4, 45.5, 45.5, 45.3}, probes, Confirmed, Changed, Confirmed},
		{"as published", []float64{46.1, 46.0, 46.2}, []float64{43.8, 43.7, 43.9}, probes, Confirmed, Confirmed, Refuted},
		{"ipv6 faster", []float64{40, 41, 40}, []float64{45, 46, 45}, probes, Confirmed, Refuted, Refuted},
		{"noise", []float64{40, 40, 40}, []float64{39, 37, 40.5}, probes, Confirmed, Noise, Noise},
		{"starved", []float64{20, 40, 30}, []float64{35, 22, 30}, probes, Confirmed, Noise, Noise},
		{"one starved of five", []float64{46.1, 26.6, 46.2, 46.1, 45.9}, []float64{45.4, 45.4, 45.5, 33.3, 45.3}, probes, Confirmed, Changed, Confirmed},
		{"too few", []float64{46.1, 46.0}, []float64{45.4, 45.4}, probes, Confirmed, Noise, Noise},
		{"clamp differs", []float64{46.1, 46.0, 46.2}, []float64{45.4, 45.4, 45.5}, map[string]ipv6MSSProbe{"ipv4": {1448, 1448, true}, "ipv6": {1428, 1428, true}}, Changed, Changed, Confirmed},
		{"no probe", []float64{46.1, 46.0, 46.2}, []float64{45.4, 45.4, 45.5}, map[string]ipv6MSSProbe{}, Noise, Changed, Confirmed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &measure.Report{Scenario: measure.Scenario{Extra: map[string]any{}}}
			for _, d := range []string{measure.DirectionUp, measure.DirectionDown} {
				rep.Rows = append(rep.Rows, ipv6Row("line", ipv6Variant, d, tc.v4...), ipv6Row("line", v6, d, tc.v6...))
			}
			vs := ipv6Verdicts(rep, ipv6Path, tc.probes)
			if len(vs) != 5 {
				t.Fatalf("%d verdicts, want 5: %+v", len(vs), vs)
			}
			for i, want := range []verdict.Outcome{tc.clamp, tc.pub, tc.ari} {
				if vs[i].Outcome != want {
					t.Errorf("verdict %d %q: %s (%s), want %s", i, vs[i].Claim, vs[i].Outcome, vs[i].Reason, want)
				}
				if vs[i].Reason == "" {
					t.Errorf("verdict %d without a reason", i)
				}
			}
			r := row(rep, "", v6, measure.DirectionUp)
			if r.Extra["predicted_ratio_to_ipv4"] == nil || r.Extra["published_ratio_to_ipv4"] != publishedIPv6Ratio {
				t.Errorf("IPv6 row extra: %v", r.Extra)
			}
		})
	}
}

func TestIPv6Recipe(t *testing.T) {
	t.Parallel() // judges no rate and no sample's validity: see runForTest
	rep := runForTest(t, runIPv6, Options{Repeat: 1, Duration: time.Second}, "iperf3")
	rows := map[string]int{}
	for _, r := range rep.Rows {
		rows[r.Variant]++
		t.Logf("%s %s: %v %s %v", r.Variant, r.Direction, r.SamplesBps, r.Error, r.Extra)
		if len(r.SamplesBps) == 0 && r.Refusal == nil {
			t.Errorf("%s %s: no samples and no refusal (error %q)", r.Variant, r.Direction, r.Error)
		}
		if fam := r.Extra["inner_family"]; (fam == "ipv6") != strings.HasSuffix(r.Variant, experiment.InnerIPv6Suffix) {
			t.Errorf("%s: inner_family %v", r.Variant, fam)
		}
	}
	if rows[ipv6Variant] != 2 || rows[ipv6Variant+experiment.InnerIPv6Suffix] != 2 || len(rep.Rows) != 4 {
		t.Errorf("rows: %v", rows)
	}
	if len(rep.Verdicts) != 5 {
		t.Fatalf("%d verdicts, want 5", len(rep.Verdicts))
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
	}
	// The clamp is deterministic: OpenVPN 2.6.14's defaults give 1400 and
	// 1380, read from real connections through the tunnel.
	if v := rep.Verdicts[0]; v.Outcome != Confirmed {
		t.Errorf("MSS clamp: %s: %s", v.Outcome, v.Reason)
	}
}
