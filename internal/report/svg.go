package report

import (
	"fmt"
	"html/template"
	"math"
	"regexp"
	"strings"
)

// Charts are small hand-written SVG: a horizontal bar chart (bars with
// min–max whiskers, stacked parts, published markers, reference lines over
// a range of rows) and a line chart. Colours come from CSS classes (s0 …
// s5, ref, pub) so that the page's stylesheet switches them for dark mode
// and print; text uses currentColor. Every chart carries <title> and
// <desc> and role="img", and the page puts a table with the same figures
// beside it, which is the text alternative.

// chartID numbers the charts of one page, for aria-labelledby.
type chartID struct{ n int }

func (c *chartID) next() string { c.n++; return fmt.Sprintf("c%d", c.n) }

// bar is one row of a horizontal bar chart.
type bar struct {
	Label string
	// Value, Min and Max are in the chart's unit; Min == Max == 0 draws
	// no whisker.
	Value, Min, Max float64
	// Parts, when set, draw a stacked bar instead of Value.
	Parts []part
	// Marker, when > 0, draws a diamond at that value (a published figure).
	Marker float64
	Class  string
	// Note is printed after the bar.
	Note string
	// Data are data-* attributes on the bar, for tests and tools. The
	// keys are the program's (dataAttrs checks them), the values may
	// come from documents.
	Data map[string]string
	// Gap puts extra space above the row (a new group).
	Gap bool
}

// part is one segment of a stacked bar.
type part struct {
	Value float64
	Class string
	Name  string
}

// refLine is a vertical reference line across rows From..To (inclusive).
type refLine struct {
	Value    float64
	From, To int
	Label    string
}

type hbarChart struct {
	Title, Desc string
	// Axis is the value axis label with its unit, e.g. "Throughput (Mbit/s)".
	Axis  string
	Bars  []bar
	Refs  []refLine
	Width int
	// Legend entries: class → name.
	Legend [][2]string
}

const (
	rowH       = 22
	groupGap   = 10
	labelW     = 190
	noteW      = 150
	axisH      = 44
	titleH     = 26
	legendRowH = 18
)

// dataAttr is one data-* attribute of a chart element.
type dataAttr struct {
	// Name follows "data-"; a program constant, checked by dataAttrs.
	Name  template.HTMLAttr
	Value string
}

var dataName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// dataAttrs orders m's attributes by name. A name is the program's, never
// a document's; one that is not a plain lower-case name is a bug, and
// panics rather than reach the page.
func dataAttrs(m map[string]string) []dataAttr {
	var out []dataAttr
	for _, k := range sortedKeys(m) {
		if !dataName.MatchString(k) {
			panic(fmt.Sprintf("report: data attribute name %q", k))
		}
		out = append(out, dataAttr{template.HTMLAttr(k), m[k]})
	}
	return out
}

