package measure

import (
	"fmt"
	"github.com/ovpnperf/ovpnperf/internal/overhead"

	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// cipherSameTolerance: cipher none within 10 % of the defaults means the
// cipher is not what costs.
const cipherSameTolerance = 0.10

// pathLimitShare: a tunnel that keeps at least 90 % of the routed rate in
// every sample pair has the path as its limit (the default data channel's
// overhead alone costs about 3 %).
const pathLimitShare = 0.90

// resolution says what would let a run decide a judgement that came out
// noise or not tested: more samples only when fewer than MinSamples were
// asked for; refused samples when they were asked for but not kept; a
// quieter machine or longer samples when the spread is too wide (more
// samples would not help there: the range of the pairs only widens).
func resolution(j verdict.Judgement, repeat, kept int) string {
	switch {
	case j.Outcome == verdict.NotTested:
		return "a run with the routed baseline (without --no-routed) would decide it"
	case repeat < verdict.MinSamples:
		return fmt.Sprintf("use --repeat %d or more", verdict.MinSamples)
	case kept < verdict.MinSamples:
		return fmt.Sprintf("%d of the %d samples asked for were kept: the rows' error says why the others were refused", kept, repeat)
	}
	return "more samples would not narrow the spread (the range of the pairs only widens); a quieter machine or longer samples (--time) would"
}

// cipherFinding says whether cipher none differs from the defaults
// (verdict.Within), with the outcome it rests on.
func cipherFinding(where string, none, def []float64, repeat int) string {
	j := verdict.Within(none, def, verdict.Unchanged(cipherSameTolerance))
	switch {
	case j.Outcome == verdict.Confirmed:
		return fmt.Sprintf("%s (%s): cipher none is within %.0f %% of the defaults in every sample pair (%s): the cost is per packet (system calls, copies, one process), not the encryption.", where, j.Outcome, 100*cipherSameTolerance, j.Ratio)
	case j.Above:
		return fmt.Sprintf("%s (%s): cipher none is faster than the defaults beyond the spread (%s): encryption is part of the cost here.", where, verdict.Confirmed, j.Ratio)
	case j.Below:
		return fmt.Sprintf("%s (%s): cipher none is slower than the defaults beyond the spread (%s): something other than the cipher varied between the samples.", where, verdict.Changed, j.Ratio)
	}
	return fmt.Sprintf("%s (%s): cannot tell whether the cipher matters: %s (%s).", where, j.Outcome, j.Why, resolution(j, repeat, min(len(none), len(def))))
}

// minCoreShare is the share of one core the busier OpenVPN process must
// have used, on average over a sample, before a tunnel below the path's rate
// is called OpenVPN-limited. It is half, not all: on a small machine the two
// OpenVPN processes, the two iperf3 processes and the router's emulator share
// the cores, so a process that limits the tunnel rarely gets a whole one (the
// built-in LAN run here: 515 Mbit/s at 12 CPU-s/GB, 0.77 of a core).
const minCoreShare = 0.5

// Findings states in words what the rows of a `lab run` show, computed from
// the measured figures (ovpnperf report puts them on the page too). Every
// claim in them goes through the evidence rules of internal/verdict
// (docs/evidence.md): a tunnel is compared with the routed path of the same
// direction by verdict.Within on interleaved sample pairs, and only a
// comparison that decides (at least MinSamples pairs, every pair on one
// side of the 90 % line) names a limit; otherwise the finding says that it
// cannot tell, why, and what would decide it. The CPU figure that names
// OpenVPN as the limit is the average over the row's samples.
func Findings(rep *Report) []string {
	if rep.Scenario.Command == CommandMeasure {
		return realFindings(rep)
	}
	var out []string
	for _, n := range rep.Scenario.Networks {
		var tunnels []Row
		byKey := map[string]Row{}
		routed := map[string]Row{}
		for _, r := range rep.Rows {
			if r.Network == n.Name && r.Valid && len(r.SamplesBps) > 0 {
				byKey[r.Variant+"/"+r.Direction] = r
				switch r.Path {
				case PathTunnel:
					tunnels = append(tunnels, r)
				case PathRouted:
					if _, seen := routed[r.Direction]; !seen || r.Proto == "tcp" {
						routed[r.Direction] = r
					}
				}
			}
		}
		for _, r := range tunnels {
			base, ok := routed[r.Direction]
			if !ok || base.MedianBps <= 0 {
				continue
			}
			pct := 100 * r.MedianBps / base.MedianBps
			line := fmt.Sprintf("%s: %s %s: %s Mbit/s, %.0f%% of the routed path", n.Name, r.Variant, r.Direction, FormatMbps(r.MedianBps), pct)
			j := verdict.Within(r.SamplesBps, base.SamplesBps, verdict.NotBelow(1-pathLimitShare))
			busiest := max(r.CPUSecondsPerGB["server"], r.CPUSecondsPerGB["client"])
			switch {
			case j.Outcome == verdict.Confirmed:
				ov := defaultGCMOverhead()
				// The figure is the default data channel's: a row does not
				// carry its variant's tun-mtu or cipher, so say whose it is.
				line += fmt.Sprintf(": the path is the limit: every sample pair keeps %.0f %% of the routed rate or more, %s (for comparison, the default configuration's %d bytes on 1500 predict %.0f%%).",
					100*pathLimitShare, j.Ratio, ov, 100*1500/float64(1500+ov))
			case j.Below && busiest > 0 && r.MedianBps >= minCoreShare*8e9/busiest:
				// CPU-seconds per 10^9 bytes → the rate one core sustains.
				line += fmt.Sprintf(": below the routed path in every sample pair, %s; OpenVPN is the limit: its busier process spends %.1f CPU-s per GB over the samples, so one core carries at most about %s Mbit/s at this cost.",
					j.Ratio, busiest, FormatMbps(8e9/busiest))
			case j.Below && busiest > 0:
				// Neither binds: OpenVPN used a small share of a core, so
				// the cause (loss, RTT, a window) is something this run did
				// not measure, and saying "OpenVPN" would be folklore.
				line += fmt.Sprintf(": below the routed path in every sample pair, %s; neither the path's rate nor OpenVPN's CPU is the limit (its busier process spends %.1f CPU-s per GB, so one core would carry about %s Mbit/s); what limits it (loss, RTT, a window) is not tested by this run.",
					j.Ratio, busiest, FormatMbps(8e9/busiest))
			case j.Below:
				line += fmt.Sprintf(": below the routed path in every sample pair, %s; what limits it is not tested by this run (no CPU figure).", j.Ratio)
			default:
				line += fmt.Sprintf(" (%s): cannot tell what limits it: %s (%s).", j.Outcome, j.Why, resolution(j, rep.Scenario.Repeat, min(len(r.SamplesBps), len(base.SamplesBps))))
			}
			out = append(out, line)
		}
		// Does the cipher matter? Compare cipher none with the defaults by
		// the evidence rules: "the cost is per packet, not the
		// encryption" is a no-difference claim, so it needs MinSamples
		// interleaved samples whose every ratio lies within 10 %. Asked
		// only where the defaults are not at the path's rate.
		for _, dir := range []string{DirectionUp, DirectionDown} {
			def, okD := byKey["default/"+dir]
			none, okN := byKey["none/"+dir]
			if !okD || !okN {
				continue
			}
			if base, ok := routed[dir]; ok && verdict.Within(def.SamplesBps, base.SamplesBps, verdict.NotBelow(1-pathLimitShare)).Outcome == verdict.Confirmed {
				continue
			}
			out = append(out, cipherFinding(n.Name+" "+dir, none.SamplesBps, def.SamplesBps, rep.Scenario.Repeat))
		}
	}
	return out
}

// defaultGCMOverhead is what the overhead model gives for OpenVPN 2.6's
// default data channel over UDP/IPv4, outer headers included.
func defaultGCMOverhead() int {
	f, err := overhead.New(overhead.DataChannel{}, overhead.Transport{Proto: "udp"})
	if err != nil {
		panic(err) // the default configuration is always known to the model
	}
	return f.Overhead(1500)
}
