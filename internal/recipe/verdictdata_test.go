package recipe

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ovpnperf/ovpnperf/docs/schemas"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// A verdict's typed basis, figures and conditions are part of the run
// document: the recorded shaper run judged again carries the tun queue
// the recipe cut as a condition with its figure, and verdicts of every
// basis and condition follow docs/schemas/run.v2.json.
func TestVerdictDataInSchema(t *testing.T) {
	t.Parallel()
	reps := readRecorded(t, filepath.Join("testdata", "recorded", "shaper-2026-11-23T1035.json"))
	if len(reps) != 1 {
		t.Fatalf("%d documents", len(reps))
	}
	rep := reps[0]
	vs, err := Judge(rep)
	if err != nil {
		t.Fatal(err)
	}
	cut := 0
	for _, v := range vs {
		if slices.Contains(v.Conditions, measure.VerdictConditionTunQueueCut) && v.Figures["txqueuelen_packets"] == shaperTxQueueLen {
			cut++
		}
	}
	if cut != 1 {
		t.Errorf("%d verdicts record the cut tun queue, want the upload's: %+v", cut, vs)
	}
	// One verdict of each basis and condition the recipes write.
	pps := &measure.Report{}
	for _, v := range []string{ppsNone, ppsCBC, ppsGCM} {
		pps.Rows = append(pps.Rows, ppsTestRow(v, 18, []float64{5000}, nil), ppsTestRow(v, 1400, []float64{4900}, nil))
	}
	m := mtuResult{ConfiguredMTU: 1492, Outer: []int{0, 0, 1492}}
	more := append(ppsVerdicts(pps, 1500), mtuVerdicts(&m)...)
	capped := newVerdict("c", Changed, "capped")
	capped.Basis = measure.VerdictBasisKernelCapped
	more = append(more, capped)
	for _, k := range []string{verdict.ShortSamples, verdict.ShortBaseline, verdict.ShortRatios, verdict.ShortZeroBaseline} {
		more = append(more, withShortfall(newVerdict("c", Noise, "short"), &verdict.Shortfall{Kind: k, N: 1, Needed: 3, Zero: 2, Of: 3}))
	}
	rep.Verdicts = append(vs, more...)
	kinds := map[string]bool{}
	for _, v := range rep.Verdicts {
		kinds[v.Basis] = true
		for _, c := range v.Conditions {
			kinds[c] = true
		}
	}
	for _, k := range []string{measure.VerdictBasisTooFew, measure.VerdictBasisKernelCapped, measure.VerdictBasisZeroBaseline, measure.VerdictConditionTunQueueCut, measure.VerdictConditionProbeFragmented} {
		if !kinds[k] {
			t.Errorf("no verdict of kind %s to check", k)
		}
	}
	// The recorded run is of version 1; its verdicts are checked as
	// those of a version 2 document, without its rows.
	rep.Schema, rep.Rows = measure.Schema, nil
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schemas.Check(b); err != nil {
		t.Errorf("run document with typed verdicts against its schema: %v", err)
	}
}
