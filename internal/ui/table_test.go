package ui

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/golden"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func TestRenderTableGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		rep    *measure.Report
	}{
		{"table.golden", sampleReport()},
		{"table_recipe.golden", recipeReport()},
	} {
		t.Run(tc.golden, func(t *testing.T) { checkGolden(t, tc.golden, tc.rep) })
	}
}

func checkGolden(t *testing.T, name string, rep *measure.Report) {
	var buf bytes.Buffer
	if err := RenderTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", name), buf.Bytes())
}

func TestFormatSocketBuffers(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{FormatSocketBuffers("R=[212992->212992] S=[212992->212992]"), "R 208K S 208K"},
		{FormatSocketBuffers("Socket Buffers: R=[524288->425984] S=[65536->65536]"), "R 416K←512K S 64K"},
		{FormatSocketBuffers("R=[0->212992] S=[1000->2000]"), "R 208K S 2000←1000"},
		{FormatSocketBuffers("sndbuf 65536"), "sndbuf 65536"},
		{FormatSocketBuffers(""), "-"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// A run cut short shows its unsampled rows as invalid in the table
// (measure.Report.InvalidateUnsampled marks them).
func TestTableShowsUnsampledInvalid(t *testing.T) {
	rep := &measure.Report{Schema: measure.Schema}
	done := measure.NewRow("lan", "routed", measure.PathRouted, measure.DirectionUp, "tcp")
	for _, v := range []float64{1e8, 1.1e8, 0.9e8} {
		done.AddSample(v)
	}
	skipped := measure.NewRow("lan", "dco", measure.PathTunnel, measure.DirectionUp, "udp")
	skipped.NotTested = "no DCO here"
	rep.Rows = []measure.Row{done, measure.NewRow("lan", "default", measure.PathTunnel, measure.DirectionUp, "udp"), skipped}
	rep.InvalidateUnsampled("no sample: interrupted")
	var b strings.Builder
	if err := RenderTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.Contains(line, "default") && !strings.Contains(line, "INVALID: no sample") {
			t.Errorf("row without samples: %s", line)
		}
	}
}

// Figures invented for the table's shape, not measurements (the same
// reports as internal/measure's tests).
func sampleReport() *measure.Report {
	rep := &measure.Report{
		Schema: measure.Schema,
		Host: hostinfo.Host{Kernel: "6.18.44", Arch: "x86_64", CPUModel: "AMD EPYC", CPUs: 2, AESNI: true,
			OpenVPNVersion: "OpenVPN 2.6.14 x86_64-pc-linux-gnu [SSL (OpenSSL)]", Iperf3Version: "iperf 3.12 (cJSON 1.7.15)",
			EmulationBackend: "nfqueue"},
		Scenario: measure.Scenario{Command: "lab run", DurationSeconds: 10, Repeat: 3, Parallel: 1, Networks: []measure.Network{
			{Name: "lan", Description: "unshaped"},
			{Name: "wan", Description: "50 Mbit/s, 60 ms RTT", Path: map[string]any{"mtu": 1500.0}},
		}},
		Started:  time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC),
		Finished: time.Date(2026, 11, 22, 2, 1, 30, 0, time.UTC),
	}
	add := func(r measure.Row, samples ...float64) {
		r.Valid = true
		for _, s := range samples {
			r.AddSample(s)
		}
		rep.Rows = append(rep.Rows, r)
	}
	// Figures invented for the table's shape, not measurements.
	add(measure.Row{Network: "wan", Variant: "routed", Path: measure.PathRouted, Direction: measure.DirectionUp, Proto: "tcp"}, 47.9e6, 47.6e6, 48.1e6)
	add(measure.Row{Network: "wan", Variant: "routed", Path: measure.PathRouted, Direction: measure.DirectionDown, Proto: "tcp"}, 47.8e6, 47.7e6, 47.9e6)
	add(measure.Row{Network: "wan", Variant: "default", Path: measure.PathTunnel, Direction: measure.DirectionUp, Proto: "udp",
		Cipher: "AES-256-GCM", SocketBuffers: "R=[212992->212992] S=[212992->212992]",
		CPUSecondsPerGB: map[string]float64{"server": 3.1, "client": 3.4}}, 46.1e6, 45.9e6, 46.3e6)
	bad := measure.Row{Network: "wan", Variant: "default", Path: measure.PathTunnel, Direction: measure.DirectionDown, Proto: "udp",
		Cipher: "AES-256-GCM", CPUSecondsPerGB: map[string]float64{"server": 3.3, "client": 3.0}}
	bad.AddSample(45.2e6)
	bad.Refuse(measure.Refusal{Kind: measure.RefusalError, Detail: "emulator fell behind: 1204 packets queued late\nsecond line"})
	bad.Refuse(measure.Refusal{Kind: measure.RefusalError, Detail: "later reason"})
	rep.Rows = append(rep.Rows, bad)
	add(measure.Row{Network: "lan", Variant: "routed", Path: measure.PathRouted, Direction: measure.DirectionUp, Proto: "tcp"}, 9.1e9, 9.4e9, 8.8e9)
	add(measure.Row{Network: "lan", Variant: "jumbo", Path: measure.PathTunnel, Direction: measure.DirectionUp, Proto: "udp",
		CPUSecondsPerGB: map[string]float64{"server": 1.9, "client": 2.1, "iperf3": 0.3}}, 1.02e9, 0.98e9, 1.1e9)
	rep.FillRatios()
	return rep
}

// recipeReport has the shape of `ovpnperf recipe tcp`: published figures
// beside measured ones, and a verdict. Figures invented, not measured.
func recipeReport() *measure.Report {
	rep := &measure.Report{Schema: measure.Schema, Host: hostinfo.Host{CPUModel: "AMD EPYC", CPUs: 2, Kernel: "6.18.44", Arch: "x86_64"},
		Scenario: measure.Scenario{Command: "recipe tcp", Networks: []measure.Network{{Name: "lan", Description: "unshaped"}}}}
	for _, v := range []struct {
		name, proto string
		pub         float64
		samples     []float64
	}{
		{"routed", "tcp", 0, []float64{940e6, 935e6, 941e6}},
		{"udp", "udp", 147e6, []float64{410e6, 402e6, 415e6}},
		{"tcp", "tcp", 115e6, []float64{380e6, 371e6, 390e6}},
		{"tcp-nodelay", "tcp", 146e6, []float64{383e6, 377e6, 385e6}},
	} {
		path := measure.PathTunnel
		if v.name == "routed" {
			path = measure.PathRouted
		}
		r := measure.NewRow("lan", v.name, path, measure.DirectionUp, v.proto)
		r.PublishedBps = v.pub
		for _, x := range v.samples {
			r.AddSample(x)
		}
		rep.Rows = append(rep.Rows, r)
	}
	rep.Verdicts = []measure.Verdict{{Claim: "TCP transport is slower than UDP (147 vs 115 Mbit/s)", Outcome: verdict.Confirmed,
		Reason: "tcp median 380 is 0.93 of udp 410, ranges apart"}}
	rep.FillRatios()
	return rep
}
