package tunedoc

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Network is the subject network of a tune document's findings: the lab
// twin of the described path (the description is the setting "path").
const Network = "twin"

// shortRatio: advise's variant is "short" of the best only when best/advise
// is above ×1.05 by the paired median (a few percent is the run-to-run
// difference of samples on a shared machine).
const shortRatio = 1.05

// citeRounds is the rule over rounds the tune findings apply.
const citeRounds = "docs/evidence.md#tunes-search-and-verdict"

// Findings judges a tune document's verdict and comparisons as records:
// tuned-faster for each direction in which the reported best beat the
// defaults in every round that judged it, or no-faster-setting when
// nothing did; advise-short for each direction in which advise's variant
// is short of the best (confirmed when faster beyond the spread in every
// judged round, noise when only by the medians), or one not tested when
// advise's variant was not measured. It reads only the document, so a
// document written without typed findings is judged the same way on
// reading.
func Findings(res *Result) []finding.Finding {
	out := []finding.Finding{}
	path := map[string]string{"path": res.PathDescription}
	with := func(m map[string]string) map[string]string {
		for k, v := range path {
			m[k] = v
		}
		return m
	}
	if res.Verdict.Found {
		for _, d := range res.Directions {
			c, ok := res.VsDefault[d]
			if !ok || !c.BeyondSpread {
				continue
			}
			f := finding.Finding{Kind: finding.TunedFaster, Subject: finding.Subject{Network: Network, Direction: d},
				Outcome: verdict.Confirmed, Figures: comparisonFigures(c, "best_over_default_ratio"),
				Settings:  with(map[string]string{"best": res.Best.Name, "variant": res.Best.Variant, "proto": res.Best.Proto}),
				RefutedBy: "a round in which the best is not faster than the defaults beyond the spread in " + d, Cites: []string{citeRounds}}
			if len(res.Best.Server) > 0 {
				f.Advice = "server: " + strings.Join(res.Best.Server, "; ") + "; client: " + strings.Join(res.Best.Client, "; ")
				if len(res.Best.Sysctl) > 0 {
					f.Advice += "; sysctl: " + strings.Join(res.Best.Sysctl, "; ")
				}
			}
			ratio := "no ratio (no pair with a positive default)"
			if c.Pairs > 0 {
				ratio = fmt.Sprintf("best/default ×%.2f over %d pairs", c.Ratio, c.Pairs)
			}
			f.Text = fmt.Sprintf("%s: %s is faster than OpenVPN's defaults (%s): %s against %s Mbit/s, %s, %s.",
				d, res.Best.Name, f.Outcome, measure.FormatMbpsSpread(c.Best), measure.FormatMbpsSpread(c.Other), ratio, c.Record)
			out = append(out, f)
		}
		if len(out) == 0 {
			// The verdict and the comparisons are judged by one rule
			// (DirRecord.Won); a document whose comparisons do not
			// show the win still says what its verdict found.
			out = append(out, finding.Finding{Kind: finding.TunedFaster, Subject: finding.Subject{Network: Network}, Outcome: verdict.Confirmed,
				Settings: with(map[string]string{"best": res.Best.Name, "variant": res.Best.Variant, "proto": res.Best.Proto}),
				Cites:    []string{citeRounds}, Text: res.Verdict.Message + "."})
		}
	} else {
		out = append(out, noFaster(res, with(map[string]string{"candidate": res.Verdict.Candidate})))
	}
	if res.VsAdvise == nil {
		return append(out, finding.Finding{Kind: finding.AdviseShort, Subject: finding.Subject{Network: Network}, Outcome: verdict.NotTested,
			Settings: path, Decide: "a tune run in which advise's variant takes part (a described path, or --probe)",
			Text: "advise's gap not measured: " + res.Advise.Note})
	}
	for _, d := range res.Directions {
		g, ok := res.VsAdvise[d]
		if !ok || len(g.ClosedBy) == 0 || g.Ratio <= shortRatio {
			continue
		}
		f := finding.Finding{Kind: finding.AdviseShort, Subject: finding.Subject{Network: Network, Direction: d},
			Figures:  comparisonFigures(g.Comparison, "best_over_advise_ratio"),
			Settings: with(map[string]string{"best": res.Best.Name, "advise_variant": res.Advise.Variant, "differs_in": strings.Join(g.ClosedBy, ", ")}), Cites: []string{citeRounds}}
		f.Figures["short_percent"] = 100 * (g.Ratio - 1)
		if g.BeyondSpread {
			f.Outcome = verdict.Confirmed
			f.RefutedBy = "a round in which the best is not faster than advise's variant beyond the spread in " + d
			f.Advice = "the best differs from advise's variant in " + strings.Join(g.ClosedBy, ", ")
			f.Text = fmt.Sprintf("advise is %.0f%% short of the best on %s (%s; best/advise ×%.2f over %d pairs, faster beyond the spread in every one of %d judged rounds); the best differs from advise's variant in %s.",
				100*(g.Ratio-1), res.PathDescription, d, g.Ratio, g.Pairs, g.Record.Judged(), strings.Join(g.ClosedBy, ", "))
		} else {
			f.Outcome = verdict.Noise
			f.Decide = fmt.Sprintf("faster beyond the spread in every judged round, at least %d besides the round that chose it (a longer --budget, or a quieter machine)", MinRounds)
			f.Text = fmt.Sprintf("%s: best/advise ×%.2f, but not faster beyond the spread in every round (%s): not a finding.", d, g.Ratio, g.Record)
		}
		out = append(out, f)
	}
	return out
}

