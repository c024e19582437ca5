package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// compressionTestLogs reads what OpenVPN 2.6.14 logged about compression
// for each variant (testdata/compression: real logs of a lzo-noallow and
// an lz4-v2 tunnel; the other compressing variants log the same lines).
func compressionTestLogs(t *testing.T) map[string][]string {
	t.Helper()
	logs := map[string][]string{}
	for _, file := range []string{"lzo-noallow", "lz4-v2"} {
		for _, side := range []string{"server", "client"} {
			f, err := os.Open(filepath.Join("testdata", "compression", file+"-"+side+".log"))
			if err != nil {
				t.Fatal(err)
			}
			lg, err := openvpn.ParseLog(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			logs[file+"/"+side] = lg.Compression
		}
	}
	for _, v := range []string{"lzo-adaptive", "lzo-yes"} {
		logs[v+"/server"], logs[v+"/client"] = logs["lz4-v2/server"], logs["lz4-v2/client"]
	}
	return logs
}

func TestCompressionVerdicts(t *testing.T) {
	t.Parallel()
	logs := compressionTestLogs(t)
	if got := compressionLogLine(logs["lzo-noallow/server"], "not compressed"); !strings.Contains(got, `unless "allow-compression yes" is also set`) {
		t.Fatalf("lzo-noallow server log: %q", logs["lzo-noallow/server"])
	}
	mk := func(payload, variant, dir string, cpu float64, mbit ...float64) measure.Row {
		r := ipv6Row(payload, variant, dir, mbit...)
		r.CPUSecondsPerGB = map[string]float64{"server": cpu / 2, "client": cpu / 2, "iperf3": 5}
		return r
	}
	build := func(randomCPU float64, zerosGain float64) *measure.Report {
		rep := &measure.Report{}
		for _, d := range []string{measure.DirectionUp, measure.DirectionDown} {
			// The line: 9.27 Mbit/s, one sample pulled down by load.
			rep.Rows = append(rep.Rows,
				mk(iperf.PayloadRandom, "off", d, 60, 9.27, 8.49, 9.27),
				mk(iperf.PayloadZeros, "off", d, 60, 9.16, 8.69, 9.22),
				mk(iperf.PayloadRandom, "lzo-noallow", d, 60, 9.27, 9.27, 9.26),
				mk(iperf.PayloadZeros, "lzo-noallow", d, 60, 9.02, 8.83, 9.27))
			for _, v := range compressingVariants {
				rep.Rows = append(rep.Rows,
					mk(iperf.PayloadRandom, v, d, randomCPU, 9.27, 9.26, 9.27),
					mk(iperf.PayloadZeros, v, d, 40, 9.2*zerosGain, 9.0*zerosGain, 9.3*zerosGain))
			}
		}
		return rep
	}
	outcomes := func(vs []measure.Verdict) map[string]verdict.Outcome {
		m := map[string]verdict.Outcome{}
		for _, v := range vs {
			if v.Reason == "" {
				t.Errorf("no reason: %+v", v)
			}
			m[v.Claim] = v.Outcome
		}
		return m
	}
	for _, tc := range []struct {
		name                      string
		randomCPU, zerosGain      float64
		random, zeros, cpu, allow verdict.Outcome
		folklore                  verdict.Outcome
	}{
		{"compression helps zeros, costs CPU on random", 75, 10, Refuted, Confirmed, Confirmed, Confirmed, Changed},
		{"CPU cost within the noise", 62, 10, Refuted, Confirmed, Noise, Confirmed, Changed},
		{"no CPU cost", 57, 10, Refuted, Confirmed, Refuted, Confirmed, Changed},
		{"compression does nothing", 60, 1, Refuted, Refuted, Refuted, Confirmed, Refuted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := compressionVerdicts(build(tc.randomCPU, tc.zerosGain), logs)
			if len(vs) != 12 {
				t.Fatalf("%d verdicts, want 12", len(vs))
			}
			got := outcomes(vs)
			for claim, o := range got {
				var want verdict.Outcome
				switch {
				case strings.Contains(claim, "speeds up") && strings.Contains(claim, "[random"):
					want = tc.random
				case strings.Contains(claim, "speeds up") && strings.Contains(claim, "[zeros"):
					want = tc.zeros
				case strings.Contains(claim, "costs CPU"):
					want = tc.cpu
				case strings.Contains(claim, "unless allow-compression"):
					want = tc.allow
				case strings.Contains(claim, "insecure"):
					want = Confirmed
				case strings.Contains(claim, "folklore"):
					want = tc.folklore
				}
				if o != want {
					t.Errorf("%q: %s, want %s", claim, o, want)
				}
			}
		})
	}
	// Without the warning in a compressing side's log, the warning claim
	// is refuted; without logs, noise.
	noWarn := map[string][]string{}
	for k, v := range logs {
		noWarn[k] = v
	}
	noWarn["lz4-v2/client"] = nil
	for _, tc := range []struct {
		logs map[string][]string
		want verdict.Outcome
	}{{noWarn, Refuted}, {map[string][]string{}, Noise}} {
		for _, v := range compressionVerdicts(build(60, 10), tc.logs) {
			if strings.Contains(v.Claim, "insecure") && v.Outcome != tc.want {
				t.Errorf("warning verdict: %s (%s), want %s", v.Outcome, v.Reason, tc.want)
			}
		}
	}
}

