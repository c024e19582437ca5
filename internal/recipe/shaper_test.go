package recipe

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Real logs of OpenVPN 2.6.14 with push "shaper 100000": the client
// imports and initializes the shaper; lines that name the shaper only in
// a lab path (the management socket of tunnel0-shaper) are not about it.
func TestShaperLogLines(t *testing.T) {
	t.Parallel()
	client, err := shaperLogLines(filepath.Join("testdata", "shaper", "shaper-client.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"PUSH: Received control message: 'PUSH_REPLY,shaper 100000,",
		"OPTIONS IMPORT: traffic shaper enabled",
		"Output Traffic Shaping initialized at 100000 bytes per second",
	}
	if len(client) != len(want) {
		t.Fatalf("client lines %q, want %d", client, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(client[i], w) {
			t.Errorf("client line %d: %q, want %q…", i, client[i], w)
		}
	}
	server, err := shaperLogLines(filepath.Join("testdata", "shaper", "shaper-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(server) != 1 || !strings.Contains(server[0], "SENT CONTROL") {
		t.Errorf("server lines %q, want the PUSH_REPLY it sent", server)
	}
	if _, err := shaperLogLines(filepath.Join("testdata", "shaper", "missing.log")); err == nil {
		t.Error("a missing log is not an error")
	}
}

// shaperReport is a saved shaper report: the client's log lines and the
// recipe's 20 Mbit/s path in the scenario, and rows of the three variants
// (nil samples leave a row out).
func shaperReport(log []string, path labpath.Path, baseUp, baseDown, shaperUp, shaperDown, tcUp, tcDown []float64) *measure.Report {
	rep := &measure.Report{Scenario: measure.Scenario{
		Command:  "recipe shaper",
		Networks: []measure.Network{{Name: "line", Path: path}},
		Extra:    map[string]any{"shaper_client_log": log},
	}}
	for _, r := range []struct {
		variant, dir string
		s            []float64
	}{
		{"noshaper", measure.DirectionUp, baseUp}, {"noshaper", measure.DirectionDown, baseDown},
		{"shaper", measure.DirectionUp, shaperUp}, {"shaper", measure.DirectionDown, shaperDown},
		{"tc", measure.DirectionUp, tcUp}, {"tc", measure.DirectionDown, tcDown},
	} {
		if r.s != nil {
			rep.Rows = append(rep.Rows, ipv6Row("line", r.variant, r.dir, r.s...))
		}
	}
	return rep
}

func TestShaperVerdicts(t *testing.T) {
	t.Parallel()
	client, err := shaperLogLines(filepath.Join("testdata", "shaper", "shaper-client.log"))
	if err != nil {
		t.Fatal(err)
	}
	baseUp, baseDown := []float64{18.5, 17.0, 18.5}, []float64{18.5, 15.7, 18.5}
	rows := func(shaperUp, shaperDown, tcUp, tcDown []float64) *measure.Report {
		return shaperReport(client, shaperPath, baseUp, baseDown, shaperUp, shaperDown, tcUp, tcDown)
	}
	free := []float64{18.1, 17.4, 18.2}
	held := []float64{0.726, 0.727, 0.70}
	tcHeld := []float64{0.781, 0.777, 0.781}
	ignored := rows(free, free, free, tcHeld)
	ignored.Scenario.Extra["shaper_client_log"] = []string{"Options error: option 'shaper' cannot be used in this context"}
	noLog := rows([]float64{0.2, 0.21, 0.2}, free, free, tcHeld)
	noLog.Scenario.Extra["shaper_client_log"] = nil
	slowPath := labpath.Path{Up: labpath.Link{RateBitsPerSec: 1e6}, Down: labpath.Link{RateBitsPerSec: 1e6}}
	for _, tc := range []struct {
		name string
		rep  *measure.Report
		want []verdict.Outcome
	}{
		{"as claimed", rows(held, free, free, tcHeld), []verdict.Outcome{Confirmed, Confirmed, Confirmed, Confirmed, Confirmed, NotTested}},
		{"shaper ignored", ignored, []verdict.Outcome{Refuted, Refuted, Confirmed, Confirmed, Confirmed, NotTested}},
		// Rule fixed: a download held back by shaped ACKs is
		// not left alone; it was "changed".
		{"ACKs shaped", rows(held, []float64{6.0, 6.1, 5.9}, free, tcHeld), []verdict.Outcome{Confirmed, Confirmed, Refuted, Confirmed, Confirmed, NotTested}},
		{"download held by the shaper", rows(held, held, free, held), []verdict.Outcome{Confirmed, Confirmed, Refuted, Confirmed, Confirmed, NotTested}},
		{"far below", noLog, []verdict.Outcome{Noise, Changed, Confirmed, Confirmed, Confirmed, NotTested}},
		{"too few", rows(held[:2], free[:2], free, held[:1]), []verdict.Outcome{Confirmed, Noise, Noise, Noise, Confirmed, NotTested}},
		{"in between", rows([]float64{0.7, 3, 0.8}, free, []float64{0.7, 18, 17}, tcHeld), []verdict.Outcome{Confirmed, Noise, Confirmed, Confirmed, Noise, NotTested}},
		// Must show 3: the download cut to 3 of 18 Mbit/s is not left alone.
		{"download cut to 3 Mbit/s", rows(held, []float64{3.0, 3.1, 2.9}, []float64{3.0, 3.1, 2.9}, tcHeld), []verdict.Outcome{Confirmed, Confirmed, Refuted, Confirmed, Refuted, NotTested}},
		// Must show 3: without a baseline nothing is left "alone".
		{"no baseline", shaperReport(client, shaperPath, nil, nil, held, free, free, tcHeld), []verdict.Outcome{Confirmed, Confirmed, NotTested, Confirmed, NotTested, NotTested}},
		{"short baseline", shaperReport(client, shaperPath, baseUp[:2], baseDown[:2], held, free, free, tcHeld), []verdict.Outcome{Confirmed, Confirmed, Noise, Confirmed, Noise, NotTested}},
		// A limit at 80 % of the path's rate is not shown to bind.
		{"path as slow as the limit", shaperReport(client, slowPath, baseUp, baseDown, held, free, free, tcHeld), []verdict.Outcome{Confirmed, NotTested, Confirmed, NotTested, Confirmed, NotTested}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := shaperVerdicts(tc.rep)
			if len(vs) != len(tc.want) {
				t.Fatalf("%d verdicts, want %d", len(vs), len(tc.want))
			}
			for i, v := range vs {
				if v.Outcome != tc.want[i] || v.Reason == "" {
					t.Errorf("verdict %d %q: %s (%s), want %s", i, v.Claim, v.Outcome, v.Reason, tc.want[i])
				}
			}
			// The upload verdict records that the recipe cut the tun queue.
			if !slices.Contains(vs[1].Conditions, measure.VerdictConditionTunQueueCut) || vs[1].Figures["txqueuelen_packets"] != shaperTxQueueLen {
				t.Errorf("upload verdict does not record the %d-packet tun queue: %+v", shaperTxQueueLen, vs[1])
			}
		})
	}
}

// The tun queue probe's verdict, from saved figures.
func TestShaperQueueVerdict(t *testing.T) {
	t.Parallel()
	probe := func(def, set []float64, defErr string) map[string]shaperQueueResult {
		return map[string]shaperQueueResult{
			"500": {TxQueueLen: 500, IdleRTTMs: []float64{0.3, 0.3, 0.4}, LoadedRTTMs: def, LoadedSent: 20, UploadBps: 7e5, DownloadError: defErr},
			"50":  {TxQueueLen: 50, IdleRTTMs: []float64{0.3, 0.3, 0.4}, LoadedRTTMs: set, LoadedSent: 20, UploadBps: 7e5, DownloadBps: 15e6},
		}
	}
	for _, tc := range []struct {
		name  string
		probe any
		want  verdict.Outcome
	}{
		{"default queue delays", probe([]float64{5000, 6500, 7400}, []float64{600, 700, 750}, "timed out"), Confirmed},
		{"no difference", probe([]float64{600, 700, 750}, []float64{600, 700, 760}, ""), Noise},
		{"smaller difference", probe([]float64{900, 1000, 1100}, []float64{600, 700, 750}, ""), Changed},
		{"no probe", nil, NotTested},
	} {
		rep := shaperReport(nil, shaperPath, nil, nil, nil, nil, nil, nil)
		if tc.probe != nil {
			rep.Scenario.Extra["tun_queue_probe"] = tc.probe
		}
		saved, err := roundTrip(rep)
		if err != nil {
			t.Fatal(err)
		}
		if v := shaperQueueVerdict(saved); v.Outcome != tc.want || v.Reason == "" {
			t.Errorf("%s: %s (%s), want %s", tc.name, v.Outcome, v.Reason, tc.want)
		}
	}
}

// The arithmetic of what a limit of 100 kB/s leaves for TCP payload.
func TestShaperPrediction(t *testing.T) {
	t.Parallel()
	outer, inner, payload := shaperPrediction()
	if outer != 1492 || inner != 1440 || payload != 1388 {
		t.Errorf("outer %d inner %d payload %d, want 1492 1440 1388", outer, inner, payload)
	}
	// 18.4 Mbit/s down: 1657 segments/s, 828 ACKs of 104 bytes.
	if got := int(ackBytesPerSec(18.4e6)); got != 86167 {
		t.Errorf("ACK bytes/s for 18.4 Mbit/s: %d, want 86167", got)
	}
}

func TestShaperRecipe(t *testing.T) {
	testenv.Exclusive(t)
	rep := runForTest(t, runShaper, Options{Repeat: 1, Duration: 2 * time.Second}, "iperf3")
	if len(rep.Rows) != 6 {
		t.Errorf("%d rows, want 6", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		t.Logf("%s: %v %s", r.Key(), r.SamplesBps, r.Error)
		if len(r.SamplesBps) == 0 && r.Refusal == nil {
			t.Errorf("%s: no samples and no refusal (error %q)", r.Key(), r.Error)
		}
		// A limit of 800 kbit/s cannot deliver 2 Mbit/s, however loaded
		// the machine. The limited rows are what this checks: without a
		// sample the check did not run.
		limited := (r.Variant == "shaper" && r.Direction == measure.DirectionUp) || (r.Variant == "tc" && r.Direction == measure.DirectionDown)
		if limited && len(r.SamplesBps) == 0 {
			t.Errorf("%s: the limited row has no sample: %v", r.Key(), r.Refusal)
		}
		if limited && len(r.SamplesBps) > 0 && r.MaxBps > 2e6 {
			t.Errorf("%s: %s, want the limit's 0.8 Mbit/s", r.Key(), mbps(&r))
		}
	}
	if len(rep.Verdicts) != 6 {
		t.Fatalf("%d verdicts, want 6", len(rep.Verdicts))
	}
	// The tun queue probe ran with both queue lengths and measured pings
	// during the upload (figures only: the machine is shared).
	probe, ok := extraAs[map[string]shaperQueueResult](rep.Scenario.Extra["tun_queue_probe"])
	for _, q := range []string{"500", "50"} {
		r := probe[q]
		t.Logf("tun queue %s: %+v", q, r)
		if !ok || r.Error != "" || len(r.LoadedRTTMs) == 0 || len(r.IdleRTTMs) == 0 {
			t.Errorf("tun queue probe %s: %+v", q, r)
		}
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
		if !v.Outcome.Valid() || v.Reason == "" {
			t.Errorf("verdict %q: outcome %q, reason %q", v.Claim, v.Outcome, v.Reason)
		}
	}
	if v := rep.Verdicts[0]; v.Outcome != Confirmed {
		t.Errorf("pushed shaper: %s: %s", v.Outcome, v.Reason)
	}
}
