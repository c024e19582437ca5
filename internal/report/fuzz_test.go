package report

import (
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/ui"
)

// FuzzParse feeds any bytes to the reader of every document `report`,
// `compare` and `recipe judge` read (lab run, recipe, pps, pmtu, crypto,
// tune, cluster status) and to what they do with an accepted document: no
// input may panic, and an accepted document renders as a page, compares
// with itself and encodes as JSON (no +Inf or NaN slips through). Seeds:
// testdata/fuzz/FuzzParse (the recorded documents and hostile variants).
func FuzzParse(f *testing.F) {
	for _, s := range []string{`[null]`, `[]`, `null`, `{}`, `[{}]`, `{"schema":"ovpnperf/run/v2","rows":[null]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Parse("fuzz.json", data)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if err := Write(io.Discard, docs, Options{}); err != nil {
			t.Fatalf("page: %v", err)
		}
		for _, d := range docs {
			if d.Run == nil {
				continue
			}
			if err := CheckComparable(d.Run, ""); err != nil {
				continue
			}
			cmp := NewComparison("a", d.Run, "b", d.Run, CompareOptions{})
			if err := cmp.WriteTable(io.Discard); err != nil {
				t.Fatalf("table: %v", err)
			}
			if err := WriteCompareHTML(io.Discard, cmp, d.Run, d.Run, Options{}); err != nil {
				t.Fatalf("compare page: %v", err)
			}
			if _, err := json.Marshal(cmp); err != nil {
				t.Fatalf("compare JSON: %v", err)
			}
			for _, c := range cmp.Changes {
				if math.IsNaN(c.ChangePercent) || math.IsInf(c.ChangePercent, 0) {
					t.Fatalf("change %v of %s", c.ChangePercent, c.Variant)
				}
			}
			if err := ui.RenderTable(io.Discard, d.Run); err != nil {
				t.Fatalf("table: %v", err)
			}
		}
	})
}
