package main

import (
	"io"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// FuzzRecipeJudge feeds any bytes to `recipe judge` after the file is
// read: the document reader, the judgement of each recipe and both
// outputs. No input may panic (a list holding null once did); a refusal
// is a one-line usage error. Seeds: testdata/fuzz/FuzzRecipeJudge.
func FuzzRecipeJudge(f *testing.F) {
	for _, s := range []string{`[null]`, `[]`, `null`, `{}`, `[{}]`, `{"schema":"ovpnperf/run/v2","scenario":{"command":"recipe mtu"},"rows":[null]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reps, list, err := parseReports("fuzz.json", data)
		if err != nil {
			if !usage.Is(err) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("not a one-line usage error: %q", err)
			}
			return
		}
		for _, asJSON := range []bool{false, true} {
			err := judgeReports(io.Discard, "fuzz.json", reps, list, asJSON)
			if err != nil && (!usage.Is(err) || strings.Contains(err.Error(), "\n")) {
				t.Fatalf("judging: not a one-line usage error: %q", err)
			}
		}
	})
}