// The charts' markup. Geometry is computed in Go and printed here with
// one decimal; every text (labels, notes, titles) is escaped by
// html/template for where it lands.
var (
	svgHead = `<svg class="chart" role="img" aria-labelledby="{{.ID}}-t {{.ID}}-d" viewBox="0 0 {{.W}} {{.H}}" width="{{.W}}" height="{{.H}}" xmlns="http://www.w3.org/2000/svg">` +
		`<title id="{{.ID}}-t">{{.Title}}</title><desc id="{{.ID}}-d">{{.Desc}}</desc><text class="ctitle" x="0" y="16">{{.Title}}</text>`

	hbarT = fragment(svgHead +
		`{{range .Legend}}<rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="12" height="12"/><text class="legend" x="{{.TX}}" y="{{.TY}}">{{.Name}}</text>{{end}}` +
		`{{range .Ticks}}<line class="grid" x1="{{f1 .X}}" y1="{{.Y1}}" x2="{{f1 .X}}" y2="{{.Y2}}"/><text class="tick" x="{{f1 .X}}" y="{{.TY}}" text-anchor="middle">{{.Label}}</text>{{end}}` +
		`<line class="axis" x1="{{.X0}}" y1="{{.Y}}" x2="{{.X1}}" y2="{{.Y}}"/><text class="axislabel" x="{{.AX}}" y="{{.AY}}" text-anchor="middle">{{.Axis}}</text>` +
		`{{range .Bars}}<g class="bar"{{range .Data}} data-{{.Name}}="{{.Value}}"{{end}}>` +
		`<text class="rowlabel" x="{{.LX}}" y="{{.TY}}" text-anchor="end">{{.Label}}</text>` +
		`{{range .Parts}}<rect class="{{.Class}}" x="{{f1 .X}}" y="{{.Y}}" width="{{f1 .W}}" height="{{.H}}"><title>{{.Title}}</title></rect>{{end}}` +
		`{{with .Rect}}<rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="{{f1 .W}}" height="{{.H}}"><title>{{.Title}}</title></rect>{{end}}` +
		`{{with .Whisker}}<path class="whisker" d="{{.}}"/>{{end}}` +
		`{{with .Marker}}<path class="pub" d="{{.D}}"><title>published {{.Value}}</title></path>{{end}}` +
		`<text class="note" x="{{.NX}}" y="{{.TY}}">{{.Note}}</text></g>{{end}}` +
		`{{range .Refs}}<g class="refline"><line class="ref" x1="{{f1 .X}}" y1="{{.Y1}}" x2="{{f1 .X}}" y2="{{.Y2}}"/><text class="reflabel" x="{{f1 .X}}" y="{{.TY}}" text-anchor="middle">{{.Label}}</text></g>{{end}}` +
		`</svg>`)

	lineT = fragment(svgHead +
		`{{range .Legend}}<line class="{{.Class}}" x1="{{.X}}" y1="{{.Y}}" x2="{{.X2}}" y2="{{.Y}}"/><text class="legend" x="{{.TX}}" y="{{.TY}}">{{.Name}}</text>{{end}}` +
		`{{range .YTicks}}<line class="grid" x1="{{.X1}}" y1="{{f1 .Y}}" x2="{{.X2}}" y2="{{f1 .Y}}"/><text class="tick" x="{{.TX}}" y="{{f1 .TY}}" text-anchor="end">{{.Label}}</text>{{end}}` +
		`{{range .XTicks}}<text class="tick" x="{{f1 .X}}" y="{{.Y}}" text-anchor="middle">{{.Label}}</text>{{end}}` +
		`<line class="axis" x1="{{.Left}}" y1="{{.Bottom}}" x2="{{.Right}}" y2="{{.Bottom}}"/><line class="axis" x1="{{.Left}}" y1="{{.Top}}" x2="{{.Left}}" y2="{{.Bottom}}"/>` +
		`<text class="axislabel" x="{{.XAX}}" y="{{.XAY}}" text-anchor="middle">{{.XAxis}}</text>` +
		`<text class="axislabel" transform="translate(12 {{.YAY}}) rotate(-90)" text-anchor="middle">{{.YAxis}}</text>` +
		`{{range .Series}}<g class="series" data-series="{{.Name}}">{{with .Path}}<path class="line {{.Class}}" d="{{.D}}"/>{{end}}` +
		`{{range .Points}}<circle class="{{.Class}}" cx="{{f1 .X}}" cy="{{f1 .Y}}" r="2.5"/>{{end}}</g>{{end}}` +
		`</svg>`)
)

