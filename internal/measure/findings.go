package measure

import (
	"fmt"
	"github.com/ovpnperf/ovpnperf/internal/overhead"

	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// cipherSameTolerance: cipher none within 10 % of the defaults means the
// cipher is not what costs.
const cipherSameTolerance = 0.10

// cipherFinding says whether cipher none differs from the defaults
// (verdict.Within), with the outcome it rests on.
func cipherFinding(where string, none, def []float64) string {
	j := verdict.Within(none, def, verdict.Unchanged(cipherSameTolerance))
	switch {
	case j.Outcome == verdict.Confirmed:
		return fmt.Sprintf("%s (%s): cipher none is within %.0f %% of the defaults in every sample pair (%s): the cost is per packet (system calls, copies, one process), not the encryption.", where, j.Outcome, 100*cipherSameTolerance, j.Ratio)
	case j.Above:
		return fmt.Sprintf("%s (%s): cipher none is faster than the defaults beyond the spread (%s): encryption is part of the cost here.", where, verdict.Confirmed, j.Ratio)
	case j.Below:
		return fmt.Sprintf("%s (%s): cipher none is slower than the defaults beyond the spread (%s): something other than the cipher varied between the samples.", where, verdict.Changed, j.Ratio)
	}
	return fmt.Sprintf("%s (%s): cannot tell whether the cipher matters: %s (use --repeat %d or more).", where, j.Outcome, j.Why, verdict.MinSamples)
}

// minCoreShare is the share of one core the busier OpenVPN process must
// have used, on average over a sample, before a tunnel below the path's rate
// is called OpenVPN-limited. It is half, not all: on a small machine the two
// OpenVPN processes, the two iperf3 processes and the router's emulator share
// the cores, so a process that limits the tunnel rarely gets a whole one (the
// built-in LAN run here: 515 Mbit/s at 12 CPU-s/GB, 0.77 of a core).
const minCoreShare = 0.5

// Findings states in words what the rows of a `lab run` show, computed from
// the measured figures (ovpnperf report puts them on the page too).
func Findings(rep *Report) []string {
	if rep.Scenario.Command == CommandMeasure {
		return realFindings(rep)
	}
	var out []string
	for _, n := range rep.Scenario.Networks {
		var tunnels []Row
		byKey := map[string]Row{}
		for _, r := range rep.Rows {
			if r.Network == n.Name && r.Valid && len(r.SamplesBps) > 0 {
				byKey[r.Variant+"/"+r.Direction] = r
				if r.Path == PathTunnel {
					tunnels = append(tunnels, r)
				}
			}
		}
		for _, r := range tunnels {
			if r.RatioToRouted == 0 {
				continue
			}
			pct := 100 * r.RatioToRouted
			line := fmt.Sprintf("%s: %s %s: %s Mbit/s, %.0f%% of the routed path", n.Name, r.Variant, r.Direction, FormatMbps(r.MedianBps), pct)
			busiest := max(r.CPUSecondsPerGB["server"], r.CPUSecondsPerGB["client"])
			switch {
			case pct >= 90:
				ov := defaultGCMOverhead()
				// The figure is the default data channel's: a row does not
				// carry its variant's tun-mtu or cipher, so say whose it is.
				line += fmt.Sprintf(": the path is the limit (for comparison, the default configuration's %d bytes on 1500 predict %.0f%%).", ov, 100*1500/float64(1500+ov))
			case busiest > 0 && r.MedianBps >= minCoreShare*8e9/busiest:
				// CPU-seconds per 10^9 bytes → the rate one core sustains.
				line += fmt.Sprintf(": OpenVPN is the limit; its busier process spends %.1f CPU-s per GB, so one core carries at most about %s Mbit/s at this cost.",
					busiest, FormatMbps(8e9/busiest))
			case busiest > 0:
				// Neither binds: OpenVPN used a small share of a core, so
				// the cause (loss, RTT, a window) is something this run did
				// not measure, and saying "OpenVPN" would be folklore.
				line += fmt.Sprintf(": neither the path's rate nor OpenVPN's CPU is the limit (its busier process spends %.1f CPU-s per GB, so one core would carry about %s Mbit/s); what limits it (loss, RTT, a window) is not tested by this run.",
					busiest, FormatMbps(8e9/busiest))
			default:
				line += "."
			}
			out = append(out, line)
		}
		// Does the cipher matter? Compare cipher none with the defaults by
		// the evidence rules: "the cost is per packet, not the
		// encryption" is a no-difference claim, so it needs MinSamples
		// interleaved samples whose every ratio lies within 10 %.
		for _, dir := range []string{DirectionUp, DirectionDown} {
			def, okD := byKey["default/"+dir]
			none, okN := byKey["none/"+dir]
			if !okD || !okN || def.RatioToRouted >= 0.9 {
				continue
			}
			out = append(out, cipherFinding(n.Name+" "+dir, none.SamplesBps, def.SamplesBps))
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
