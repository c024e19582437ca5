// Package recipe re-runs the published OpenVPN tuning experiments (the
// cookbook's performance chapter, forum measurements, a forwarding
// benchmark, the multi-instance write-up) in a lab on today's kernel and
// OpenVPN, and judges each published claim from the measurements: confirmed,
// changed, refuted, or noise when the spread of the figures does not allow a
// verdict. Verdicts are computed, never written in advance.
package recipe

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Options are what the user may change about any recipe.
type Options struct {
	// Path, when set, replaces the recipe's own path(s).
	Path *labpath.Path
	// Repeat and Duration override the recipe's defaults when non-zero.
	Repeat   int
	Duration time.Duration
	// Progress receives progress lines; nil shows none.
	Progress io.Writer
	// PKIDir reuses a PKI.
	PKIDir string
	// LabName names the recipe's labs; empty picks random names.
	LabName string
	// Lab is where the recipe's labs keep their state and which ovpnperf
	// runs their owners (experiment.Spec.Lab); the zero value is the
	// host's and this executable.
	Lab lab.Env
}

// Validate refuses a Repeat or Duration outside experiment's ranges (0
// leaves the recipe's own), naming the flag, as a usage error: the check of
// every recipe, also of those that do not measure through experiment.Run.
func (o Options) Validate() error {
	if o.Repeat != 0 {
		if err := experiment.CheckRepeat(o.Repeat); err != nil {
			return err
		}
	}
	if o.Duration != 0 {
		return experiment.CheckSampleTime(o.Duration)
	}
	return nil
}

// repeat returns the user's repeat count or experiment's default
// (experiment.DefaultRepeat: the samples a verdict needs), the default of
// every recipe but ipv6.
func (o Options) repeat() int { return o.repeatOr(experiment.DefaultRepeat) }

// repeatOr returns the user's repeat count or def, a recipe's own default
// (a named constant of the recipe, never a number typed at the call).
func (o Options) repeatOr(def int) int {
	if o.Repeat > 0 {
		return o.Repeat
	}
	return def
}

// duration returns the user's sample length or the recipe's default.
func (o Options) duration(def time.Duration) time.Duration {
	if o.Duration > 0 {
		return o.Duration
	}
	return def
}

// path returns the user's path or the recipe's default.
func (o Options) path(def labpath.Path) labpath.Path {
	if o.Path != nil {
		return *o.Path
	}
	return def
}

// Recipe is one published experiment.
type Recipe struct {
	Name string
	// Summary is one line for `recipe list`.
	Summary string
	// Source names the publication and what it measured.
	Source string
	// Needs lists programs beyond openvpn, iperf3 and ip.
	Needs []string
	Run   func(ctx context.Context, o Options) (*measure.Report, error)
	// Judge computes the verdicts from a report as saved (see Judge);
	// Run sets them the same way.
	Judge func(rep *measure.Report) []measure.Verdict
	// Columns are the recipe's extra columns of the text table, read
	// from the rows as saved (not part of the JSON).
	Columns []measure.Column
}

var registry = map[string]Recipe{}

func register(r Recipe) { registry[r.Name] = r }

