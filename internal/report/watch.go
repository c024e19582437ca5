package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
	"github.com/ovpnperf/ovpnperf/internal/watch/watchdoc"
)

// A history of `ovpnperf watch` is JSON lines, one record a round, not one
// document: Parse recognises it by its first line's schema and reads all
// of it with watchdoc.Read into one Document.

// isHistory reports whether data's first line is a watch round record.
func isHistory(data []byte) bool {
	first, _, _ := bytes.Cut(bytes.TrimSpace(data), []byte("\n"))
	var head struct {
		Schema string `json:"schema"`
	}
	return json.Unmarshal(first, &head) == nil && head.Schema == watchdoc.Schema
}

func decodeHistory(b []byte, d *Document, _ Reader) error {
	rounds, cut, err := watchdoc.Read(b)
	if err != nil {
		return err
	}
	d.Watch, d.WatchCut = rounds, cut
	return nil
}

// limitOrder is which finding names the binding limit of a direction in a
// round when several are confirmed: the ones that name a cause inside or
// around OpenVPN first, path-bound (nothing in the way) last.
var limitOrder = []finding.Kind{finding.CPUBound, finding.SocketDrops, finding.TunDrops, finding.Fragmentation,
	finding.WindowBound, finding.Loss, finding.BelowPath, finding.PathBound}

// limitClass is each limit's band colour (the legend and the table say
// the name too).
var limitClass = map[finding.Kind]string{finding.CPUBound: "s4", finding.SocketDrops: "s1", finding.TunDrops: "s1",
	finding.Fragmentation: "s3", finding.WindowBound: "s5", finding.Loss: "s0", finding.BelowPath: "s0", finding.PathBound: "s2"}

// bindingLimit is the limit the round's confirmed findings name for dir
// ("" when none is confirmed).
func bindingLimit(r *watchdoc.Round, dir string) finding.Kind {
	if r.Run == nil {
		return ""
	}
	// The tunnel's own findings first: a finding about the path outside
	// the tunnel (loss of the outside flow) names the tunnel's limit only
	// when none of the tunnel's is confirmed; a path-bound tunnel on a
	// lossy path is held by the path, which path-bound already says.
	for _, tunnelOnly := range []bool{true, false} {
		for _, k := range limitOrder {
			for _, f := range r.Run.Findings {
				if f.Kind == k && f.Outcome == verdict.Confirmed && f.Subject.Direction == dir &&
					(!tunnelOnly || f.Subject.Variant != measure.VariantOutside) {
					return k
				}
			}
		}
	}
	return ""
}

// rowRate is the median of the row of the round's run with variant and
// direction, 0 when it has none valid.
func rowRate(r *watchdoc.Round, variant, dir string) float64 {
	if r.Run == nil {
		return 0
	}
	for _, row := range r.Run.Rows {
		if row.Variant == variant && row.Direction == dir && row.Valid && len(row.SamplesBps) > 0 {
			return row.MedianBps
		}
	}
	return 0
}

