package main

import (
	"encoding/json"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/report"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Two recorded runs (labrun-default.json, edited: in both the WAN's
// default tunnel up keeps 97 % of the recorded routed rate sample by
// sample; in the second the routed rate is higher, so the tunnel has 60 %
// of it, with OpenVPN's server at 200 CPU-s per GB) where the limit of
// wan default up moved from the path to OpenVPN's CPU. The first carries
// no findings (judged on reading), the second the records ovpnperf wrote.
// The move is a typed record and makes the exit status 1 although no
// tunnel row got worse (the routed row got better); the reverse move is
// better (there the routed row is worse, so compare exits 1 for it).
func TestCompareFindingsMoved(t *testing.T) {
	pathBound, cpuBound := recorded("compare-path-bound.json"), recorded("compare-cpu-bound.json")
	run := func(old, new string, code int, worseRows int) report.Comparison {
		t.Helper()
		r := ovpnperf(t, "compare", old, new, "--json")
		var cmp report.Comparison
		if err := json.Unmarshal([]byte(r.stdout), &cmp); err != nil {
			t.Fatalf("%v\n%s%s", err, r.stdout, r.stderr)
		}
		if r.code != code || cmp.Worse != (code == 1) {
			t.Errorf("compare %s %s: exit %d, worse %v; want exit %d", old, new, r.code, cmp.Worse, code)
		}
		worse := 0
		for _, c := range cmp.Changes {
			if c.Verdict == report.Worse {
				worse++
			}
		}
		if worse != worseRows {
			t.Errorf("compare %s %s: %d rows worse, want %d", old, new, worse, worseRows)
		}
		return cmp
	}
	check := func(cmp report.Comparison, from, to finding.Kind, v string) {
		t.Helper()
		if len(cmp.FindingChanges) != 1 {
			t.Fatalf("finding changes %+v, want the one move", cmp.FindingChanges)
		}
		c := cmp.FindingChanges[0]
		if c.Change != report.LimitMoved || c.From != from || c.To != to || c.Kind != to || c.Verdict != v ||
			c.Subject.Network != "wan" || c.Subject.Variant != "default" || c.Subject.Direction != "up" ||
			c.Old == nil || c.New == nil || c.Old.Kind != from || c.New.Kind != to || c.NewOutcome != verdict.Confirmed {
			t.Errorf("change %+v, want wan default up %s → %s, %s", c, from, to, v)
		}
	}
	check(run(pathBound, cpuBound, 1, 0), finding.PathBound, finding.CPUBound, report.Worse)
	check(run(cpuBound, pathBound, 1, 1), finding.CPUBound, finding.PathBound, report.Better)
	// The same document twice: no finding changed, exit 0.
	if cmp := run(cpuBound, cpuBound, 0, 0); len(cmp.FindingChanges) != 0 {
		t.Errorf("a document against itself: %+v", cmp.FindingChanges)
	}
}
