package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// run writes the section of a `lab run` or recipe document (schema
// ovpnperf/run/*): per network, the throughput bars with whiskers and the
// routed baseline, CPU-s/GB beside them, the figures table, the findings,
// and each sample's interval series; for recipes the verdicts and the
// published-vs-measured table first.
func (p *page) run(d *Document) {
	rep := d.Run
	sc := rep.Scenario
	extra := ""
	if n := len(rep.Verdicts); n > 0 {
		counts := map[string]int{}
		for _, v := range rep.Verdicts {
			counts[string(v.Outcome)]++
		}
		var parts []string
		for _, k := range sortedKeys(counts) {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
		extra = " — " + strings.Join(parts, ", ")
	}
	p.section(sc.Command, extra)
	p.command(sc.Argv, "ovpnperf "+sc.Command)
	settings := fmt.Sprintf("%d sample(s) per row", sc.Repeat)
	if sc.DurationSeconds > 0 {
		settings += fmt.Sprintf(" of %g s each", sc.DurationSeconds)
	}
	settings += fmt.Sprintf(", %d stream(s)", sc.Parallel)
	if pl, ok := sc.Extra["payload"].(string); ok {
		settings += ", payload " + pl
	}
	when := ""
	if !rep.Started.IsZero() {
		when = rep.Started.UTC().Format("2006-01-02 15:04:05 MST")
		if !rep.Finished.IsZero() {
			when += fmt.Sprintf(" (took %s)", rep.Finished.Sub(rep.Started).Round(1e9))
		}
	}
	p.facts("Measured", when, "Settings", settings, "File", d.File+" (schema "+d.Schema+")")
	p.hostFacts(rep.Host)
	if len(rep.Verdicts) > 0 {
		p.verdicts(rep)
	}
	if hasPublished(rep) {
		p.published(rep)
	}
	if chart := recipeCharts[sc.Command]; chart != nil {
		chart(p, rep)
	}
	findings := rep.Judge()
	if rep.JudgedOnReading && len(findings) > 0 {
		p.h(`<p class="muted" data-findings="judged-on-reading">Findings judged on reading: this document was written before run documents carried their findings, so they are judged from its rows by this version of ovpnperf.</p>`, nil)
	}
	for _, n := range networksOf(rep) {
		p.network(rep, n, findings)
	}
}

// networksOf lists the scenario's networks, plus any a row names that the
// scenario does not (a hand-made document).
func networksOf(rep *measure.Report) []measure.Network {
	nets := append([]measure.Network(nil), rep.Scenario.Networks...)
	known := map[string]bool{}
	for _, n := range nets {
		known[n.Name] = true
	}
	for _, r := range rep.Rows {
		if !known[r.Network] {
			known[r.Network] = true
			nets = append(nets, measure.Network{Name: r.Network})
		}
	}
	return nets
}

func hasPublished(rep *measure.Report) bool {
	for _, r := range rep.Rows {
		if r.PublishedBps > 0 {
			return true
		}
	}
	return false
}

var arrows = map[string]string{measure.DirectionUp: "↑ up", measure.DirectionDown: "↓ down"}

func dirLabel(d string) string {
	if a, ok := arrows[d]; ok {
		return a
	}
	return d
}

// network writes one network's charts, table, findings and series.
func (p *page) network(rep *measure.Report, n measure.Network, findings []finding.Finding) {
	var rows []measure.Row
	for _, r := range rep.Rows {
		if r.Network == n.Name {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	title := "Network " + n.Name
	if n.Description != "" {
		title += ": " + n.Description
	}
	p.h(`<h3>{{.}}</h3>`, title)

	// Bars: tunnel rows grouped by direction; the routed row of each
	// direction is the reference line across its group.
	colour := map[string]string{}
	var bars, cpuBars []bar
	var refs []refLine
	var offScale []string
	for gi, dir := range directionsOf(rows) {
		first := len(bars)
		var routed *measure.Row
		for i := range rows {
			r := &rows[i]
			if r.Direction != dir {
				continue
			}
			if r.Path == measure.PathRouted {
				if routed == nil && len(r.SamplesBps) > 0 && r.MedianBps > 0 {
					routed = r
				}
				continue
			}
			if len(r.SamplesBps) == 0 {
				// Nothing measured (a recipe's probe row, or every
				// sample failed): the table says why, a bar would say 0.
				continue
			}
			if _, ok := colour[r.Variant]; !ok {
				colour[r.Variant] = fmt.Sprintf("s%d", len(colour)%6)
			}
			label := r.Variant + " " + dirLabel(dir)
			note := measure.FormatMbpsSpread(verdict.Of(r.SamplesBps)) + " Mbit/s"
			if !r.Valid {
				note += " (invalid)"
			}
			b := bar{Label: label, Value: r.MedianBps / 1e6, Min: r.MinBps / 1e6, Max: r.MaxBps / 1e6, Class: colour[r.Variant], Note: note,
				Gap: gi > 0 && len(bars) == first, Data: map[string]string{"variant": r.Variant, "direction": dir, "median-mbps": fmt.Sprintf("%.3f", r.MedianBps/1e6)}}
			if r.PublishedBps > 0 {
				b.Marker = r.PublishedBps / 1e6
			}
			bars = append(bars, b)
			srv, cli := r.CPUSecondsPerGB["server"], r.CPUSecondsPerGB["client"]
			cpuBars = append(cpuBars, bar{Label: label, Gap: b.Gap,
				Parts: []part{{srv, "s0", fmt.Sprintf("server %.2f CPU-s/GB", srv)}, {cli, "s1", fmt.Sprintf("client %.2f CPU-s/GB", cli)}},
				Note:  fmt.Sprintf("%.2f + %.2f", srv, cli), Data: map[string]string{"variant": r.Variant, "direction": dir}})
		}
		if routed == nil {
			continue
		}
		if len(bars) == first {
			// Only the baseline was measured in this direction: show it as a bar.
			bars = append(bars, bar{Label: "routed " + dirLabel(dir), Value: routed.MedianBps / 1e6, Min: routed.MinBps / 1e6, Max: routed.MaxBps / 1e6,
				Class: "s5", Note: measure.FormatMbpsSpread(verdict.Of(routed.SamplesBps)) + " Mbit/s", Gap: gi > 0,
				Data: map[string]string{"variant": routed.Variant, "direction": dir}})
			continue
		}
		maxTunnel := 0.0
		for _, b := range bars[first:] {
			maxTunnel = math.Max(maxTunnel, math.Max(b.Value, b.Max))
		}
		rv := routed.MedianBps / 1e6
		if rv <= 3*maxTunnel {
			refs = append(refs, refLine{Value: rv, From: first, To: len(bars) - 1, Label: "routed " + measure.FormatMbps(routed.MedianBps)})
		} else {
			offScale = append(offScale, fmt.Sprintf("the routed path %s made %s Mbit/s, ×%.0f the fastest tunnel, off this scale",
				dirLabel(dir), measure.FormatMbpsSpread(verdict.Of(routed.SamplesBps)), rv/maxTunnel))
		}
	}
	p.h(`<div class="charts">`, nil)
	if len(bars) > 0 {
		desc := fmt.Sprintf("Median throughput of each tunnel variant and direction on network %s, with a whisker from the slowest to the fastest sample; a dashed line marks the routed path without a tunnel.", n.Name)
		if len(offScale) > 0 {
			desc += " " + strings.Join(offScale, "; ") + "."
		}
		p.h(`<figure>{{.}}</figure>`, hbarChart{Title: "Throughput on " + n.Name + " (median, min–max)", Desc: desc, Axis: "Throughput (Mbit/s)", Bars: bars, Refs: refs, Width: 660}.render(p))
	}
	if len(cpuBars) > 0 && anyCPU(cpuBars) {
		p.h(`<figure>{{.}}</figure>`, hbarChart{Title: "OpenVPN CPU per GB moved", Desc: "CPU-seconds the OpenVPN server and client processes spent per 10^9 bytes moved, stacked.",
			Axis: "CPU-seconds per GB (CPU-s/GB)", Bars: cpuBars, Width: 440, Legend: [][2]string{{"s0", "server"}, {"s1", "client"}}}.render(p))
	}
	if pb := ppsBars(rows); len(pb) > 0 {
		p.h(`<figure>{{.}}</figure>`, hbarChart{Title: "Packets per second on " + n.Name, Desc: "Median packets per second of each row that counted packets, with min–max; a diamond marks a published figure.",
			Axis: "Packets per second (pps)", Bars: pb, Width: 640}.render(p))
	}
	p.h(`</div>`, nil)
	if len(offScale) > 0 {
		p.h(`<p class="muted">No reference line: {{.}}.</p>`, strings.Join(offScale, "; "))
	}
	p.rowTable(rows)
	var mine []pageFinding
	for _, f := range findings {
		if f.Subject.Network == n.Name {
			mine = append(mine, newPageFinding(f))
		}
	}
	if len(mine) > 0 {
		p.h(`<h4>Findings</h4><ul class="findings">{{range .}}<li data-kind="{{.Kind}}" data-outcome="{{.Outcome}}" data-key="{{.Key}}" data-figures="{{.Figures}}">{{.Text}}</li>{{end}}</ul>`, mine)
	}
	p.intervalSeries(n.Name, rows)
}

func anyCPU(bars []bar) bool {
	for _, b := range bars {
		for _, pt := range b.Parts {
			if pt.Value > 0 {
				return true
			}
		}
	}
	return false
}

func directionsOf(rows []measure.Row) []string {
	var dirs []string
	seen := map[string]bool{}
	for _, want := range []string{measure.DirectionUp, measure.DirectionDown} {
		for _, r := range rows {
			if r.Direction == want && !seen[want] {
				seen[want] = true
				dirs = append(dirs, want)
			}
		}
	}
	for _, r := range rows {
		if !seen[r.Direction] {
			seen[r.Direction] = true
			dirs = append(dirs, r.Direction)
		}
	}
	return dirs
}

// rowTable is the text alternative of the charts: every figure they draw.
func (p *page) rowTable(rows []measure.Row) {
	type rowView struct {
		Variant, Direction, Proto, Median, Min, Max, Ratio, CPU, Cipher string
		Samples                                                         int
		Invalid                                                         bool
		Error                                                           string
		// Refusal and RefusalFigures are the row's typed refusal (its
		// kind and figures as JSON), data for scripts and tests.
		Refusal, RefusalFigures string
		Extras                  []string
	}
	var views []rowView
	for _, r := range rows {
		ratio := "-"
		if r.RatioToRouted > 0 {
			ratio = fmt.Sprintf("%.0f%%", 100*r.RatioToRouted)
		}
		var extras []string
		for _, k := range sortedKeys(r.Extra) {
			// Scalars only: lists and logs would drown the table.
			switch v := r.Extra[k].(type) {
			case float64:
				extras = append(extras, fmt.Sprintf("%s=%.4g", k, v))
			case string, bool:
				if t := fmt.Sprint(v); len(t) <= 80 {
					extras = append(extras, k+"="+t)
				}
			}
		}
		v := rowView{Variant: r.Variant, Direction: dirLabel(r.Direction), Proto: r.Proto,
			Median: measure.FormatMbps(r.MedianBps), Min: measure.FormatMbps(r.MinBps), Max: measure.FormatMbps(r.MaxBps),
			Samples: len(r.SamplesBps), Ratio: ratio, CPU: measure.FormatCPUPerGB(r.CPUSecondsPerGB), Cipher: r.Cipher,
			Invalid: !r.Valid, Error: r.Error, Extras: extras}
		if rf := r.Refusal; rf != nil {
			figs, err := json.Marshal(rf.Figures)
			if err != nil {
				figs = []byte("{}") // finite figures, checked when read, always marshal
			}
			v.Refusal, v.RefusalFigures = rf.Kind, string(figs)
		}
		views = append(views, v)
	}
	p.h(`<table class="rows"><caption class="muted">Figures of the charts above</caption><thead><tr><th>Variant</th><th>Direction</th><th>Proto</th><th class="num">Median (Mbit/s)</th><th class="num">Min–max (Mbit/s)</th><th class="num">Samples</th><th class="num">Of routed</th><th>CPU-s/GB</th><th>Cipher</th><th>Notes</th></tr></thead><tbody>`+
		`{{range .}}<tr><td>{{.Variant}}</td><td>{{.Direction}}</td><td>{{.Proto}}</td><td class="num">{{.Median}}</td><td class="num">{{.Min}}–{{.Max}}</td><td class="num">{{.Samples}}</td><td class="num">{{.Ratio}}</td><td>{{.CPU}}</td><td>{{.Cipher}}</td>`+
		`<td>{{if .Invalid}}<span class="invalid"{{with .Refusal}} data-refusal="{{.}}"{{end}}{{with .RefusalFigures}} data-figures="{{.}}"{{end}}>invalid: {{.Error}}</span>{{end}}{{with .Extras}}<details><summary>{{len .}} more figures</summary>{{range $i, $e := .}}{{if $i}}<br>{{end}}{{$e}}{{end}}</details>{{end}}</td></tr>{{end}}`+
		`</tbody></table>`, views)
}

// intervalSeries draws, per row, each sample's iperf3 intervals.
func (p *page) intervalSeries(network string, rows []measure.Row) {
	any := false
	for _, r := range rows {
		any = any || len(r.Samples) > 0
	}
	if !any {
		p.h(`<p class="muted">No per-interval figures: this document predates schema {{.}}.</p>`, measure.Schema)
		return
	}
	p.h(`<h4>Each sample, second by second</h4><p class="muted">iperf3's interval reports of every sample (one line per sample; hollow points are the warm-up left out of the figures). A stall or a late emulator shows as a dip.</p><div class="series-grid">`, nil)
	for _, r := range rows {
		if len(r.Samples) == 0 {
			continue
		}
		var ss []series
		var desc []string
		for i, s := range r.Samples {
			sr := series{Name: fmt.Sprintf("sample %d", i+1), Class: fmt.Sprintf("s%d", i%6)}
			var vals []string
			// iperf3 restarts its clock after the -O warm-up: place the
			// measured intervals after it, so time runs on.
			warmup := 0.0
			for _, iv := range s.Intervals {
				if iv.Omitted {
					warmup = math.Max(warmup, iv.EndSeconds)
				}
			}
			for _, iv := range s.Intervals {
				x := iv.EndSeconds
				if !iv.Omitted {
					x += warmup
				}
				sr.X = append(sr.X, x)
				sr.Y = append(sr.Y, iv.Bps/1e6)
				sr.Hollow = append(sr.Hollow, iv.Omitted)
				vals = append(vals, measure.FormatMbps(iv.Bps))
			}
			ss = append(ss, sr)
			desc = append(desc, fmt.Sprintf("sample %d: %s Mbit/s", i+1, strings.Join(vals, ", ")))
		}
		title := fmt.Sprintf("%s %s %s", network, r.Variant, dirLabel(r.Direction))
		p.h(`<div class="series" data-variant="{{.Variant}}" data-direction="{{.Direction}}">{{.Chart}}</div>`, struct {
			Variant, Direction string
			Chart              template.HTML
		}{r.Variant, r.Direction, lineChart{Title: title, Desc: "Throughput per interval, " + strings.Join(desc, "; ") + ".", XAxis: "Time, warm-up included (s)", YAxis: "Mbit/s",
			Series: ss, Width: 270, Height: 180, Legend: len(ss) > 1}.render(p)})
	}
	p.h(`</div>`, nil)
}

// verdicts writes a recipe's claims and outcomes.
func (p *page) verdicts(rep *measure.Report) {
	type verdictView struct{ Claim, Class, Outcome, Reason string }
	var vs []verdictView
	for _, v := range rep.Verdicts {
		vs = append(vs, verdictView{v.Claim, strings.ReplaceAll(string(v.Outcome), " ", "-"), string(v.Outcome), v.Reason})
	}
	p.h(`<h3>Verdicts</h3><table class="verdicts"><thead><tr><th>Claim</th><th>Outcome</th><th>Because</th></tr></thead><tbody>`+
		`{{range .}}<tr><td>{{.Claim}}</td><td class="verdict v-{{.Class}}">{{.Outcome}}</td><td>{{.Reason}}</td></tr>{{end}}</tbody></table>`, vs)
}

// published writes the rows that have a published figure beside today's.
func (p *page) published(rep *measure.Report) {
	type pubView struct {
		Network, Variant, Direction, Published, Measured string
		Ratio                                            float64
	}
	var rows []pubView
	for _, r := range rep.Rows {
		if r.PublishedBps <= 0 {
			continue
		}
		rows = append(rows, pubView{r.Network, r.Variant, dirLabel(r.Direction), measure.FormatMbps(r.PublishedBps),
			measure.FormatMbpsSpread(verdict.Of(r.SamplesBps)), r.MedianBps / r.PublishedBps})
	}
	p.h(`<h3>Published and measured</h3><table class="published"><thead><tr><th>Network</th><th>Variant</th><th>Direction</th><th class="num">Published (Mbit/s)</th><th class="num">Measured median (min–max, Mbit/s)</th><th class="num">Measured / published</th></tr></thead><tbody>`+
		`{{range .}}<tr><td>{{.Network}}</td><td>{{.Variant}}</td><td>{{.Direction}}</td><td class="num">{{.Published}}</td><td class="num">{{.Measured}}</td><td class="num">×{{f2 .Ratio}}</td></tr>{{end}}`+
		`</tbody></table><p class="muted">In the throughput charts below, a diamond marks the published figure of a row.</p>`, rows)
}

// ppsBars draws the rows whose recipe counted packets (Extra pps_median,
// pps_min, pps_max; outer_ip_bytes names the packet size).
func ppsBars(rows []measure.Row) []bar {
	var bars []bar
	num := func(r measure.Row, k string) float64 { v, _ := r.Extra[k].(float64); return v }
	for _, r := range rows {
		med := num(r, "pps_median")
		if med <= 0 {
			continue
		}
		label := r.Variant + " " + dirLabel(r.Direction)
		if size := num(r, "outer_ip_bytes"); size > 0 {
			label = fmt.Sprintf("%s %s, %.0f B", r.Variant, dirLabel(r.Direction), size)
		}
		bars = append(bars, bar{Label: label, Value: med, Min: num(r, "pps_min"), Max: num(r, "pps_max"), Marker: num(r, "published_pps"),
			Class: "s2", Note: fmt.Sprintf("%.0f pps", med), Data: map[string]string{"variant": r.Variant, "direction": r.Direction, "unit": "pps"}})
	}
	return bars
}

// pageFinding is a finding as the page shows it: its sentence, and its
// kind, outcome, key and figures (JSON) as data-* attributes of its item,
// for tests and tools that read the page.
type pageFinding struct {
	Kind, Outcome, Key, Figures, Text string
}

func newPageFinding(f finding.Finding) pageFinding {
	figs, err := json.Marshal(f.Figures)
	if err != nil {
		figs = []byte("{}") // finite figures, checked when read, always marshal
	}
	return pageFinding{Kind: string(f.Kind), Outcome: string(f.Outcome), Key: f.Key(), Figures: string(figs), Text: measure.FindingText(f)}
}
