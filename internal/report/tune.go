package report

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/tune"
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
		p.w(`<p>Server lines: <code>%s</code>; client lines: <code>%s</code></p>`, esc(strings.Join(r.Best.Server, "; ")), esc(strings.Join(r.Best.Client, "; ")))
	}

	p.w(`<h3>Search path</h3>`)
	p.w(`<div class="charts">`)
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
		p.w(`<figure>%s</figure>`, hbarChart{Title: "Search path, " + dir,
			Desc: fmt.Sprintf("Each round of the search (%d) and the candidates it measured %s: median throughput with min–max whiskers; the default, advise's variant and the best are marked.", len(r.Steps), dir),
			Axis: "Throughput " + dir + " (Mbit/s)", Bars: bars, Refs: refs, Width: 550,
			Legend: [][2]string{{tuneDefault, "default"}, {tuneAdvise, "advise"}, {tuneBest, "best"}, {tuneOther, "other"}}}.render(&p.ids))
	}
	p.w(`</div>`)

	// The same figures, with each round's decision.
	p.w(`<table><caption class="muted">Rounds: throughput in Mbit/s, median (min–max) and number of samples</caption><thead><tr><th class="num">Round</th><th>Axis</th><th>Candidate</th><th>Variant</th><th>Proto</th>`)
	for _, dir := range r.Directions {
		p.w(`<th class="num">%s (Mbit/s)</th>`, esc(dir))
	}
	p.w(`<th>Decision</th></tr></thead><tbody>`)
	for _, st := range r.Steps {
		for ci, c := range st.Candidates {
			_, role := tuneClass(r, c.Name)
			name := c.Name
			if role != "" {
				name += " (" + role + ")"
			}
			p.w(`<tr><td class="num">%d</td><td>%s</td><td>%s</td><td><code>%s</code></td><td>%s</td>`, st.Round, esc(st.Axis), esc(name), esc(c.Variant), esc(c.Proto))
			for _, dir := range r.Directions {
				p.w(`<td class="num">%s</td>`, esc(spreadMbit(c.Spread[dir])))
			}
			dec := ""
			if ci == 0 {
				dec = st.Decision
				if !st.Complete {
					dec += " (round incomplete)"
				}
				if len(st.Errors) > 0 {
					dec += fmt.Sprintf(" (%d samples refused, listed below)", len(st.Errors))
				}
			}
			p.w(`<td>%s</td></tr>`, esc(dec))
		}
	}
	p.w(`</tbody></table>`)
	var refused []string
	for _, st := range r.Steps {
		for _, e := range st.Errors {
			refused = append(refused, fmt.Sprintf(`<li>round %d: %s</li>`, st.Round, esc(e)))
		}
	}
	if len(refused) > 0 {
		p.w(`<details><summary>Samples refused (%d)</summary><ul>%s</ul></details>`, len(refused), strings.Join(refused, ""))
	}

	p.w(`<h3>Best against the default and advise</h3><ul class="findings">`)
	for _, dir := range r.Directions {
		if c, ok := r.VsDefault[dir]; ok {
			p.w(`<li>%s: best %s vs default %s Mbit/s (×%.2f, %s)</li>`, esc(dir), esc(spreadMbit(c.Best)), esc(spreadMbit(c.Other)), c.Ratio, beyond(c.BeyondSpread))
		}
	}
	if !r.Advise.Available {
		p.w(`<li>advise's gap: not tested here (%s)</li>`, esc(r.Advise.Note))
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
		p.w(`<li class="gap">%s: advise's gap ×%.2f: best %s vs advise %s Mbit/s (%s); axes where the best differs from advise: %s`,
			esc(dir), g.Ratio, esc(spreadMbit(g.Best)), esc(spreadMbit(g.Other)), beyond(g.BeyondSpread), esc(closed))
		if g.Finding != "" {
			p.w(`. %s`, esc(g.Finding))
		}
		p.w(`</li>`)
	}
	for _, f := range r.Findings {
		p.w(`<li>%s</li>`, esc(f))
	}
	for _, n := range r.Notes {
		p.w(`<li class="muted">note: %s</li>`, esc(n))
	}
	p.w(`</ul>`)
}

// tuneClass says what a candidate is to the search: the best (which may
// also be the default or advise's variant, and then says so), advise's
// variant, the default. The colour follows the first of these.
func tuneClass(r *tune.Result, name string) (class, role string) {
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

func spreadMbit(s measure.Spread) string {
	if s.N == 0 {
		return "no sample"
	}
	return fmt.Sprintf("%s (%s–%s) n=%d", fmtMbit(s.Median), fmtMbit(s.Min), fmtMbit(s.Max), s.N)
}
