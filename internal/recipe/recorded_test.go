package recipe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/golden"
	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// TestRecordedVerdicts judges results of real recipe runs on this
// project's machine (testdata/recorded/*.json, written by `recipe NAME
// --out` or `recipe all --out`) with today's rules and compares the
// verdicts with the golden table beside each file. Real measurements reach
// the verdict code on every `go test`, without root or a lab; a verdict a
// rule change moved shows in the golden diff, and the table marks every
// verdict that differs from the one the run itself printed ("recorded:").
func TestRecordedVerdicts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "recorded", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded results in testdata/recorded")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			reps := readRecorded(t, f)
			var b bytes.Buffer
			for _, rep := range reps {
				vs, err := Judge(rep)
				if err != nil {
					t.Fatalf("%s: %v", rep.Scenario.Command, err)
				}
				if len(vs) == 0 {
					t.Errorf("%s: no verdicts", rep.Scenario.Command)
				}
				was := map[string]string{}
				for _, v := range rep.Verdicts {
					was[v.Claim] = string(v.Outcome)
				}
				for _, v := range vs {
					if !v.Outcome.Valid() || v.Reason == "" {
						t.Errorf("%s: %q: outcome %q, reason %q", rep.Scenario.Command, v.Claim, v.Outcome, v.Reason)
					}
					note := ""
					if w, ok := was[v.Claim]; !ok {
						note = " (recorded: absent)"
					} else if w != string(v.Outcome) {
						note = " (recorded: " + w + ")"
					}
					fmt.Fprintf(&b, "%-12s %-15s %s%s\n", strings.TrimPrefix(rep.Scenario.Command, "recipe "), v.Outcome, v.Claim, note)
				}
			}
			golden.Check(t, strings.TrimSuffix(f, ".json")+".verdicts", b.Bytes())
		})
	}
}

// readRecorded reads one saved report or the list `recipe all` writes.
func readRecorded(t *testing.T, path string) []*measure.Report {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var reps []*measure.Report
		if err := json.Unmarshal(data, &reps); err != nil {
			t.Fatal(err)
		}
		return reps
	}
	var rep measure.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return []*measure.Report{&rep}
}

// A report is judged through JSON: what the run prints is what a replay of
// its saved file prints, Extra values typed in memory included.
func TestJudgeSavedRoundTrip(t *testing.T) {
	t.Parallel()
	up := measure.DirectionUp
	rep := bufReport(
		withWindow(mkRow("200ms", "buf64k-tcp", up, 2.4, 2.5, 2.45), 65536),
		withWindow(mkRow("50ms", "buf64k-tcp", up, 9.5, 9.8, 10), 65536),
	)
	rep.Rows[0].Extra["effective_bytes"] = map[string]map[string]int{"server": {"rcvbuf": 131072}}
	if err := judgeSaved(rep, bufferVerdicts); err != nil {
		t.Fatal(err)
	}
	replayed, err := Judge(rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(replayed) != len(rep.Verdicts) {
		t.Fatalf("%d verdicts replayed, %d in the run", len(replayed), len(rep.Verdicts))
	}
	for i := range replayed {
		if !reflect.DeepEqual(replayed[i], rep.Verdicts[i]) {
			t.Errorf("verdict %d: run %+v, replay %+v", i, rep.Verdicts[i], replayed[i])
		}
	}
	if _, err := Judge(&measure.Report{Scenario: measure.Scenario{Command: "lab run"}}); err == nil {
		t.Error("judged a lab run")
	}
}
