package report

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Candidate classes in the tune charts: the colour says what a candidate
// is to the search; the row label and note say it too.
const (
	tuneOther   = "s0"
	tuneAdvise  = "s1"
	tuneBest    = "s2"
	tuneDefault = "s5"
)

// tune writes a `tune --json` result: the search path round by round (each
// candidate's median with its min–max per direction, the default, advise's
// variant and the best marked), the verdict and advise's gap as text.
func (p *page) tune(d *Document) {
	r := d.Tune
	p.section("tune "+r.PathDescription, " — "+r.Verdict.Message)
	// The tune document does not record its command line.
	p.command(nil, "ovpnperf tune --json")
	adv := "not available: " + r.Advise.Note
	if r.Advise.Available {
		adv = r.Advise.Variant + " (" + r.Advise.Note + ")"
	}
	best := r.Best.Name
	if r.Best.Body != "" {
		best += ": " + r.Best.Body
	}
	best += " (" + r.Best.Proto + ")"
	p.facts("Path", r.PathDescription, "Directions", strings.Join(r.Directions, ", "),
		"Search", fmt.Sprintf("%d rounds in %.0f s (budget %.0f s), %s", len(r.Steps), r.ElapsedSeconds, r.BudgetSeconds, r.Stopped),
		"Advise's variant", adv, "Best", best, "Verdict", r.Verdict.Message, "File", d.File+" (schema "+d.Schema+")")
	if r.Verdict.Found && len(r.Best.Server) > 0 {
		p.h(`<p>Server lines: <code>{{index . 0}}</code>; client lines: <code>{{index . 1}}</code></p>`, []string{strings.Join(r.Best.Server, "; "), strings.Join(r.Best.Client, "; ")})
	}

	p.h(`<h3>Search path</h3><div class="charts">`, nil)
	for _, dir := range r.Directions {
		var bars []bar
		for si, st := range r.Steps {
			for ci, c := range st.Candidates {
				sp := c.Spread[dir]
				cls, role := tuneClass(r, c.Name)
				label := fmt.Sprintf("%d %s: %s", st.Round, st.Axis, c.Name)
				if c.Proto != "" && c.Proto != "udp" {
					label += " " + c.Proto
				}
				note := "no sample"
				if sp.N > 0 {
					note = fmt.Sprintf("%s Mbit/s n=%d", fmtMbit(sp.Median), sp.N)
				}
				if role != "" {
					note += " · " + role
				}
				bars = append(bars, bar{Label: label, Value: sp.Median / 1e6, Min: sp.Min / 1e6, Max: sp.Max / 1e6, Class: cls,
					Gap: si > 0 && ci == 0, Note: note,
					Data: map[string]string{"variant": c.Name, "direction": dir, "round": fmt.Sprint(st.Round), "role": role}})
			}
		}
		if len(bars) == 0 {
			continue
		}
		var refs []refLine
		if def, ok := r.VsDefault[dir]; ok && def.Other.N > 0 {
			refs = append(refs, refLine{Value: def.Other.Median / 1e6, From: 0, To: len(bars) - 1,
				Label: fmt.Sprintf("default, all rounds: %s Mbit/s", fmtMbit(def.Other.Median))})
		}
		p.h(`<figure>{{.}}</figure>`, hbarChart{Title: "Search path, " + dir,
			Desc: fmt.Sprintf("Each round of the search (%d) and the candidates it measured %s: median throughput with min–max whiskers; the default, advise's variant and the best are marked.", len(r.Steps), dir),
			Axis: "Throughput " + dir + " (Mbit/s)", Bars: bars, Refs: refs, Width: 550,
			Legend: [][2]string{{tuneDefault, "default"}, {tuneAdvise, "advise"}, {tuneBest, "best"}, {tuneOther, "other"}}}.render(p))
	}
	p.h(`</div>`, nil)

	// The same figures, with each round's decision.
	type roundRow struct {
		Round                                int
		Axis, Name, Variant, Proto, Decision string
		Spreads                              []string
	}
	var rows []roundRow
	for _, st := range r.Steps {
		for ci, c := range st.Candidates {
			_, role := tuneClass(r, c.Name)
			name := c.Name
			if role != "" {
				name += " (" + role + ")"
			}
			row := roundRow{Round: st.Round, Axis: st.Axis, Name: name, Variant: c.Variant, Proto: c.Proto}
			for _, dir := range r.Directions {
				row.Spreads = append(row.Spreads, spreadMbit(c.Spread[dir]))
			}
			if ci == 0 {
				row.Decision = st.Decision
				if !st.Complete {
					row.Decision += " (round incomplete)"
				}
				if len(st.Errors) > 0 {
					row.Decision += fmt.Sprintf(" (%d samples refused, listed below)", len(st.Errors))
				}
			}
			rows = append(rows, row)
		}
	}
	type refusal struct {
		Round int
		Error string
	}
	var refused []refusal
	for _, st := range r.Steps {
		for _, e := range st.Errors {
			refused = append(refused, refusal{st.Round, e})
		}
	}
	p.h(`<table><caption class="muted">Rounds: throughput in Mbit/s, median (min–max) and number of samples</caption><thead><tr><th class="num">Round</th><th>Axis</th><th>Candidate</th><th>Variant</th><th>Proto</th>`+
		`{{range .Directions}}<th class="num">{{.}} (Mbit/s)</th>{{end}}<th>Decision</th></tr></thead><tbody>`+
		`{{range .Rows}}<tr><td class="num">{{.Round}}</td><td>{{.Axis}}</td><td>{{.Name}}</td><td><code>{{.Variant}}</code></td><td>{{.Proto}}</td>`+
		`{{range .Spreads}}<td class="num">{{.}}</td>{{end}}<td>{{.Decision}}</td></tr>{{end}}</tbody></table>`+
		`{{with .Refused}}<details><summary>Samples refused ({{len .}})</summary><ul>{{range .}}<li>round {{.Round}}: {{.Error}}</li>{{end}}</ul></details>{{end}}`,
		struct {
			Directions []string
			Rows       []roundRow
			Refused    []refusal
		}{r.Directions, rows, refused})

	type vsDefault struct {
		Dir, Best, Default, Beyond string
		Ratio                      float64
	}
	type vsAdvise struct {
		Dir, Best, Advise, Beyond, Closed string
		Ratio                             float64
	}
	var defs []vsDefault
	var gaps []vsAdvise
	for _, dir := range r.Directions {
		if c, ok := r.VsDefault[dir]; ok {
			defs = append(defs, vsDefault{dir, spreadMbit(c.Best), spreadMbit(c.Other), beyond(c.BeyondSpread), c.Ratio})
		}
	}
	for _, dir := range r.Directions {
		g, ok := r.VsAdvise[dir]
		if !ok {
			continue
		}
		closed := "none (the best is advise's variant)"
		if len(g.ClosedBy) > 0 {
			closed = strings.Join(g.ClosedBy, ", ")
		}
		gaps = append(gaps, vsAdvise{dir, spreadMbit(g.Best), spreadMbit(g.Other), beyond(g.BeyondSpread), closed, g.Ratio})
	}
	noAdvise := ""
	if !r.Advise.Available {
		noAdvise = r.Advise.Note
	}
	p.h(`<h3>Best against the default and advise</h3><ul class="findings">`+
		`{{range .Defaults}}<li>{{.Dir}}: best {{.Best}} vs default {{.Default}} Mbit/s (×{{f2 .Ratio}}, {{.Beyond}})</li>{{end}}`+
		`{{if not .Available}}<li>advise's gap: not tested here ({{.Note}})</li>{{end}}`+
		`{{range .Gaps}}<li class="gap">{{.Dir}}: advise's gap ×{{f2 .Ratio}}: best {{.Best}} vs advise {{.Advise}} Mbit/s ({{.Beyond}}); axes where the best differs from advise: {{.Closed}}</li>{{end}}`+
		`{{range .Findings}}<li data-kind="{{.Kind}}" data-outcome="{{.Outcome}}" data-key="{{.Key}}" data-figures="{{.Figures}}">{{.Text}}</li>{{end}}{{range .Notes}}<li class="muted">note: {{.}}</li>{{end}}</ul>`,
		struct {
			Defaults  []vsDefault
			Available bool
			Note      string
			Gaps      []vsAdvise
			Findings  []pageFinding
			Notes     []string
		}{defs, r.Advise.Available, noAdvise, gaps, recordFindings(r.Findings), r.Notes})
}

