package measure

import (
	"github.com/ovpnperf/ovpnperf/internal/overhead"

	"fmt"
	"strings"

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
	// LossShare: outside TCP retransmitting more than 1 % of its segments
	// in every sample is a lossy path, beyond what a queue overflowing at
	// the bottleneck makes.
	LossShare = 0.01
)

// realFindings judges an `ovpnperf measure` document: each line names a
// limit, the figures that show it, and what would show it wrong.
func realFindings(rep *Report) []string {
	rp := rep.Scenario.Real
	if rp == nil {
		return nil
	}
	row := func(variant, dir string) *Row {
		for i := range rep.Rows {
			r := &rep.Rows[i]
			if r.Variant == variant && r.Direction == dir {
				return r
			}
		}
		return nil
	}
	var out []string
	for _, dir := range []string{DirectionUp, DirectionDown} {
		t, o := row(VariantTunnel, dir), row(VariantOutside, dir)
		if t == nil || o == nil {
			continue
		}
		out = append(out, directionFindings(rp, dir, t, o)...)
	}
	var unread []string
	seen := map[string]bool{}
	for _, r := range rep.Rows {
		for _, c := range r.OpenVPN {
			for _, u := range c.Unread {
				if !seen[u] {
					seen[u] = true
					unread = append(unread, u)
				}
			}
		}
	}
	if len(unread) > 0 {
		out = append(out, NetworkReal+": not read (findings that need these are not tested here): "+strings.Join(unread, "; "))
	}
	return out
}

func directionFindings(rp *RealPath, dir string, t, o *Row) []string {
	var out []string
	name := dir
	if dir == DirectionUp {
		name = NetworkReal + " up (this host → " + rp.Host + ")"
	} else {
		name = NetworkReal + " down (" + rp.Host + " → this host)"
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
		switch {
		case j.Outcome == verdict.Confirmed:
			out = append(out, fmt.Sprintf("%s: path-bound: the tunnel carries %s of the outside rate, within ±%.0f %% of the %.3f the overhead model predicts (%s); OpenVPN is not what limits this direction. Shown wrong by: a tunnel/outside ratio outside %s in any sample pair.",
				name, j.Ratio, 100*PathBoundTolerance, rp.PredictedRatio, rp.PredictionBasis, w))
		case j.Below:
			out = append(out, fmt.Sprintf("%s: not path-bound: the tunnel carries %s of the outside rate, below the %.3f the overhead model predicts (%s) in every sample pair; something in or around OpenVPN costs the difference (see the other findings).",
				name, j.Ratio, rp.PredictedRatio, rp.PredictionBasis))
		case j.Above:
			out = append(out, fmt.Sprintf("%s: the tunnel carries %s of the outside rate, above the %.3f the model predicts: the outside flow is held by something the tunnel avoids (its own window or loss), so the path's rate is not known from it.",
				name, j.Ratio, rp.PredictedRatio))
		default:
			out = append(out, fmt.Sprintf("%s: path-bound or not cannot be told (%s): %s.", name, j.Outcome, j.Why))
		}
	}
	if cpuBound {
		out = append(out, fmt.Sprintf("%s: CPU-bound: OpenVPN's busiest thread used at least %.0f %% of a core in every tunnel sample (%d samples); one OpenVPN process uses one core, so this is its ceiling at %.1f CPU-s per GB. Shown wrong by: a sample below %.0f %%.",
			name, 100*minShare, n, t.CPUSecondsPerGB["openvpn"], 100*CPUBoundShare))
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
		out = append(out, fmt.Sprintf("%s: socket drops: OpenVPN's UDP socket dropped %d datagrams in %d of %d tunnel samples; the kernel gave it a receive buffer of %d bytes (SO_RCVBUF), too small for the datagrams that arrive while OpenVPN is not running (busy, or waiting for a CPU). %s Shown wrong by: drops that stay when the receive buffer is larger.",
			name, drops, withDrops, n, rcv, rp.BufferAdvice))
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
		line := fmt.Sprintf("%s: fragmentation: this host made %d IP fragments and received %d for reassembly during %d of %d tunnel samples (%d outside), %d failed; OpenVPN's outer packets are larger than the path MTU (tun-mtu %d, path MTU %d%s).",
			name, frags, reasm, fragSamples, n, outsideFrags, fails, rp.TunMTU, rp.PathMTU, map[bool]string{true: " learnt from the path", false: ", not learnt: the device's"}[rp.PathMTULearnt])
		if rp.MTUAdvice != "" {
			line += " " + rp.MTUAdvice + "."
		}
		line += " Shown wrong by: no fragments in tunnel samples (counters of /proc/net/snmp, host-wide)."
		out = append(out, line)
	}
	// Window-bound: one TCP flow whose rate is its window over the RTT.
	if wb := windowFinding(name, t); wb != "" {
		out = append(out, wb)
	}
	// Loss on the path itself: outside TCP retransmitting in every sample.
	if lf := lossFinding(name, o); lf != "" {
		out = append(out, lf)
	}
	var tunDrops uint64
	for _, c := range t.OpenVPN {
		tunDrops += c.TunTxDropped
	}
	if tunDrops > 0 {
		out = append(out, fmt.Sprintf("%s: the tun device %s dropped %d packets before OpenVPN read them (txqueuelen %d): OpenVPN did not keep up with what was sent into the tunnel.",
			name, rp.TunDevice, tunDrops, t.OpenVPN[len(t.OpenVPN)-1].TxQueueLen))
	}
	return out
}

