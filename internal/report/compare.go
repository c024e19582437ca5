package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Verdicts of a compared row.
const (
	Better   = "better"
	Worse    = "worse"
	NoChange = "no change"
	// Incomparable: a side has no valid samples, or the row exists on one
	// side only.
	Incomparable = "not comparable"
	// CannotTell: enough samples, but their spread allows a change as
	// large as the threshold and also none: neither is shown.
	CannotTell = "cannot tell"
	// TooFew: both sides have samples, but one has fewer than
	// verdict.MinSamples: its min–max spread says nothing about the
	// spread of the rate, so neither a change nor its absence is judged.
	TooFew = "not enough samples"
)

// DefaultThreshold is the relative change of the median below which a row
// counts as unchanged even when the spreads do not overlap: samples of a
// few seconds on a shared machine differ by a few percent from run to run
// with nothing changed.
const DefaultThreshold = 0.05

// CompareOptions select what is compared.
type CompareOptions struct {
	// Threshold is the smallest relative change of the median that can be
	// better or worse (DefaultThreshold when 0).
	Threshold float64
	// OldVariant and NewVariant, when set, compare that variant of the old
	// document with that of the new one (e.g. default against jumbo in one
	// run), matching rows by network and direction.
	OldVariant, NewVariant string
}

// Change is one row of a comparison.
type Change struct {
	Network    string `json:"network"`
	Variant    string `json:"variant"`
	NewVariant string `json:"new_variant,omitempty"`
	Direction  string `json:"direction"`
	Path       string `json:"path"`
	// Old and New are the rows' samples summarized, in bits per second.
	Old verdict.Spread `json:"old"`
	New verdict.Spread `json:"new"`
	// ChangePercent is (new median − old median) / old median × 100.
	ChangePercent float64 `json:"change_percent"`
	// Verdict is Better, Worse, NoChange or Incomparable; Reason says why.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

// Comparison is the JSON document of `ovpnperf compare --json`.
type Comparison struct {
	Schema    string  `json:"schema"`
	Old       string  `json:"old"`
	New       string  `json:"new"`
	Threshold float64 `json:"threshold"`
	// Worse is true when any row got worse beyond its spread, or any
	// finding change is worse (exit 1).
	Worse   bool     `json:"worse"`
	Changes []Change `json:"changes"`
	// FindingChanges are the findings that differ between the documents
	// (CompareFindings): [] when none does.
	FindingChanges []FindingChange `json:"finding_changes"`
}

// CompareSchema names the document of `ovpnperf compare --json`.
const CompareSchema = "ovpnperf/compare/v1"

type rowKey struct{ network, variant, direction string }

// Compare matches the rows of two run documents by network, variant and
// direction and judges each: "not enough samples" when a side has fewer
// than verdict.MinSamples valid samples (docs/evidence.md); better or
// worse when every sample of one side lies beyond every sample of the
// other (verdict.Above) and the medians differ by the threshold or more;
// "no change" only when every ratio new/old the samples allow lies within
// ± the threshold, so that a change of that size would have shown;
// otherwise "cannot tell". Throughput is the measure: higher is better.
func Compare(old, new *measure.Report, opts CompareOptions) []Change {
	if opts.Threshold <= 0 {
		opts.Threshold = DefaultThreshold
	}
	index := func(rep *measure.Report, only string) (map[rowKey]measure.Row, []rowKey) {
		m := map[rowKey]measure.Row{}
		var order []rowKey
		for _, r := range rep.Rows {
			if only != "" && r.Variant != only {
				continue
			}
			k := rowKey{r.Network, r.Variant, r.Direction}
			if only != "" {
				k.variant = ""
			}
			if _, dup := m[k]; !dup {
				order = append(order, k)
			}
			// CheckComparable refuses documents with two rows
			// of one key; the last would win here.
			m[k] = r
		}
		return m, order
	}
	olds, order := index(old, opts.OldVariant)
	news, newOrder := index(new, opts.NewVariant)
	for _, k := range newOrder {
		if _, ok := olds[k]; !ok {
			order = append(order, k)
		}
	}
	var out []Change
	for _, k := range order {
		o, okO := olds[k]
		n, okN := news[k]
		c := Change{Network: k.network, Variant: k.variant, Direction: k.direction}
		if opts.OldVariant != "" {
			c.Variant = opts.OldVariant
		}
		if opts.NewVariant != "" && opts.NewVariant != c.Variant {
			c.NewVariant = opts.NewVariant
		}
		switch {
		case okO:
			c.Path = o.Path
		case okN:
			c.Path = n.Path
		}
		c.Old, c.New = verdict.Of(o.SamplesBps), verdict.Of(n.SamplesBps)
		switch {
		case !okO:
			c.Verdict, c.Reason = Incomparable, "only in the new document"
		case !okN:
			c.Verdict, c.Reason = Incomparable, "only in the old document"
		case c.Old.N == 0 || c.New.N == 0:
			c.Verdict, c.Reason = Incomparable, "a side has no valid sample"
		case c.Old.N < verdict.MinSamples || c.New.N < verdict.MinSamples:
			c.ChangePercent = 100 * (c.New.Median - c.Old.Median) / c.Old.Median
			c.Verdict, c.Reason = TooFew, fmt.Sprintf("not enough samples to judge: %d old and %d new valid samples, a verdict needs %d a side (docs/evidence.md)",
				c.Old.N, c.New.N, verdict.MinSamples)
		default:
			c.ChangePercent = 100 * (c.New.Median - c.Old.Median) / c.Old.Median
			rel := math.Abs(c.ChangePercent) / 100
			// Every ratio new/old the samples allow: separate runs,
			// so unpaired (slowest new over fastest old … fastest
			// new over slowest old).
			lo, hi := c.New.Min/c.Old.Max, c.New.Max/c.Old.Min
			switch {
			case !c.Old.Overlaps(c.New) && rel >= opts.Threshold && c.New.Median > c.Old.Median:
				c.Verdict, c.Reason = Better, "new slowest sample above the old fastest"
			case !c.Old.Overlaps(c.New) && rel >= opts.Threshold:
				c.Verdict, c.Reason = Worse, "new fastest sample below the old slowest"
			case lo >= 1-opts.Threshold && hi <= 1+opts.Threshold:
				c.Verdict, c.Reason = NoChange, fmt.Sprintf("every ratio the samples allow, ×%.2f–×%.2f, lies within ±%.0f%%", lo, hi, 100*opts.Threshold)
			default:
				c.Verdict, c.Reason = CannotTell, fmt.Sprintf("the samples allow ×%.2f–×%.2f, wider than the ±%.0f%% a change must exceed: neither a change nor its absence is shown (more samples with --repeat, or longer ones, narrow it)", lo, hi, 100*opts.Threshold)
			}
		}
		// A row is marked invalid when a sample failed or the emulator
		// fell behind: its figures may not be what the path gives, so
		// it decides nothing.
		for _, side := range []struct {
			name string
			r    measure.Row
			ok   bool
		}{{"old", o, okO}, {"new", n, okN}} {
			if side.ok && !side.r.Valid {
				c.Verdict, c.ChangePercent = Incomparable, 0
				c.Reason = fmt.Sprintf("the %s row is marked invalid", side.name)
				if side.r.Error != "" {
					c.Reason += ": " + side.r.Error
				}
				break
			}
		}
		out = append(out, c)
	}
	return out
}

// CheckComparable refuses a document compare cannot read unambiguously:
// two rows of one network, variant and direction (with only, of the
// variant compared), e.g. the same variant over udp and tcp.
func CheckComparable(rep *measure.Report, only string) error {
	seen := map[rowKey]bool{}
	for i, r := range rep.Rows {
		if only != "" && r.Variant != only {
			continue
		}
		k := rowKey{r.Network, r.Variant, r.Direction}
		if seen[k] {
			return fmt.Errorf("rows[%d]: a second row for network %q, variant %q, direction %q; compare matches rows by these", i, r.Network, r.Variant, r.Direction)
		}
		seen[k] = true
	}
	return nil
}

// NewComparison compares two documents and names them: their rows
// (Compare) and their findings (CompareFindings; a document written
// without findings is judged from its rows, as report does).
func NewComparison(oldFile string, old *measure.Report, newFile string, new *measure.Report, opts CompareOptions) Comparison {
	if opts.Threshold <= 0 {
		opts.Threshold = DefaultThreshold
	}
	c := Comparison{Schema: CompareSchema, Old: oldFile, New: newFile, Threshold: opts.Threshold, Changes: Compare(old, new, opts),
		FindingChanges: CompareFindings(old.Judge(), new.Judge(), opts)}
	if c.FindingChanges == nil {
		c.FindingChanges = []FindingChange{}
	}
	for _, ch := range c.Changes {
		c.Worse = c.Worse || ch.Verdict == Worse
	}
	for _, ch := range c.FindingChanges {
		c.Worse = c.Worse || ch.Verdict == Worse
	}
	return c
}

func (c Change) label() string {
	v := c.Variant
	if c.NewVariant != "" {
		v += " → " + c.NewVariant
	}
	return v
}

// WriteTable prints the comparison for a terminal.
func (cmp Comparison) WriteTable(w io.Writer) error {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.AppendHeader(table.Row{"NETWORK", "VARIANT", "DIR", "OLD Mbit/s", "NEW Mbit/s", "CHANGE", "VERDICT", "BECAUSE"})
	for _, c := range cmp.Changes {
		change := "-"
		if c.Verdict != Incomparable {
			change = fmt.Sprintf("%+.1f%%", c.ChangePercent)
		}
		t.AppendRow(table.Row{c.Network, c.label(), c.Direction, measure.FormatMbpsSpread(c.Old), measure.FormatMbpsSpread(c.New), change, c.Verdict, c.Reason})
	}
	t.Render()
	if len(cmp.FindingChanges) > 0 {
		fmt.Fprintln(w, "findings that changed:")
		for _, c := range cmp.FindingChanges {
			fmt.Fprintln(w, "  "+c.line())
		}
	}
	_, err := fmt.Fprintf(w, "old %s, new %s; with fewer than %d samples a side: not enough samples to judge; no change = every ratio the samples allow within ±%.0f%%, cannot tell = wider (docs/evidence.md)\n", cmp.Old, cmp.New, verdict.MinSamples, 100*cmp.Threshold)
	return err
}

// WriteCompareHTML renders the comparison as a page like `report`'s: per
// network, old and new bars with whiskers, and the table of verdicts.
func WriteCompareHTML(w io.Writer, cmp Comparison, old, new *measure.Report, opts Options) error {
	p := newPage(opts)
	p.title = "compare " + cmp.Old + " → " + cmp.New
	p.secN++
	p.h(`<section class="doc" id="doc1" aria-labelledby="doc1-h"><h2 id="doc1-h">{{.}}</h2>`, p.title)
	p.facts("Old", fmt.Sprintf("%s: %s, %s", cmp.Old, old.Scenario.Command, old.Started.UTC().Format("2006-01-02 15:04 MST")),
		"New", fmt.Sprintf("%s: %s, %s", cmp.New, new.Scenario.Command, new.Started.UTC().Format("2006-01-02 15:04 MST")),
		"Rule", fmt.Sprintf("with %d or more samples a side, better or worse only when the min–max spreads are apart and the medians differ by %.0f%% or more; no change only when every ratio the samples allow lies within ±%.0f%%; otherwise cannot tell (docs/evidence.md)", verdict.MinSamples, 100*cmp.Threshold, 100*cmp.Threshold))
	if oc, nc := commandLine(old.Scenario.Argv), commandLine(new.Scenario.Argv); oc == nc && oc != "" {
		p.h(`<p class="cmd">Command of both: <code>{{.}}</code></p>`, oc)
	} else {
		for _, c := range [][2]string{{"Old", oc}, {"New", nc}} {
			if c[1] != "" {
				p.h(`<p class="cmd">{{index . 0}} command: <code>{{index . 1}}</code></p>`, c)
			}
		}
	}
	counts := map[string]int{}
	for _, c := range cmp.Changes {
		counts[c.Verdict]++
	}
	var parts []string
	for _, k := range sortedKeys(counts) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	p.h(`<p class="summary"><strong>{{.}}</strong></p>`, strings.Join(parts, ", "))
	var networks []string
	seen := map[string]bool{}
	for _, c := range cmp.Changes {
		if !seen[c.Network] {
			seen[c.Network] = true
			networks = append(networks, c.Network)
		}
	}
	for _, n := range networks {
		p.h(`<h3>Network {{.}}</h3>`, n)
		var bars []bar
		for _, c := range cmp.Changes {
			if c.Network != n || c.Old.N == 0 || c.New.N == 0 {
				continue
			}
			newName := c.Variant
			if c.NewVariant != "" {
				newName = c.NewVariant
			}
			data := map[string]string{"variant": c.label(), "direction": c.Direction, "verdict": c.Verdict}
			bars = append(bars,
				bar{Label: "old " + c.Variant + " " + dirLabel(c.Direction), Value: c.Old.Median / 1e6, Min: c.Old.Min / 1e6, Max: c.Old.Max / 1e6, Class: "s5", Gap: len(bars) > 0,
					Note: measure.FormatMbpsSpread(c.Old) + " Mbit/s", Data: data},
				bar{Label: "new " + newName + " " + dirLabel(c.Direction), Value: c.New.Median / 1e6, Min: c.New.Min / 1e6, Max: c.New.Max / 1e6, Class: "s0",
					Note: fmt.Sprintf("%s Mbit/s: %s", measure.FormatMbpsSpread(c.New), c.Verdict), Data: data})
		}
		if len(bars) > 0 {
			p.h(`<figure>{{.}}</figure>`, hbarChart{Title: "Old and new throughput on " + n, Desc: "For each row, the old and the new median throughput with min–max whiskers, and the verdict.",
				Axis: "Throughput (Mbit/s)", Bars: bars, Width: 760, Legend: [][2]string{{"s5", "old"}, {"s0", "new"}}}.render(p))
		}
		type changeRow struct{ Variant, Direction, Old, New, Change, Class, Verdict, Reason string }
		var rows []changeRow
		for _, c := range cmp.Changes {
			if c.Network != n {
				continue
			}
			change := "-"
			if c.Verdict != Incomparable {
				change = fmt.Sprintf("%+.1f%%", c.ChangePercent)
			}
			rows = append(rows, changeRow{c.label(), dirLabel(c.Direction), measure.FormatMbpsSpread(c.Old), measure.FormatMbpsSpread(c.New), change,
				strings.ReplaceAll(c.Verdict, " ", "-"), c.Verdict, c.Reason})
		}
		p.h(`<table class="compare"><thead><tr><th>Variant</th><th>Direction</th><th class="num">Old (Mbit/s)</th><th class="num">New (Mbit/s)</th><th class="num">Change</th><th>Verdict</th><th>Because</th></tr></thead><tbody>`+
			`{{range .}}<tr data-verdict="{{.Verdict}}"><td>{{.Variant}}</td><td>{{.Direction}}</td><td class="num">{{.Old}}</td><td class="num">{{.New}}</td><td class="num">{{.Change}}</td><td class="verdict v-{{.Class}}">{{.Verdict}}</td><td>{{.Reason}}</td></tr>{{end}}`+
			`</tbody></table>`, rows)
	}
	if len(cmp.FindingChanges) > 0 {
		type fc struct{ Change, Kind, Verdict, Line string }
		var items []fc
		for _, c := range cmp.FindingChanges {
			items = append(items, fc{c.Change, string(c.Kind), c.Verdict, c.line()})
		}
		p.h(`<h3>Findings that changed</h3><ul class="findings">{{range .}}<li data-change="{{.Change}}" data-kind="{{.Kind}}" data-verdict="{{.Verdict}}">{{.Line}}</li>{{end}}</ul>`, items)
	}
	p.h(`</section>`, nil)
	page, err := p.finish()
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, page)
	return err
}
