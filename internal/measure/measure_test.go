package measure

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/golden"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func TestFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		got, want string
	}{
		{FormatMbps(0), "0"},
		{FormatMbps(953e3), "0.953"},
		{FormatMbps(2.5e6), "2.50"},
		{FormatMbps(47.34e6), "47.3"},
		{FormatMbps(912.4e6), "912"},
		{FormatMbps(2.345e9), "2345"},
		{FormatMbps(math.NaN()), "-"},
		{FormatRate(47.34e6), "47.3 Mbit/s"},
		{FormatMbpsSpread(verdict.Of([]float64{47e6, 48e6, 49.01e6})), "48.0 (47.0–49.0)"},
		{FormatMbpsSpread(verdict.Of([]float64{47e6})), "47.0"},
		{FormatMbpsSpread(verdict.Spread{}), "-"},
		{FormatRatio(0.9612), "0.96"},
		{FormatRatio(0), "-"},
		{FormatCPUPerGB(map[string]float64{"iperf3": 0.4212, "client": 1.2, "server": 13.12, "emulator": 120.4}),
			"server 13.1 client 1.20 emulator 120 iperf3 0.42"},
		{FormatCPUPerGB(nil), "-"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestRowJSONKeys pins the JSON contract of lab run and the recipes.
func TestRowJSONKeys(t *testing.T) {
	t.Parallel()
	r := Row{Network: "wan", Variant: "default", Path: PathTunnel, Direction: DirectionUp, Proto: "udp",
		CPUSecondsPerGB: map[string]float64{"server": 1}, Valid: true}
	r.AddSample(47e6)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"cpu_seconds_per_gb", "direction", "max_bps", "median_bps", "min_bps", "network", "path", "proto", "samples_bps", "valid", "variant"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v\nwant %v", keys, want)
	}
	r.RatioToRouted, r.Cipher, r.SocketBuffers, r.Error, r.Extra = 0.9, "AES-256-GCM", "R=[212992->212992] S=[212992->212992]", "x", map[string]any{"pps": 1}
	b, _ = json.Marshal(r)
	for _, k := range []string{`"ratio_to_routed":0.9`, `"cipher":"AES-256-GCM"`, `"socket_buffers":`, `"error":"x"`, `"extra":{"pps":1}`} {
		if !bytes.Contains(b, []byte(k)) {
			t.Errorf("%s lacks %s", b, k)
		}
	}

	rep := NewReport(hostinfo.Host{}, Scenario{})
	b, _ = json.Marshal(rep)
	for _, k := range []string{`"schema":"ovpnperf/run/v2"`, `"host":{`, `"scenario":{`, `"rows":null`, `"started":`, `"finished":`} {
		if !bytes.Contains(b, []byte(k)) {
			t.Errorf("%s lacks %s", b, k)
		}
	}
}

func sampleReport() *Report {
	rep := &Report{
		Schema: Schema,
		Host: hostinfo.Host{Kernel: "6.18.44", Arch: "x86_64", CPUModel: "AMD EPYC", CPUs: 2, AESNI: true,
			OpenVPNVersion: "OpenVPN 2.6.14 x86_64-pc-linux-gnu [SSL (OpenSSL)]", Iperf3Version: "iperf 3.12 (cJSON 1.7.15)",
			EmulationBackend: "nfqueue"},
		Scenario: Scenario{Command: "lab run", DurationSeconds: 10, Repeat: 3, Parallel: 1, Networks: []Network{
			{Name: "lan", Description: "unshaped"},
			{Name: "wan", Description: "50 Mbit/s, 60 ms RTT", Path: map[string]any{"mtu": 1500.0}},
		}},
		Started:  time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC),
		Finished: time.Date(2026, 11, 22, 2, 1, 30, 0, time.UTC),
	}
	add := func(r Row, samples ...float64) {
		r.Valid = true
		for _, s := range samples {
			r.AddSample(s)
		}
		rep.Rows = append(rep.Rows, r)
	}
	// Figures invented for the table's shape, not measurements.
	add(Row{Network: "wan", Variant: "routed", Path: PathRouted, Direction: DirectionUp, Proto: "tcp"}, 47.9e6, 47.6e6, 48.1e6)
	add(Row{Network: "wan", Variant: "routed", Path: PathRouted, Direction: DirectionDown, Proto: "tcp"}, 47.8e6, 47.7e6, 47.9e6)
	add(Row{Network: "wan", Variant: "default", Path: PathTunnel, Direction: DirectionUp, Proto: "udp",
		Cipher: "AES-256-GCM", SocketBuffers: "R=[212992->212992] S=[212992->212992]",
		CPUSecondsPerGB: map[string]float64{"server": 3.1, "client": 3.4}}, 46.1e6, 45.9e6, 46.3e6)
	bad := Row{Network: "wan", Variant: "default", Path: PathTunnel, Direction: DirectionDown, Proto: "udp",
		Cipher: "AES-256-GCM", CPUSecondsPerGB: map[string]float64{"server": 3.3, "client": 3.0}}
	bad.AddSample(45.2e6)
	bad.Refuse(Refusal{Kind: RefusalError, Detail: "emulator fell behind: 1204 packets queued late\nsecond line"})
	bad.Refuse(Refusal{Kind: RefusalError, Detail: "later reason"})
	rep.Rows = append(rep.Rows, bad)
	add(Row{Network: "lan", Variant: "routed", Path: PathRouted, Direction: DirectionUp, Proto: "tcp"}, 9.1e9, 9.4e9, 8.8e9)
	add(Row{Network: "lan", Variant: "jumbo", Path: PathTunnel, Direction: DirectionUp, Proto: "udp",
		CPUSecondsPerGB: map[string]float64{"server": 1.9, "client": 2.1, "iperf3": 0.3}}, 1.02e9, 0.98e9, 1.1e9)
	rep.FillRatios()
	return rep
}

