package probe

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/pps"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

const goodProbe = `{"schema":"ovpnperf/probe/v1","host":"198.51.100.2","time":"2026-11-23T10:00:00Z","path":{
 "pmtu_ipv4":{"value":{"bytes":1400,"blackhole":true},"source":"measured"},
 "pmtu_ipv6":{"value":{"bytes":0,"blackhole":false},"source":"not available","note":"no IPv6 address"},
 "rtt_ms":{"value":10.2,"source":"measured"},"jitter_ms":{"value":0.1,"source":"measured"},
 "loss_percent":{"value":0,"source":"measured"},
 "throughput_bps":{"value":9.1e7,"source":"measured"},"path_rate_bps":{"value":9.5e7,"source":"measured"},
 "rmem_max":{"value":212992,"source":"read"},"wmem_max":{"value":212992,"source":"read"},
 "openvpn_version":{"value":"2.6.14","source":"read"},"dco_available":{"value":false,"source":"read"}}}`

func write(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadAndInput(t *testing.T) {
	t.Parallel()
	r, err := Load(write(t, goodProbe))
	if err != nil {
		t.Fatal(err)
	}
	in := r.Input("udp", false)
	if in.PathMTU != 1400 || !in.Blackhole || in.RTT != 10200*time.Microsecond || in.RateBitsPerSec != 9.5e7 || in.RmemMax != 212992 || in.OpenVPN != "" {
		t.Fatalf("input %+v", in)
	}
	if in6 := r.Input("udp", true); in6.PathMTU != 0 {
		t.Fatalf("IPv6 not available, got pmtu %d", in6.PathMTU)
	}
}

// A file written before the per-direction loss and the method existed
// still loads (they are absent, so not known), and a new one round-trips.
func TestSchemaCompatible(t *testing.T) {
	t.Parallel()
	r, err := Load(write(t, goodProbe))
	if err != nil {
		t.Fatal(err)
	}
	if r.Path.LossUpPercent.Known() || r.Path.LossDownPercent.Known() || r.Path.LossPercent.Method != "" {
		t.Fatalf("old file: up %+v down %+v loss %+v", r.Path.LossUpPercent, r.Path.LossDownPercent, r.Path.LossPercent)
	}
	r.Path.LossUpPercent = measured(5.0, "x").by(MethodPPSEcho)
	r.Path.Offloads = read(map[string]bool{"rx-gro": true}, "y").by(MethodEthtoolIoctl)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"loss_up_percent":{"value":5,"source":"measured","note":"x","method":"pps-echo"}`) {
		t.Errorf("encoding: %s", b)
	}
	r2, err := Decode(strings.NewReader(string(b)))
	if err != nil || r2.Path.LossUpPercent != r.Path.LossUpPercent || !r2.Path.Offloads.Value["rx-gro"] || r2.Path.Offloads.Method != MethodEthtoolIoctl {
		t.Fatalf("round trip: %v %+v", err, r2.Path)
	}
	if _, err := Decode(strings.NewReader(strings.Replace(string(b), `"source":"measured","note":"x"`, `"source":"guess","note":"x"`, 1))); err == nil || !strings.Contains(err.Error(), "loss_up_percent") {
		t.Errorf("a bad source in a new field: %v", err)
	}
}

// Must show 4: another schema and a truncated file are one-line errors.
func TestLoadErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, body, want string }{
		{"other schema", strings.Replace(goodProbe, "ovpnperf/probe/v1", "ovpnperf/lab-run/v1", 1), `schema "ovpnperf/lab-run/v1", want ovpnperf/probe/v1`},
		{"truncated", goodProbe[:200], "truncated"},
		{"empty", "", "truncated"},
		{"no schema", `{"host":"x","path":{}}`, "no \"schema\""},
		{"bad source", strings.Replace(goodProbe, `"source":"read"}`, `"source":"guessed"}`, 1), "guessed"},
		{"not json", "hello", "not JSON"},
	} {
		_, err := Load(write(t, c.body))
		var le *LoadError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line containing %q", c.name, err, c.want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestParsePing(t *testing.T) {
	t.Parallel()
	out := `PING 198.51.100.2 (198.51.100.2) 56(84) bytes of data.

