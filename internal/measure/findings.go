package measure

import (
	"fmt"
	"math"

	"github.com/ovpnperf/ovpnperf/internal/finding"
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

// Settings of a run document's findings (finding.Finding.Settings): what
// the tunnel was compared with, and the non-numeric facts a kind names.
// docs/schemas.md lists them with the kinds.
const (
	// SettingBaseline is BaselineRouted (lab run, recipes),
	// BaselineOutside (measure) or BaselineDefault (cipher-cost: cipher
	// none against the default cipher).
	SettingBaseline = "baseline"
	BaselineRouted  = "routed"
	BaselineOutside = "outside"
	BaselineDefault = "default"
	// SettingCost (cipher-cost) is CostPerPacket, CostEncryption or
	// CostOther (cipher none slower than the defaults); absent when
	// undecided.
	SettingCost    = "cost"
	CostPerPacket  = "per-packet"
	CostEncryption = "encryption"
	CostOther      = "other"
	// SettingHost is the far end of measure's path; SettingTunDevice its
	// tun device; SettingPredictionBasis what the model's prediction rests
	// on; SettingPathMTULearnt "true" when the kernel learnt the path MTU;
	// SettingUnread what could not be read (not-read), "; "-separated.
	SettingHost            = "host"
	SettingTunDevice       = "tun_device"
	SettingPredictionBasis = "prediction_basis"
	SettingPathMTULearnt   = "path_mtu_learnt"
	SettingUnread          = "unread"
)

// Figures of a run document's findings, by name (each ends in its unit;
// docs/schemas.md lists which kind has which).
const (
	// A tunnel row against its baseline, and the ratio the verdict rests
	// on: its median, lowest and highest, and the number of interleaved
	// pairs (or, unpaired, of samples of the smaller side).
	FigTunnelMedianBps   = "tunnel_median_bps"
	FigBaselineMedianBps = "baseline_median_bps"
	FigBaselinePercent   = "baseline_percent"
	FigMedianRatio       = "median_ratio"
	FigLowRatio          = "low_ratio"
	FigHighRatio         = "high_ratio"
	FigPairs             = "pairs"
	FigUnpairedSamples   = "unpaired_samples"
	// The window the claim puts the ratio in (high absent: no upper end).
	FigWindowLowRatio  = "window_low_ratio"
	FigWindowHighRatio = "window_high_ratio"
	// lab run's comparison: the default configuration's overhead on a
	// 1500-byte packet and the share of the routed rate it predicts.
	FigDefaultOverheadBytes = "default_overhead_bytes"
	FigPredictedPercent     = "predicted_percent"
	// The busier OpenVPN process's CPU per 10^9 bytes and the rate one
	// core carries at that cost.
	FigBusiestCPUSecondsPerGB = "busiest_cpu_seconds_per_gb"
	FigOneCoreBps             = "one_core_bps"
	// measure: the model's predicted tunnel/outside ratio.
	FigPredictedRatio = "predicted_ratio"
	// cpu-bound: the lowest share of a core the busiest thread used over
	// the tunnel samples, the rule's share, OpenVPN's CPU per GB.
	FigBusiestThreadMinPercent = "busiest_thread_min_percent"
	FigCPUBoundPercent         = "cpu_bound_percent"
	FigOpenVPNCPUSecondsPerGB  = "openvpn_cpu_seconds_per_gb"
	// Tunnel samples a counter was read in, and how many showed it.
	FigTunnelSamples = "tunnel_samples"
	FigShownSamples  = "shown_samples"
	// socket-drops.
	FigDroppedDatagrams = "dropped_datagrams"
	FigRcvbufBytes      = "rcvbuf_bytes"
	// fragmentation (this host, /proc/net/snmp).
	FigFragmentsMadePackets        = "fragments_made_packets"
	FigFragmentsReassembledPackets = "fragments_reassembled_packets"
	FigOutsideFragmentsPackets     = "outside_fragments_packets"
	FigFragmentFailuresPackets     = "fragment_failures_packets"
	FigTunMTUBytes                 = "tun_mtu_bytes"
	FigPathMTUBytes                = "path_mtu_bytes"
	// window-bound: the first sample's window and mean RTT, and the
	// median over the samples of window/RTT.
	FigWindowBytes = "window_bytes"
	FigRTTSeconds  = "rtt_seconds"
	FigWindowBps   = "window_rate_bps"
	// loss: the lowest share of segments retransmitted over the outside
	// samples, and the rule's share.
	FigRetransmitMinPercent = "retransmit_min_percent"
	FigLossRulePercent      = "loss_rule_percent"
	// loss, when paced echoes answered: how many were sent and lost, and
	// the lost share.
	FigEchoesSentPackets = "echoes_sent_packets"
	FigEchoesLostPackets = "echoes_lost_packets"
	FigEchoLossPercent   = "echo_loss_percent"
	// tun-drops.
	FigTunDroppedPackets = "tun_dropped_packets"
	FigTxQueueLenPackets = "txqueuelen_packets"
)

// Where the rules of the findings are explained: anchors of headings in
// the repository's docs (a test resolves each one).
const (
	citeRuleSamples     = "docs/evidence.md#rule-1-at-least-3-samples-a-side"
	citeRuleWithin      = "docs/evidence.md#rule-3-no-difference-and-keeps-n-"
	citeOverhead        = "docs/openvpn-facts.md#per-packet-overhead"
	citeCipherNone      = "docs/openvpn-facts.md#data-channel-without-encryption-or-authentication"
	citeOneCore         = "docs/openvpn-facts.md#how-others-spread-clients-across-cores"
	citeSocketBuffers   = "docs/openvpn-facts.md#socket-buffers"
	citeMTU             = "docs/openvpn-facts.md#tun-mtu-and-link-mtu"
	citeMssfix          = "docs/openvpn-facts.md#mssfix"
	citeBufferRTT       = "docs/openvpn-facts.md#buffer-size-and-rtt"
	citeTxqueuelen      = "docs/openvpn-facts.md#txqueuelen"
	citeMeasureFindings = "docs/measure.md#measure-host---tunnel-tunnel_addr-analyze-filepcap"
)

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

// ratioFigures puts a verdict ratio and its window into figs.
func ratioFigures(figs finding.Figures, r verdict.Ratio, w verdict.Window) {
	if r.N > 0 {
		figs[FigMedianRatio], figs[FigLowRatio], figs[FigHighRatio] = r.Median, r.Lo, r.Hi
		if r.Paired {
			figs[FigPairs] = float64(r.N)
		} else {
			figs[FigUnpairedSamples] = float64(r.N)
		}
	}
	figs[FigWindowLowRatio] = w.Lo
	if !math.IsInf(w.Hi, 1) {
		figs[FigWindowHighRatio] = w.Hi
	}
}

// ratioOf is the verdict ratio ratioFigures put into figs.
func ratioOf(figs finding.Figures) verdict.Ratio {
	r := verdict.Ratio{Median: figs[FigMedianRatio], Lo: figs[FigLowRatio], Hi: figs[FigHighRatio]}
	if n, ok := figs[FigPairs]; ok {
		r.N, r.Paired = int(n), true
	} else {
		r.N = int(figs[FigUnpairedSamples])
	}
	return r
}

// windowOf is the window ratioFigures put into figs.
func windowOf(figs finding.Figures) verdict.Window {
	w := verdict.Window{Lo: figs[FigWindowLowRatio], Hi: math.Inf(1)}
	if hi, ok := figs[FigWindowHighRatio]; ok {
		w.Hi = hi
	}
	return w
}

// undecided fills what a finding that could not be decided says: why,
// and what would decide it.
func undecided(f *finding.Finding, j verdict.Judgement, repeat, kept int) {
	f.Why = j.Why
	f.Decide = resolution(j, repeat, kept)
	f.Cites = append(f.Cites, citeRuleSamples)
}

// cipherFinding says whether cipher none differs from the defaults
// (verdict.Within), with the outcome it rests on.
func cipherFinding(network, dir string, rows [2]int, none, def []float64, repeat int) finding.Finding {
	w := verdict.Unchanged(cipherSameTolerance)
	j := verdict.Within(none, def, w)
	f := finding.Finding{Kind: finding.CipherCost, Outcome: j.Outcome,
		Subject:  finding.Subject{Network: network, Variant: "none", Direction: dir, Rows: rows[:]},
		Figures:  finding.Figures{},
		Settings: map[string]string{SettingBaseline: BaselineDefault},
		Cites:    []string{citeRuleWithin, citeCipherNone}}
	ratioFigures(f.Figures, j.Ratio, w)
	switch {
	case j.Outcome == verdict.Confirmed:
		f.Settings[SettingCost] = CostPerPacket
		f.RefutedBy = "a sample pair whose ratio lies outside the window"
	case j.Above:
		f.Outcome = verdict.Confirmed
		f.Settings[SettingCost] = CostEncryption
		f.RefutedBy = "a sample pair whose ratio lies inside the window or below it"
	case j.Below:
		f.Outcome = verdict.Changed
		f.Settings[SettingCost] = CostOther
	default:
		undecided(&f, j, repeat, min(len(none), len(def)))
	}
	return rendered(f)
}

// minCoreShare is the share of one core the busier OpenVPN process must
// have used, on average over a sample, before a tunnel below the path's rate
// is called OpenVPN-limited. It is half, not all: on a small machine the two
// OpenVPN processes, the two iperf3 processes and the router's emulator share
// the cores, so a process that limits the tunnel rarely gets a whole one (the
// built-in LAN run here: 515 Mbit/s at 12 CPU-s/GB, 0.77 of a core).
const minCoreShare = 0.5

// Findings judges what the rows of a run document show, as records (the
// document's "findings"; FindingText is their sentence). Every claim in
// them goes through the evidence rules of internal/verdict
// (docs/evidence.md): a tunnel is compared with the routed path of the
// same direction by verdict.Within on interleaved sample pairs, and only a
// comparison that decides (at least MinSamples pairs, every pair on one
// side of the 90 % line) names a limit; otherwise the finding is
// limit-unknown with why and what would decide it. The CPU figure that
// names OpenVPN as the limit is the average over the row's samples.
// A recipe's document is judged by its verdicts: it has no findings.
func Findings(rep *Report) []finding.Finding {
	out := []finding.Finding{}
	if len(rep.Verdicts) > 0 {
		return out
	}
	if rep.Scenario.Command == CommandMeasure {
		return append(out, realFindings(rep)...)
	}
	for _, n := range rep.Scenario.Networks {
		var tunnels []int
		byKey := map[string]int{}
		routed := map[string]int{}
		for i, r := range rep.Rows {
			if r.Network == n.Name && r.Valid && len(r.SamplesBps) > 0 {
				byKey[r.Variant+"/"+r.Direction] = i
				switch r.Path {
				case PathTunnel:
					tunnels = append(tunnels, i)
				case PathRouted:
					if _, seen := routed[r.Direction]; !seen || r.Proto == "tcp" {
						routed[r.Direction] = i
					}
				}
			}
		}
		for _, ti := range tunnels {
			r := rep.Rows[ti]
			bi, ok := routed[r.Direction]
			if !ok || rep.Rows[bi].MedianBps <= 0 {
				continue
			}
			base := rep.Rows[bi]
			out = append(out, pathFinding(n.Name, rep.Scenario.Repeat, [2]int{ti, bi}, r, base))
		}
		// Does the cipher matter? Compare cipher none with the defaults by
		// the evidence rules: "the cost is per packet, not the
		// encryption" is a no-difference claim, so it needs MinSamples
		// interleaved samples whose every ratio lies within 10 %. Asked
		// only where the defaults are not at the path's rate.
		for _, dir := range []string{DirectionUp, DirectionDown} {
			di, okD := byKey["default/"+dir]
			ni, okN := byKey["none/"+dir]
			if !okD || !okN {
				continue
			}
			def, none := rep.Rows[di], rep.Rows[ni]
			if bi, ok := routed[dir]; ok && verdict.Within(def.SamplesBps, rep.Rows[bi].SamplesBps, verdict.NotBelow(1-pathLimitShare)).Outcome == verdict.Confirmed {
				continue
			}
			out = append(out, cipherFinding(n.Name, dir, [2]int{ni, di}, none.SamplesBps, def.SamplesBps, rep.Scenario.Repeat))
		}
	}
	return out
}

// pathFinding judges one tunnel row r (rows[0]) against the routed row
// base (rows[1]) of its direction.
func pathFinding(network string, repeat int, rows [2]int, r, base Row) finding.Finding {
	w := verdict.NotBelow(1 - pathLimitShare)
	j := verdict.Within(r.SamplesBps, base.SamplesBps, w)
	busiest := max(r.CPUSecondsPerGB["server"], r.CPUSecondsPerGB["client"])
	f := finding.Finding{Outcome: verdict.Confirmed,
		Subject:  finding.Subject{Network: network, Variant: r.Variant, Direction: r.Direction, Rows: rows[:]},
		Settings: map[string]string{SettingBaseline: BaselineRouted},
		Figures: finding.Figures{FigTunnelMedianBps: r.MedianBps, FigBaselineMedianBps: base.MedianBps,
			FigBaselinePercent: 100 * r.MedianBps / base.MedianBps},
		Cites: []string{citeRuleWithin}}
	ratioFigures(f.Figures, j.Ratio, w)
	if busiest > 0 && j.Below {
		// CPU-seconds per 10^9 bytes → the rate one core sustains.
		f.Figures[FigBusiestCPUSecondsPerGB] = busiest
		f.Figures[FigOneCoreBps] = 8e9 / busiest
	}
	switch {
	case j.Outcome == verdict.Confirmed:
		f.Kind = finding.PathBound
		// The figure is the default data channel's: a row does not carry
		// its variant's tun-mtu or cipher, so say whose it is.
		ov := defaultGCMOverhead()
		f.Figures[FigDefaultOverheadBytes] = float64(ov)
		f.Figures[FigPredictedPercent] = 100 * 1500 / float64(1500+ov)
		f.Cites = append(f.Cites, citeOverhead)
		f.RefutedBy = fmt.Sprintf("a sample pair below %.0f %% of the routed rate", 100*pathLimitShare)
	case j.Below && busiest > 0 && r.MedianBps >= minCoreShare*8e9/busiest:
		f.Kind = finding.CPUBound
		f.Cites = append(f.Cites, citeOneCore)
		f.RefutedBy = "a tunnel at the routed rate with the same CPU per GB, or OpenVPN's busier process under half a core"
	case j.Below:
		// Neither binds (or no CPU figure): OpenVPN used a small share
		// of a core, so the cause (loss, RTT, a window) is something
		// this run did not measure, and saying "OpenVPN" would be
		// folklore.
		f.Kind = finding.BelowPath
		f.RefutedBy = fmt.Sprintf("a sample pair at %.0f %% of the routed rate or more", 100*pathLimitShare)
	default:
		f.Kind = finding.LimitUnknown
		f.Outcome = j.Outcome
		undecided(&f, j, repeat, min(len(r.SamplesBps), len(base.SamplesBps)))
	}
	return rendered(f)
}

// rendered sets the finding's sentence from its fields.
func rendered(f finding.Finding) finding.Finding {
	f.Text = FindingText(f)
	return f
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