// tuneClass says what a candidate is to the search: the best (which may
// also be the default or advise's variant, and then says so), advise's
// variant, the default. The colour follows the first of these.
func tuneClass(r *tunedoc.Result, name string) (class, role string) {
	var roles []string
	class = tuneOther
	if name == r.Best.Name {
		roles, class = append(roles, "best"), tuneBest
	}
	if name == "advise" {
		roles = append(roles, "advise")
		if class == tuneOther {
			class = tuneAdvise
		}
	}
	if name == "default" {
		roles = append(roles, "default")
		if class == tuneOther {
			class = tuneDefault
		}
	}
	return class, strings.Join(roles, ", ")
}

// beyond says what tune's round-by-round rule found (schema 2: faster
// beyond the spread in every round that judged the direction).
func beyond(b bool) string {
	if b {
		return "faster beyond the spread in every judged round"
	}
	return "not faster beyond the spread in every round"
}

// fmtMbit prints bit/s as Mbit/s with three significant figures.
func fmtMbit(bps float64) string {
	m := bps / 1e6
	switch {
	case m >= 100:
		return fmt.Sprintf("%.0f", m)
	case m >= 10:
		return fmt.Sprintf("%.1f", m)
	}
	return fmt.Sprintf("%.2f", m)
}

func spreadMbit(s verdict.Spread) string {
	if s.N == 0 {
		return "no sample"
	}
	return fmt.Sprintf("%s (%s–%s) n=%d", fmtMbit(s.Median), fmtMbit(s.Min), fmtMbit(s.Max), s.N)
}