// watch writes the section of a watch history: the rates inside and
// outside over time, the binding limit of each direction as bands, the
// echoes' round trips, and a table of the rounds.
func (p *page) watch(d *Document) {
	rounds := d.Watch
	first, last := rounds[0].Started, rounds[len(rounds)-1].Started
	var rp *measure.RealPath
	var argv []string
	for i := range rounds {
		if r := rounds[i].Run; r != nil && r.Scenario.Real != nil {
			rp, argv = r.Scenario.Real, r.Scenario.Argv
		}
	}
	title := "watch"
	if rp != nil {
		title = fmt.Sprintf("watch %s (tunnel %s)", rp.Host, rp.Tunnel)
	}
	counts := map[string]int{}
	for _, r := range rounds {
		counts[r.Result]++
	}
	var parts []string
	for _, res := range watchdoc.Results() {
		if counts[res] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[res], res))
		}
	}
	p.section(title, " — "+strings.Join(parts, ", "))
	p.command(argv, "ovpnperf watch")
	cut := ""
	if d.WatchCut {
		cut = "the last line was cut short (watch stopped while writing it) and is left out"
	}
	p.facts("Rounds", fmt.Sprintf("%d: %s", len(rounds), strings.Join(parts, ", ")),
		"From", first.UTC().Format("2006-01-02 15:04:05 MST"), "To", last.UTC().Format("2006-01-02 15:04:05 MST"),
		"File", d.File+" (schema "+watchdoc.Schema+")", "Note", cut)
	// Time axis: hours since the first round, or minutes for a short
	// history.
	span := last.Sub(first).Hours()
	unit, scale := "hours", 1.0
	if span < 2 {
		unit, scale = "minutes", 60
	}
	x := func(r *watchdoc.Round) float64 { return r.Started.Sub(first).Hours() * scale }
	xAxis := fmt.Sprintf("%s since %s", unit, first.UTC().Format("2006-01-02 15:04 MST"))

	var rate []series
	for i, v := range []struct{ variant, path, dir string }{
		{measure.VariantTunnel, "inside", measure.DirectionUp}, {measure.VariantTunnel, "inside", measure.DirectionDown},
		{measure.VariantOutside, "outside", measure.DirectionUp}, {measure.VariantOutside, "outside", measure.DirectionDown}} {
		s := series{Name: v.path + " " + v.dir, Class: fmt.Sprintf("s%d", i)}
		for j := range rounds {
			if bps := rowRate(&rounds[j], v.variant, v.dir); bps > 0 {
				s.X, s.Y = append(s.X, x(&rounds[j])), append(s.Y, bps/1e6)
			}
		}
		if len(s.X) > 0 {
			rate = append(rate, s)
		}
	}
	var rtt []series
	for i, path := range []string{watchdoc.PathInside, watchdoc.PathOutside} {
		s := series{Name: path + " (median between rounds)", Class: fmt.Sprintf("s%d", i)}
		for j := range rounds {
			for _, e := range rounds[j].Echoes {
				if e.Path == path && e.Answered > 0 {
					s.X, s.Y = append(s.X, x(&rounds[j])), append(s.Y, e.MedianSeconds*1e3)
				}
			}
		}
		if len(s.X) > 0 {
			rtt = append(rtt, s)
		}
	}
	p.h(`<div class="charts">`, nil)
	if len(rate) > 0 {
		p.h(`<figure>{{.}}</figure>`, lineChart{Title: "TCP rate inside and outside the tunnel", Desc: "Median rate of each measured round, inside the tunnel and outside it, each direction.",
			XAxis: xAxis, YAxis: "Mbit/s", Series: rate, Width: 560, Height: 240, Legend: true}.render(p))
	}
	if len(rtt) > 0 {
		p.h(`<figure>{{.}}</figure>`, lineChart{Title: "Round trip between rounds", Desc: "Median of the single ICMP echoes sent between two rounds, inside and outside the tunnel.",
			XAxis: xAxis, YAxis: "ms", Series: rtt, Width: 560, Height: 240, Legend: true}.render(p))
	}
	p.h(`</div>`, nil)
	p.limitBands(rounds, x, xAxis)
	p.watchTable(rounds)
}

// limitBands draws, for each direction, a band per round from its start to
// the next round's, coloured by the binding limit its findings confirmed.
func (p *page) limitBands(rounds []watchdoc.Round, x func(*watchdoc.Round) float64, xAxis string) {
	const w, left, right, bandH, top = 640, 60, 10, 22, 30
	maxX := x(&rounds[len(rounds)-1])
	if len(rounds) > 1 {
		// The last round's band is as wide as the one before it.
		maxX += maxX - x(&rounds[len(rounds)-2])
	}
	if maxX <= 0 {
		maxX = 1
	}
	sx := func(v float64) float64 { return left + v/maxX*float64(w-left-right) }
	type band struct {
		X, W    float64
		Y       int
		Class   string
		Kind    string
		Title   string
		Seq     string
		Dir     string
		Present bool
	}
	type rowLabel struct {
		Y    int
		Text string
	}
	var bands []band
	var labels []rowLabel
	seen := map[finding.Kind]bool{}
	for di, dir := range []string{measure.DirectionUp, measure.DirectionDown} {
		y := top + di*(bandH+6)
		labels = append(labels, rowLabel{y + 15, dir})
		for i := range rounds {
			r := &rounds[i]
			if r.Run == nil {
				continue
			}
			end := maxX
			if i+1 < len(rounds) {
				end = x(&rounds[i+1])
			}
			k := bindingLimit(r, dir)
			cls, name := "", "not judged"
			if k != "" {
				cls, name = limitClass[k], string(k)
				seen[k] = true
			}
			bands = append(bands, band{X: sx(x(r)), W: math.Max(sx(end)-sx(x(r)), 1), Y: y, Class: cls, Kind: name, Dir: dir,
				Seq: fmt.Sprint(r.Seq), Title: fmt.Sprintf("round %d, %s: %s", r.Seq, dir, name)})
		}
	}
	type legendView struct {
		Class, Name  string
		X, Y, TX, TY int
	}
	var legend []legendView
	lx := left
	add := func(cls, name string) {
		legend = append(legend, legendView{Class: cls, Name: name, X: lx, Y: top + 2*(bandH+6), TX: lx + 16, TY: top + 2*(bandH+6) + 10})
		lx += 30 + 6*len(name)
	}
	for _, k := range limitOrder {
		if seen[k] {
			add(limitClass[k], string(k))
		}
	}
	add("", "not judged")
	h := top + 2*(bandH+6) + 48
	v := struct {
		ID, Title, Desc, XAxis string
		W, H, AX, AY           int
		Bands                  []band
		Labels                 []rowLabel
		Legend                 []legendView
	}{ID: p.ids.next(), Title: "Binding limit per round", Desc: "For each direction, a band per measured round coloured by the limit its confirmed findings name (grey: none confirmed).",
		XAxis: xAxis, W: w, H: h, AX: (left + w - right) / 2, AY: h - 6, Bands: bands, Labels: labels, Legend: legend}
	p.h(`<figure>{{.}}</figure>`, p.render(bandsT, v))
}

