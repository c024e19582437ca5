package recipe

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// Real logs of OpenVPN 2.6.14 with push "shaper 100000": the client
// imports and initializes the shaper; lines that name the shaper only in
// a lab path (the management socket of tunnel0-shaper) are not about it.
func TestShaperLogLines(t *testing.T) {
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

func TestShaperVerdicts(t *testing.T) {
	client, err := shaperLogLines(filepath.Join("testdata", "shaper", "shaper-client.log"))
	if err != nil {
		t.Fatal(err)
	}
	rows := func(shaperUp, shaperDown, tcUp, tcDown []float64) *measure.Report {
		rep := &measure.Report{}
		rep.Rows = append(rep.Rows,
			ipv6Row("line", "noshaper", measure.DirectionUp, 18.5, 17.0, 18.5),
			ipv6Row("line", "noshaper", measure.DirectionDown, 18.5, 15.7, 18.5),
			ipv6Row("line", "shaper", measure.DirectionUp, shaperUp...),
			ipv6Row("line", "shaper", measure.DirectionDown, shaperDown...),
			ipv6Row("line", "tc", measure.DirectionUp, tcUp...),
			ipv6Row("line", "tc", measure.DirectionDown, tcDown...))
		return rep
	}
	free := []float64{18.1, 17.4, 18.2}
	held := []float64{0.726, 0.727, 0.70}
	for _, tc := range []struct {
		name string
		rep  *measure.Report
		log  []string
		want []string
	}{
		{"as claimed", rows(held, free, free, []float64{0.781, 0.777, 0.781}), client, []string{Confirmed, Confirmed, Confirmed, Confirmed, Confirmed}},
		{"shaper ignored", rows(free, free, free, []float64{0.781, 0.777, 0.781}), []string{"Options error: option 'shaper' cannot be used in this context"}, []string{Refuted, Refuted, Confirmed, Confirmed, Confirmed}},
		{"ACKs shaped", rows(held, []float64{6.0, 6.1, 5.9}, free, []float64{0.781, 0.777, 0.781}), client, []string{Confirmed, Confirmed, Changed, Confirmed, Confirmed}},
		{"download held by the shaper", rows(held, held, free, held), client, []string{Confirmed, Confirmed, Refuted, Confirmed, Confirmed}},
		{"far below", rows([]float64{0.2, 0.21, 0.2}, free, free, []float64{0.781, 0.777, 0.781}), nil, []string{Noise, Changed, Confirmed, Confirmed, Confirmed}},
		{"too few", rows(held[:2], free[:2], free, held[:1]), client, []string{Confirmed, Noise, Noise, Noise, Confirmed}},
		{"in between", rows([]float64{0.7, 3, 0.8}, free, []float64{0.7, 18, 17}, []float64{0.781, 0.777, 0.781}), client, []string{Confirmed, Noise, Confirmed, Confirmed, Noise}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := shaperVerdicts(tc.rep, tc.log)
			if len(vs) != len(tc.want) {
				t.Fatalf("%d verdicts, want %d", len(vs), len(tc.want))
			}
			for i, v := range vs {
				if v.Outcome != tc.want[i] || v.Reason == "" {
					t.Errorf("verdict %d %q: %s (%s), want %s", i, v.Claim, v.Outcome, v.Reason, tc.want[i])
				}
			}
		})
	}
}

// The arithmetic of what a limit of 100 kB/s leaves for TCP payload.
func TestShaperPrediction(t *testing.T) {
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
	rep := runForTest(t, runShaper, Options{Repeat: 1, Duration: 3 * time.Second}, "iperf3")
	if len(rep.Rows) != 6 {
		t.Errorf("%d rows, want 6", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		t.Logf("%s: %v %s", r.Key(), r.SamplesBps, r.Error)
		if len(r.SamplesBps) == 0 && r.Error == "" {
			t.Errorf("%s: no samples and no reason", r.Key())
		}
		// A limit of 800 kbit/s cannot deliver 2 Mbit/s, however loaded
		// the machine.
		limited := (r.Variant == "shaper" && r.Direction == measure.DirectionUp) || (r.Variant == "tc" && r.Direction == measure.DirectionDown)
		if limited && len(r.SamplesBps) > 0 && r.MaxBps > 2e6 {
			t.Errorf("%s: %s, want the limit's 0.8 Mbit/s", r.Key(), mbps(&r))
		}
	}
	if len(rep.Verdicts) != 5 {
		t.Fatalf("%d verdicts, want 5", len(rep.Verdicts))
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
	}
	if v := rep.Verdicts[0]; v.Outcome != Confirmed {
		t.Errorf("pushed shaper: %s: %s", v.Outcome, v.Reason)
	}
}
