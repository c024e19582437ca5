package measure

import (
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// realDoc is a measure document as realnet fills it, replayable without a
// tunnel: the findings are a pure function of it.
func realDoc(tunnel, outside []float64, counters func(i int) OpenVPNCounters) *Report {
	rep := &Report{Schema: Schema, Scenario: Scenario{Command: CommandMeasure, Repeat: 3,
		Networks: []Network{{Name: NetworkReal}},
		Real: &RealPath{Host: "198.51.100.2", Tunnel: "10.8.0.1", TunDevice: "tun0", Proto: "udp", TunMTU: 1500, PathMTU: 1400, PathMTULearnt: true,
			PredictedRatio: 0.964, PredictionBasis: "model", MTUAdvice: "For a path MTU of 1400: set mssfix 1400 mtu", BufferAdvice: "Set `rcvbuf 4194304`."}}}
	t := NewRow(NetworkReal, VariantTunnel, PathTunnel, DirectionDown, "udp")
	o := NewRow(NetworkReal, VariantOutside, PathRouted, DirectionDown, "tcp")
	for i := range tunnel {
		t.AddSample(tunnel[i])
		o.AddSample(outside[i])
		t.OpenVPN = append(t.OpenVPN, counters(i))
		o.OpenVPN = append(o.OpenVPN, OpenVPNCounters{})
	}
	t.CPUSecondsPerGB = map[string]float64{"openvpn": 12}
	rep.Rows = []Row{o, t}
	return rep
}

// withUp adds an up direction whose tunnel flow moved at its window over
// the RTT (4 MB over 100 ms: 320 Mbit/s), and whose outside flow
// retransmitted 2 % of its segments.
func withUp(rep *Report) *Report {
	t := NewRow(NetworkReal, VariantTunnel, PathTunnel, DirectionUp, "udp")
	o := NewRow(NetworkReal, VariantOutside, PathRouted, DirectionUp, "tcp")
	for range 3 {
		t.AddSample(318e6)
		t.Samples = append(t.Samples, Sample{Bps: 318e6, SenderMeanRTTMicros: 100000, SenderMaxSndWndBytes: 4e6})
		t.OpenVPN = append(t.OpenVPN, OpenVPNCounters{BusiestThreadShare: 0.3})
		o.AddSample(330e6)
		// 330 Mbit/s for 2 s is 56975 segments of 1448 bytes.
		o.Samples = append(o.Samples, Sample{Bps: 330e6, Intervals: []Interval{{StartSeconds: 0, EndSeconds: 2, Bps: 330e6, Retransmits: 1140}}})
		o.OpenVPN = append(o.OpenVPN, OpenVPNCounters{})
	}
	rep.Rows = append(rep.Rows, o, t)
	return rep
}

func TestRealFindings(t *testing.T) {
	quiet := func(int) OpenVPNCounters { return OpenVPNCounters{BusiestThreadShare: 0.2, RcvbufBytes: 425984} }
	for _, c := range []struct {
		name            string
		tunnel, outside []float64
		counters        func(int) OpenVPNCounters
		want, absent    []finding.Kind
		check           func(t *testing.T, fs []finding.Finding, rep *Report)
	}{
		{"path-bound", []float64{46e6, 46.5e6, 45.8e6}, []float64{47.5e6, 48e6, 47.6e6}, quiet,
			[]finding.Kind{finding.PathBound}, []finding.Kind{finding.CPUBound, finding.SocketDrops, finding.Fragmentation, finding.BelowPath},
			func(t *testing.T, fs []finding.Finding, rep *Report) {
				f := findingOf(t, fs, finding.PathBound, NetworkReal, VariantTunnel, DirectionDown)
				if f.Outcome != verdict.Confirmed || f.Figures[FigPredictedRatio] != 0.964 || f.Figures[FigPairs] != 3 ||
					f.Figures[FigLowRatio] < f.Figures[FigWindowLowRatio] || f.Settings[SettingHost] != "198.51.100.2" {
					t.Errorf("%+v", f)
				}
				if r := f.Subject.Rows; len(r) != 2 || rep.Rows[r[0]].Variant != VariantTunnel || rep.Rows[r[1]].Variant != VariantOutside {
					t.Errorf("rows %v", r)
				}
			}},
		{"too few samples", []float64{46e6, 46.5e6}, []float64{47.5e6, 48e6}, quiet,
			[]finding.Kind{finding.LimitUnknown}, []finding.Kind{finding.PathBound},
			func(t *testing.T, fs []finding.Finding, _ *Report) {
				if f := findingOf(t, fs, finding.LimitUnknown, NetworkReal, VariantTunnel, DirectionDown); f.Outcome != verdict.Noise {
					t.Errorf("%+v", f)
				}
			}},
		{"above the prediction", []float64{47e6, 47.5e6, 47.2e6}, []float64{40e6, 40.1e6, 40.2e6}, quiet,
			[]finding.Kind{finding.LimitUnknown}, []finding.Kind{finding.PathBound, finding.BelowPath},
			func(t *testing.T, fs []finding.Finding, _ *Report) {
				f := findingOf(t, fs, finding.LimitUnknown, NetworkReal, VariantTunnel, DirectionDown)
				if f.Outcome != verdict.NotTested || f.Figures[FigLowRatio] <= f.Figures[FigWindowHighRatio] {
					t.Errorf("%+v", f)
				}
			}},
		{"CPU-bound with drops", []float64{20e6, 21e6, 19e6}, []float64{47.5e6, 48e6, 47.6e6},
			func(i int) OpenVPNCounters {
				return OpenVPNCounters{BusiestThreadShare: 0.95, SocketDrops: uint64(10 * i), RcvbufBytes: 32768}
			},
			[]finding.Kind{finding.BelowPath, finding.CPUBound, finding.SocketDrops}, []finding.Kind{finding.PathBound},
			func(t *testing.T, fs []finding.Finding, rep *Report) {
				cpu := findingOf(t, fs, finding.CPUBound, NetworkReal, VariantTunnel, DirectionDown)
				if !near(cpu.Figures[FigBusiestThreadMinPercent], 95) || cpu.Figures[FigTunnelSamples] != 3 || cpu.Figures[FigOpenVPNCPUSecondsPerGB] != 12 || cpu.Figures[FigCPUBoundPercent] != 90 {
					t.Errorf("%+v", cpu)
				}
				d := findingOf(t, fs, finding.SocketDrops, NetworkReal, VariantTunnel, DirectionDown)
				if d.Figures[FigDroppedDatagrams] != 30 || d.Figures[FigShownSamples] != 2 || d.Figures[FigTunnelSamples] != 3 ||
					d.Figures[FigRcvbufBytes] != 32768 || d.Advice != rep.Scenario.Real.BufferAdvice {
					t.Errorf("%+v", d)
				}
			}},
		{"fragments and tun drops", []float64{44e6, 44.5e6, 44.2e6}, []float64{47.5e6, 48e6, 47.6e6},
			func(int) OpenVPNCounters { return OpenVPNCounters{FragCreates: 1000, TunTxDropped: 7, TxQueueLen: 500} },
			[]finding.Kind{finding.Fragmentation, finding.TunDrops}, []finding.Kind{finding.SocketDrops},
			func(t *testing.T, fs []finding.Finding, rep *Report) {
				f := findingOf(t, fs, finding.Fragmentation, NetworkReal, VariantTunnel, DirectionDown)
				if f.Figures[FigFragmentsMadePackets] != 3000 || f.Figures[FigPathMTUBytes] != 1400 || f.Figures[FigTunMTUBytes] != 1500 ||
					f.Settings[SettingPathMTULearnt] != "true" || f.Advice != rep.Scenario.Real.MTUAdvice+"." {
					t.Errorf("%+v", f)
				}
				td := findingOf(t, fs, finding.TunDrops, NetworkReal, VariantTunnel, DirectionDown)
				if td.Figures[FigTunDroppedPackets] != 21 || td.Figures[FigTxQueueLenPackets] != 500 || td.Settings[SettingTunDevice] != "tun0" {
					t.Errorf("%+v", td)
				}
			}},
		{"unread", []float64{46e6, 46.5e6, 45.8e6}, []float64{47.5e6, 48e6, 47.6e6},
			func(int) OpenVPNCounters {
				return OpenVPNCounters{Unread: []string{"socket buffers (sock_diag): EPERM"}}
			},
			[]finding.Kind{finding.NotRead}, nil,
			func(t *testing.T, fs []finding.Finding, _ *Report) {
				f := findingOf(t, fs, finding.NotRead, NetworkReal, "", "")
				if f.Outcome != verdict.NotTested || f.Settings[SettingUnread] != "socket buffers (sock_diag): EPERM" {
					t.Errorf("%+v", f)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := realDoc(c.tunnel, c.outside, c.counters)
			fs := Findings(rep)
			wellFormed(t, rep, fs)
			has := map[finding.Kind]bool{}
			for _, f := range fs {
				has[f.Kind] = true
			}
			for _, k := range c.want {
				if !has[k] {
					t.Errorf("no %s finding:\n%s", k, kindsOf(fs))
				}
			}
			for _, k := range c.absent {
				if has[k] {
					t.Errorf("a %s finding:\n%s", k, kindsOf(fs))
				}
			}
			c.check(t, fs, rep)
		})
	}
}

// One TCP flow at its window over the RTT is window-bound; outside TCP
// retransmitting over 1 % in every sample raises loss, which without
// paced echoes is not tested.
func TestRealFindingsWindowAndLoss(t *testing.T) {
	quiet := func(int) OpenVPNCounters { return OpenVPNCounters{BusiestThreadShare: 0.2} }
	rep := withUp(realDoc([]float64{46e6, 46.5e6, 45.8e6}, []float64{47.5e6, 48e6, 47.6e6}, quiet))
	fs := Findings(rep)
	wellFormed(t, rep, fs)
	w := findingOf(t, fs, finding.WindowBound, NetworkReal, VariantTunnel, DirectionUp)
	if w.Figures[FigWindowBytes] != 4e6 || w.Figures[FigRTTSeconds] != 0.1 || !near(w.Figures[FigWindowBps], 320e6) {
		t.Errorf("%+v", w)
	}
	l := findingOf(t, fs, finding.Loss, NetworkReal, VariantOutside, DirectionUp)
	if p := l.Figures[FigRetransmitMinPercent]; p < 1.9 || p > 2.1 || l.Figures[FigLossRulePercent] != 100*LossShare || l.Outcome != verdict.NotTested {
		t.Errorf("%+v", l)
	}
	if r := l.Subject.Rows; len(r) != 1 || rep.Rows[r[0]].Variant != VariantOutside || rep.Rows[r[0]].Direction != DirectionUp {
		t.Errorf("loss rests on rows %v", r)
	}
}

// Retransmits raise the question of loss; the paced echoes answer it:
// more than 1 % lost confirms, at most half of it (of enough echoes)
// refutes, in between is noise, and without an answered echo it is not
// tested.
func TestLossFindingNeedsPacedEchoes(t *testing.T) {
	t.Parallel()
	quiet := func(int) OpenVPNCounters { return OpenVPNCounters{BusiestThreadShare: 0.2} }
	for _, c := range []struct {
		name    string
		echoes  *EchoCount
		want    verdict.Outcome
		figures bool
	}{
		{"no echoes", nil, verdict.NotTested, false},
		{"echoes failed", &EchoCount{Failed: "ping: permission denied", IntervalSeconds: 0.01}, verdict.NotTested, false},
		{"none answered", &EchoCount{Sent: 300, IntervalSeconds: 0.01}, verdict.NotTested, false},
		{"all answered", &EchoCount{Sent: 300, Answered: 300, IntervalSeconds: 0.01}, verdict.Refuted, true},
		{"one lost", &EchoCount{Sent: 300, Answered: 299, IntervalSeconds: 0.01}, verdict.Refuted, true},
		{"too few to refute", &EchoCount{Sent: 100, Answered: 100, IntervalSeconds: 0.01}, verdict.Noise, true},
		{"near the rule", &EchoCount{Sent: 300, Answered: 297, IntervalSeconds: 0.01}, verdict.Noise, true},
		{"lossy", &EchoCount{Sent: 300, Answered: 285, IntervalSeconds: 0.01}, verdict.Confirmed, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := withUp(realDoc([]float64{46e6, 46.5e6, 45.8e6}, []float64{47.5e6, 48e6, 47.6e6}, quiet))
			rep.Scenario.Real.LossEchoes = c.echoes
			fs := Findings(rep)
			wellFormed(t, rep, fs)
			l := findingOf(t, fs, finding.Loss, NetworkReal, VariantOutside, DirectionUp)
			if l.Outcome != c.want {
				t.Errorf("outcome %q, want %q: %+v", l.Outcome, c.want, l)
			}
			if p := l.Figures[FigRetransmitMinPercent]; p < 1.9 || p > 2.1 {
				t.Errorf("retransmits %.2f %%, want 2 %%", p)
			}
			_, has := l.Figures[FigEchoLossPercent]
			if has != c.figures {
				t.Errorf("echo figures %v, want %v: %v", has, c.figures, l.Figures)
			}
			if has {
				lost := float64(c.echoes.Sent - c.echoes.Answered)
				if l.Figures[FigEchoesSentPackets] != float64(c.echoes.Sent) || l.Figures[FigEchoesLostPackets] != lost ||
					!near(l.Figures[FigEchoLossPercent], 100*lost/float64(c.echoes.Sent)) {
					t.Errorf("figures %v", l.Figures)
				}
			}
			if (l.Outcome == verdict.NotTested || l.Outcome == verdict.Noise) && (l.Why == "" || l.Decide == "") {
				t.Errorf("undecided without why and decide: %+v", l)
			}
		})
	}
}

// Every kind is made by some document of these tests (a kind no rule
// makes would be a kind no test reads).
func TestEveryKindIsMade(t *testing.T) {
	made := map[finding.Kind]bool{}
	mk := findingRow
	lab := &Report{Scenario: Scenario{Repeat: 3, Networks: []Network{{Name: "lan"}, {Name: "wan"}, {Name: "lossy"}, {Name: "one"}}}}
	lab.Rows = []Row{
		mk("lan", "routed", PathRouted, "up", 0, 16000, 17000, 18000),
		mk("lan", "default", PathTunnel, "up", 10, 500, 520, 540),
		mk("lan", "none", PathTunnel, "up", 9, 480, 530, 560),
		mk("wan", "routed", PathRouted, "up", 0, 48, 48, 48),
		mk("wan", "default", PathTunnel, "up", 26, 46, 46.1, 46.2),
		mk("lossy", "routed", PathRouted, "up", 0, 4.2, 4.25, 4.3),
		mk("lossy", "jumbo", PathTunnel, "up", 21.1, 3.34, 3.41, 3.58),
		mk("one", "routed", PathRouted, "up", 0, 48),
		mk("one", "default", PathTunnel, "up", 26, 46.1),
	}
	counters := func(i int) OpenVPNCounters {
		return OpenVPNCounters{BusiestThreadShare: 0.95, SocketDrops: 5, FragCreates: 10, TunTxDropped: 1, Unread: []string{"x"}}
	}
	for _, rep := range []*Report{lab, withUp(realDoc([]float64{20e6, 21e6, 19e6}, []float64{47.5e6, 48e6, 47.6e6}, counters))} {
		fs := Findings(rep)
		wellFormed(t, rep, fs)
		for _, f := range fs {
			made[f.Kind] = true
		}
	}
	for _, k := range finding.RunKinds() {
		if !made[k] {
			t.Errorf("no test document makes a %s finding", k)
		}
	}
}
