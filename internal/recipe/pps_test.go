package recipe

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/ui"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// ppsTestRow makes a row of made-up echo rates (pps) and OpenVPN µs per
// packet, as ppsFill leaves it.
func ppsTestRow(variant string, size int, rates []float64, cpu []float64) measure.Row {
	path := measure.PathTunnel
	if variant == experiment.Routed {
		path = measure.PathRouted
	}
	r := measure.NewRow(ppsNetwork(size), variant, path, measure.DirectionUp, "udp")
	r.Extra = map[string]any{"size_bytes": size}
	for _, p := range rates {
		r.AddSample(p * float64(size) * 8)
	}
	r.Summarize()
	if cpu != nil {
		r.Extra["cpu_s_per_mpkt_samples"] = cpu
	}
	return r
}

// The verdicts follow the figures: made-up reports, one per situation.
func TestPPSVerdicts(t *testing.T) {
	t.Parallel()
	type rates struct {
		variant string
		size    int
		pps     []float64
		cpu     []float64
	}
	flat := func(v string, pps []float64, cpu []float64) []rates {
		return []rates{{v, 18, pps, cpu}, {v, 512, pps, cpu}, {v, 1400, pps, cpu}}
	}
	for _, tc := range []struct {
		name string
		rows []rates
		// want: outcome by the first words of the claim ("routing",
		// "cipher none", "OpenVPN's CPU", "[none]" …).
		want map[string]verdict.Outcome
	}{
		{
			name: "the publication's picture",
			rows: append(append(append(
				flat(experiment.Routed, []float64{46000, 47000, 48000}, nil),
				flat(ppsNone, []float64{13000, 13500, 14000}, []float64{20, 21, 22})...),
				flat(ppsCBC, []float64{11800, 12000, 12200}, []float64{23, 24, 25})...),
				flat(ppsGCM, []float64{11500, 11900, 12100}, []float64{22, 23, 24})...),
			want: map[string]verdict.Outcome{"routing": Confirmed, "cipher none": Confirmed, "OpenVPN's CPU": Confirmed,
				"[none]": Confirmed, "[aes128cbc]": Confirmed, "[aes256gcm]": Confirmed},
		},
		{
			name: "crypto-bound tunnels, routing far ahead, byte-limited",
			rows: []rates{
				{experiment.Routed, 18, []float64{90000, 91000, 92000}, nil},
				{experiment.Routed, 1400, []float64{80000, 81000, 82000}, nil},
				{ppsNone, 18, []float64{9000, 9100, 9200}, []float64{10, 10.5, 11}},
				{ppsNone, 1400, []float64{2000, 2100, 2200}, []float64{30, 31, 32}},
				{ppsCBC, 18, []float64{4000, 4100, 4200}, []float64{20, 21, 22}},
				{ppsCBC, 1400, []float64{500, 6000, 3500}, nil},
				// GCM: no 1400-byte row at all.
				{ppsGCM, 18, []float64{5000, 5100, 5200}, []float64{18, 19, 20}},
			},
			want: map[string]verdict.Outcome{"routing": Changed, "cipher none": Changed, "OpenVPN's CPU": Changed,
				"[none]": Changed, "[aes128cbc]": Noise, "[aes256gcm]": Noise},
		},
		{
			name: "overlapping spreads",
			rows: []rates{
				{experiment.Routed, 18, []float64{10000, 30000, 50000}, nil},
				{ppsCBC, 18, []float64{9000, 12000, 15000}, []float64{10, 15, 30}},
				{ppsNone, 18, []float64{9000, 14000, 20000}, []float64{12, 14, 16}},
			},
			want: map[string]verdict.Outcome{"routing": Noise, "cipher none": Noise, "OpenVPN's CPU": Noise},
		},
		{
			name: "tunnel ahead of routing",
			rows: []rates{
				{experiment.Routed, 18, []float64{4000, 4100, 4200}, nil},
				{ppsCBC, 18, []float64{9000, 9100, 9200}, []float64{10, 10, 10}},
				{ppsNone, 18, []float64{9000, 9100, 9200}, []float64{10, 10, 10}},
				// A byte-limited none tunnel: ×30 fewer packets at 1400 bytes.
				{ppsNone, 1400, []float64{280, 290, 300}, nil},
			},
			want: map[string]verdict.Outcome{"routing": Refuted, "cipher none": Confirmed, "OpenVPN's CPU": Confirmed,
				"[none]": Refuted, "[aes128cbc]": Noise},
		},
		{
			name: "two samples are too few for any verdict",
			rows: append(append(append(
				flat(experiment.Routed, []float64{46000, 48000}, nil),
				flat(ppsNone, []float64{13000, 14000}, []float64{20, 22})...),
				flat(ppsCBC, []float64{11800, 12200}, []float64{23, 25})...),
				flat(ppsGCM, []float64{2000, 2100}, []float64{22, 24})...),
			want: map[string]verdict.Outcome{"routing": Noise, "cipher none": Noise, "OpenVPN's CPU": Noise,
				"[none]": Noise, "[aes128cbc]": Noise, "[aes256gcm]": Noise},
		},
		{
			// An earlier rule: any ratio up to ×1.30 confirmed "only 10–15 %
			// faster", none being slower included.
			name: "none slower than AES-128-CBC",
			rows: []rates{
				{ppsCBC, 18, []float64{12000, 12100, 12200}, []float64{24, 24, 24}},
				{ppsNone, 18, []float64{10000, 10100, 10200}, []float64{28, 28, 28}},
			},
			want: map[string]verdict.Outcome{"cipher none": Refuted, "OpenVPN's CPU": Refuted},
		},
		{
			name: "nothing measured",
			want: map[string]verdict.Outcome{"routing": Noise, "cipher none": Noise, "OpenVPN's CPU": Noise,
				"[none]": Noise, "[aes128cbc]": Noise, "[aes256gcm]": Noise},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &measure.Report{}
			for _, r := range tc.rows {
				rep.Rows = append(rep.Rows, ppsTestRow(r.variant, r.size, r.pps, r.cpu))
			}
			vs := ppsVerdicts(rep, 1500)
			if len(vs) != 6 {
				t.Fatalf("%d verdicts, want 6", len(vs))
			}
			got := map[string]verdict.Outcome{}
			for _, v := range vs {
				if v.Reason == "" {
					t.Errorf("verdict without a reason: %+v", v)
				}
				for k := range tc.want {
					if strings.HasPrefix(v.Claim, k) || strings.HasSuffix(v.Claim, k) {
						got[k] = v.Outcome
					}
				}
			}
			for k, w := range tc.want {
				if got[k] != w {
					t.Errorf("%q: outcome %q, want %q", k, got[k], w)
					for _, v := range vs {
						t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
					}
				}
			}
		})
	}
}

