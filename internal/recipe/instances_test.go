package recipe

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// instFake makes samples of a configuration: aggregate rates in Mbit/s
// (split evenly over the flows), the share of a core each server used, the
// share of the time it waited for a CPU and the host's busy share.
func instFake(cfg *instConfig, util, wait, busy float64, mbit ...float64) []instSample {
	var out []instSample
	for _, m := range mbit {
		s := instSample{cpu: map[string]float64{instClient: 1, instIperf: 0.2}, waitSec: map[string]float64{}, wall: 6 * time.Second, hostBusy: busy}
		for label := range cfg.servers {
			s.cpu[label] = util * 6
			s.waitSec[label] = wait * 6
		}
		for i := range s.flowBps {
			s.flowBps[i] = m / 2 * 1e6
			s.flowBytes[i] = uint64(m / 2 * 1e6 / 8 * 6)
		}
		out = append(out, s)
	}
	return out
}

func TestInstancesVerdicts(t *testing.T) {
	t.Parallel()
	one := &instConfig{name: instOne, servers: map[string]int{instServer: 1}, flows: [2]instFlow{{server: instServer}, {server: instServer}}}
	two := &instConfig{name: instTwo, servers: map[string]int{"server-cpu0": 2, "server-cpu1": 3},
		flows: [2]instFlow{{server: "server-cpu0"}, {server: "server-cpu1"}}, pinned: map[string]int{"server-cpu0": 0, "server-cpu1": 1}}
	for _, c := range []struct {
		name             string
		oneRows, twoRows []instSample
		want             [2]verdict.Outcome
	}{
		{"saturated core, scales", instFake(one, 0.97, 0, 0.7, 200, 205, 210), instFake(two, 0.9, 0, 0.95, 300, 310, 290), [2]verdict.Outcome{Confirmed, Confirmed}},
		{"mostly idle, small gain", instFake(one, 0.3, 0.1, 1, 200, 205, 210), instFake(two, 0.3, 0.1, 1, 220, 225, 230), [2]verdict.Outcome{Refuted, Changed}},
		{"half busy, slower", instFake(one, 0.4, 0.3, 0.8, 200, 205, 210), instFake(two, 0.4, 0.3, 1, 150, 160, 170), [2]verdict.Outcome{Noise, Refuted}},
		// On a saturated host every process with work is
		// runnable; that was "confirmed", it shows nothing.
		{"starved of CPU on a saturated host", instFake(one, 0.5, 0.45, 1, 200, 250, 300), instFake(two, 0.5, 0.4, 1, 260, 280, 290), [2]verdict.Outcome{NotTested, Noise}},
		{"waiting for a CPU on a host with room", instFake(one, 0.5, 0.45, 0.8, 200, 250, 300), instFake(two, 0.5, 0.4, 1, 260, 280, 290), [2]verdict.Outcome{Confirmed, Noise}},
		{"one sample", instFake(one, 0.99, 0, 1, 200), instFake(two, 0.5, 0, 1, 400), [2]verdict.Outcome{Noise, Noise}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := &measure.Report{Scenario: measure.Scenario{Extra: map[string]any{"cpus": 2}}}
			for _, d := range []string{measure.DirectionUp, measure.DirectionDown} {
				rep.Rows = append(rep.Rows, instRow("n", one, d, c.oneRows), instRow("n", two, d, c.twoRows))
			}
			vs := instVerdicts(rep)
			if len(vs) != 4 {
				t.Fatalf("%d verdicts, want 4", len(vs))
			}
			for i, v := range vs {
				if v.Outcome != c.want[i%2] || v.Reason == "" {
					t.Errorf("verdict %d: %s (%s: %s), want %s", i, v.Outcome, v.Claim, v.Reason, c.want[i%2])
				}
			}
		})
	}
	// CPU-s/GB: each pinned server against the bytes it carried, the sum
	// against all bytes.
	r := instRow("n", two, measure.DirectionUp, instFake(two, 0.5, 0, 1, 400))
	gb := 400e6 / 8 * 6 / 1e9
	if got, want := r.CPUSecondsPerGB["server-cpu0"], 3/(gb/2); abs(got-want) > 1e-9 {
		t.Errorf("server-cpu0 %v CPU-s/GB, want %v", got, want)
	}
	if got, want := r.CPUSecondsPerGB[instServer], 6/gb; abs(got-want) > 1e-9 {
		t.Errorf("server %v CPU-s/GB, want %v", got, want)
	}
	if r := instRow("n", one, measure.DirectionUp, nil); r.Valid {
		t.Error("a row without samples is valid")
	}
}

// testdata/instances-schedstat.txt is /proc/1/schedstat of the test machine.
func TestInstancesParseSchedstat(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/instances-schedstat.txt")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	w, err := instParseSchedstat(b)
	if err != nil || f[1] != strconv.FormatInt(int64(w), 10) {
		t.Errorf("instParseSchedstat(%q) = %v, %v", b, w, err)
	}
	for _, bad := range []string{"", "1 2", "1 x 3", "1 -2 3"} {
		if _, err := instParseSchedstat([]byte(bad)); err == nil {
			t.Errorf("instParseSchedstat(%q) succeeded", bad)
		}
	}
	// A live process: this test's own threads.
	if _, err := instRunqueueWait(os.Getpid()); err != nil {
		t.Error(err)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestInstancesRecipe(t *testing.T) {
	testenv.Exclusive(t)
	rep := runForTest(t, runInstances, Options{Repeat: 1, Duration: 2 * time.Second}, "iperf3")
	if len(rep.Rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if !r.Valid || len(r.SamplesBps) != 1 {
			t.Errorf("%s: valid %v (%s), samples %v", r.Key(), r.Valid, r.Error, r.SamplesBps)
			continue
		}
		// Both clients carried traffic: the extra client of one-process
		// too, through its own device.
		for _, f := range r.Extra["flow_bps"].([][2]float64) {
			if f[0] <= 0 || f[1] <= 0 {
				t.Errorf("%s: flows %v", r.Key(), f)
			}
		}
		if r.CPUSecondsPerGB[instServer] <= 0 || r.CPUSecondsPerGB[instClient] <= 0 {
			t.Errorf("%s: CPU-s/GB %v", r.Key(), r.CPUSecondsPerGB)
		}
	}
	if len(rep.Verdicts) != 4 {
		t.Errorf("%d verdicts, want 4", len(rep.Verdicts))
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
		// One sample per row has no spread: every verdict must say noise.
		if v.Outcome != Noise || v.Basis != measure.VerdictBasisTooFew || v.Figures["samples"] != 1 || v.Figures["samples_needed"] != instMinSamples {
			t.Errorf("verdict from one sample: %+v", v)
		}
	}
}