// windowFinding: iperf3's sender reports its window and RTT (up samples
// only: the client sends); a rate within 15 % of window/RTT in every
// sample means the window, not the path, held the flow.
func windowFinding(name string, t *Row) string {
	if len(t.Samples) < verdict.MinSamples {
		return ""
	}
	var caps []float64
	for _, s := range t.Samples {
		if s.SenderMeanRTTMicros <= 0 || s.SenderMaxSndWndBytes <= 0 {
			return ""
		}
		capBps := float64(s.SenderMaxSndWndBytes) * 8 / (float64(s.SenderMeanRTTMicros) / 1e6)
		if s.Bps < 0.85*capBps || s.Bps > 1.15*capBps {
			return ""
		}
		caps = append(caps, capBps)
	}
	s := t.Samples[0]
	return fmt.Sprintf("%s: window-bound: one TCP flow moved at its receiver's window over the RTT in every sample (window %d bytes, RTT %.1f ms: at most %s); a larger receive window (net.ipv4.tcp_rmem on the receiver) or more flows would go faster. Shown wrong by: a rate away from window/RTT by more than 15 %%.",
		name, s.SenderMaxSndWndBytes, float64(s.SenderMeanRTTMicros)/1e3, FormatRate(Median(caps)))
}

// lossFinding: outside TCP flows retransmitting more than LossShare of
// their segments in every sample show a lossy path.
func lossFinding(name string, o *Row) string {
	if len(o.Samples) < verdict.MinSamples {
		return ""
	}
	lo := 1.0
	for _, s := range o.Samples {
		var retr int64
		var bytes float64
		for _, iv := range s.Intervals {
			if iv.Retransmits < 0 {
				return "" // not reported (reverse tests)
			}
			retr += iv.Retransmits
			bytes += iv.Bps / 8 * (iv.EndSeconds - iv.StartSeconds)
		}
		if bytes <= 0 {
			return ""
		}
		share := float64(retr) / (bytes / overhead.TCPSegmentBytes)
		if share <= LossShare {
			return ""
		}
		lo = min(lo, share)
	}
	return fmt.Sprintf("%s: loss: TCP outside the tunnel retransmitted at least %.1f %% of its segments in every sample: the path loses packets, and a TCP flow through it (inside the tunnel too) is held by its congestion control, not by OpenVPN. Shown wrong by: an outside sample retransmitting under %.0f %%.",
		name, 100*lo, 100*LossShare)
}