func TestFillRatios(t *testing.T) {
	t.Parallel()
	rep := sampleReport()
	want := map[string]float64{
		"wan default up":   46.1e6 / 47.9e6,
		"wan default down": 0, // one sample, but the baseline is valid: ratio is set below
		"lan jumbo up":     1.02e9 / 9.1e9,
	}
	want["wan default down"] = 45.2e6 / 47.8e6
	for _, r := range rep.Rows {
		if r.Path == PathRouted {
			if r.RatioToRouted != 0 {
				t.Errorf("routed row has ratio %v", r.RatioToRouted)
			}
			continue
		}
		k := r.Network + " " + r.Variant + " " + r.Direction
		if math.Abs(r.RatioToRouted-want[k]) > 1e-12 {
			t.Errorf("%s: ratio %v, want %v", k, r.RatioToRouted, want[k])
		}
	}
	// Without a baseline in that direction there is no ratio.
	rep.Rows = slices.DeleteFunc(rep.Rows, func(r Row) bool { return r.Path == PathRouted && r.Direction == DirectionDown })
	rep.FillRatios()
	for _, r := range rep.Rows {
		if r.Direction == DirectionDown && r.RatioToRouted != 0 {
			t.Errorf("ratio %v without a baseline", r.RatioToRouted)
		}
	}
}

func TestFillRatiosPrefersSameProto(t *testing.T) {
	t.Parallel()
	rep := &Report{Rows: []Row{
		{Network: "n", Variant: "routed", Path: PathRouted, Direction: "up", Proto: "tcp", MedianBps: 100, Valid: true},
		{Network: "n", Variant: "routed", Path: PathRouted, Direction: "up", Proto: "udp", MedianBps: 50, Valid: true},
		{Network: "n", Variant: "v", Path: PathTunnel, Direction: "up", Proto: "udp", MedianBps: 40},
		{Network: "n", Variant: "w", Path: PathTunnel, Direction: "up", Proto: "sctp", MedianBps: 40},
		{Network: "other", Variant: "v", Path: PathTunnel, Direction: "up", Proto: "udp", MedianBps: 40},
	}}
	rep.FillRatios()
	if got := []float64{rep.Rows[2].RatioToRouted, rep.Rows[3].RatioToRouted, rep.Rows[4].RatioToRouted}; !slices.Equal(got, []float64{0.8, 0.4, 0}) {
		t.Errorf("ratios %v", got)
	}
}