// The CBC tunnel's 1400-byte probes exceed a 1500-byte path, the others'
// do not; the reason of the size verdict says so.
func TestPPSFragmentNote(t *testing.T) {
	t.Parallel()
	rep := &measure.Report{}
	for _, v := range []string{ppsNone, ppsCBC, ppsGCM} {
		rep.Rows = append(rep.Rows, ppsTestRow(v, 18, []float64{5000}, nil), ppsTestRow(v, 1400, []float64{4900}, nil))
	}
	for _, v := range ppsVerdicts(rep, 1500) {
		frag := slices.Contains(v.Conditions, measure.VerdictConditionProbeFragmented)
		if want := strings.HasSuffix(v.Claim, "["+ppsCBC+"]"); frag != want {
			t.Errorf("%s: fragment condition %v, want %v: %+v", v.Claim, frag, want, v)
		}
		if frag && (v.Figures["path_mtu_bytes"] != 1500 || v.Figures["probe_bytes"] != ppsLarge || v.Figures["datagram_bytes"] <= 1500) {
			t.Errorf("%s: fragment figures %v", v.Claim, v.Figures)
		}
	}
}

// Outer datagram sizes per OpenVPN's data-channel framing; the AEAD and none
// figures are the overheads of docs/openvpn-facts.md#per-packet-overhead (24 and 8 bytes
// plus 28 of outer IPv4 and UDP), CBC pads the packet-id and inner packet to
// whole 16-byte blocks with at least one byte. The sizes of the three
// recipe sizes through each tunnel were checked with tcpdump in the router of
// a lab with the recipe's tunnels (OpenVPN 2.6.14, 2026-11-22), including CBC at 1400: IPv4 length
// 1500 with more-fragments, then 28 at offset 1480.
func TestPPSOuterBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		variant string
		size    int
		want    int
	}{
		{ppsNone, 18, 28 + 8 + 46},
		{ppsGCM, 18, 28 + 24 + 46},
		{ppsGCM, 1400, 1480},
		{ppsNone, 1400, 1464},
		// 4 + 46 = 50 → 64 bytes encrypted.
		{ppsCBC, 18, 28 + 4 + 20 + 16 + 64},
		// 4 + 1428 = 1432 → 1440.
		{ppsCBC, 1400, 1508},
		// 4 + 540 = 544, a whole number of blocks: a full block of padding.
		{ppsCBC, 512, 28 + 4 + 20 + 16 + 560},
		{experiment.Routed, 18, 0},
	} {
		if got := ppsOuterBytes(tc.variant, tc.size); got != tc.want {
			t.Errorf("ppsOuterBytes(%s, %d) = %d, want %d", tc.variant, tc.size, got, tc.want)
		}
	}
}