var bandsT = fragment(`<svg class="chart" role="img" aria-labelledby="{{.ID}}-t {{.ID}}-d" viewBox="0 0 {{.W}} {{.H}}" width="{{.W}}" height="{{.H}}" xmlns="http://www.w3.org/2000/svg">` +
	`<title id="{{.ID}}-t">{{.Title}}</title><desc id="{{.ID}}-d">{{.Desc}}</desc><text class="ctitle" x="0" y="16">{{.Title}}</text>` +
	`{{range .Legend}}<rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="12" height="12"{{if not .Class}} fill="currentColor" fill-opacity="0.15"{{end}}/><text class="legend" x="{{.TX}}" y="{{.TY}}">{{.Name}}</text>{{end}}` +
	`{{range .Labels}}<text class="tick" x="4" y="{{.Y}}">{{.Text}}</text>{{end}}` +
	`{{range .Bands}}<rect class="band {{.Class}}"{{if not .Class}} fill="currentColor" fill-opacity="0.15"{{end}} data-round="{{.Seq}}" data-direction="{{.Dir}}" data-limit="{{.Kind}}" x="{{f1 .X}}" y="{{.Y}}" width="{{f1 .W}}" height="22"><title>{{.Title}}</title></rect>{{end}}` +
	`<text class="axislabel" x="{{.AX}}" y="{{.AY}}" text-anchor="middle">{{.XAxis}}</text></svg>`)

// watchTable lists the rounds.
func (p *page) watchTable(rounds []watchdoc.Round) {
	type rowView struct {
		Seq, When, Result, Why, Load string
		InUp, InDown, OutUp, OutDown string
		LimitUp, LimitDown           string
	}
	mbps := func(v float64) string {
		if v <= 0 {
			return "—"
		}
		return measure.FormatMbps(v)
	}
	var rows []rowView
	for i := range rounds {
		r := &rounds[i]
		why := r.Reason
		for _, k := range sortedKeys(r.Refusals) {
			why = strings.TrimSpace(fmt.Sprintf("%s %s×%d", why, k, r.Refusals[k]))
		}
		load := ""
		if r.Load != nil {
			load = fmt.Sprintf("%.0f %%", 100*r.Load.ShareRatio)
		}
		rows = append(rows, rowView{Seq: fmt.Sprint(r.Seq), When: r.Started.UTC().Format("2006-01-02 15:04:05"), Result: r.Result, Why: why, Load: load,
			InUp: mbps(rowRate(r, measure.VariantTunnel, measure.DirectionUp)), InDown: mbps(rowRate(r, measure.VariantTunnel, measure.DirectionDown)),
			OutUp: mbps(rowRate(r, measure.VariantOutside, measure.DirectionUp)), OutDown: mbps(rowRate(r, measure.VariantOutside, measure.DirectionDown)),
			LimitUp: string(bindingLimit(r, measure.DirectionUp)), LimitDown: string(bindingLimit(r, measure.DirectionDown))})
	}
	p.h(`<table class="watch-rounds"><caption>Rounds (rates in Mbit/s, medians; load: the tunnel's traffic before the round against its last measured rate)</caption>`+
		`<thead><tr><th class="num">#</th><th>Started (UTC)</th><th>Result</th><th>Reason</th><th class="num">Load</th>`+
		`<th class="num">Inside up</th><th class="num">Inside down</th><th class="num">Outside up</th><th class="num">Outside down</th><th>Limit up</th><th>Limit down</th></tr></thead><tbody>`+
		`{{range .}}<tr data-result="{{.Result}}"><td class="num">{{.Seq}}</td><td>{{.When}}</td><td>{{.Result}}</td><td>{{.Why}}</td><td class="num">{{.Load}}</td>`+
		`<td class="num">{{.InUp}}</td><td class="num">{{.InDown}}</td><td class="num">{{.OutUp}}</td><td class="num">{{.OutDown}}</td><td>{{.LimitUp}}</td><td>{{.LimitDown}}</td></tr>{{end}}</tbody></table>`, rows)
}
