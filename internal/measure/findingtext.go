package measure

import (
	"fmt"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// FindingText is the sentence of a run document's finding, rendered from
// its fields alone: the one place the findings of `lab run`, `measure` and
// `report` are put into words (the document's "text" is what it returned
// when the finding was made). A finding it has no words for (a kind of a
// later version) keeps the text its document carries.
func FindingText(f finding.Finding) string {
	var s string
	switch f.Settings[SettingBaseline] {
	case BaselineRouted:
		s = labText(f)
	case BaselineOutside:
		s = realText(f)
	case BaselineDefault:
		s = cipherText(f)
	}
	if s == "" {
		return f.Text
	}
	return s
}

// labText words a finding of a tunnel row against the routed row.
func labText(f finding.Finding) string {
	fg := f.Figures
	r := ratioOf(fg)
	line := fmt.Sprintf("%s: %s %s: %s Mbit/s, %.0f%% of the routed path", f.Subject.Network, f.Subject.Variant, f.Subject.Direction,
		FormatMbps(fg[FigTunnelMedianBps]), fg[FigBaselinePercent])
	_, cpu := fg[FigBusiestCPUSecondsPerGB]
	switch f.Kind {
	case finding.PathBound:
		return line + fmt.Sprintf(": the path is the limit: every sample pair keeps %.0f %% of the routed rate or more, %s (for comparison, the default configuration's %.0f bytes on 1500 predict %.0f%%).",
			100*fg[FigWindowLowRatio], r, fg[FigDefaultOverheadBytes], fg[FigPredictedPercent])
	case finding.CPUBound:
		return line + fmt.Sprintf(": below the routed path in every sample pair, %s; OpenVPN is the limit: its busier process spends %.1f CPU-s per GB over the samples, so one core carries at most about %s Mbit/s at this cost.",
			r, fg[FigBusiestCPUSecondsPerGB], FormatMbps(fg[FigOneCoreBps]))
	case finding.BelowPath:
		if cpu {
			return line + fmt.Sprintf(": below the routed path in every sample pair, %s; neither the path's rate nor OpenVPN's CPU is the limit (its busier process spends %.1f CPU-s per GB, so one core would carry about %s Mbit/s); what limits it (loss, RTT, a window) is not tested by this run.",
				r, fg[FigBusiestCPUSecondsPerGB], FormatMbps(fg[FigOneCoreBps]))
		}
		return line + fmt.Sprintf(": below the routed path in every sample pair, %s; what limits it is not tested by this run (no CPU figure).", r)
	case finding.LimitUnknown:
		return line + fmt.Sprintf(" (%s): cannot tell what limits it: %s (%s).", f.Outcome, f.Why, f.Decide)
	}
	return ""
}

// cipherText words cipher none against the defaults.
func cipherText(f finding.Finding) string {
	if f.Kind != finding.CipherCost {
		return ""
	}
	where := f.Subject.Network + " " + f.Subject.Direction
	r := ratioOf(f.Figures)
	switch f.Settings[SettingCost] {
	case CostPerPacket:
		return fmt.Sprintf("%s (%s): cipher none is within %.0f %% of the defaults in every sample pair (%s): the cost is per packet (system calls, copies, one process), not the encryption.",
			where, f.Outcome, 100*(f.Figures[FigWindowHighRatio]-1), r)
	case CostEncryption:
		return fmt.Sprintf("%s (%s): cipher none is faster than the defaults beyond the spread (%s): encryption is part of the cost here.", where, f.Outcome, r)
	case CostOther:
		return fmt.Sprintf("%s (%s): cipher none is slower than the defaults beyond the spread (%s): something other than the cipher varied between the samples.", where, f.Outcome, r)
	}
	return fmt.Sprintf("%s (%s): cannot tell whether the cipher matters: %s (%s).", where, f.Outcome, f.Why, f.Decide)
}

// realText words a finding of measure's tunnel against the path outside.
func realText(f finding.Finding) string {
	fg := f.Figures
	name := realName(f)
	wrong := ""
	if f.RefutedBy != "" {
		wrong = " Shown wrong by: " + f.RefutedBy + "."
	}
	switch f.Kind {
	case finding.PathBound:
		pred := fg[FigPredictedRatio]
		return fmt.Sprintf("%s: path-bound: the tunnel carries %s of the outside rate, within ±%.0f %% of the %.3f the overhead model predicts (%s); OpenVPN is not what limits this direction.",
			name, ratioOf(fg), 100*(fg[FigWindowHighRatio]/pred-1), pred, f.Settings[SettingPredictionBasis]) + wrong
	case finding.BelowPath:
		return fmt.Sprintf("%s: not path-bound: the tunnel carries %s of the outside rate, below the %.3f the overhead model predicts (%s) in every sample pair; something in or around OpenVPN costs the difference (see the other findings).",
			name, ratioOf(fg), fg[FigPredictedRatio], f.Settings[SettingPredictionBasis])
	case finding.LimitUnknown:
		return fmt.Sprintf("%s: path-bound or not cannot be told (%s): %s.", name, f.Outcome, f.Why)
	case finding.CPUBound:
		return fmt.Sprintf("%s: CPU-bound: OpenVPN's busiest thread used at least %.0f %% of a core in every tunnel sample (%.0f samples); one OpenVPN process uses one core, so this is its ceiling at %.1f CPU-s per GB.",
			name, fg[FigBusiestThreadMinPercent], fg[FigTunnelSamples], fg[FigOpenVPNCPUSecondsPerGB]) + wrong
	case finding.SocketDrops:
		advice := ""
		if f.Advice != "" {
			advice = " " + f.Advice
		}
		return fmt.Sprintf("%s: socket drops: OpenVPN's UDP socket dropped %.0f datagrams in %.0f of %.0f tunnel samples; the kernel gave it a receive buffer of %.0f bytes (SO_RCVBUF), too small for the datagrams that arrive while OpenVPN is not running (busy, or waiting for a CPU).%s",
			name, fg[FigDroppedDatagrams], fg[FigShownSamples], fg[FigTunnelSamples], fg[FigRcvbufBytes], advice) + wrong
	case finding.Fragmentation:
		learnt := ", not learnt: the device's"
		if f.Settings[SettingPathMTULearnt] == "true" {
			learnt = " learnt from the path"
		}
		line := fmt.Sprintf("%s: fragmentation: this host made %.0f IP fragments and received %.0f for reassembly during %.0f of %.0f tunnel samples (%.0f outside), %.0f failed; OpenVPN's outer packets are larger than the path MTU (tun-mtu %.0f, path MTU %.0f%s).",
			name, fg[FigFragmentsMadePackets], fg[FigFragmentsReassembledPackets], fg[FigShownSamples], fg[FigTunnelSamples],
			fg[FigOutsideFragmentsPackets], fg[FigFragmentFailuresPackets], fg[FigTunMTUBytes], fg[FigPathMTUBytes], learnt)
		if f.Advice != "" {
			line += " " + f.Advice
		}
		return line + wrong
	case finding.WindowBound:
		return fmt.Sprintf("%s: window-bound: one TCP flow moved at its receiver's window over the RTT in every sample (window %.0f bytes, RTT %.1f ms: at most %s); %s.",
			name, fg[FigWindowBytes], 1e3*fg[FigRTTSeconds], FormatRate(fg[FigWindowBps]), f.Advice) + wrong
	case finding.Loss:
		retr := fmt.Sprintf("TCP outside the tunnel retransmitted at least %.1f %% of its segments in every sample", fg[FigRetransmitMinPercent])
		echoes := fmt.Sprintf("%.0f of %.0f paced echoes to the host on the idle path were lost (%.1f %%)", fg[FigEchoesLostPackets], fg[FigEchoesSentPackets], fg[FigEchoLossPercent])
		switch f.Outcome {
		case verdict.Confirmed:
			if _, ok := fg[FigEchoesSentPackets]; !ok {
				// A document judged by the rule before the echoes.
				return fmt.Sprintf("%s: loss: %s: the path loses packets, and a TCP flow through it (inside the tunnel too) is held by its congestion control, not by OpenVPN.",
					name, retr) + wrong
			}
			return fmt.Sprintf("%s: loss: %s, and %s: the path loses packets on its own, and a TCP flow through it (inside the tunnel too) is held by its congestion control, not by OpenVPN.",
				name, retr, echoes) + wrong
		case verdict.Refuted:
			return fmt.Sprintf("%s: loss on the path refuted: %s, but only %s, at most half the rule's %.0f %%: the retransmits are the flow overflowing the queue of the path's bottleneck, as a TCP flow that fills a path does, not a lossy path.",
				name, retr, echoes, fg[FigLossRulePercent])
		}
		return fmt.Sprintf("%s: loss on the path (%s): %s; %s (%s).", name, f.Outcome, retr, f.Why, f.Decide)
	case finding.TunDrops:
		return fmt.Sprintf("%s: the tun device %s dropped %.0f packets before OpenVPN read them (txqueuelen %.0f): OpenVPN did not keep up with what was sent into the tunnel.",
			name, f.Settings[SettingTunDevice], fg[FigTunDroppedPackets], fg[FigTxQueueLenPackets])
	case finding.NotRead:
		return f.Subject.Network + ": not read (findings that need these are not tested here): " + f.Settings[SettingUnread]
	}
	return ""
}

// Judge returns the document's findings, judging its rows first when it
// carries none (a document being written, or one written before run
// documents carried findings: JudgedOnReading says which ReadJSON met).
func (rep *Report) Judge() []finding.Finding {
	if rep.Findings == nil {
		rep.Findings = Findings(rep)
	}
	return rep.Findings
}

// FindingLines are the sentences of the document's findings, for the
// text output of the commands that write it.
func FindingLines(rep *Report) []string {
	var out []string
	for _, f := range rep.Judge() {
		out = append(out, FindingText(f))
	}
	return out
}

// checkFindings refuses a document whose findings are not well formed.
func (rep *Report) checkFindings() error {
	for i, f := range rep.Findings {
		if err := f.Check(); err != nil {
			return fmt.Errorf("findings[%d]: %v", i, err)
		}
		for _, r := range f.Subject.Rows {
			if r < 0 || r >= len(rep.Rows) {
				return fmt.Errorf("findings[%d] (%s): row %d: the document has %d rows", i, f.Kind, r, len(rep.Rows))
			}
		}
	}
	return nil
}