--- 198.51.100.2 ping statistics ---
300 packets transmitted, 294 received, 2% packet loss, time 3050ms
rtt min/avg/max/mdev = 300.112/300.523/301.908/0.311 ms, pipe 31
`
	rtt, jit, loss, err := ParsePing(out, 300)
	if err != nil || rtt.Value != 300.112 || jit.Value != 0.311 || loss.Value != 2 {
		t.Fatalf("%v %v %v %v", rtt, jit, loss, err)
	}
	_, _, loss, err = ParsePing("5 packets transmitted, 0 received, 100% packet loss, time 4000ms\n", 5)
	if err != nil || loss.Value != 100 {
		t.Fatalf("all lost: %v %v", loss, err)
	}
	if _, _, _, err := ParsePing("ping: unknown host", 5); err == nil {
		t.Fatal("no summary: no error")
	}
	if sent, answered, err := ParseEchoCount(out); err != nil || sent != 300 || answered != 294 {
		t.Fatalf("echo count: %d %d %v", sent, answered, err)
	}
	if sent, answered, err := ParseEchoCount("5 packets transmitted, 0 received, +5 errors, 100% packet loss, time 4000ms\n"); err != nil || sent != 5 || answered != 0 {
		t.Fatalf("echo count, none answered: %d %d %v", sent, answered, err)
	}
	if _, _, err := ParseEchoCount("ping: unknown host"); err == nil {
		t.Fatal("echo count without a summary: no error")
	}
	lo, hi, err := ParsePingRange(out)
	if err != nil || lo != 300112*time.Microsecond || hi != 301908*time.Microsecond {
		t.Fatalf("range: %v %v %v", lo, hi, err)
	}
	if _, _, err := ParsePingRange("5 packets transmitted, 0 received, 100% packet loss, time 4000ms\n"); err == nil {
		t.Fatal("all lost: no error")
	}
}

// The throughput sample follows the echo round trip: on a satellite path
// (600 ms) slow start takes seconds, and the receiver's window runs a
// round trip past the sender's; without an echo it is as asked.
func TestIperfTimingFollowsTheEchoes(t *testing.T) {
	t.Parallel()
	rtt := func(ms float64) Field[float64] { return measured(ms, "test") }
	o, why := iperfTiming(rtt(600), rtt(5), 5*time.Second)
	if o.Duration != 13*time.Second || o.Omit < 5*time.Second || o.PathSlack != 1240*time.Millisecond || !strings.Contains(why, "600 ms") {
		t.Errorf("600 ms: %+v %q", o, why)
	}
	// Ten of a 4 s echo round trip's 8 s slack would be 80 s: a minute at most.
	if o, _ = iperfTiming(rtt(4000), rtt(0), 5*time.Second); o.Duration != time.Minute {
		t.Errorf("4 s: %+v", o)
	}
	o, _ = iperfTiming(rtt(1), rtt(0.1), 5*time.Second)
	if o.Duration != 5*time.Second || o.Omit != time.Second || o.PathSlack > 10*time.Millisecond {
		t.Errorf("1 ms: %+v", o)
	}
	// The same rule as measure's (iperf.RealPathTiming), at the largest
	// round trip: the echo round trip plus four mean deviations.
	for _, c := range []struct{ rtt, mdev float64 }{{0.3, 0.05}, {20, 2}, {150, 10}, {600, 5}, {640, 40}, {2000, 100}} {
		o, _ := iperfTiming(rtt(c.rtt), rtt(c.mdev), time.Second)
		d, w, slack := iperf.RealPathTiming(time.Duration((c.rtt+4*c.mdev)*float64(time.Millisecond)), true)
		if o.Duration != max(time.Second, d) || o.Omit != w || o.PathSlack != slack {
			t.Errorf("%v ms ± %v: probe %v -O %v slack %v, the rule %v -O %v slack %v", c.rtt, c.mdev, o.Duration, o.Omit, o.PathSlack, d, w, slack)
		}
	}
	// An echo of 0 ms (a LAN's round trip rounded to nothing) answered:
	// the echo rule, not the no-echo warm-up.
	o, why = iperfTiming(rtt(0), rtt(0), time.Second)
	if o.Duration != 2*time.Second || o.Omit != time.Second || o.PathSlack != 0 || !strings.Contains(why, "sized by the 0 ms echo") {
		t.Errorf("0 ms: %+v %q", o, why)
	}
	o, why = iperfTiming(missing[float64]("no echo"), missing[float64]("no echo"), 5*time.Second)
	if o.Duration != 5*time.Second || o.Omit != 2*time.Second || o.PathSlack != 0 || !strings.Contains(why, "no echo") {
		t.Errorf("no echo: %+v %q", o, why)
	}
}

// The offloads kept are those of offloadFeatures the device has, with
// their state; other features are left out.
func TestPickOffloads(t *testing.T) {
	t.Parallel()
	m := PickOffloads(map[string]bool{"rx-gro": false, "tx-tcp-segmentation": true, "rx-checksum": true, "tx-nocache-copy": true, "highdma": true})
	if len(m) != 3 || m["rx-gro"] || !m["tx-tcp-segmentation"] || !m["rx-checksum"] {
		t.Fatalf("%v", m)
	}
}

// A pps echo gives loss per direction from the server's counts; without
// them only the round trip is claimed.
func TestPPSFields(t *testing.T) {
	t.Parallel()
	r := &pps.Result{Server: "198.51.100.2:7007", Counters: pps.Counters{Sent: 1000, Received: 940, Lost: 60, Late: 2},
		LossPercent: 6, RTTMinUs: 10100, RTTP50Us: 10300, RTTStdDevUs: 250,
		ServerReport: &pps.ServerReport{Received: 950, Echoed: 950}}
	rtt, jit, loss, up, down := PPSFields(r)
	for name, f := range map[string]Field[float64]{"rtt": rtt, "jitter": jit, "loss": loss, "up": up, "down": down} {
		if f.Source != Measured || f.Method != MethodPPSEcho {
			t.Errorf("%s: %+v", name, f)
		}
	}
	// Up: 50 of 1000 never reached the server; down: 950 echoed, 940 in
	// time and 2 late came back, so 8 were lost on the way back.
	if rtt.Value != 10.1 || jit.Value != 0.25 || loss.Value != 6 || up.Value != 5 || math.Abs(down.Value-100*8.0/950) > 1e-9 {
		t.Errorf("rtt %v jitter %v loss %v up %v down %v", rtt.Value, jit.Value, loss.Value, up.Value, down.Value)
	}
	// The counts behind those percents: 940 of 1000 in time; up 950 of
	// 1000; down 942 of 950.
	e := PPSEchoes(r)
	if e.Source != Measured || e.Method != MethodPPSEcho || e.Value.Sent != 1000 || e.Value.Answered != 940 ||
		e.Value.Up == nil || *e.Value.Up != (OneWay{Sent: 1000, Arrived: 950}) || e.Value.Down == nil || *e.Value.Down != (OneWay{Sent: 950, Arrived: 942}) {
		t.Errorf("echo counts %+v", e)
	}
	r.ServerReport = nil
	if e := PPSEchoes(r); e.Value.Up != nil || e.Value.Down != nil || e.Value.Answered != 940 {
		t.Errorf("echo counts without the server's report %+v", e)
	}
	_, _, loss, up, down = PPSFields(r)
	if !loss.Known() || up.Known() || down.Known() || !strings.Contains(up.Note, "round trip") {
		t.Errorf("without the server's report: loss %+v up %+v down %+v", loss, up, down)
	}
}

// A probe's judgements are records, also for a document written without
// them: the black-holed IPv4 path and the host without DCO of goodProbe;
// with loss measured, a confirmed loss finding carrying the figure; with
// loss not available, one not tested.
func TestFindings(t *testing.T) {
	t.Parallel()
	r, err := Load(write(t, goodProbe))
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(fs []finding.Finding) map[string]finding.Finding {
		m := map[string]finding.Finding{}
		for _, f := range fs {
			if err := f.Check(); err != nil {
				t.Error(err)
			}
			m[string(f.Kind)+"/"+f.Subject.Variant] = f
		}
		return m
	}
	got := kinds(r.Findings)
	if f, ok := got["pmtu-blackhole/ipv4"]; !ok || f.Outcome != verdict.Confirmed || f.Figures["path_mtu_bytes"] != 1400 || f.Settings["host"] != "198.51.100.2" {
		t.Errorf("pmtu-blackhole ipv4: %+v", f)
	}
	if f, ok := got["dco-off/host"]; !ok || f.Outcome != verdict.Confirmed {
		t.Errorf("dco-off host: %+v", f)
	}
	// goodProbe's 0 % has no count of echoes behind it: the rule needs
	// one to refute, so loss is not tested, and no count is made up.
	if f, ok := got["loss/"]; !ok || f.Outcome != verdict.NotTested || f.Why == "" || f.Decide == "" || len(got) != 3 {
		t.Errorf("findings %+v, want the black hole, DCO off and loss not tested (a percent without its count)", r.Findings)
	} else if _, has := f.Figures["echoes_sent_packets"]; has {
		t.Errorf("a count of echoes made up: %v", f.Figures)
	}
	r.Path.LossPercent = measured(2.5, "ICMP echo, 195 of 200 answered").by(MethodICMPEcho)
	r.Path.DCO = read(true, "x")
	got = kinds(Findings(&Report{Host: r.Host, Path: r.Path}))
	if f := got["loss/"]; f.Outcome != verdict.Confirmed || f.Figures["loss_percent"] != 2.5 || f.Settings["method"] != MethodICMPEcho {
		t.Errorf("loss: %+v", f)
	}
	if _, ok := got["dco-off/host"]; ok {
		t.Errorf("dco-off with DCO available: %+v", got)
	}
	// With the counts, the rule judges them: 1 of 300 lost refutes, and
	// the finding carries the counts.
	r.Path.LossPercent = measured(100.0/300, "ICMP echo, 299 of 300 answered").by(MethodICMPEcho)
	r.Path.LossEchoes = measured(Echoes{Sent: 300, Answered: 299}, "x").by(MethodICMPEcho)
	if f := kinds(Findings(&Report{Host: r.Host, Path: r.Path}))["loss/"]; f.Outcome != verdict.Refuted || f.Figures["echoes_sent_packets"] != 300 || f.Figures["echoes_lost_packets"] != 1 || f.Advice != "" {
		t.Errorf("loss refuted by counts: %+v", f)
	}
	r.Path.LossEchoes = Field[Echoes]{}
	r.Path.LossPercent = missing[float64]("no echo came back")
	if f := kinds(Findings(&Report{Host: r.Host, Path: r.Path}))["loss/"]; f.Outcome != verdict.NotTested || f.Decide == "" {
		t.Errorf("loss not available: %+v", f)
	}
}