// render draws the chart as an SVG element.
func (c hbarChart) render(p *page) template.HTML {
	w := c.Width
	if w == 0 {
		w = 640
	}
	top := titleH
	if len(c.Legend) > 0 {
		top += legendRowH
	}
	gap := groupGap
	if len(c.Refs) > 0 {
		// Room above each group for its reference line's label.
		top += 14
		gap += 14
	}
	y := top
	ys := make([]int, len(c.Bars))
	for i, b := range c.Bars {
		if b.Gap && i > 0 {
			y += gap
		}
		ys[i] = y
		y += rowH
	}
	h := y + axisH
	maxV := 0.0
	for _, b := range c.Bars {
		v := math.Max(b.Value, math.Max(b.Max, b.Marker))
		sum := 0.0
		for _, p := range b.Parts {
			sum += p.Value
		}
		maxV = math.Max(maxV, math.Max(v, sum))
	}
	for _, r := range c.Refs {
		maxV = math.Max(maxV, r.Value)
	}
	ticks, top2 := niceTicks(maxV)
	x0, x1 := labelW, w-noteW
	sx := func(v float64) float64 { return float64(x0) + (v/top2)*float64(x1-x0) }

	type legend struct {
		Class, Name  string
		X, Y, TX, TY int
	}
	type tick struct {
		X          float64
		Y1, Y2, TY int
		Label      string
	}
	type rect struct {
		Class, Title string
		X, Y, H      int
		W            float64
	}
	type partRect struct {
		Class, Title string
		X, W         float64
		Y, H         int
	}
	type marker struct{ D, Value string }
	type barView struct {
		Data        []dataAttr
		Label, Note string
		LX, NX, TY  int
		Parts       []partRect
		Rect        *rect
		Whisker     string
		Marker      *marker
	}
	type ref struct {
		X          float64
		Y1, Y2, TY int
		Label      string
	}
	v := struct {
		ID                string
		W, H              int
		Title, Desc, Axis string
		Legend            []legend
		Ticks             []tick
		X0, X1, Y, AX, AY int
		Bars              []barView
		Refs              []ref
	}{ID: p.ids.next(), W: w, H: h, Title: c.Title, Desc: c.Desc, Axis: c.Axis, X0: x0, X1: x1, Y: y, AX: (x0 + x1) / 2, AY: y + 34}
	lx := x0
	for _, l := range c.Legend {
		v.Legend = append(v.Legend, legend{Class: l[0], Name: l[1], X: lx, Y: titleH + 2, TX: lx + 16, TY: titleH + 12})
		lx += 24 + 7*len(l[1])
	}
	for _, t := range ticks {
		v.Ticks = append(v.Ticks, tick{X: sx(t), Y1: top, Y2: y, TY: y + 14, Label: fmtTick(t)})
	}
	for i, b := range c.Bars {
		by := ys[i]
		bv := barView{Data: dataAttrs(b.Data), Label: b.Label, Note: b.Note, LX: x0 - 6, NX: x1 + 6, TY: by + 15}
		if len(b.Parts) > 0 {
			at := 0.0
			for _, pt := range b.Parts {
				bv.Parts = append(bv.Parts, partRect{Class: pt.Class, Title: pt.Name, X: sx(at), Y: by + 3, W: math.Max(sx(at+pt.Value)-sx(at), 0.5), H: rowH - 6})
				at += pt.Value
			}
		} else {
			bv.Rect = &rect{Class: b.Class, Title: b.Label + ": " + b.Note, X: x0, Y: by + 3, W: math.Max(sx(b.Value)-float64(x0), 0.5), H: rowH - 6}
		}
		if b.Max > b.Min {
			mid := by + rowH/2
			bv.Whisker = fmt.Sprintf("M%.1f %dV%dM%.1f %dH%.1fM%.1f %dV%d", sx(b.Min), mid-5, mid+5, sx(b.Min), mid, sx(b.Max), sx(b.Max), mid-5, mid+5)
		}
		if b.Marker > 0 {
			mx, my := sx(b.Marker), float64(by+rowH/2)
			bv.Marker = &marker{D: fmt.Sprintf("M%.1f %.1fl6 6l-6 6l-6 -6z", mx, my-6), Value: fmtTick(b.Marker)}
		}
		v.Bars = append(v.Bars, bv)
	}
	for _, r := range c.Refs {
		if r.From < 0 || r.To >= len(ys) || r.From > r.To {
			continue
		}
		y1 := ys[r.From]
		v.Refs = append(v.Refs, ref{X: sx(r.Value), Y1: y1 - 2, Y2: ys[r.To] + rowH, TY: y1 - 4, Label: r.Label})
	}
	return p.render(hbarT, v)
}

// series is one line of a line chart.
type series struct {
	Name string
	X, Y []float64
	// Hollow marks points drawn hollow (e.g. iperf3's -O warm-up).
	Hollow []bool
	Class  string
	// Points draws the points alone, without a line between them.
	Points bool
}

type lineChart struct {
	Title, Desc   string
	XAxis, YAxis  string
	Series        []series
	Width, Height int
	// Legend shows the series names (off for a single series).
	Legend bool
}

