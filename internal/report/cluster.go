package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/cluster/clusterdoc"
)

// ClusterSchema names `cluster status --json` documents. Those written
// before it carried a "schema" key are recognised by their keys (sniff) as
// clusterdoc.LegacyStatusSchema.
const ClusterSchema = clusterdoc.StatusSchema

// clusterDoc writes `cluster status --json`: per instance its clients,
// bytes in and out, restarts, with its state, port and CPU in the labels,
// and the per-client bytes when serve listed them.
func (p *page) clusterDoc(d *Document) {
	r := d.Cluster
	clients, up := 0, 0
	for _, in := range r.Instances {
		clients += in.Clients
		if in.State == clusterdoc.StateUp {
			up++
		}
	}
	p.section("cluster "+r.ID, fmt.Sprintf(" — %d of %d instances up, %d clients", up, len(r.Instances), clients))
	p.command(nil, "ovpnperf cluster status "+r.ID+" --json")
	onePort := "none (each instance on its own port)"
	if r.OnePort != 0 {
		onePort = fmt.Sprintf("%d (%s)", r.OnePort, r.Backend)
	}
	p.facts("Namespace", r.Netns, "One port", onePort, "Instances", fmt.Sprintf("%d, %d up", len(r.Instances), up),
		"Clients", fmt.Sprint(clients), "File", d.File+" (schema "+d.Schema+", a snapshot: counters since each instance started)")

	if len(r.Instances) == 0 {
		p.h(`<p class="invalid">The status lists no instance.</p>`, nil)
		return
	}
	label := func(in clusterdoc.Instance) string {
		return fmt.Sprintf("%s %s/%d cpu %d", in.Name, in.Proto, in.Port, in.CPU)
	}
	state := func(in clusterdoc.Instance) string {
		s := in.State
		if in.CrashLoop {
			s += " (crash loop)"
		}
		return s
	}
	var maxBytes float64
	for _, in := range r.Instances {
		maxBytes = math.Max(maxBytes, float64(max(in.BytesIn, in.BytesOut)))
	}
	unit, div := byteUnit(maxBytes)
	var cl, by, rs []bar
	for i, in := range r.Instances {
		data := func(what string) map[string]string {
			return map[string]string{"variant": in.Name, "direction": what, "state": in.State}
		}
		cl = append(cl, bar{Label: label(in), Value: float64(in.Clients), Class: "s0", Note: fmt.Sprintf("%d · %s", in.Clients, state(in)), Data: data("clients")})
		by = append(by,
			bar{Label: label(in), Value: float64(in.BytesIn) / div, Class: "s0", Gap: i > 0, Note: fmt.Sprintf("in %s %s", fmtTick(float64(in.BytesIn)/div), unit), Data: data("bytes_in")},
			bar{Label: "", Value: float64(in.BytesOut) / div, Class: "s1", Note: fmt.Sprintf("out %s %s", fmtTick(float64(in.BytesOut)/div), unit), Data: data("bytes_out")})
		note := fmt.Sprintf("%d", in.Restarts)
		if in.LastExit != "" {
			note += " · last: " + in.LastExit
		}
		rs = append(rs, bar{Label: label(in), Value: float64(in.Restarts), Class: "s4", Note: note, Data: data("restarts")})
	}
	p.h(`<div class="charts">`, nil)
	p.h(`<figure>{{.}}</figure>`, hbarChart{Title: "Clients per instance", Desc: fmt.Sprintf("Connected clients of each of the %d instances (%d in all), with its state.", len(r.Instances), clients),
		Axis: "Connected clients (count)", Bars: cl, Width: 520}.render(p))
	p.h(`<figure>{{.}}</figure>`, hbarChart{Title: "Bytes per instance", Desc: "Bytes each instance received from and sent to its clients since it started, from its management interface.",
		Axis: "Bytes (" + unit + ")", Bars: by, Width: 520, Legend: [][2]string{{"s0", "in (from clients)"}, {"s1", "out (to clients)"}}}.render(p))
	p.h(`<figure>{{.}}</figure>`, hbarChart{Title: "Restarts per instance", Desc: "Times the supervisor restarted each instance after it exited, with the last exit's reason.",
		Axis: "Restarts (count)", Bars: rs, Width: 520}.render(p))
	p.h(`</div>`, nil)

	type instanceView struct {
		clusterdoc.Instance
		StateText, Recovery, Since string
	}
	type clientView struct {
		Instance, CommonName, Real string
		BytesIn, BytesOut          int64
	}
	var ins []instanceView
	var perClient []clientView
	for _, in := range r.Instances {
		var rec []string
		for _, s := range in.Recoveries {
			rec = append(rec, fmt.Sprintf("%.2f", s))
		}
		since := ""
		if !in.UpSince.IsZero() {
			since = in.UpSince.UTC().Format("01-02 15:04:05Z")
		}
		ins = append(ins, instanceView{in, state(in), strings.Join(rec, ", "), since})
		for _, c := range in.PerClient {
			perClient = append(perClient, clientView{in.Name, c.CommonName, c.Real, c.BytesIn, c.BytesOut})
		}
	}
	p.h(`<table><caption class="muted">Instances</caption><thead><tr><th>Instance</th><th>State</th><th class="num">PID</th><th class="num">CPU</th><th>Proto</th><th class="num">Port</th><th>Subnet</th><th class="num">Clients</th><th class="num">Bytes in</th><th class="num">Bytes out</th><th class="num">Bytes/s</th><th class="num">Restarts</th><th>Last exit</th><th class="num">Recovery (s)</th><th class="num">CPU (s)</th><th>Up since</th></tr></thead><tbody>`+
		`{{range .}}<tr><td>{{.Name}}</td><td>{{.StateText}}</td><td class="num">{{.Pid}}</td><td class="num">{{.CPU}}</td><td>{{.Proto}}</td><td class="num">{{.Port}}</td><td>{{.Subnet}}</td><td class="num">{{.Clients}}</td><td class="num">{{.BytesIn}}</td><td class="num">{{.BytesOut}}</td><td class="num">{{f0 .BytesPerSec}}</td><td class="num">{{.Restarts}}</td><td>{{.LastExit}}</td><td class="num">{{.Recovery}}</td><td class="num">{{f2 .CPUSeconds}}</td><td>{{.Since}}</td></tr>{{end}}`+
		`</tbody></table>`, ins)
	if len(perClient) > 0 {
		p.h(`<details><summary>Bytes per client</summary><table><thead><tr><th>Instance</th><th>Client</th><th>Address</th><th class="num">Bytes in</th><th class="num">Bytes out</th></tr></thead><tbody>`+
			`{{range .}}<tr><td>{{.Instance}}</td><td>{{.CommonName}}</td><td>{{.Real}}</td><td class="num">{{.BytesIn}}</td><td class="num">{{.BytesOut}}</td></tr>{{end}}`+
			`</tbody></table></details>`, perClient)
	}
}

// byteUnit picks the decimal unit the largest count reads best in.
func byteUnit(max float64) (string, float64) {
	switch {
	case max >= 1e9:
		return "GB", 1e9
	case max >= 1e6:
		return "MB", 1e6
	case max >= 1e3:
		return "kB", 1e3
	}
	return "bytes", 1
}
