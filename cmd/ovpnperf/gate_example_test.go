package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The "Gate a change in CI" lines of docs/schemas.md, as TestEveryExample
// finds them.
const (
	gateWorse      = `ovpnperf compare main.json branch.json --json | jq -e '[.finding_changes[] | select(.verdict == "worse")] | length == 0'`
	gateKind       = `ovpnperf compare main.json branch.json --json | jq -e 'any(.finding_changes[]; .kind == "socket-drops" and .change == "appeared") | not'`
	gateLimitMoved = `ovpnperf compare main.json branch.json --json | jq -r '.finding_changes[] | select(.change == "limit-moved") | "\(.subject.network) \(.subject.variant) \(.subject.direction): \(.from) -> \(.to) (\(.verdict))"'`
)

// TestGateExamples runs the CI gate examples of docs/schemas.md with the
// built binary and jq on the two recorded runs, without a lab (so the
// -short loop runs them too): the gate on worse findings fails, the one on
// socket drops passes, and the limit that moved is the one the page says.
func TestGateExamples(t *testing.T) {
	var found []string
	for _, e := range shExamples(t, "../../docs/schemas.md") {
		if strings.Contains(e.text, "jq ") {
			found = append(found, e.text)
		}
	}
	want := []string{gateWorse, gateKind, gateLimitMoved}
	if strings.Join(found, "\n") != strings.Join(want, "\n") {
		t.Fatalf("docs/schemas.md's jq examples:\n%s\nwant:\n%s", strings.Join(found, "\n"), strings.Join(want, "\n"))
	}
	env := &exampleEnv{t: t, names: map[string]string{}}
	dir := t.TempDir()
	for _, f := range []string{"main.json", "branch.json"} {
		env.makeFile(dir, f)
	}
	for _, tc := range []struct {
		line string
		exit int
		out  string
	}{
		{gateWorse, 1, "false"},
		{gateKind, 0, "true"},
		{gateLimitMoved, 0, "wan default up: path-bound -> cpu-bound (worse)"},
	} {
		if r := exampleRules[tc.line]; r.exit != tc.exit {
			t.Errorf("exampleRules gives %q exit %d, want %d", tc.line, r.exit, tc.exit)
		}
		code, out, _ := runExample(dir, env.rewrite(tc.line))
		if code != tc.exit || strings.TrimSpace(out) != tc.out {
			t.Errorf("%s\n  in %s: exit %d, printed %q; want exit %d, %q", tc.line, filepath.Base(dir), code, out, tc.exit, tc.out)
		}
	}
}