// TestPPSRecipe runs the recipe for real with one short sample per row:
// every row must exist and carry its figures, every verdict must be
// computed, and nothing of the lab may be left.
func TestPPSRecipe(t *testing.T) {
	t.Parallel() // judges no rate and no sample's validity: see runForTest
	rep := runForTest(t, runPPS, Options{Repeat: 1, Duration: time.Second})
	var sb strings.Builder
	if err := ui.RenderTable(&sb, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", sb.String())
	if len(rep.Rows) != len(ppsSizes)*4 {
		t.Errorf("%d rows, want %d", len(rep.Rows), len(ppsSizes)*4)
	}
	invalid := 0
	for _, r := range rep.Rows {
		if !r.Valid {
			// One failed sample on the shared machine is possible;
			// it must say why, as data. More would leave the figures
			// this test exists to check unchecked.
			invalid++
			t.Logf("%s invalid: %v", r.Key(), r.Refusal)
			if r.Refusal == nil || r.Error == "" {
				t.Errorf("%s invalid without a typed refusal (error %q)", r.Key(), r.Error)
			}
			continue
		}
		for _, k := range []string{"pps_median", "sent", "received", "loss_percent", "rtt_p50_us", "rtt_p99_us"} {
			if _, ok := r.Extra[k]; !ok {
				t.Errorf("%s: no %s in %v", r.Key(), k, r.Extra)
			}
		}
		if p, _ := r.Extra["pps_median"].(float64); p <= 0 {
			t.Errorf("%s: pps_median %v", r.Key(), r.Extra["pps_median"])
		}
		if r.Path == measure.PathTunnel {
			if r.Cipher == "" {
				t.Errorf("%s: no cipher", r.Key())
			}
			if _, ok := r.Extra["cpu_server_s_per_mpkt"]; !ok {
				t.Errorf("%s: no OpenVPN CPU figure", r.Key())
			}
		}
	}
	if invalid > 1 {
		t.Errorf("%d of %d rows invalid: their figures were not checked", invalid, len(rep.Rows))
	}
	if r := row(rep, ppsNetwork(18), ppsCBC, measure.DirectionUp); r == nil || r.Cipher != "AES-128-CBC/SHA1" {
		t.Errorf("AES-128-CBC row: %+v", r)
	}
	if len(rep.Verdicts) != 6 {
		t.Errorf("%d verdicts, want 6", len(rep.Verdicts))
	}
	for _, v := range rep.Verdicts {
		if !v.Outcome.Valid() || v.Reason == "" {
			t.Errorf("verdict %+v", v)
		}
	}
	if !strings.Contains(sb.String(), "pps median") || !strings.Contains(sb.String(), "absolute pps are a floor") {
		t.Errorf("the table lacks the pps column or the note on shared cores")
	}
}
