package recipe

import (
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func TestTCPVariants(t *testing.T) {
	t.Parallel()
	vs, protos, err := tcpVariants()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		srv, cli := &openvpn.Config{}, &openvpn.Config{}
		v.Apply(srv, cli)
		_, nodelay := srv.Get("tcp-nodelay")
		if nodelay != (v.Name == tcpNoDelay) || len(cli.Directives) != 0 {
			t.Errorf("%s: server %v client %v", v.Name, srv.Directives, cli.Directives)
		}
	}
	if protos[tcpUDP] != openvpn.UDP || protos[tcpTCP] != openvpn.TCP || protos[tcpNoDelay] != openvpn.TCP {
		t.Errorf("transports %v", protos)
	}
}

func TestTCPVerdicts(t *testing.T) {
	t.Parallel()
	up, down := measure.DirectionUp, measure.DirectionDown
	rep := &measure.Report{Rows: []measure.Row{
		// up: the cookbook's picture.
		mkRow("clean", tcpUDP, up, 600, 610, 620),
		mkRow("clean", tcpTCP, up, 400, 420, 410),
		mkRow("clean", tcpNoDelay, up, 590, 600, 605),
		// down: TCP as fast as UDP, tcp-nodelay no different.
		mkRow("clean", tcpUDP, down, 600, 610, 620),
		mkRow("clean", tcpTCP, down, 598, 605, 612),
		mkRow("clean", tcpNoDelay, down, 600, 606, 611),
		// lossy up: TCP-in-TCP melts.
		mkRow("lossy", tcpUDP, up, 5, 6, 5.5),
		mkRow("lossy", tcpTCP, up, 2, 2.5, 2.2),
		mkRow("lossy", tcpNoDelay, up, 2.1, 2.6, 2.4),
	}}
	got := map[string]verdict.Outcome{}
	for _, v := range tcpVerdicts(rep) {
		got[v.Claim] = v.Outcome
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
	}
	want := map[string]verdict.Outcome{
		"TCP transport is slower than UDP (published 115 vs 147 Mbit/s) [clean, up]":                     Confirmed,
		"tcp-nodelay recovers TCP transport's loss (published 146 vs 115 Mbit/s, UDP 147) [clean, up]":   Confirmed,
		"TCP transport is slower than UDP (published 115 vs 147 Mbit/s) [clean, down]":                   Noise,
		"tcp-nodelay recovers TCP transport's loss (published 146 vs 115 Mbit/s, UDP 147) [clean, down]": Refuted,
		"on a lossy path (1% loss, 80 ms RTT) TCP-over-TCP suffers more than UDP transport [lossy, up]":  Confirmed,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%q: %q, want %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d verdicts, want %d: %v", len(got), len(want), got)
	}
	// Without the clean path, the lossy verdict is not made.
	rep.Rows = rep.Rows[6:]
	if vs := tcpVerdicts(rep); len(vs) != 0 {
		t.Errorf("verdicts without a clean path: %v", vs)
	}
}

func TestTCPRecipe(t *testing.T) {
	t.Parallel() // judges no rate and no sample's validity: see runForTest
	// The user's path replaces both networks: one short network.
	p := labpath.Path{Up: labpath.Link{RateBitsPerSec: 200e6}, Down: labpath.Link{RateBitsPerSec: 200e6}}
	rep := runForTest(t, runTCP, Options{Repeat: 1, Duration: time.Second, Path: &p}, "iperf3")
	rows := map[string]int{}
	for _, r := range rep.Rows {
		rows[r.Variant]++
		if r.Path == measure.PathTunnel {
			if want := map[string]string{tcpUDP: "udp", tcpTCP: "tcp", tcpNoDelay: "tcp"}[r.Variant]; r.Proto != want {
				t.Errorf("%s: transport %q, want %q", r.Variant, r.Proto, want)
			}
			if r.Valid && r.Extra["ratio_to_udp"] == nil {
				t.Errorf("%s %s: no ratio to UDP", r.Variant, r.Direction)
			}
		}
	}
	for _, v := range []string{"routed", tcpUDP, tcpTCP, tcpNoDelay} {
		if rows[v] != 2 {
			t.Errorf("%s: %d rows, want 2", v, rows[v])
		}
	}
	if len(rep.Verdicts) != 4 {
		t.Errorf("%d verdicts, want 4", len(rep.Verdicts))
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
		if !v.Outcome.Valid() || v.Reason == "" {
			t.Errorf("verdict %+v", v)
		}
	}
}
