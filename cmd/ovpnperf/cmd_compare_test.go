package main

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	t.Parallel()
	pathBound, cpuBound := recorded("compare-path-bound.json"), recorded("compare-cpu-bound.json")
	run := func(old, new string, code int, worseRows int) report.Comparison {
		t.Helper()
		r := ovpnperf(t, "compare", old, new, "--json")
		checkSchema(t, "compare --json", r.stdout, false)
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

// A measure document whose OpenVPN socket dropped datagrams against the
// same document without the drops (findingsDocs' constructed figures):
// the socket-drops finding that appeared is worse, exit 1, with no row
// worse; the reverse is better, exit 0.
func TestCompareSocketDrops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, drops uint64) string {
		t.Helper()
		rep := findingsDocs()[1]
		for i := range rep.Rows {
			for j := range rep.Rows[i].OpenVPN {
				if rep.Rows[i].OpenVPN[j].SocketDrops > 0 {
					rep.Rows[i].OpenVPN[j].SocketDrops = drops
				}
			}
		}
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := rep.WriteJSON(f); err != nil {
			t.Fatal(err)
		}
		return p
	}
	without, with := write("without.json", 0), write("with.json", 10)
	for _, tc := range []struct {
		old, new string
		code     int
		change   string
		verdict  string
	}{{without, with, 1, report.FindingAppeared, report.Worse}, {with, without, 0, report.FindingGone, report.Better}} {
		r := ovpnperf(t, "compare", tc.old, tc.new, "--json")
		checkSchema(t, "compare --json", r.stdout, false)
		var cmp report.Comparison
		if err := json.Unmarshal([]byte(r.stdout), &cmp); err != nil {
			t.Fatalf("%v\n%s%s", err, r.stdout, r.stderr)
		}
		for _, c := range cmp.Changes {
			if c.Verdict == report.Worse {
				t.Errorf("row %s %s %s worse", c.Network, c.Variant, c.Direction)
			}
		}
		if r.code != tc.code || len(cmp.FindingChanges) != 1 {
			t.Fatalf("exit %d, finding changes %+v; want exit %d and one change", r.code, cmp.FindingChanges, tc.code)
		}
		c := cmp.FindingChanges[0]
		if c.Kind != finding.SocketDrops || c.Change != tc.change || c.Verdict != tc.verdict || c.Subject.Network != "real" || c.Subject.Direction != "down" {
			t.Errorf("change %+v, want socket-drops %s, %s", c, tc.change, tc.verdict)
		}
	}
}
