package report

import (
	"fmt"
	"strings"
)

// pps writes a `pps client` result: the per-second series of echoes (or
// probes counted at the server) and of loss.
func (p *page) pps(d *Document) {
	r := d.PPS
	p.section("pps client "+r.Server, fmt.Sprintf(" — median %.0f pps, loss %.2f%%", r.PPSMedian, r.LossPercent))
	p.command(r.Argv, "ovpnperf pps client "+r.Server)
	if r.Host != nil {
		p.hostFacts(*r.Host)
	}
	mode := "echo (round trips)"
	if r.Params.OneWay {
		mode = "one-way (the server counts)"
	}
	p.facts("Started", r.Start.UTC().Format("2006-01-02 15:04:05 MST"), "Mode", mode,
		"Probes", fmt.Sprintf("%d-byte UDP payload, %d flow(s), rate %s", r.Params.Size, r.Params.Flows, ratePPS(r.Params.RatePPS)),
		"Counts", fmt.Sprintf("sent %d, received %d, lost %d (%.2f%%)", r.Sent, r.Received, r.Lost, r.LossPercent),
		"Packets per second", fmt.Sprintf("median %.0f (min %.0f, max %.0f) over whole seconds", r.PPSMedian, r.PPSMin, r.PPSMax),
		"RTT", rttLine(r.RTTP50Us, r.RTTP99Us, r.RTTMaxUs), "File", d.File+" (schema "+d.Schema+")")
	var x, sent, got, loss []float64
	for _, iv := range r.Series {
		x = append(x, iv.EndS)
		sent = append(sent, iv.SentPPS)
		got = append(got, iv.PPS)
		loss = append(loss, iv.LossPercent)
	}
	p.h(`<div class="charts">`, nil)
	p.h(`<figure>{{.}}</figure>`, lineChart{Title: "Packets per second", Desc: fmt.Sprintf("Probes sent and answered per second over %d intervals; median answered %.0f pps.", len(x), r.PPSMedian),
		XAxis: "Time (s)", YAxis: "Packets per second (pps)", Series: []series{{Name: "sent", X: x, Y: sent, Class: "s0"}, {Name: "answered", X: x, Y: got, Class: "s2"}},
		Width: 520, Height: 240, Legend: true}.render(p))
	p.h(`<figure>{{.}}</figure>`, lineChart{Title: "Loss per second", Desc: fmt.Sprintf("Share of probes lost in each second; %.2f%% over the run.", r.LossPercent),
		XAxis: "Time (s)", YAxis: "Loss (%)", Series: []series{{Name: "loss", X: x, Y: loss, Class: "s4"}}, Width: 420, Height: 240}.render(p))
	p.h(`</div>`, nil)
	p.h(`<details><summary>Series as a table</summary><table><thead><tr><th class="num">End (s)</th><th class="num">Sent (pps)</th><th class="num">Answered (pps)</th><th class="num">Loss (%)</th><th class="num">RTT mean (µs)</th></tr></thead><tbody>`+
		`{{range .}}<tr><td class="num">{{f1 .EndS}}</td><td class="num">{{f0 .SentPPS}}</td><td class="num">{{f0 .PPS}}</td><td class="num">{{f2 .LossPercent}}</td><td class="num">{{f0 .RTTMeanUs}}</td></tr>{{end}}`+
		`</tbody></table></details>`, r.Series)
	p.h(`{{range .}}<p class="invalid">{{.}}</p>{{end}}`, r.Warnings)
}

func ratePPS(r uint64) string {
	if r == 0 {
		return "as fast as possible"
	}
	return fmt.Sprintf("%d pps", r)
}

func rttLine(p50, p99, max float64) string {
	if p50 == 0 && max == 0 {
		return ""
	}
	return fmt.Sprintf("p50 %.0f µs, p99 %.0f µs, max %.0f µs", p50, p99, max)
}

