package recipe

import (
	"fmt"
	"math"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/ui"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// ppsColumns are the recipe's figures in the text table.
var ppsColumns = []measure.Column{
	{Header: "pps median (min–max)", Format: func(r measure.Row) string {
		sp, ok := ppsSpread(&r)
		if !ok {
			return "-"
		}
		if sp.N == 1 {
			return fmt.Sprintf("%.0f", sp.Median)
		}
		return fmt.Sprintf("%.0f (%.0f–%.0f)", sp.Median, sp.Min, sp.Max)
	}},
	{Header: "sent pps", Key: "sent_pps_median"},
	{Header: "loss %", Key: "loss_percent"},
	{Header: "RTT p50/p99 µs", Format: func(r measure.Row) string {
		if _, ok := r.Extra["rtt_p50_us"]; !ok {
			return "-"
		}
		return ui.FormatExtra(r.Extra["rtt_p50_us"]) + "/" + ui.FormatExtra(r.Extra["rtt_p99_us"])
	}},
	{Header: "OpenVPN µs/pkt (% core) srv cli", Format: func(r measure.Row) string {
		if _, ok := r.Extra["cpu_server_s_per_mpkt"]; !ok {
			return "-"
		}
		return fmt.Sprintf("%s (%s%%) %s (%s%%)",
			ui.FormatExtra(r.Extra["cpu_server_s_per_mpkt"]), ui.FormatExtra(r.Extra["cpu_server_percent"]),
			ui.FormatExtra(r.Extra["cpu_client_s_per_mpkt"]), ui.FormatExtra(r.Extra["cpu_client_percent"]))
	}},
	{Header: "OpenVPN pps/core", Key: "openvpn_pps_per_core"},
	{Header: "published pps", Key: "published_pps"},
}

// ppsSpread is the spread of a row's echo rates, from its samples (payload
// bit rates) and its payload size.
func ppsSpread(r *measure.Row) (verdict.Spread, bool) {
	if r == nil {
		return verdict.Spread{}, false
	}
	size, ok := extraAs[int](r.Extra["size_bytes"])
	if !ok || size <= 0 || len(r.SamplesBps) == 0 {
		return verdict.Spread{}, false
	}
	v := make([]float64, len(r.SamplesBps))
	for i, b := range r.SamplesBps {
		v[i] = b / 8 / float64(size)
	}
	return verdict.Of(v), true
}

// ppsRow finds the row of a variant at a size, with its pps spread.
func ppsRow(rep *measure.Report, variant string, size int) (*measure.Row, verdict.Spread, bool) {
	r := row(rep, ppsNetwork(size), variant, measure.DirectionUp)
	if r == nil {
		return nil, verdict.Spread{}, false
	}
	sp, ok := ppsSpread(r)
	return r, sp, ok && sp.Min > 0
}

func ppsText(sp verdict.Spread, ok bool) string {
	if !ok {
		return "no valid sample"
	}
	if sp.N == 1 {
		return fmt.Sprintf("%.0f pps (1 sample)", sp.Median)
	}
	return fmt.Sprintf("%.0f pps (%.0f–%.0f)", sp.Median, sp.Min, sp.Max)
}

// ppsVerdicts judges the benchmark's claims from the rows. mtu is the
// lab path's MTU, which decides whether a tunnel's large probes leave
// fragmented.
// ppsJudge judges a saved report; the path's MTU is the first network's.
func ppsJudge(rep *measure.Report) []measure.Verdict {
	mtu := 0
	if p, ok := firstPath(rep); ok {
		mtu = p.EffectiveMTU()
	}
	return ppsVerdicts(rep, mtu)
}

func ppsVerdicts(rep *measure.Report, mtu int) []measure.Verdict {
	var out []measure.Verdict

	// 1. Routing against AES-128-CBC at 64-byte frames.
	claim := fmt.Sprintf("routing forwards about %.1f× the packets of an OpenVPN AES-128-CBC tunnel (published 47 000 vs 12 000 pps, 64-byte frames)", ppsRoutedRatio)
	_, rs, rok := ppsRow(rep, experiment.Routed, ppsSmall)
	_, cs, cok := ppsRow(rep, ppsCBC, ppsSmall)
	others := ppsOtherRatios(rep)
	switch {
	case !rok || !cok:
		out = append(out, newVerdict(claim, Noise, "missing rows: routed %s, AES-128-CBC %s", ppsText(rs, rok), ppsText(cs, cok)))
	default:
		ratio := rs.Median / cs.Median
		outcome := Noise
		switch {
		case !ppsEnough(rs, cs):
		case cs.Min > rs.Max:
			outcome = Refuted
		case rs.Min > cs.Max && ratio >= ppsRoutedRatio/ppsRatioTolerance && ratio <= ppsRoutedRatio*ppsRatioTolerance:
			outcome = Confirmed
		case rs.Min > cs.Max:
			outcome = Changed
		}
		few := ""
		if !ppsEnough(rs, cs) {
			few = "; " + ppsTooFew()
		}
		out = append(out, newVerdict(claim, outcome, "at %d bytes routed %s vs AES-128-CBC %s: ×%.2f%s%s; %s",
			ppsSmall, ppsText(rs, rok), ppsText(cs, cok), ratio, others, few, ppsCoresNote()))
	}

	// 2. Cipher none against AES-128-CBC: how much of the per-packet cost
	// is the crypto.
	claim = "cipher none is only 10–15 % faster than AES-128-CBC (published 13–14 000 vs 12 000 pps): OpenVPN's per-packet cost dominates, not the crypto"
	nr, ns, nok := ppsRow(rep, ppsNone, ppsSmall)
	cr, _, _ := ppsRow(rep, ppsCBC, ppsSmall)
	if !nok || !cok {
		out = append(out, newVerdict(claim, Noise, "missing rows: none %s, AES-128-CBC %s", ppsText(ns, nok), ppsText(cs, cok)))
	} else {
		// Judged on the pps of interleaved samples: every ratio must lie
		// in the claim's window, so none being slower, or faster by more
		// than 30 %, is not "only 10–15 % faster".
		j := verdict.Within(ppsSamples(nr), ppsSamples(cr), ppsNoneWindow)
		cpu := fmt.Sprintf("OpenVPN's CPU per packet (server + client): none %s, AES-128-CBC %s", ppsCPUText(nr), ppsCPUText(cr))
		facts := fmt.Sprintf("at %d bytes none %s vs AES-128-CBC %s: %s", ppsSmall, ppsText(ns, nok), ppsText(cs, cok), j.Ratio)
		switch {
		case j.Outcome == Confirmed:
			out = append(out, newVerdict(claim, Confirmed, "%s, inside %s: removing the crypto gains little, the per-packet cost dominates; %s", facts, ppsNoneWindow, cpu))
		case j.Above:
			out = append(out, newVerdict(claim, Changed, "%s, above %s beyond the spread: the crypto is a large part of the per-packet cost here; %s", facts, ppsNoneWindow, cpu))
		case j.Below:
			out = append(out, newVerdict(claim, Refuted, "%s: none is slower than AES-128-CBC beyond the spread, which no per-packet model explains (load); %s", facts, cpu))
		default:
			out = append(out, withShortfall(newVerdict(claim, j.Outcome, "%s: %s; %s", facts, j.Why, cpu), j.Short))
		}
	}

	// 3. The same claim from what a packet cost OpenVPN in CPU time, which
	// the sharing of the cores changes less than the packet rate: a
	// starved OpenVPN forwards fewer packets, but each costs about the same.
	claim = "OpenVPN's CPU time per packet is hardly higher with AES-128-CBC+HMAC-SHA1 than with cipher none (the publication's reading: per-packet cost dominates, not the crypto)"
	nc, ncok := ppsCPUSamples(nr)
	cc, ccok := ppsCPUSamples(cr)
	if !ncok || !ccok {
		out = append(out, newVerdict(claim, Noise, "missing CPU figures: none %s, AES-128-CBC %s", ppsCPUText(nr), ppsCPUText(cr)))
	} else {
		j := verdict.Within(cc, nc, ppsNoneWindow)
		facts := fmt.Sprintf("at %d bytes AES-128-CBC %s vs none %s: %s; with a core of its own the busier OpenVPN process would carry %s pps with AES-128-CBC (published 12 000 on the PIII), %s with none",
			ppsSmall, ppsCPUText(cr), ppsCPUText(nr), j.Ratio, ui.FormatExtra(cr.Extra["openvpn_pps_per_core"]), ui.FormatExtra(nr.Extra["openvpn_pps_per_core"]))
		switch {
		case j.Outcome == Confirmed:
			out = append(out, newVerdict(claim, Confirmed, "%s, inside %s: the crypto adds little to what a packet costs", facts, ppsNoneWindow))
		case j.Above:
			out = append(out, newVerdict(claim, Changed, "%s, above %s beyond the spread: the crypto is %.0f %% of what a packet costs OpenVPN here", facts, ppsNoneWindow, 100*(1-1/j.Ratio.Median)))
		case j.Below:
			out = append(out, newVerdict(claim, Refuted, "%s: AES-128-CBC costs less CPU per packet than none beyond the spread", facts))
		default:
			out = append(out, withShortfall(newVerdict(claim, j.Outcome, "%s: %s", facts, j.Why), j.Short))
		}
	}

	// 4. Packets, not bytes, limit the tunnel: its packet rate hardly
	// changes with the size.
	predicted := float64(ppsLarge+28) / float64(ppsSmall+28)
	boundary := math.Sqrt(predicted)
	_, r1, r1ok := ppsRow(rep, experiment.Routed, ppsSmall)
	_, r2, r2ok := ppsRow(rep, experiment.Routed, ppsLarge)
	routed := "routed: no valid samples"
	if r1ok && r2ok {
		routed = fmt.Sprintf("routed for comparison: %.0f → %.0f pps (×%.2f)", r1.Median, r2.Median, r1.Median/r2.Median)
	}
	for _, v := range []string{ppsNone, ppsCBC, ppsGCM} {
		claim := fmt.Sprintf("the packet rate, not the byte rate, limits the tunnel: its pps stays roughly constant from %d to %d bytes, not ×%.0f lower as a byte limit would make it [%s]", ppsSmall, ppsLarge, predicted, v)
		_, a, aok := ppsRow(rep, v, ppsSmall)
		_, m, mok := ppsRow(rep, v, 512)
		_, b, bok := ppsRow(rep, v, ppsLarge)
		if !aok || !bok {
			out = append(out, newVerdict(claim, Noise, "missing rows: %d bytes %s, %d bytes %s", ppsSmall, ppsText(a, aok), ppsLarge, ppsText(b, bok)))
			continue
		}
		ratio, hi, lo := a.Median/b.Median, a.Max/b.Min, a.Min/b.Max
		mid := ""
		if mok {
			mid = fmt.Sprintf(", 512 bytes %s", ppsText(m, mok))
		}
		frag, fragFigures := "", finding.Figures(nil)
		if ob := ppsOuterBytes(v, ppsLarge); mtu > 0 && ob > mtu {
			fragFigures = finding.Figures{"probe_bytes": ppsLarge, "datagram_bytes": float64(ob), "path_mtu_bytes": float64(mtu)}
			frag = fmt.Sprintf("; its %d-byte probes leave as %d-byte IPv4 datagrams, fragmented in two on the %d-byte path", ppsLarge, ob, mtu)
		}
		facts := fmt.Sprintf("%d bytes %s%s, %d bytes %s: the packet rate falls ×%.2f (×%.2f–×%.2f within the spreads) while the bytes per packet grow ×%.0f; %s%s",
			ppsSmall, ppsText(a, aok), mid, ppsLarge, ppsText(b, bok), ratio, lo, hi, predicted, routed, frag)
		n := len(out)
		switch {
		case !ppsEnough(a, b):
			out = append(out, newVerdict(claim, Noise, "%s; %s", facts, ppsTooFew()))
		case hi <= boundary && lo <= ppsFlatRatio:
			out = append(out, newVerdict(claim, Confirmed, "packets limit (the ratio stays below ×%.1f, halfway to a byte limit on a log scale): %s", boundary, facts))
		case hi <= boundary:
			out = append(out, newVerdict(claim, Changed, "packets limit, but the size costs something too (the pps falls by more than ×%.1f beyond the spread): %s", ppsFlatRatio, facts))
		case lo > boundary:
			out = append(out, newVerdict(claim, Refuted, "bytes limit (the ratio exceeds ×%.1f, nearer a byte limit): %s", boundary, facts))
		default:
			out = append(out, newVerdict(claim, Noise, "the spreads straddle ×%.1f, halfway between a packet and a byte limit: %s", boundary, facts))
		}
		if fragFigures != nil {
			out[n] = withCondition(out[n], measure.VerdictConditionProbeFragmented, fragFigures)
		}
	}
	return out
}

// ppsMinSamples is the fewest samples per row a verdict other than noise
// needs: with three interleaved samples on each side, "the lowest of one
// above the highest of the other" happens by chance once in twenty.
const ppsMinSamples = 3

// ppsTooFew says why a verdict is noise when a row has fewer samples.
func ppsTooFew() string {
	return fmt.Sprintf("too few samples to tell a difference from noise (at least %d per row: --repeat %d)", ppsMinSamples, ppsMinSamples)
}

// ppsEnough reports whether every spread has ppsMinSamples samples.
func ppsEnough(sps ...verdict.Spread) bool {
	for _, sp := range sps {
		if sp.N < ppsMinSamples {
			return false
		}
	}
	return true
}

// ppsSamples returns a row's samples as packet rates (payload bit rate
// over 8 × the payload size).
func ppsSamples(r *measure.Row) []float64 {
	if r == nil {
		return nil
	}
	size, ok := extraAs[int](r.Extra["size_bytes"])
	if !ok || size <= 0 {
		return nil
	}
	v := make([]float64, len(r.SamplesBps))
	for i, b := range r.SamplesBps {
		v[i] = b / 8 / float64(size)
	}
	return v
}

// ppsCPUSamples returns a row's OpenVPN CPU µs per packet, per sample.
func ppsCPUSamples(r *measure.Row) ([]float64, bool) {
	if r == nil {
		return nil, false
	}
	v, ok := extraAs[[]float64](r.Extra["cpu_s_per_mpkt_samples"])
	return v, ok && len(v) > 0 && verdict.Min(v) > 0
}

// ppsCPUSpread is the spread of a tunnel row's OpenVPN CPU-seconds per
// million packets (= µs per packet), server and client together, per sample.
func ppsCPUSpread(r *measure.Row) (verdict.Spread, bool) {
	if r == nil {
		return verdict.Spread{}, false
	}
	v, ok := extraAs[[]float64](r.Extra["cpu_s_per_mpkt_samples"])
	if !ok || len(v) == 0 {
		return verdict.Spread{}, false
	}
	sp := verdict.Of(v)
	return sp, sp.Min > 0
}

func ppsCPUText(r *measure.Row) string {
	sp, ok := ppsCPUSpread(r)
	switch {
	case !ok:
		return "no CPU figure"
	case sp.N == 1:
		return fmt.Sprintf("%.1f µs", sp.Median)
	}
	return fmt.Sprintf("%.1f µs (%.1f–%.1f)", sp.Median, sp.Min, sp.Max)
}

// ppsOtherRatios states the routed/tunnel ratios of the other tunnels and
// sizes, for the reason of the first verdict.
func ppsOtherRatios(rep *measure.Report) string {
	var parts []string
	for _, size := range ppsSizes {
		_, r, rok := ppsRow(rep, experiment.Routed, size)
		if !rok {
			continue
		}
		for _, v := range []string{ppsCBC, ppsGCM, ppsNone} {
			if size == ppsSmall && v == ppsCBC {
				continue
			}
			if _, t, ok := ppsRow(rep, v, size); ok {
				parts = append(parts, fmt.Sprintf("%s %dB ×%.2f", v, size, r.Median/t.Median))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (routed over " + strings.Join(parts, ", ") + ")"
}
