package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// recipe judge recomputes a saved run's verdicts without root or a lab:
// the recorded run of testdata, as text and as JSON.
func TestRecipeJudge(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "internal", "recipe", "testdata", "recorded", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded results: %v", err)
	}
	for _, f := range files {
		r := ovpnperf(t, "recipe", "judge", f).mustSucceed(t)
		wants := []string{"verdict(s) differ from the saved ones", "== recipe ", "Mbit/s median"}
		list := strings.HasPrefix(filepath.Base(f), "all-")
		if list {
			wants = append(wants, "== summary of verdicts")
		}
		for _, want := range wants {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: output lacks %q:\n%s", f, want, r.stdout)
			}
		}
		r = ovpnperf(t, "recipe", "judge", "--json", f).mustSucceed(t)
		var reps []measure.Report
		if list {
			err = json.Unmarshal([]byte(r.stdout), &reps)
		} else {
			reps = make([]measure.Report, 1)
			err = json.Unmarshal([]byte(r.stdout), &reps[0])
		}
		if err != nil {
			t.Fatalf("%s: --json: %v", f, err)
		}
		for _, rep := range reps {
			if len(rep.Verdicts) == 0 {
				t.Errorf("%s: %s has no verdicts", f, rep.Scenario.Command)
			}
			for _, v := range rep.Verdicts {
				if !v.Outcome.Valid() || v.Reason == "" {
					t.Errorf("%s: %q: outcome %q reason %q", rep.Scenario.Command, v.Claim, v.Outcome, v.Reason)
				}
			}
		}
	}
}

func TestRecipeJudgeBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ovpnperf(t, "recipe", "judge", filepath.Join(dir, "missing.json")).mustBeUsageError(t, "no such file")
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	ovpnperf(t, "recipe", "judge", garbage).mustBeUsageError(t, "not an ovpnperf JSON document")
	labRun := filepath.Join(dir, "labrun.json")
	if err := os.WriteFile(labRun, []byte(`{"schema":"ovpnperf/run/v1","scenario":{"command":"lab run"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ovpnperf(t, "recipe", "judge", labRun).mustBeUsageError(t, "not a recipe's")
	// Without a file, the message says what is missing (not cobra's
	// "accepts 2 arg(s), received 1").
	ovpnperf(t, "recipe", "judge").mustBeUsageError(t, "give the FILE.json of a saved recipe result")
}