// pmtu writes a path-MTU result: the sizes that matter on one axis, and
// OpenVPN's translation. (The document keeps the outcome, not every probe
// size tried, so the chart marks the outcome's sizes.)
func (p *page) pmtu(d *Document) {
	r := d.PMTU
	p.section("pmtu "+r.Host, fmt.Sprintf(" — path MTU %d", r.PathMTU))
	p.command(r.Argv, "ovpnperf pmtu "+r.Host)
	if r.Machine != nil {
		p.hostFacts(*r.Machine)
	}
	hop := "none answered"
	if r.Hop != nil {
		hop = fmt.Sprintf("%s (named MTU %d)", *r.Hop, r.HopMTU)
	}
	p.facts("Address", r.Address+" ("+r.Family+")", "Path MTU", fmt.Sprintf("%d bytes", r.PathMTU), "ICMP black hole", fmt.Sprint(r.Blackhole),
		"Hop that answered", hop, "Interface", fmt.Sprintf("%s, MTU %d", r.Interface, r.LocalMTU),
		"Search", fmt.Sprintf("%d probes in %d rounds, %.2f s, RTT %.1f ms", r.Probes, r.Rounds, r.ElapsedSeconds, r.RTTMillis),
		"Explanation", r.Explanation, "File", d.File+" (schema "+d.Schema+")")
	bars := []bar{{Label: "path MTU", Value: float64(r.PathMTU), Class: "s0", Note: fmt.Sprintf("%d bytes", r.PathMTU), Data: map[string]string{"size": "path_mtu"}}}
	if r.LocalMTU > 0 {
		bars = append(bars, bar{Label: "interface MTU", Value: float64(r.LocalMTU), Class: "s5", Note: fmt.Sprintf("%d bytes", r.LocalMTU)})
	}
	if r.HopMTU > 0 {
		bars = append(bars, bar{Label: "MTU the hop named", Value: float64(r.HopMTU), Class: "s1", Note: fmt.Sprintf("%d bytes", r.HopMTU)})
	}
	if r.LargestPassed > 0 {
		bars = append(bars, bar{Label: "largest size passed", Value: float64(r.LargestPassed), Class: "s3", Note: fmt.Sprintf("%d bytes", r.LargestPassed)})
	}
	if r.OpenVPN != nil {
		for _, t := range r.OpenVPN.Rows {
			bars = append(bars, bar{Label: fmt.Sprintf("max tun-mtu %s/%s", t.Transport, t.Family), Value: float64(t.MaxTunMTU), Class: "s2", Gap: len(bars) > 0 && !strings.HasPrefix(bars[len(bars)-1].Label, "max"),
				Note: fmt.Sprintf("%d bytes (overhead %d)", t.MaxTunMTU, t.Overhead)})
		}
	}
	if len(r.ProbesTried) > 0 {
		// The search: each round's probe sizes, by what answered them.
		bySeries := map[string]*series{}
		var order []string
		for _, pr := range r.ProbesTried {
			sr := bySeries[pr.Outcome]
			if sr == nil {
				cls := map[string]string{"reply": "s2", "too-big": "s1", "local-too-big": "s3", "lost": "s4"}[pr.Outcome]
				if cls == "" {
					cls = "s5"
				}
				sr = &series{Name: pr.Outcome, Class: cls, Points: true}
				bySeries[pr.Outcome] = sr
				order = append(order, pr.Outcome)
			}
			sr.X = append(sr.X, float64(pr.Size))
			sr.Y = append(sr.Y, float64(pr.Round))
		}
		var ss []series
		for _, o := range order {
			ss = append(ss, *bySeries[o])
		}
		p.h(`<figure>{{.}}</figure>`, lineChart{Title: "Probe sizes tried, round by round", Desc: fmt.Sprintf("%d probes in %d rounds; each point is one probe size, placed by its round and marked by its answer (reply, too-big, lost).", len(r.ProbesTried), r.Rounds),
			XAxis: "Probe size, whole IP packet (bytes)", YAxis: "Round", Series: ss, Width: 640, Height: 220, Legend: true}.render(p))
	}
	p.h(`<figure>{{.}}</figure>`, hbarChart{Title: "Packet sizes on this path", Desc: fmt.Sprintf("Path MTU %d bytes, interface MTU %d, and the largest OpenVPN tun-mtu per transport.", r.PathMTU, r.LocalMTU),
		Axis: "Whole IP packet (bytes)", Bars: bars, Width: 640}.render(p))
	if r.OpenVPN != nil {
		p.h(`<table><caption class="muted">OpenVPN settings for this path (cipher {{.Cipher}})</caption><thead><tr><th>Transport</th><th>Outer family</th><th class="num">Path MTU</th><th class="num">Overhead (bytes)</th><th class="num">Max tun-mtu</th><th>mssfix</th><th>fragment</th></tr></thead><tbody>`+
			`{{range .Rows}}<tr><td>{{.Transport}}</td><td>{{.Family}}</td><td class="num">{{.PathMTU}}{{if not .Measured}} (assumed){{end}}</td><td class="num">{{.Overhead}}</td><td class="num">{{.MaxTunMTU}}</td><td><code>{{.MSSFix}}</code></td><td>{{.Fragment}}</td></tr>{{end}}`+
			`</tbody></table>`, r.OpenVPN)
	}
}

