package measure

import (
	"github.com/ovpnperf/ovpnperf/internal/overhead"

	"fmt"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// NetworkReal names the one network of an `ovpnperf measure` document: the
// user's own path, not an emulated one.
const NetworkReal = "real"

// Variant names of `ovpnperf measure` rows.
const (
	VariantOutside = "outside" // iperf3 to HOST, outside the tunnel
	VariantTunnel  = "tunnel"  // iperf3 to TUNNEL_ADDR, through it
)

// CommandMeasure is Scenario.Command of `ovpnperf measure`.
const CommandMeasure = "measure"

// RealPath describes the path and tunnel `ovpnperf measure` ran on
// (Scenario.Real; schema v2 added key).
type RealPath struct {
	Host   string `json:"host"`
	Tunnel string `json:"tunnel"`
	// OutsideDevice reaches Host; TunDevice is OpenVPN's tun device.
	OutsideDevice string `json:"outside_device"`
	TunDevice     string `json:"tun_device"`
	TunMTU        int    `json:"tun_mtu"`
	// PathMTU is the route's MTU to Host after the samples (the kernel's
	// cached path MTU when it learnt one); PathMTULearnt says it did.
	PathMTU       int  `json:"path_mtu"`
	PathMTULearnt bool `json:"path_mtu_learnt"`
	// OpenVPN process and transport socket.
	Pid    int    `json:"openvpn_pid"`
	Proto  string `json:"proto"`
	Socket string `json:"socket"`
	// ModelCipher is the data cipher the overhead model was asked for;
	// ModelOverheadBytes what it adds to a full inner packet, and
	// PredictedRatio the tunnel/outside TCP goodput ratio it predicts.
	ModelCipher        string  `json:"model_cipher"`
	ModelOverheadBytes int     `json:"model_overhead_bytes"`
	PredictedRatio     float64 `json:"predicted_ratio"`
	PredictionBasis    string  `json:"prediction_basis"`
	// Capture is the analysis of the outer packets of one sample, when
	// --capture was given.
	Capture *CaptureSummary `json:"capture,omitempty"`
	// MTUAdvice is the MTU rule's advice for PathMTU (pmtu.Translate).
	MTUAdvice string `json:"mtu_advice,omitempty"`
	// BufferAdvice is what to set when the socket dropped datagrams.
	BufferAdvice string `json:"buffer_advice,omitempty"`
	// LossEchoes are the paced ICMP echoes to Host sent on the idle path
	// after the samples when an outside row raised the loss question
	// (LossQuestion): what the loss finding rests on (absent when no row
	// raised it, and in documents written before measure sent them).
	LossEchoes *EchoCount `json:"loss_echoes,omitempty"`
}

// EchoCount is a paced echo probe's count: Sent echoes, one every
// IntervalSeconds, of which Answered came back within 2 s. Failed says
// why no count was read (then Sent is 0).
type EchoCount struct {
	Sent            int     `json:"sent"`
	Answered        int     `json:"answered"`
	IntervalSeconds float64 `json:"interval_seconds"`
	Failed          string  `json:"failed,omitempty"`
}

// CaptureSummary is what the capture of one tunnel sample showed.
type CaptureSummary struct {
	Sample    string `json:"sample"` // e.g. "tunnel up, round 3"
	Packets   int    `json:"packets"`
	Fragments int    `json:"fragments"`
	// FragmentedDatagrams of the OpenVPN port; Datagrams all of them.
	FragmentedDatagrams int `json:"fragmented_datagrams"`
	Datagrams           int `json:"datagrams"`
	MaxIPBytes          int `json:"max_ip_bytes"`
	// MeasuredOverheadBytes is the mean outer datagram minus the mean
	// inner packet through the tun device over the sample; the model's
	// figure for the same inner size is ModelOverheadBytes.
	MeasuredOverheadBytes float64 `json:"measured_overhead_bytes"`
	ModelOverheadBytes    int     `json:"model_overhead_bytes"`
	TCPRetransmitted      int     `json:"tcp_retransmitted,omitempty"`
	// File is where the capture was kept ("" when it was removed).
	File string `json:"file,omitempty"`
}

// OpenVPNCounters is what the local OpenVPN process and host counted during
// one sample (Row.OpenVPN, one per accepted sample; schema v2 added key).
type OpenVPNCounters struct {
	Seconds float64 `json:"seconds"`
	// CPUSeconds of the whole process; CoreShare is CPUSeconds over the
	// wall time, BusiestThreadShare the busiest thread's (1 = one core).
	CPUSeconds         float64 `json:"cpu_seconds"`
	CoreShare          float64 `json:"core_share"`
	BusiestThreadShare float64 `json:"busiest_thread_share"`
	// SocketDrops: datagrams the transport socket dropped (UDP: the drops
	// column of /proc/net/udp); TCPRetrans: its retransmitted segments.
	SocketDrops uint64 `json:"socket_drops"`
	TCPRetrans  uint64 `json:"tcp_retransmits"`
	// RcvbufBytes and SndbufBytes are the buffers the kernel gave the
	// socket (what SO_RCVBUF/SO_SNDBUF return: twice what was asked).
	RcvbufBytes uint32 `json:"rcvbuf_bytes"`
	SndbufBytes uint32 `json:"sndbuf_bytes"`
	// IP fragments this host made and fragments it reassembled, and the
	// failures of each (/proc/net/snmp).
	FragCreates uint64 `json:"ip_frag_creates"`
	FragFails   uint64 `json:"ip_frag_fails"`
	ReasmReqds  uint64 `json:"ip_reasm_reqds"`
	ReasmFails  uint64 `json:"ip_reasm_fails"`
	// The tun device: packets dropped before OpenVPN read them, packets
	// and bytes both ways, txqueuelen.
	TunTxDropped uint64 `json:"tun_tx_dropped"`
	TunPackets   uint64 `json:"tun_packets"`
	TunBytes     uint64 `json:"tun_bytes"`
	TxQueueLen   int    `json:"tun_txqueuelen"`
	// Unread names what could not be read, with the reason.
	Unread []string `json:"unread,omitempty"`
}

// Thresholds of the real-path findings.
const (
	// PathBoundTolerance: a tunnel within ±5 % of the overhead model's
	// prediction of the outside rate in every sample pair is path-bound.
	PathBoundTolerance = 0.05
	// CPUBoundShare: the busiest OpenVPN thread at 90 % of a core or more
	// in every sample is the limit (a process cannot use more than one).
	CPUBoundShare = 0.90
	// LossShare: a path losing more than 1 % of its packets is lossy
	// (verdict.LossShare, the paced-echo rule probe judges by too). The
	// outside TCP flow retransmitting more than this share of its
	// segments in every sample raises the question; paced echoes on the
	// idle path answer it (lossFinding, by verdict.JudgeEchoLoss).
	LossShare = verdict.LossShare
	// LossEchoes echoes, one every LossEchoInterval, on the idle path
	// after the samples: probe's count and pace, 3 s.
	LossEchoes       = verdict.LossEchoes
	LossEchoInterval = 10 * time.Millisecond
)

// realFindings judges an `ovpnperf measure` document: each finding names a
// limit, the figures that show it, and what would show it wrong.
func realFindings(rep *Report) []finding.Finding {
	rp := rep.Scenario.Real
	if rp == nil {
		return nil
	}
	row := func(variant, dir string) int {
		for i := range rep.Rows {
			r := &rep.Rows[i]
			if r.Variant == variant && r.Direction == dir {
				return i
			}
		}
		return -1
	}
	var out []finding.Finding
	for _, dir := range []string{DirectionUp, DirectionDown} {
		ti, oi := row(VariantTunnel, dir), row(VariantOutside, dir)
		if ti < 0 || oi < 0 {
			continue
		}
		out = append(out, directionFindings(rp, rep.Scenario.Repeat, dir, [2]int{ti, oi}, &rep.Rows[ti], &rep.Rows[oi])...)
	}
	var unread []string
	var rows []int
	seen := map[string]bool{}
	for i, r := range rep.Rows {
		for _, c := range r.OpenVPN {
			for _, u := range c.Unread {
				if len(rows) == 0 || rows[len(rows)-1] != i {
					rows = append(rows, i)
				}
				if !seen[u] {
					seen[u] = true
					unread = append(unread, u)
				}
			}
		}
	}
	if len(unread) > 0 {
		out = append(out, rendered(finding.Finding{Kind: finding.NotRead, Outcome: verdict.NotTested,
			Subject:  finding.Subject{Network: NetworkReal, Rows: rows},
			Settings: map[string]string{SettingBaseline: BaselineOutside, SettingUnread: strings.Join(unread, "; ")},
			Why:      "counters the findings need could not be read: " + strings.Join(unread, "; "),
			Decide:   "a run as root in OpenVPN's network namespace, where the counters can be read",
			Cites:    []string{citeMeasureFindings}}))
	}
	return out
}

// realName is how a real finding names its direction: "real up (this
// host → HOST)".
func realName(f finding.Finding) string {
	if f.Subject.Direction == DirectionUp {
		return NetworkReal + " up (this host → " + f.Settings[SettingHost] + ")"
	}
	return NetworkReal + " down (" + f.Settings[SettingHost] + " → this host)"
}

func directionFindings(rp *RealPath, repeat int, dir string, rows [2]int, t, o *Row) []finding.Finding {
	var out []finding.Finding
	// add completes a finding about this direction (subject, baseline,
	// host, its sentence) and keeps it.
	add := func(f finding.Finding) {
		if f.Subject.Variant == "" {
			f.Subject.Variant = VariantTunnel
		}
		if f.Subject.Rows == nil {
			f.Subject.Rows = []int{rows[0]}
		}
		f.Subject.Network, f.Subject.Direction = NetworkReal, dir
		if f.Settings == nil {
			f.Settings = map[string]string{}
		}
		f.Settings[SettingBaseline] = BaselineOutside
		f.Settings[SettingHost] = rp.Host
		if f.Outcome == "" {
			f.Outcome = verdict.Confirmed
		}
		f.Cites = append(f.Cites, citeMeasureFindings)
		out = append(out, rendered(f))
	}
	n := len(t.OpenVPN)
	// CPU-bound: the busiest thread near a whole core in every sample.
	cpuBound := n >= verdict.MinSamples
	minShare := 2.0
	for _, c := range t.OpenVPN {
		cpuBound = cpuBound && c.BusiestThreadShare >= CPUBoundShare
		minShare = min(minShare, c.BusiestThreadShare)
	}
	// Path-bound: tunnel/outside within the prediction in every pair.
	if rp.PredictedRatio > 0 {
		w := verdict.Window{Lo: rp.PredictedRatio * (1 - PathBoundTolerance), Hi: rp.PredictedRatio * (1 + PathBoundTolerance)}
		j := verdict.Within(t.SamplesBps, o.SamplesBps, w)
		f := finding.Finding{Outcome: j.Outcome, Subject: finding.Subject{Rows: rows[:]},
			Figures:  finding.Figures{FigTunnelMedianBps: t.MedianBps, FigBaselineMedianBps: o.MedianBps, FigPredictedRatio: rp.PredictedRatio},
			Settings: map[string]string{SettingPredictionBasis: rp.PredictionBasis},
			Cites:    []string{citeRuleWithin, citeOverhead}}
		ratioFigures(f.Figures, j.Ratio, w)
		switch {
		case j.Outcome == verdict.Confirmed:
			f.Kind = finding.PathBound
			f.RefutedBy = fmt.Sprintf("a tunnel/outside ratio outside %s in any sample pair", w)
		case j.Below:
			f.Kind, f.Outcome = finding.BelowPath, verdict.Confirmed
			f.RefutedBy = fmt.Sprintf("a tunnel/outside ratio of %.3f or more in any sample pair", w.Lo)
		case j.Above:
			f.Kind, f.Outcome = finding.LimitUnknown, verdict.NotTested
			f.Why = fmt.Sprintf("the tunnel carries %s of the outside rate, above the %.3f the model predicts: the outside flow is held by something the tunnel avoids (its own window or loss), so the path's rate is not known from it", j.Ratio, rp.PredictedRatio)
			f.Decide = "an outside flow that reaches the path's rate (more streams, --parallel)"
		default:
			f.Kind = finding.LimitUnknown
			f.Why = j.Why
			f.Decide = resolution(j, repeat, min(len(t.SamplesBps), len(o.SamplesBps)))
			if j.Outcome == verdict.NotTested {
				f.Decide = "an outside sample to compare with"
			}
			f.Cites = append(f.Cites, citeRuleSamples)
		}
		add(f)
	}
	if cpuBound {
		add(finding.Finding{Kind: finding.CPUBound,
			Figures: finding.Figures{FigBusiestThreadMinPercent: 100 * minShare, FigTunnelSamples: float64(n),
				FigOpenVPNCPUSecondsPerGB: t.CPUSecondsPerGB["openvpn"], FigCPUBoundPercent: 100 * CPUBoundShare},
			RefutedBy: fmt.Sprintf("a sample below %.0f %%", 100*CPUBoundShare),
			Cites:     []string{citeOneCore}})
	}
	// Socket drops.
	var drops uint64
	withDrops := 0
	var rcv uint32
	for _, c := range t.OpenVPN {
		drops += c.SocketDrops
		if c.SocketDrops > 0 {
			withDrops++
		}
		rcv = max(rcv, c.RcvbufBytes)
	}
	if drops > 0 && rp.Proto == "udp" {
		add(finding.Finding{Kind: finding.SocketDrops,
			Figures: finding.Figures{FigDroppedDatagrams: float64(drops), FigShownSamples: float64(withDrops),
				FigTunnelSamples: float64(n), FigRcvbufBytes: float64(rcv)},
			Advice:    rp.BufferAdvice,
			RefutedBy: "drops that stay when the receive buffer is larger",
			Cites:     []string{citeSocketBuffers}})
	}
	// Fragmentation.
	var frags, reasm, fails uint64
	fragSamples := 0
	for _, c := range t.OpenVPN {
		frags += c.FragCreates
		reasm += c.ReasmReqds
		fails += c.FragFails + c.ReasmFails
		if c.FragCreates+c.ReasmReqds > 0 {
			fragSamples++
		}
	}
	var outsideFrags uint64
	for _, c := range o.OpenVPN {
		outsideFrags += c.FragCreates + c.ReasmReqds
	}
	if frags+reasm > 0 && fragSamples >= min(n, verdict.MinSamples) {
		advice := ""
		if rp.MTUAdvice != "" {
			advice = rp.MTUAdvice + "."
		}
		add(finding.Finding{Kind: finding.Fragmentation, Subject: finding.Subject{Rows: rows[:]},
			Figures: finding.Figures{FigFragmentsMadePackets: float64(frags), FigFragmentsReassembledPackets: float64(reasm),
				FigShownSamples: float64(fragSamples), FigTunnelSamples: float64(n), FigOutsideFragmentsPackets: float64(outsideFrags),
				FigFragmentFailuresPackets: float64(fails), FigTunMTUBytes: float64(rp.TunMTU), FigPathMTUBytes: float64(rp.PathMTU)},
			Settings:  map[string]string{SettingPathMTULearnt: fmt.Sprint(rp.PathMTULearnt)},
			Advice:    advice,
			RefutedBy: "no fragments in tunnel samples (counters of /proc/net/snmp, host-wide)",
			Cites:     []string{citeMTU, citeMssfix}})
	}
	// Window-bound: one TCP flow whose rate is its window over the RTT.
	if wb, ok := windowFinding(t); ok {
		add(wb)
	}
	// Loss on the path itself: raised by outside TCP retransmitting in
	// every sample, answered by the paced echoes.
	if lf, ok := lossFinding(o, rp.LossEchoes); ok {
		lf.Subject = finding.Subject{Variant: VariantOutside, Rows: []int{rows[1]}}
		add(lf)
	}
	var tunDrops uint64
	for _, c := range t.OpenVPN {
		tunDrops += c.TunTxDropped
	}
	if tunDrops > 0 {
		add(finding.Finding{Kind: finding.TunDrops,
			Figures:   finding.Figures{FigTunDroppedPackets: float64(tunDrops), FigTxQueueLenPackets: float64(t.OpenVPN[len(t.OpenVPN)-1].TxQueueLen)},
			Settings:  map[string]string{SettingTunDevice: rp.TunDevice},
			RefutedBy: "no tun drops with a longer txqueuelen",
			Cites:     []string{citeTxqueuelen}})
	}
	return out
}

// windowFinding: iperf3's sender reports its window and RTT (up samples
// only: the client sends); a rate within 15 % of window/RTT in every
// sample means the window, not the path, held the flow.
func windowFinding(t *Row) (finding.Finding, bool) {
	if len(t.Samples) < verdict.MinSamples {
		return finding.Finding{}, false
	}
	var caps []float64
	for _, s := range t.Samples {
		if s.SenderMeanRTTMicros <= 0 || s.SenderMaxSndWndBytes <= 0 {
			return finding.Finding{}, false
		}
		capBps := float64(s.SenderMaxSndWndBytes) * 8 / (float64(s.SenderMeanRTTMicros) / 1e6)
		if s.Bps < 0.85*capBps || s.Bps > 1.15*capBps {
			return finding.Finding{}, false
		}
		caps = append(caps, capBps)
	}
	s := t.Samples[0]
	return finding.Finding{Kind: finding.WindowBound,
		Figures: finding.Figures{FigWindowBytes: float64(s.SenderMaxSndWndBytes), FigRTTSeconds: float64(s.SenderMeanRTTMicros) / 1e6,
			FigWindowBps: verdict.Median(caps), FigTunnelSamples: float64(len(t.Samples))},
		Advice:    "a larger receive window (net.ipv4.tcp_rmem on the receiver) or more flows would go faster",
		RefutedBy: "a rate away from window/RTT by more than 15 %",
		Cites:     []string{citeBufferRTT}}, true
}

// LossQuestion is whether outside row o raises the loss question: its TCP
// flow retransmitted more than LossShare of its segments in every sample
// (at least verdict.MinSamples); lo is the lowest sample's share. measure
// sends its paced echoes only then, and lossFinding judges them.
func LossQuestion(o *Row) (lo float64, raised bool) {
	if len(o.Samples) < verdict.MinSamples {
		return 0, false
	}
	lo = 1.0
	for _, s := range o.Samples {
		var retr int64
		var bytes float64
		for _, iv := range s.Intervals {
			if iv.Retransmits < 0 {
				return 0, false // not reported (reverse tests)
			}
			retr += iv.Retransmits
			bytes += iv.Bps / 8 * (iv.EndSeconds - iv.StartSeconds)
		}
		if bytes <= 0 {
			return 0, false
		}
		share := float64(retr) / (bytes / overhead.TCPSegmentBytes)
		if share <= LossShare {
			return 0, false
		}
		lo = min(lo, share)
	}
	return lo, true
}

// lossFinding judges whether the path loses packets on its own. The
// outside TCP flow retransmitting more than LossShare of its segments in
// every sample raises the question (no finding otherwise), but cannot
// answer it: a loss-based TCP flow that fills a path overflows the
// bottleneck's queue and retransmits on a path that loses nothing at
// random. Paced echoes on the idle path build no queue, so their loss is
// the path's own, and verdict.JudgeEchoLoss judges it as it does probe's:
// more than LossShare of them lost confirms; at most half of it (at least
// verdict.LossMinEchoes sent) refutes, and the retransmits were the flow's
// own queue overflowing; in between is noise; without an answered echo (a
// document written before measure sent them, or ICMP blocked) it is not
// tested here.
func lossFinding(o *Row, echoes *EchoCount) (finding.Finding, bool) {
	lo, raised := LossQuestion(o)
	if !raised {
		return finding.Finding{}, false
	}
	f := finding.Finding{Kind: finding.Loss,
		Figures: finding.Figures{FigRetransmitMinPercent: 100 * lo, FigLossRulePercent: 100 * LossShare}}
	var j verdict.EchoLoss
	if echoes != nil && echoes.Failed == "" {
		j = verdict.JudgeEchoLoss(echoes.Sent, echoes.Answered)
	} else {
		j = verdict.EchoLoss{Outcome: verdict.NotTested, Reason: verdict.EchoesNoneAnswered}
	}
	f.Outcome = j.Outcome
	if j.Outcome == verdict.NotTested {
		f.Why = "retransmits alone do not tell a lossy path from a flow that fills the path and overflows its bottleneck's queue, as every loss-based TCP does"
		switch {
		case echoes == nil:
			f.Why += ", and no paced echo was sent"
		case echoes.Failed != "":
			f.Why += ", and the paced echoes failed: " + echoes.Failed
		default:
			f.Why += fmt.Sprintf(", and none of the %d paced echoes came back (ICMP blocked on the way, or not answered)", echoes.Sent)
		}
		f.Decide = "paced echoes on the idle path that come back (measure sends them to the host after the samples)"
		return f, true
	}
	f.Figures[FigEchoesSentPackets] = float64(j.Sent)
	f.Figures[FigEchoesLostPackets] = float64(j.Lost)
	f.Figures[FigEchoLossPercent] = j.LostPercent
	switch j.Outcome {
	case verdict.Confirmed:
		f.RefutedBy = fmt.Sprintf("paced echoes on the idle path losing %.0f %% or less", 100*LossShare)
	case verdict.Noise:
		f.Why = fmt.Sprintf("%d of %d paced echoes lost: near the %.0f %% rule, or too few echoes to tell", j.Lost, j.Sent, 100*LossShare)
		f.Decide = fmt.Sprintf("more paced echoes (%d at least)", LossEchoes)
	}
	return f, true
}