// All returns the recipes in the order `recipe all` runs them.
func All() []Recipe {
	var out []Recipe
	for _, r := range registry {
		out = append(out, r)
	}
	order := map[string]int{}
	for i, n := range runOrder {
		order[n] = i + 1
	}
	sort.Slice(out, func(i, j int) bool {
		oi, oj := order[out[i].Name], order[out[j].Name]
		if oi == 0 {
			oi = 1000
		}
		if oj == 0 {
			oj = 1000
		}
		if oi != oj {
			return oi < oj
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// runOrder is the running order of `recipe all`: cheap and fundamental first.
var runOrder = []string{"mtu", "ciphers", "ipv6", "compression", "fragment", "tcp", "buffers", "shaper", "pps", "instances"}

// Lookup finds a recipe by name.
func Lookup(name string) (Recipe, bool) {
	r, ok := registry[name]
	return r, ok
}

// Outcomes of a verdict (measure.Verdict.Outcome); the rules behind them
// are package verdict's.
const (
	Confirmed = verdict.Confirmed
	Changed   = verdict.Changed
	Refuted   = verdict.Refuted
	Noise     = verdict.Noise
	NotTested = verdict.NotTested
)

// verdict builds a measure.Verdict.
func newVerdict(claim string, outcome verdict.Outcome, format string, a ...any) measure.Verdict {
	return measure.Verdict{Claim: claim, Outcome: outcome, Reason: fmt.Sprintf(format, a...)}
}

// fewSamples records that v was decided by too few samples: n of need (or,
// for the MTU recipe, successful searches).
func fewSamples(v measure.Verdict, n, need int) measure.Verdict {
	return withShortfall(v, &verdict.Shortfall{Kind: verdict.ShortSamples, N: n, Needed: need})
}

// withShortfall records s, when a judgement had too few samples, as v's
// basis and figures: the one place a shortfall becomes verdict data.
func withShortfall(v measure.Verdict, s *verdict.Shortfall) measure.Verdict {
	if s == nil {
		return v
	}
	v.Basis = measure.VerdictBasisTooFew
	figs := finding.Figures{"samples_needed": float64(s.Needed)}
	switch s.Kind {
	case verdict.ShortBaseline:
		figs["baseline_samples"] = float64(s.N)
	case verdict.ShortRatios:
		figs["ratios"] = float64(s.N)
	case verdict.ShortZeroBaseline:
		v.Basis = measure.VerdictBasisZeroBaseline
		figs["ratios"], figs["zero_baseline_samples"], figs["baseline_samples"] = float64(s.N), float64(s.Zero), float64(s.Of)
	default:
		figs["samples"] = float64(s.N)
	}
	return withFigures(v, figs)
}

// limitShort is the shortfall behind a Noise of verdict.LimitedTo on
// samples, else nil.
func limitShort(o verdict.Outcome, samples []float64) *verdict.Shortfall {
	if o != Noise {
		return nil
	}
	return verdict.SamplesShort(samples)
}

// withCondition records a condition of v's measurement (measure.
// VerdictCondition*) and its figures; v's reason says it in words.
func withCondition(v measure.Verdict, kind string, figs finding.Figures) measure.Verdict {
	v.Conditions = append(v.Conditions, kind)
	return withFigures(v, figs)
}

func withFigures(v measure.Verdict, figs finding.Figures) measure.Verdict {
	if v.Figures == nil {
		v.Figures = finding.Figures{}
	}
	for k, x := range figs {
		v.Figures[k] = x
	}
	return v
}

// row finds the row of a network, variant and direction (nil if absent or
// without samples).
func row(rep *measure.Report, network, variant, dir string) *measure.Row {
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if (network == "" || r.Network == network) && r.Variant == variant && r.Direction == dir && len(r.SamplesBps) > 0 {
			return r
		}
	}
	return nil
}

// separated reports whether a is above b beyond the spread of both
// (verdict.Above): the lowest sample of a exceeds the highest of b, with
// MinSamples samples on each side.
func separated(a, b *measure.Row) bool {
	return verdict.Above(verdict.Of(a.SamplesBps), verdict.Of(b.SamplesBps))
}

// MinSamples is how many samples a row needs before a verdict rests on it.
const MinSamples = verdict.MinSamples

// compareRates judges a claim that a is faster than b by at least minRatio
// (1 for "faster at all"), by verdict.Faster. It returns the outcome and
// the ratio of medians.
func compareRates(a, b *measure.Row, minRatio float64) (verdict.Outcome, float64) {
	if a == nil || b == nil || b.MedianBps == 0 {
		return Noise, 0
	}
	return verdict.Faster(a.SamplesBps, b.SamplesBps, minRatio)
}

// ratioText is "×1.23", a ratio compareRates gave against base, or says
// that there is none: a baseline whose median is 0 bit/s gives no ratio
// (compareRates returns 0 for it, which is no measured figure).
func ratioText(ratio float64, base *measure.Row) string {
	if base == nil || base.MedianBps == 0 {
		return "no ratio (the baseline's median is 0 bit/s)"
	}
	return fmt.Sprintf("×%.2f", ratio)
}

// samples returns a row's samples (none for a nil row).
func samples(r *measure.Row) []float64 {
	if r == nil {
		return nil
	}
	return r.SamplesBps
}

// mbps formats a row's median with its spread.
func mbps(r *measure.Row) string {
	if r == nil {
		return "no valid sample"
	}
	return fmt.Sprintf("%s Mbit/s (%s–%s)", measure.FormatMbps(r.MedianBps), measure.FormatMbps(r.MinBps), measure.FormatMbps(r.MaxBps))
}