func (c lineChart) render(p *page) template.HTML {
	w, h := c.Width, c.Height
	if w == 0 {
		w = 380
	}
	if h == 0 {
		h = 190
	}
	left, right, top, bottom := 56, 10, titleH+4, 40
	// Legend entries wrap onto as many rows as the width needs.
	type entry struct{ x, y int }
	var legend []entry
	if c.Legend {
		lx, ly := left, titleH
		for _, sr := range c.Series {
			wd := 30 + 6*len(sr.Name)
			if lx+wd > w && lx > left {
				lx, ly = left, ly+legendRowH
			}
			legend = append(legend, entry{lx, ly})
			lx += wd
		}
		top = ly + legendRowH + 4
	}
	maxX, maxY := 0.0, 0.0
	for _, s := range c.Series {
		for _, x := range s.X {
			maxX = math.Max(maxX, x)
		}
		for _, y := range s.Y {
			maxY = math.Max(maxY, y)
		}
	}
	xt, xtop := niceTicks(maxX)
	yt, ytop := niceTicks(maxY)
	sx := func(v float64) float64 { return float64(left) + v/xtop*float64(w-left-right) }
	sy := func(v float64) float64 { return float64(h-bottom) - v/ytop*float64(h-bottom-top) }

	type legendView struct {
		Class, Name      string
		X, X2, Y, TX, TY int
	}
	type yTick struct {
		X1, X2, TX int
		Y, TY      float64
		Label      string
	}
	type xTick struct {
		X     float64
		Y     int
		Label string
	}
	type point struct {
		Class string
		X, Y  float64
	}
	type path struct{ Class, D string }
	type seriesView struct {
		Name   string
		Path   *path
		Points []point
	}
	v := struct {
		ID                        string
		W, H                      int
		Title, Desc, XAxis, YAxis string
		Legend                    []legendView
		YTicks                    []yTick
		XTicks                    []xTick
		Left, Right, Top, Bottom  int
		XAX, XAY, YAY             int
		Series                    []seriesView
	}{ID: p.ids.next(), W: w, H: h, Title: c.Title, Desc: c.Desc, XAxis: c.XAxis, YAxis: c.YAxis,
		Left: left, Right: w - right, Top: top, Bottom: h - bottom, XAX: (left + w - right) / 2, XAY: h - 6, YAY: (top + h - bottom) / 2}
	for i, e := range legend {
		sr := c.Series[i]
		v.Legend = append(v.Legend, legendView{Class: sr.Class, Name: sr.Name, X: e.x, X2: e.x + 14, Y: e.y + 7, TX: e.x + 18, TY: e.y + 11})
	}
	for _, t := range yt {
		y := sy(t)
		v.YTicks = append(v.YTicks, yTick{X1: left, X2: w - right, TX: left - 4, Y: y, TY: y + 4, Label: fmtTick(t)})
	}
	for _, t := range xt {
		v.XTicks = append(v.XTicks, xTick{X: sx(t), Y: h - bottom + 14, Label: fmtTick(t)})
	}
	for _, sr := range c.Series {
		var d strings.Builder
		for i := range sr.X {
			if i < len(sr.Y) {
				fmt.Fprintf(&d, "%s%.1f %.1f", map[bool]string{true: "M", false: "L"}[i == 0], sx(sr.X[i]), sy(sr.Y[i]))
			}
		}
		sv := seriesView{Name: sr.Name}
		if !sr.Points {
			sv.Path = &path{Class: sr.Class, D: d.String()}
		}
		for i := range sr.X {
			if i >= len(sr.Y) {
				break
			}
			cls := "pt " + sr.Class
			if i < len(sr.Hollow) && sr.Hollow[i] {
				cls += " hollow"
			}
			sv.Points = append(sv.Points, point{Class: cls, X: sx(sr.X[i]), Y: sy(sr.Y[i])})
		}
		v.Series = append(v.Series, sv)
	}
	return p.render(lineT, v)
}

// niceTicks returns tick values from 0 to a round top at or above max.
func niceTicks(max float64) ([]float64, float64) {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return []float64{0, 1}, 1
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	top := 0.0
	for v := 0.0; ; v += step {
		ticks = append(ticks, v)
		top = v
		if v >= max*0.99 { // a point 1 % beyond the top still fits the frame
			break
		}
	}
	return ticks, top
}

// fmtTick prints a tick value without needless digits.
func fmtTick(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0")
	case a >= 1:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
	}
}