func TestRefuseKeepsFirstReason(t *testing.T) {
	t.Parallel()
	r := Row{Valid: true}
	r.Refuse(Refusal{Kind: RefusalError, Detail: "first"})
	r.Refuse(Refusal{Kind: RefusalNoValidSample})
	if r.Valid || r.Error != "first" || r.Refusal == nil || r.Refusal.Kind != RefusalError {
		t.Errorf("%+v", r)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	rep := sampleReport()
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// Network.Path is any: it comes back as generic JSON, as it went in
	// here. Absent CPU figures come back as empty maps, so compare JSON.
	if !reflect.DeepEqual(back.Scenario, rep.Scenario) || back.Host != rep.Host || !back.Started.Equal(rep.Started) {
		t.Errorf("round trip differs:\n%+v\n%+v", back, rep)
	}
	a, _ := json.Marshal(rep)
	b, _ := json.Marshal(back)
	if !bytes.Equal(a, b) {
		t.Errorf("round trip differs:\n%s\n%s", a, b)
	}
	if !bytes.Contains(a, []byte(`"cpu_seconds_per_gb":{}`)) {
		t.Errorf("routed rows: CPU figures not written as {}: %s", a)
	}

	if _, err := ReadJSON(strings.NewReader(`{"schema":"ovpnperf/run/v0"}`)); err == nil {
		t.Error("old schema accepted")
	}

	rep.Rows[0].CPUSecondsPerGB = map[string]float64{"server": math.Inf(1)}
	if err := rep.WriteJSON(&buf); err == nil || !strings.Contains(err.Error(), "wan/routed/up/tcp") {
		t.Errorf("non-finite number: %v", err)
	}
}

func TestHostString(t *testing.T) {
	t.Parallel()
	h := sampleReport().Host
	want := "AMD EPYC, 2 CPUs, AES-NI; Linux 6.18.44 x86_64; OpenVPN 2.6.14; iperf3 3.12; emulation nfqueue"
	if got := h.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := (hostinfo.Host{CPUs: 1}).String(); got != "unknown CPU, 1 CPUs, no AES-NI; Linux" {
		t.Errorf("empty host: %q", got)
	}
}

// recipeReport has the shape of `ovpnperf recipe tcp`: published figures
// beside measured ones, and a verdict. Figures invented, not measured.
func recipeReport() *Report {
	rep := &Report{Schema: Schema, Host: hostinfo.Host{CPUModel: "AMD EPYC", CPUs: 2, Kernel: "6.18.44", Arch: "x86_64"},
		Scenario: Scenario{Command: "recipe tcp", Networks: []Network{{Name: "lan", Description: "unshaped"}}}}
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
		path := PathTunnel
		if v.name == "routed" {
			path = PathRouted
		}
		r := NewRow("lan", v.name, path, DirectionUp, v.proto)
		r.PublishedBps = v.pub
		for _, x := range v.samples {
			r.AddSample(x)
		}
		rep.Rows = append(rep.Rows, r)
	}
	rep.Verdicts = []Verdict{{Claim: "TCP transport is slower than UDP (147 vs 115 Mbit/s)", Outcome: verdict.Confirmed,
		Reason: "tcp median 380 is 0.93 of udp 410, ranges apart"}}
	rep.FillRatios()
	return rep
}

func TestNewRow(t *testing.T) {
	t.Parallel()
	r := NewRow("wan", "default", PathTunnel, DirectionDown, "udp")
	if !r.Valid || r.Key() != "wan/default/down/udp" || r.SamplesBps != nil {
		t.Errorf("%+v %s", r, r.Key())
	}
}

// TestReportJSONGolden pins the whole document of schema ovpnperf/run/v2:
// a changed key or shape shows up here first.
func TestReportJSONGolden(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	rep := recipeReport()
	rep.Started = time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	rep.Finished = rep.Started.Add(90 * time.Second)
	rep.Rows[1].CPUSecondsPerGB = map[string]float64{"server": 2.5, "client": 2.25, "iperf3": 0.5}
	rep.Rows[1].Cipher, rep.Rows[1].SocketBuffers = "AES-256-GCM", "R=[212992->212992] S=[212992->212992]"
	rep.Rows[2].Refuse(Refusal{Kind: RefusalIperfError, Detail: "iperf3: the server has terminated"})
	rep.Rows[2].Extra = map[string]any{"retransmits": 12}
	rep.Rows[1].Samples = []Sample{{Bps: 410e6, Intervals: []Interval{
		{StartSeconds: 0, EndSeconds: 1, Bps: 300e6, Retransmits: 4, Omitted: true},
		{StartSeconds: 0, EndSeconds: 1.0001, Bps: 410e6, Retransmits: 0}}}}
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "report.golden.json"), buf.Bytes())
}

// TestReadJSONVersions: v2 documents and the v1 documents written before
// rows[].samples existed are read; any other schema is refused by name.
func TestReadJSONVersions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		schema string
		ok     bool
	}{{Schema, true}, {SchemaV1, true}, {"ovpnperf/run/v9", false}, {"", false}} {
		doc := `{"schema":"` + tc.schema + `","rows":[{"network":"lan","variant":"default","samples_bps":[1e6]}]}`
		rep, err := ReadJSON(strings.NewReader(doc))
		if tc.ok && (err != nil || len(rep.Rows) != 1 || rep.Rows[0].Samples != nil) {
			t.Errorf("schema %q: %v, %+v", tc.schema, err, rep)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.schema)) {
			t.Errorf("schema %q: want an error naming it, got %v", tc.schema, err)
		}
	}
}

// A run cut short marks the rows it never sampled invalid (an
// interrupted measure printed them as "ok"), and leaves the others and
// the rows marked not tested alone.
func TestInvalidateUnsampled(t *testing.T) {
	t.Parallel()
	rep := &Report{Schema: Schema}
	done := NewRow("lan", "routed", PathRouted, DirectionUp, "tcp")
	for _, v := range []float64{1e8, 1.1e8, 0.9e8} {
		done.AddSample(v)
	}
	skipped := NewRow("lan", "dco", PathTunnel, DirectionUp, "udp")
	skipped.NotTested = "no DCO here"
	rep.Rows = []Row{done, NewRow("lan", "default", PathTunnel, DirectionUp, "udp"), skipped}
	rep.InvalidateUnsampled("no sample: interrupted")
	if !rep.Rows[0].Valid || rep.Rows[1].Valid || rep.Rows[1].Error != "no sample: interrupted" || !rep.Rows[2].Valid {
		t.Errorf("%+v", rep.Rows)
	}
}
