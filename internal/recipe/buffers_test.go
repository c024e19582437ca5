package recipe

import (
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// The six tunnels carry what their names say: 64 KiB in both configs, no
// setting, 512 KiB on the server and pushed to the client.
func TestBufferVariants(t *testing.T) {
	t.Parallel()
	vs, protos, err := bufferVariants()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 6 || len(protos) != 6 {
		t.Fatalf("%d variants, %d transports, want 6", len(vs), len(protos))
	}
	for _, v := range vs {
		srv, cli := &openvpn.Config{}, &openvpn.Config{}
		v.Apply(srv, cli)
		text := func(c *openvpn.Config) string {
			s, err := c.Render()
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		s, c := text(srv), text(cli)
		var wantS, wantC string
		switch {
		case strings.HasPrefix(v.Name, "buf64k-"):
			wantS = "sndbuf 65536\nrcvbuf 65536\n"
			wantC = wantS
		case strings.HasPrefix(v.Name, "buf512k-"):
			wantS = "sndbuf 524288\nrcvbuf 524288\npush \"sndbuf 524288\"\npush \"rcvbuf 524288\"\n"
		case strings.HasPrefix(v.Name, "osdefault-"):
		default:
			t.Errorf("unexpected variant %s", v.Name)
		}
		if s != wantS || c != wantC {
			t.Errorf("%s: server %q client %q, want %q and %q", v.Name, s, c, wantS, wantC)
		}
		if want := v.Name[strings.LastIndexByte(v.Name, '-')+1:]; protos[v.Name] != want {
			t.Errorf("%s: transport %q, want %q", v.Name, protos[v.Name], want)
		}
	}
}

func TestParseSysctlValues(t *testing.T) {
	t.Parallel()
	m, err := parseSysctlValues("4194304\n4194304\n212992\n212992\n")
	if err != nil {
		t.Fatal(err)
	}
	if m["rmem_max"] != 4194304 || m["wmem_default"] != 212992 {
		t.Errorf("got %v", m)
	}
	for _, bad := range []string{"", "1\n2\n3\n", "1\n2\n3\nx\n", "1 2 3 4 5"} {
		if _, err := parseSysctlValues(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The window is the smaller of the sender's send and the receiver's
// receive buffer, halved from what Linux reports.
func TestBoundWindow(t *testing.T) {
	t.Parallel()
	srv := openvpn.SocketBuffers{RecvAfter: 1 << 20, SendAfter: 131072}
	cli := openvpn.SocketBuffers{RecvAfter: 262144, SendAfter: 1 << 20}
	if w := boundWindow(measure.DirectionDown, srv, cli); w != 65536 {
		t.Errorf("down: %d, want 65536 (server send 131072 / 2)", w)
	}
	if w := boundWindow(measure.DirectionUp, srv, cli); w != 1<<19 {
		t.Errorf("up: %d, want 524288", w)
	}
	// 64 KiB at 200 ms is the published 2.5 Mbit/s (2.62 in SI).
	if b := boundBps(64<<10, 200*time.Millisecond); b < 2.6e6 || b > 2.63e6 {
		t.Errorf("64 KiB / 200 ms = %v bit/s", b)
	}
}

func mkRow(network, variant, dir string, samplesMbps ...float64) measure.Row {
	r := measure.NewRow(network, variant, measure.PathTunnel, dir, "udp")
	for _, s := range samplesMbps {
		r.AddSample(s * 1e6)
	}
	r.Summarize()
	return r
}

func TestJudgeBound(t *testing.T) {
	t.Parallel()
	bound := 10e6
	for _, c := range []struct {
		samples []float64
		want    verdict.Outcome
	}{
		{[]float64{9.1, 9.5, 9.3}, Confirmed},
		{[]float64{3, 3.5, 4}, Changed},  // something else limits
		{[]float64{13, 15, 17}, Changed}, // within the kernel's doubling
		{[]float64{40, 45, 50}, Refuted}, // no window at all
		{[]float64{9, 12, 30}, Noise},    // straddles
		{[]float64{11.4, 11.5, 11.5}, Confirmed},
		{[]float64{9.1, 9.5}, Noise}, // too few samples for a spread
	} {
		r := mkRow("n", "v", measure.DirectionUp, c.samples...)
		if got, why := judgeBound(&r, bound, 0); got != c.want {
			t.Errorf("%v: %s (%s), want %s", c.samples, got, why, c.want)
		}
	}
	if got, _ := judgeBound(nil, bound, 0); got != Noise {
		t.Errorf("nil row: %s", got)
	}
	// A bound as high as the path's rate is no test of the buffer (it was
	// "confirmed" by an earlier rule). With a bound above 0 and three
	// samples, NotTested has this one cause (verdict.LimitedTo's
	// verdict.BindingShare).
	r := mkRow("n", "v", measure.DirectionUp, 9.1, 9.5, 9.3)
	if got, why := judgeBound(&r, bound, 11e6); got != NotTested || bound < verdict.BindingShare*11e6 {
		t.Errorf("path-bound: %s (%s)", got, why)
	}
	if got, _ := judgeBound(&r, bound, bound/0.79); got != Confirmed {
		t.Errorf("bound at 79 %% of the path: %s", got)
	}
}

// bufReport is a saved buffers report on the recipe's two paths.
func bufReport(rows ...measure.Row) *measure.Report {
	rep := &measure.Report{Scenario: measure.Scenario{Command: "recipe buffers", Extra: map[string]any{"net_core_host": map[string]int{"rmem_max": 4194304, "wmem_max": 4194304}}}}
	for _, nr := range bufferRuns(Options{}) {
		rep.Scenario.Networks = append(rep.Scenario.Networks, measure.Network{Name: nr.net.Name, Path: nr.net.Path})
	}
	rep.Rows = rows
	return rep
}

func withWindow(r measure.Row, window int) measure.Row {
	rowExtra(&r)["bound_window_bytes"] = window
	return r
}

func bufOutcomes(t *testing.T, rep *measure.Report) map[string]verdict.Outcome {
	t.Helper()
	got := map[string]verdict.Outcome{}
	for _, v := range bufferVerdicts(rep) {
		got[v.Claim] = v.Outcome
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
		if v.Reason == "" {
			t.Errorf("no reason: %+v", v)
		}
	}
	return got
}

const (
	claim64tcp  = "64 KiB buffers at 200 ms RTT cap throughput at 2.5 Mbit/s [tcp transport]"
	claim512tcp = "512 KiB buffers at 50 ms RTT allow at most 80 Mbit/s [tcp transport]"
	claimRule   = "throughput ≤ buffer / RTT wherever sndbuf/rcvbuf are set [tcp transport]"
)

func TestBufferVerdicts(t *testing.T) {
	t.Parallel()
	up := measure.DirectionUp
	eff := func(b int) map[string]map[string]int {
		return map[string]map[string]int{"server": {"rcvbuf": b, "sndbuf": b}, "client": {"rcvbuf": b, "sndbuf": b}}
	}
	limits := map[string]map[string]int{"server": {"rmem_max": 4194304, "wmem_max": 4194304}, "client": {"rmem_max": 4194304, "wmem_max": 4194304}}
	rep := bufReport(
		withWindow(mkRow("200ms", "buf64k-tcp", up, 2.4, 2.5, 2.45), 65536),
		withWindow(mkRow("200ms", "buf64k-udp", up, 40, 45, 42), 65536),
		mkRow("200ms", "osdefault-tcp", up, 48, 50, 52),
		mkRow("200ms", "osdefault-udp", up, 41, 44, 43),
		withWindow(mkRow("50ms", "buf64k-tcp", up, 9.5, 9.8, 10), 65536),
		withWindow(mkRow("50ms", "buf512k-tcp", up, 78, 80, 82), 512<<10),
		withWindow(mkRow("50ms", "buf512k-udp", up, 90, 91, 92), 512<<10),
	)
	for i := range rep.Rows {
		if strings.HasPrefix(rep.Rows[i].Variant, "buf512k") {
			rowExtra(&rep.Rows[i])["effective_bytes"] = eff(1 << 20)
			rep.Rows[i].Extra["net_core"] = limits
		}
	}
	got := bufOutcomes(t, rep)
	want := map[string]verdict.Outcome{
		claim64tcp: Confirmed,
		"64 KiB buffers at 200 ms RTT cap throughput at 2.5 Mbit/s [udp transport]": Refuted,
		// 512 KiB at 50 ms bounds at 84 Mbit/s,
		// 84 % of the 100 Mbit/s path: not tested here (was confirmed).
		claim512tcp: NotTested,
		"512 KiB buffers at 50 ms RTT allow at most 80 Mbit/s [udp transport]": NotTested,
		claimRule: Confirmed,
		"throughput ≤ buffer / RTT wherever sndbuf/rcvbuf are set [udp transport]":                        Refuted,
		"OpenVPN 2.6's OS-default buffers beat the 64 KiB that 2.3 forced, at 200 ms RTT [tcp transport]": Confirmed,
		"OpenVPN 2.6's OS-default buffers beat the 64 KiB that 2.3 forced, at 200 ms RTT [udp transport]": Noise,
		"sndbuf/rcvbuf 524288, set on the server and pushed, give both sides 512 KiB buffers":             Confirmed,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%q: %q, want %q", k, got[k], w)
		}
	}
	// A kernel limit below the request caps it (and Linux doubles it).
	capped := map[string]map[string]int{"server": {"rmem_max": 212992, "wmem_max": 212992}, "client": {"rmem_max": 212992, "wmem_max": 212992}}
	for i := range rep.Rows {
		if strings.HasPrefix(rep.Rows[i].Variant, "buf512k") {
			rep.Rows[i].Extra["effective_bytes"] = eff(2 * 212992)
			rep.Rows[i].Extra["net_core"] = capped
		}
	}
	if v := pushVerdict(rep, nil); v.Outcome != Changed || v.Basis != measure.VerdictBasisKernelCapped {
		t.Errorf("capped: %+v", v)
	}
	// A client that kept its default did not get the push.
	for i := range rep.Rows {
		if strings.HasPrefix(rep.Rows[i].Variant, "buf512k") {
			e := eff(1 << 20)
			e["client"]["sndbuf"] = 212992
			rep.Rows[i].Extra["effective_bytes"] = e
			rep.Rows[i].Extra["net_core"] = limits
		}
	}
	if v := pushVerdict(rep, nil); v.Outcome != Refuted {
		t.Errorf("unpushed: %+v", v)
	}
}

// Defects of earlier rules in the buffers recipe, each a crafted report.
func TestBufferVerdictsEvidence(t *testing.T) {
	t.Parallel()
	up := measure.DirectionUp
	// A path-limited row is no evidence that the rule binds: with only
	// 512 KiB rows at 50 ms (bound 84 of 100 Mbit/s) the rule is not
	// tested (it was confirmed, "binding in 1").
	got := bufOutcomes(t, bufReport(withWindow(mkRow("50ms", "buf512k-tcp", up, 78, 80, 82), 512<<10)))
	if got[claimRule] != NotTested {
		t.Errorf("rule on path-limited rows only: %s, want not tested here", got[claimRule])
	}
	// The claim names 512 KiB: a request capped at wmem_max to 208 KiB
	// (bound 34 Mbit/s at 50 ms, which binds on 100 Mbit/s) does not test
	// it; it was confirmed from the capped buffer.
	got = bufOutcomes(t, bufReport(withWindow(mkRow("50ms", "buf512k-tcp", up, 32, 33, 33.5), 212992)))
	if got[claim512tcp] != NotTested {
		t.Errorf("capped 512 KiB: %s, want not tested here", got[claim512tcp])
	}
}

func TestBuffersRecipe(t *testing.T) {
	t.Parallel() // judges no rate and no sample's validity: see runForTest
	// One short network instead of the recipe's two: the test checks the
	// rows' figures and the computed verdicts, not the rule itself.
	l := labpath.Link{RateBitsPerSec: 100e6, Delay: 10 * time.Millisecond}
	rep := runForTest(t, runBuffers, Options{Repeat: 1, Duration: 2 * time.Second, Path: &labpath.Path{Up: l, Down: l}}, "iperf3")
	if len(rep.Rows) != 6 {
		t.Fatalf("%d rows, want 6", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		x := r.Extra
		logged, _ := x["socket_buffers_logged"].(map[string][]string)
		if len(logged["server"]) == 0 || len(logged["client"]) == 0 {
			t.Errorf("%s: no socket buffer lines: %v", r.Variant, x["socket_buffers_logged"])
		}
		if _, ok := x["net_core"].(map[string]map[string]int)["client"]["rmem_max"]; !ok {
			t.Errorf("%s: no net.core limits: %v", r.Variant, x["net_core"])
		}
		eff, _ := x["effective_bytes"].(map[string]map[string]int)
		s, _ := bufferSettingOf(r.Variant)
		if s.bytes > 0 {
			// Linux doubles what was asked (the lab's limits allow 512 KiB
			// unless the host lowered net.core.*mem_max).
			if got := eff["server"]["sndbuf"]; got != 2*s.bytes && got != 2*x["net_core"].(map[string]map[string]int)["server"]["wmem_max"] {
				t.Errorf("%s: server sndbuf %d for %d requested", r.Variant, got, s.bytes)
			}
			if _, ok := x["bound_bps"].(float64); !ok {
				t.Errorf("%s: no bound", r.Variant)
			}
		}
		if r.Valid && len(r.SamplesBps) != 1 {
			t.Errorf("%s: %d samples", r.Variant, len(r.SamplesBps))
		}
	}
	if len(rep.Verdicts) < 3 {
		t.Errorf("%d verdicts", len(rep.Verdicts))
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
		if !v.Outcome.Valid() || v.Reason == "" {
			t.Errorf("verdict %+v", v)
		}
	}
}