// noFaster is the finding when no candidate beat the defaults: noise when
// some direction of the search's best was faster in a round but not by
// the rule, not tested when no round judged it, confirmed otherwise (the
// candidates measured were not faster; others the search did not try may
// be).
func noFaster(res *Result, settings map[string]string) finding.Finding {
	f := finding.Finding{Kind: finding.NoFasterSetting, Subject: finding.Subject{Network: Network},
		Figures: finding.Figures{}, Settings: settings, Cites: []string{citeRounds}}
	judged, faster := 0, 0
	for _, d := range res.Directions {
		c, ok := res.VsDefault[d]
		if !ok {
			continue
		}
		judged += c.Record.Judged()
		faster += c.Record.Faster
		if c.Pairs > 0 {
			f.Figures[d+"_best_over_default_ratio"] = c.Ratio
		}
	}
	switch {
	case res.Verdict.Candidate == "default" || res.Verdict.Candidate == "":
		f.Outcome = verdict.Confirmed
	case judged == 0:
		f.Outcome = verdict.NotTested
		f.Decide = fmt.Sprintf("rounds with %d valid samples a side of the search's best and the defaults", verdict.MinSamples)
	case faster > 0:
		f.Outcome = verdict.Noise
		f.Decide = fmt.Sprintf("faster beyond the spread in every judged round, at least %d besides the round that chose it (a longer --budget, or a quieter machine)", MinRounds)
	default:
		f.Outcome = verdict.Confirmed
	}
	if f.Outcome == verdict.Confirmed {
		f.RefutedBy = "a configuration faster than the defaults beyond the spread in every round that judges it"
	}
	f.Text = fmt.Sprintf("%s (%s).", res.Verdict.Message, f.Outcome)
	return f
}

// comparisonFigures are a comparison's figures, its ratio under name.
func comparisonFigures(c Comparison, name string) finding.Figures {
	f := finding.Figures{"pairs": float64(c.Pairs), "faster_rounds": float64(c.Record.Faster), "judged_rounds": float64(c.Record.Judged())}
	// No pair with a positive denominator (a side stalled at 0 bit/s):
	// no ratio, and the figure is absent.
	if c.Pairs > 0 {
		f[name], f["min_pair_ratio"], f["max_pair_ratio"] = c.Ratio, c.RatioMin, c.RatioMax
	}
	if c.Best.N > 0 {
		f["best_median_bps"] = c.Best.Median
	}
	if c.Other.N > 0 {
		f["other_median_bps"] = c.Other.Median
	}
	return f
}