func TestCompressionRecipe(t *testing.T) {
	t.Parallel() // judges no rate and no sample's validity: see runForTest
	rep := runForTest(t, runCompression, Options{Repeat: 1, Duration: time.Second}, "iperf3")
	rows := map[string]int{}
	for _, r := range rep.Rows {
		rows[r.Network+"/"+r.Variant]++
		if len(r.SamplesBps) == 0 && r.Refusal == nil {
			t.Errorf("%s: no samples and no refusal (error %q)", r.Key(), r.Error)
		}
		if insecure := r.Extra["insecure"] != nil; insecure != (r.Variant != "off") {
			t.Errorf("%s: insecure mark %v", r.Key(), r.Extra["insecure"])
		}
	}
	for _, p := range []string{iperf.PayloadRandom, iperf.PayloadZeros} {
		for _, spec := range compressionVariants {
			v := strings.SplitN(spec, "=", 2)[0]
			if rows[p+"/"+v] != 2 {
				t.Errorf("%s/%s: %d rows, want 2", p, v, rows[p+"/"+v])
			}
		}
	}
	if rep.Scenario.Extra["warning"] != compressionWarning {
		t.Errorf("no warning in the scenario: %v", rep.Scenario.Extra)
	}
	if len(rep.Verdicts) != 12 {
		t.Fatalf("%d verdicts, want 12", len(rep.Verdicts))
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
		// What OpenVPN logs does not depend on the machine's load.
		if strings.Contains(v.Claim, "insecure") && v.Outcome != Confirmed {
			t.Errorf("warning verdict: %s: %s", v.Outcome, v.Reason)
		}
	}
}

// The zeros file lasts a sample at 40 × the line, and never grows beyond
// what experiment writes as a file (beyond it, samples would send a fixed
// amount and last minutes on the line without compression).
func TestZerosFileBitsPerSec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line uint64
		d    time.Duration
		want uint64
	}{
		{10e6, 2 * time.Second, 400e6},
		{10e6, 10 * time.Second, 0},
		{0, 2 * time.Second, 0},
		{1e9, time.Second, 0},
	} {
		got := zerosFileBitsPerSec(tc.line, tc.d)
		if tc.want != 0 && got != tc.want {
			t.Errorf("line %d, %v: %d, want %d", tc.line, tc.d, got, tc.want)
		}
		if size := iperf.PayloadSize(got, tc.d); size > experiment.MaxPayloadBytes {
			t.Errorf("line %d, %v: %d bit/s make a %d-byte file, above %d", tc.line, tc.d, got, size, experiment.MaxPayloadBytes)
		}
		if got < 100e6 {
			t.Errorf("line %d, %v: %d bit/s, too slow for compressed zeros", tc.line, tc.d, got)
		}
	}
}
