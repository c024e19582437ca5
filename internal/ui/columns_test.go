package ui

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

func TestFormatExtra(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{47000.4, "47000"}, {12.34, "12.3"}, {1.234, "1.23"}, {0.0421, "0.042"}, {0.0, "0"},
		{math.NaN(), "-"}, {math.Inf(1), "-"}, {nil, "-"}, {18, "18"}, {uint64(7), "7"}, {"udp", "udp"},
	} {
		if got := FormatExtra(tc.in); got != tc.want {
			t.Errorf("FormatExtra(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Extra columns come after the standard ones, a key without Format shows
// Extra[Key] or "-", and a report without Columns renders as before.
func TestRenderTableColumns(t *testing.T) {
	rep := recipeReport()
	var plain bytes.Buffer
	if err := RenderTable(&plain, rep); err != nil {
		t.Fatal(err)
	}
	rep.Rows[0].Extra = map[string]any{"pps_median": 12345.6}
	rep.Columns = []measure.Column{
		{Header: "pps", Key: "pps_median"},
		{Header: "twice", Format: func(r measure.Row) string { return FormatExtra(2 * r.MedianBps) }},
	}
	var buf bytes.Buffer
	if err := RenderTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	header := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "status") {
			header = l
			break
		}
	}
	if !strings.Contains(header, "status") || strings.Index(header, "pps") < strings.Index(header, "status") || !strings.Contains(header, "twice") {
		t.Errorf("extra columns not after status in the header:\n%s", out)
	}
	if !strings.Contains(out, "12346") || !strings.Contains(out, FormatExtra(2*rep.Rows[0].MedianBps)) {
		t.Errorf("extra cells missing:\n%s", out)
	}
	if len(rep.Rows) > 1 && rep.Rows[1].Extra["pps_median"] == nil && !strings.Contains(out, " - ") {
		t.Errorf("a row without the figure shows no dash:\n%s", out)
	}
	rep.Columns = nil
	rep.Rows[0].Extra = nil
	var again bytes.Buffer
	if err := RenderTable(&again, rep); err != nil {
		t.Fatal(err)
	}
	if again.String() != plain.String() {
		t.Errorf("without columns the table changed:\n%s\nwas\n%s", again.String(), plain.String())
	}
}
