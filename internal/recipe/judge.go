package recipe

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// Judgement is separated from measurement: a recipe's Judge reads only
// what its report saves (rows, their Extra, the scenario's networks and
// Extra), so `ovpnperf recipe judge FILE.json` can recompute the verdicts
// of a saved run, and a rule fixed later can be replayed on old data.
// To keep that honest, a run judges a copy of its report that has been
// through JSON, exactly what a replay reads.

// Judge recomputes the verdicts of a saved recipe report (its
// Scenario.Command names the recipe).
func Judge(rep *measure.Report) ([]measure.Verdict, error) {
	name := strings.TrimPrefix(rep.Scenario.Command, "recipe ")
	r, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("command %q is not a recipe", rep.Scenario.Command)
	}
	if r.Judge == nil {
		return nil, fmt.Errorf("recipe %s has no replayable judgement", name)
	}
	saved, err := roundTrip(rep)
	if err != nil {
		return nil, err
	}
	return r.Judge(saved), nil
}

// Columns returns the extra table columns of the recipe that made rep.
func Columns(rep *measure.Report) []measure.Column {
	r, ok := Lookup(strings.TrimPrefix(rep.Scenario.Command, "recipe "))
	if !ok {
		return nil
	}
	return r.Columns
}

// judgeSaved sets rep's verdicts from judge applied to rep as saved. A
// report that does not survive JSON (which would also break --out) is
// judged as it is, and says so in Scenario.Extra["judge_error"]: the
// measurements are not thrown away for it.
func judgeSaved(rep *measure.Report, judge func(*measure.Report) []measure.Verdict) error {
	saved, err := roundTrip(rep)
	if err != nil {
		if rep.Scenario.Extra == nil {
			rep.Scenario.Extra = map[string]any{}
		}
		rep.Scenario.Extra["judge_error"] = err.Error()
		rep.Verdicts = judge(rep)
		return nil
	}
	rep.Verdicts = judge(saved)
	return nil
}

// roundTrip returns a copy of rep as a reader of its JSON sees it.
func roundTrip(rep *measure.Report) (*measure.Report, error) {
	b, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("saving the report to judge it: %w", err)
	}
	var out measure.Report
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("reading the saved report: %w", err)
	}
	out.Verdicts = nil
	return &out, nil
}

// extraAs reads v (a typed value, or what JSON decoding made of it) as a T.
func extraAs[T any](v any) (T, bool) {
	var out T
	if v == nil {
		return out, false
	}
	if t, ok := v.(T); ok {
		return t, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return out, false
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, false
	}
	return out, true
}

// networkPath returns the saved path of a scenario's network.
func networkPath(rep *measure.Report, name string) (labpath.Path, bool) {
	for _, n := range rep.Scenario.Networks {
		if n.Name == name {
			return extraAs[labpath.Path](n.Path)
		}
	}
	return labpath.Path{}, false
}

// firstPath returns the path of the scenario's first network.
func firstPath(rep *measure.Report) (labpath.Path, bool) {
	if len(rep.Scenario.Networks) == 0 {
		return labpath.Path{}, false
	}
	return extraAs[labpath.Path](rep.Scenario.Networks[0].Path)
}