// crypto writes `ovpnperf crypto`: each cipher's speed at the tunnel's
// packet size, as is and with AES-NI masked.
func (p *page) crypto(d *Document) {
	r := d.Crypto
	used := "not measured"
	if r.AESNIUsed != nil {
		used = fmt.Sprint(*r.AESNIUsed)
	}
	p.section("crypto", " — AES-NI used: "+used)
	p.command(r.Argv, "ovpnperf crypto")
	p.facts("OpenSSL", r.OpenSSL, "CPU", fmt.Sprintf("%s, %d cores", r.CPU.Model, r.CPU.Cores), "AES-NI used", used+": "+r.AESNIEvidence,
		"Preferred cipher", r.Projection.PreferredCipher+": "+r.Projection.PreferredReason, "File", d.File+" (schema "+d.Schema+")")
	if r.Host != nil {
		p.hostFacts(*r.Host)
	}
	var bars []bar
	type speedRow struct {
		Cipher        string
		Block         int
		With, Without float64
		Speedup       float64
	}
	var rows []speedRow
	for _, c := range r.Ciphers {
		for _, s := range c.Sizes {
			rows = append(rows, speedRow{c.Cipher, s.BlockBytes, s.WithAESNI.BytesPerSecond / 1e6, s.WithoutAESNI.BytesPerSecond / 1e6, s.AESNISpeedup})
			if !s.PacketSize {
				continue
			}
			gap := len(bars) > 0
			bars = append(bars,
				bar{Label: c.Cipher, Value: s.WithAESNI.BytesPerSecond / 1e6, Min: s.WithAESNI.MinBytesPerSecond / 1e6, Max: s.WithAESNI.MaxBytesPerSecond / 1e6,
					Class: "s0", Gap: gap, Note: fmt.Sprintf("%.0f MB/s", s.WithAESNI.BytesPerSecond/1e6), Data: map[string]string{"cipher": c.Cipher, "aesni": "on"}},
				bar{Label: "masked", Value: s.WithoutAESNI.BytesPerSecond / 1e6, Min: s.WithoutAESNI.MinBytesPerSecond / 1e6, Max: s.WithoutAESNI.MaxBytesPerSecond / 1e6,
					Class: "s1", Note: fmt.Sprintf("%.0f MB/s", s.WithoutAESNI.BytesPerSecond/1e6), Data: map[string]string{"cipher": c.Cipher, "aesni": "masked"}})
		}
	}
	p.h(`<table><caption class="muted">Speed at each block size (MB/s, median of the samples)</caption><thead><tr><th>Cipher</th><th class="num">Block (bytes)</th><th class="num">With AES-NI</th><th class="num">AES-NI masked</th><th class="num">Speed-up</th></tr></thead><tbody>`+
		`{{range .}}<tr><td>{{.Cipher}}</td><td class="num">{{.Block}}</td><td class="num">{{f0 .With}}</td><td class="num">{{f0 .Without}}</td><td class="num">×{{f1 .Speedup}}</td></tr>{{end}}`+
		`</tbody></table>`, rows)
	if len(bars) > 0 {
		p.h(`<figure>{{.}}</figure>`, hbarChart{Title: fmt.Sprintf("Cipher speed at %d-byte packets", r.Projection.PacketBytes),
			Desc: "Each data-channel cipher's speed at the tunnel's packet size, as is and with AES-NI masked, median with min–max.",
			Axis: "Encryption speed (MB/s)", Bars: bars, Width: 660, Legend: [][2]string{{"s0", "as is (AES-NI)"}, {"s1", "AES-NI masked"}}}.render(p))
	}
}
