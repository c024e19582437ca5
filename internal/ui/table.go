package ui

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// maxErrorWidth keeps a long error from widening the table; the JSON has
// the whole text.
const maxErrorWidth = 40

// RenderTable writes the report for people: the host line, then one table
// per network with, for each row: variant, direction, transport, Mbit/s
// median (min–max) over n samples, ratio to the routed baseline, the
// published figure (only where a row of that network has one), CPU-s/GB
// per side, what OpenVPN reported (cipher, socket buffers), and ok or the
// reason the row is invalid, then the report's extra Columns; then the
// verdicts, one a line. Call Report.FillRatios (or Finish) first.
func RenderTable(w io.Writer, rep *measure.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Host: %s\n", rep.Host)
	for _, g := range groupRows(rep) {
		b.WriteString("\n")
		b.WriteString(renderNetwork(g, rep.Columns))
		b.WriteString("\n")
	}
	if len(rep.Verdicts) > 0 {
		b.WriteString("\n")
		for _, v := range rep.Verdicts {
			fmt.Fprintf(&b, "%-9s %s: %s\n", v.Outcome, v.Claim, v.Reason)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type rowGroup struct {
	title string
	rows  []measure.Row
}

// groupRows orders rows by the scenario's networks, keeping each network's
// rows in report order; rows naming an unlisted network come last.
func groupRows(rep *measure.Report) []rowGroup {
	var groups []rowGroup
	index := map[string]int{}
	for _, n := range rep.Scenario.Networks {
		if _, dup := index[n.Name]; dup {
			continue
		}
		title := n.Name
		if n.Description != "" {
			title += ": " + n.Description
		}
		index[n.Name] = len(groups)
		groups = append(groups, rowGroup{title: title})
	}
	for _, r := range rep.Rows {
		i, ok := index[r.Network]
		if !ok {
			i = len(groups)
			index[r.Network] = i
			title := r.Network
			if title == "" {
				title = "(unnamed network)"
			}
			groups = append(groups, rowGroup{title: title})
		}
		groups[i].rows = append(groups[i].rows, r)
	}
	out := groups[:0]
	for _, g := range groups {
		if len(g.rows) > 0 {
			out = append(out, g)
		}
	}
	return out
}

func renderNetwork(g rowGroup, extra []measure.Column) string {
	t := table.NewWriter()
	style := table.StyleLight
	style.Format.Header = text.FormatDefault // "CPU-s/GB", not "CPU-S/GB"
	t.SetStyle(style)
	t.SetTitle("%s", g.title) // a title is text, not a format
	published := false
	for _, r := range g.rows {
		published = published || r.PublishedBps > 0
	}
	header := table.Row{"variant", "dir", "proto", "n", "Mbit/s median (min–max)", "× routed"}
	if published {
		header = append(header, "published")
	}
	header = append(header, "CPU-s/GB", "cipher", "socket buffers", "status")
	for _, c := range extra {
		header = append(header, c.Header)
	}
	t.AppendHeader(header)
	for _, r := range g.rows {
		status := "ok"
		switch {
		case r.NotTested != "":
			status = truncate(oneLine(r.NotTested), 2*maxErrorWidth)
		case !r.Valid:
			status = "INVALID"
			if r.Error != "" {
				status += ": " + truncate(oneLine(r.Error), maxErrorWidth)
			}
		}
		ratio := measure.FormatRatio(r.RatioToRouted)
		if r.Path == measure.PathRouted {
			ratio = "baseline"
		}
		spread := measure.FormatMbpsSpread(verdict.Of(r.SamplesBps))
		if r.NotTested != "" {
			spread, ratio = "-", "-"
		}
		row := table.Row{r.Variant, r.Direction, r.Proto, len(r.SamplesBps), spread, ratio}
		if published {
			p := "-"
			if r.PublishedBps > 0 {
				p = measure.FormatMbps(r.PublishedBps)
			}
			row = append(row, p)
		}
		row = append(row, measure.FormatCPUPerGB(r.CPUSecondsPerGB), dash(r.Cipher), FormatSocketBuffers(r.SocketBuffers), status)
		for _, c := range extra {
			row = append(row, cell(c, r))
		}
		t.AppendRow(row)
	}
	configs := []table.ColumnConfig{
		{Number: 4, Align: text.AlignRight},
		{Number: 5, Align: text.AlignRight},
		{Number: 6, Align: text.AlignRight},
	}
	if published {
		configs = append(configs, table.ColumnConfig{Number: 7, Align: text.AlignRight})
	}
	for i := range extra {
		configs = append(configs, table.ColumnConfig{Number: len(header) - len(extra) + i + 1, Align: text.AlignRight})
	}
	t.SetColumnConfigs(configs)
	return t.Render()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// socketBuffersRE matches what OpenVPN logs about its socket buffers:
// "Socket Buffers: R=[212992->212992] S=[212992->212992]".
var socketBuffersRE = regexp.MustCompile(`R=\[(\d+)->(\d+)\] S=\[(\d+)->(\d+)\]`)

// FormatSocketBuffers shortens OpenVPN's socket buffer report to the sizes
// in effect, "R 208K S 208K", or shows what it got as it is; "" prints
// as "-". A requested size the kernel lowered is kept: "R 64K←512K".
func FormatSocketBuffers(s string) string {
	m := socketBuffersRE.FindStringSubmatch(s)
	if m == nil {
		return dash(s)
	}
	side := func(req, got string) string {
		out := kib(got)
		if req != got && req != "0" {
			out += "←" + kib(req)
		}
		return out
	}
	return "R " + side(m[1], m[2]) + " S " + side(m[3], m[4])
}

func kib(s string) string {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n%1024 != 0 {
		return s
	}
	return strconv.FormatUint(n/1024, 10) + "K"
}
