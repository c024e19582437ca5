package report

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Charts are small hand-written SVG: a horizontal bar chart (bars with
// min–max whiskers, stacked parts, published markers, reference lines over
// a range of rows) and a line chart. Colours come from CSS classes (s0 …
// s5, ref, pub) so that the page's stylesheet switches them for dark mode
// and print; text uses currentColor. Every chart carries <title> and
// <desc> and role="img", and the page puts a table with the same figures
// beside it, which is the text alternative.

// esc escapes text for HTML and SVG alike.
func esc(s string) string { return html.EscapeString(s) }

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
	// Data are data-* attributes on the bar, for tests and tools.
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

// render writes the chart as an SVG element.
func (c hbarChart) render(ids *chartID) string {
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

	id := ids.next()
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" role="img" aria-labelledby="%s-t %s-d" viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`, id, id, w, h, w, h)
	fmt.Fprintf(&s, `<title id="%s-t">%s</title><desc id="%s-d">%s</desc>`, id, esc(c.Title), id, esc(c.Desc))
	fmt.Fprintf(&s, `<text class="ctitle" x="0" y="16">%s</text>`, esc(c.Title))
	if len(c.Legend) > 0 {
		lx := x0
		for _, l := range c.Legend {
			fmt.Fprintf(&s, `<rect class="%s" x="%d" y="%d" width="12" height="12"/><text class="legend" x="%d" y="%d">%s</text>`, l[0], lx, titleH+2, lx+16, titleH+12, esc(l[1]))
			lx += 24 + 7*len(l[1])
		}
	}
	// Grid and axis.
	for _, t := range ticks {
		x := sx(t)
		fmt.Fprintf(&s, `<line class="grid" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`, x, top, x, y)
		fmt.Fprintf(&s, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, y+14, fmtTick(t))
	}
	fmt.Fprintf(&s, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, x0, y, x1, y)
	fmt.Fprintf(&s, `<text class="axislabel" x="%d" y="%d" text-anchor="middle">%s</text>`, (x0+x1)/2, y+34, esc(c.Axis))
	for i, b := range c.Bars {
		by := ys[i]
		var data strings.Builder
		for _, k := range sortedKeys(b.Data) {
			fmt.Fprintf(&data, ` data-%s="%s"`, k, esc(b.Data[k]))
		}
		fmt.Fprintf(&s, `<g class="bar"%s>`, data.String())
		fmt.Fprintf(&s, `<text class="rowlabel" x="%d" y="%d" text-anchor="end">%s</text>`, x0-6, by+15, esc(b.Label))
		if len(b.Parts) > 0 {
			at := 0.0
			for _, p := range b.Parts {
				fmt.Fprintf(&s, `<rect class="%s" x="%.1f" y="%d" width="%.1f" height="%d"><title>%s</title></rect>`,
					p.Class, sx(at), by+3, math.Max(sx(at+p.Value)-sx(at), 0.5), rowH-6, esc(p.Name))
				at += p.Value
			}
		} else {
			fmt.Fprintf(&s, `<rect class="%s" x="%d" y="%d" width="%.1f" height="%d"><title>%s</title></rect>`,
				b.Class, x0, by+3, math.Max(sx(b.Value)-float64(x0), 0.5), rowH-6, esc(b.Label+": "+b.Note))
		}
		if b.Max > b.Min {
			mid := by + rowH/2
			fmt.Fprintf(&s, `<path class="whisker" d="M%.1f %dV%dM%.1f %dH%.1fM%.1f %dV%d"/>`,
				sx(b.Min), mid-5, mid+5, sx(b.Min), mid, sx(b.Max), sx(b.Max), mid-5, mid+5)
		}
		if b.Marker > 0 {
			mx, my := sx(b.Marker), float64(by+rowH/2)
			fmt.Fprintf(&s, `<path class="pub" d="M%.1f %.1fl6 6l-6 6l-6 -6z"><title>published %s</title></path>`, mx, my-6, fmtTick(b.Marker))
		}
		fmt.Fprintf(&s, `<text class="note" x="%d" y="%d">%s</text>`, x1+6, by+15, esc(b.Note))
		s.WriteString(`</g>`)
	}
	for _, r := range c.Refs {
		if r.From < 0 || r.To >= len(ys) || r.From > r.To {
			continue
		}
		x := sx(r.Value)
		y1, y2 := ys[r.From], ys[r.To]+rowH
		fmt.Fprintf(&s, `<g class="refline"><line class="ref" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/><text class="reflabel" x="%.1f" y="%d" text-anchor="middle">%s</text></g>`,
			x, y1-2, x, y2, x, y1-4, esc(r.Label))
	}
	s.WriteString(`</svg>`)
	return s.String()
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

func (c lineChart) render(ids *chartID) string {
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
	id := ids.next()
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" role="img" aria-labelledby="%s-t %s-d" viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`, id, id, w, h, w, h)
	fmt.Fprintf(&s, `<title id="%s-t">%s</title><desc id="%s-d">%s</desc>`, id, esc(c.Title), id, esc(c.Desc))
	fmt.Fprintf(&s, `<text class="ctitle" x="0" y="16">%s</text>`, esc(c.Title))
	for i, e := range legend {
		sr := c.Series[i]
		fmt.Fprintf(&s, `<line class="%s" x1="%d" y1="%d" x2="%d" y2="%d"/><text class="legend" x="%d" y="%d">%s</text>`,
			sr.Class, e.x, e.y+7, e.x+14, e.y+7, e.x+18, e.y+11, esc(sr.Name))
	}
	for _, t := range yt {
		y := sy(t)
		fmt.Fprintf(&s, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/><text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`,
			left, y, w-right, y, left-4, y+4, fmtTick(t))
	}
	for _, t := range xt {
		x := sx(t)
		fmt.Fprintf(&s, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, h-bottom+14, fmtTick(t))
	}
	fmt.Fprintf(&s, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/><line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`,
		left, h-bottom, w-right, h-bottom, left, top, left, h-bottom)
	fmt.Fprintf(&s, `<text class="axislabel" x="%d" y="%d" text-anchor="middle">%s</text>`, (left+w-right)/2, h-6, esc(c.XAxis))
	fmt.Fprintf(&s, `<text class="axislabel" transform="translate(12 %d) rotate(-90)" text-anchor="middle">%s</text>`, (top+h-bottom)/2, esc(c.YAxis))
	for _, sr := range c.Series {
		var d strings.Builder
		for i := range sr.X {
			if i < len(sr.Y) {
				fmt.Fprintf(&d, "%s%.1f %.1f", map[bool]string{true: "M", false: "L"}[i == 0], sx(sr.X[i]), sy(sr.Y[i]))
			}
		}
		fmt.Fprintf(&s, `<g class="series" data-series="%s">`, esc(sr.Name))
		if !sr.Points {
			fmt.Fprintf(&s, `<path class="line %s" d="%s"/>`, sr.Class, d.String())
		}
		for i := range sr.X {
			if i >= len(sr.Y) {
				break
			}
			cls := "pt " + sr.Class
			if i < len(sr.Hollow) && sr.Hollow[i] {
				cls += " hollow"
			}
			fmt.Fprintf(&s, `<circle class="%s" cx="%.1f" cy="%.1f" r="2.5"/>`, cls, sx(sr.X[i]), sy(sr.Y[i]))
		}
		s.WriteString(`</g>`)
	}
	s.WriteString(`</svg>`)
	return s.String()
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
