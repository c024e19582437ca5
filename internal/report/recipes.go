package report

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// recipeCharts are the charts particular to one recipe, beyond the bars
// every run document gets, keyed by the scenario's command.
var recipeCharts = map[string]func(p *page, rep *measure.Report){
	"recipe buffers":  buffersChart,
	"recipe fragment": fragmentChart,
}

// rttOf reads a network's round-trip time (up + down delay) from the lab
// path the scenario recorded; 0 when it has none.
func rttOf(n measure.Network) float64 {
	m, _ := n.Path.(map[string]any)
	delay := func(side string) float64 {
		l, _ := m[side].(map[string]any)
		d, _ := l["delay_ns"].(float64)
		return d
	}
	return (delay("up") + delay("down")) / 1e6
}

var bufName = regexp.MustCompile(`^buf(\d+)k-(udp|tcp)$`)

// buffersChart draws throughput against RTT for each socket-buffer setting
// and transport, with the line buffer / RTT that the rule of thumb puts
// as the ceiling of one window per round trip.
func buffersChart(p *page, rep *measure.Report) {
	rtts := map[string]float64{}
	for _, n := range rep.Scenario.Networks {
		if r := rttOf(n); r > 0 {
			rtts[n.Name] = r
		}
	}
	if len(rtts) < 2 {
		return
	}
	byVariant := map[string]*series{}
	kibs := map[int]bool{}
	var names []string
	maxY := 0.0
	for _, r := range rep.Rows {
		rtt, ok := rtts[r.Network]
		if !ok || r.Path != measure.PathTunnel || len(r.SamplesBps) == 0 {
			continue
		}
		if m := bufName.FindStringSubmatch(r.Variant); m != nil {
			kib, _ := strconv.Atoi(m[1])
			kibs[kib] = true
		}
		key := r.Variant + " " + dirLabel(r.Direction)
		s := byVariant[key]
		if s == nil {
			s = &series{Name: key}
			byVariant[key] = s
			names = append(names, key)
		}
		s.X = append(s.X, rtt)
		s.Y = append(s.Y, r.MedianBps/1e6)
		maxY = math.Max(maxY, r.MedianBps/1e6)
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	var ss []series
	for i, n := range names {
		s := byVariant[n]
		s.Class = fmt.Sprintf("s%d", i%5)
		ss = append(ss, *s)
	}
	// The buffer / RTT ceilings of the fixed buffer sizes, clipped to the
	// chart so that they do not flatten the measured lines.
	var xs []float64
	for _, r := range rtts {
		xs = append(xs, r)
	}
	sort.Float64s(xs)
	var sizes []int
	for k := range kibs {
		sizes = append(sizes, k)
	}
	sort.Ints(sizes)
	for _, kib := range sizes {
		line := series{Name: fmt.Sprintf("%d KiB / RTT", kib), Class: fmt.Sprintf("s%d ceil", 4+len(ss)%2)}
		for _, x := range xs {
			line.X = append(line.X, x)
			line.Y = append(line.Y, math.Min(float64(kib)*1024*8/(x/1e3)/1e6, 1.5*maxY))
		}
		ss = append(ss, line)
	}
	p.h(`<figure>{{.}}</figure>`, lineChart{Title: "Throughput against RTT per socket buffer", Desc: "Median tunnel throughput at each RTT measured, per buffer setting, transport and direction, with the buffer/RTT ceiling of the fixed buffer sizes (clipped at 1.5 times the fastest row).",
		XAxis: "Round-trip time (ms)", YAxis: "Throughput (Mbit/s)", Series: ss, Width: 760, Height: 320, Legend: true}.render(p))
}

// fragmentChart draws the fragment recipe's ping round-trip times: per
// variant and ping size, the median over all replies with the range of the
// rounds' medians (the spread its verdicts use).
func fragmentChart(p *page, rep *measure.Report) {
	type pingRow struct {
		Variant string
		Size    int
		Median  float64
		Lo, Hi  float64
	}
	var bars []bar
	var rows []pingRow
	colour := map[string]string{}
	for _, r := range rep.Rows {
		m, _ := r.Extra["ping_rtt_ms"].(map[string]any)
		if _, done := colour[r.Variant]; len(m) == 0 || done {
			// The pings are per tunnel: rows of both directions carry them.
			continue
		}
		if _, ok := colour[r.Variant]; !ok {
			colour[r.Variant] = fmt.Sprintf("s%d", len(colour)%6)
		}
		var sizes []int
		for k := range m {
			if n, err := strconv.Atoi(k); err == nil {
				sizes = append(sizes, n)
			}
		}
		sort.Ints(sizes)
		first := true
		for _, size := range sizes {
			st, _ := m[strconv.Itoa(size)].(map[string]any)
			med, _ := st["median_ms"].(float64)
			lo, hi := math.Inf(1), math.Inf(-1)
			if rm, ok := st["round_medians_ms"].([]any); ok {
				for _, v := range rm {
					if f, ok := v.(float64); ok {
						lo, hi = math.Min(lo, f), math.Max(hi, f)
					}
				}
			}
			if math.IsInf(lo, 0) {
				lo, hi = 0, 0
			}
			bars = append(bars, bar{Label: fmt.Sprintf("%s, %d B", r.Variant, size), Value: med, Min: lo, Max: hi, Class: colour[r.Variant],
				Gap: first && len(bars) > 0, Note: fmt.Sprintf("%.2f ms (rounds %.2f–%.2f)", med, lo, hi), Data: map[string]string{"variant": r.Variant, "size": strconv.Itoa(size)}})
			rows = append(rows, pingRow{r.Variant, size, med, lo, hi})
			first = false
		}
	}
	if len(bars) == 0 {
		return
	}
	p.h(`<figure>{{.}}</figure>`, hbarChart{Title: "Ping round-trip time by size and fragment setting", Desc: "Median round-trip time of pings of each size through each tunnel, with the range of the rounds' medians.",
		Axis: "Round-trip time (ms)", Bars: bars, Width: 700}.render(p))
	p.h(`<table><caption class="muted">Ping round-trip times</caption><thead><tr><th>Variant</th><th class="num">Ping size (bytes)</th><th class="num">Median (ms)</th><th class="num">Rounds' medians (ms)</th></tr></thead><tbody>`+
		`{{range .}}<tr><td>{{.Variant}}</td><td class="num">{{.Size}}</td><td class="num">{{f2 .Median}}</td><td class="num">{{f2 .Lo}}–{{f2 .Hi}}</td></tr>{{end}}`+
		`</tbody></table>`, rows)
}
