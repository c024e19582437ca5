package tune

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// The rules by which tune calls one candidate better than another, in one
// place (docs/evidence.md explains them for users, with their chances):
//
//   - Within one interleaved round and one direction, a is faster than b
//     when a's slowest sample is above b's fastest (verdict.Faster:
//     Confirmed), slower when b's slowest is above a's fastest (Refuted),
//     and within the spread otherwise. A side with fewer than MinSamples
//     valid samples in that round leaves the direction not judged in that
//     round: a sample refused because the emulator fell behind or iperf3's
//     figures disagreed says nothing about the candidate, so a side with
//     no valid sample is not taken to be the slower one. (A stalled
//     tunnel gives valid samples of 0 bit/s and loses by the rule itself.)
//   - One round (the search's moves): a beats b when it is faster in at
//     least one direction and slower in none (Better).
//   - Over several rounds (the final verdict, advise's gap): samples of
//     different rounds are never pooled, because the machine's load drifts
//     between rounds and a pooled range mixes that drift into the spread
//     in both directions: it can hide a steady win, and it let a round
//     lost beyond the spread pass as "within the spread". a beats b only
//     when some direction is faster in every round that judged it (at
//     least MinRounds besides the round in which the search chose a for
//     its win: of several candidates the luckiest wins a round, so that
//     round is no fair evidence), and no direction is slower in any round
//     (Judge).
//     The search ends with a confirmation round when its best has fewer
//     rounds with the default; when its best fails, an earlier best or
//     advise's variant that passes is reported (Decide).

// MinSamples is how many samples each side needs in a round before a
// difference can be called beyond the spread (verdict.MinSamples).
const MinSamples = verdict.MinSamples

// compare judges one round in one direction: +1 when a is faster than b
// beyond the spread, -1 when slower, 0 within the spread; judged is false
// when either side has fewer than MinSamples samples.
func compare(a, b []float64) (cmp int, judged bool) {
	if len(a) < MinSamples || len(b) < MinSamples {
		return 0, false
	}
	switch o, _ := verdict.Faster(a, b, 1); o {
	case verdict.Confirmed, verdict.Changed:
		return 1, true
	case verdict.Refuted:
		return -1, true
	}
	return 0, true
}

func outcomeOf(a, b []float64) string {
	c, ok := compare(a, b)
	switch {
	case !ok:
		return fmt.Sprintf("%s (%d vs %d, need %d)", OutcomeTooFew, len(a), len(b), MinSamples)
	case c > 0:
		return OutcomeFaster
	case c < 0:
		return OutcomeSlower
	}
	return OutcomeWithin
}

// Better reports whether a beats b in one round: faster beyond the spread
// in at least one direction and slower beyond the spread in none.
func Better(a, b Samples, dirs []string) bool {
	won := false
	for _, d := range dirs {
		switch c, _ := compare(a[d], b[d]); c {
		case 1:
			won = true
		case -1:
			return false
		}
	}
	return won
}

// RoundPair is what one round measured of two candidates.
type RoundPair struct {
	Round int
	A, B  Samples
	// Chose is true when the search moved to A in this round because A
	// won it: a round picked for A's win is no fair evidence of A (of
	// several candidates, the luckiest wins), so it does not count
	// towards MinRounds.
	Chose bool
}

// movedTo returns the candidate step i of steps moved to ("" when it did
// not move on an axis): Step.Best, or in documents without it the next
// step's incumbent.
func movedTo(steps []Step, i int) string {
	st := steps[i]
	if !st.Moved || st.Axis == "start" {
		return ""
	}
	if st.Best != "" {
		return st.Best
	}
	if i+1 < len(steps) {
		return steps[i+1].Incumbent
	}
	return ""
}

// pairsOf returns, for every step that measured both a and b, their
// samples in that step.
func pairsOf(steps []Step, a, b string) []RoundPair {
	var out []RoundPair
	for i, st := range steps {
		var sa, sb Samples
		for _, c := range st.Candidates {
			if c.Name == a {
				sa = c.Samples
			}
			if c.Name == b {
				sb = c.Samples
			}
		}
		if sa != nil && sb != nil {
			out = append(out, RoundPair{Round: st.Round, A: sa, B: sb, Chose: movedTo(steps, i) == a})
		}
	}
	return out
}

// record judges a against b round by round.
func record(pairs []RoundPair, dirs []string) (map[string]DirRecord, []RoundJudgement) {
	recs := map[string]DirRecord{}
	var rounds []RoundJudgement
	for _, p := range pairs {
		rj := RoundJudgement{Round: p.Round, Outcome: map[string]string{}}
		for _, d := range dirs {
			r := recs[d]
			c, ok := compare(p.A[d], p.B[d])
			switch {
			case !ok:
				r.Unjudge++
			case c > 0:
				r.Faster++
			case c < 0:
				r.Slower++
			default:
				r.Within++
			}
			if ok && p.Chose {
				r.Chose++
			}
			recs[d] = r
			rj.Outcome[d] = outcomeOf(p.A[d], p.B[d])
			rj.Chose = p.Chose
			if p.Chose {
				rj.Outcome[d] += " (the round that chose it)"
			}
		}
		rounds = append(rounds, rj)
	}
	return recs, rounds
}

// beats is the rule over rounds: some direction faster in every round
// that judged it, no direction slower in any round.
func beats(recs map[string]DirRecord, dirs []string) bool {
	won := false
	for _, d := range dirs {
		r := recs[d]
		if r.Slower > 0 {
			return false
		}
		won = won || r.Won()
	}
	return won
}

// VerdictRule is the rule a Verdict applies, as the JSON states it.
const VerdictRule = "better only when, in the interleaved rounds that measured both, one direction was faster beyond the spread (slowest sample above the other's fastest, 3 samples a side) in every round that judged it (at least 2 rounds besides the round in which the search chose it) and no direction was slower beyond the spread in any round; samples of different rounds are not pooled (docs/evidence.md: a candidate of the default's speed passes by chance in about 1 of 400 per direction)"

// Judge decides whether candidate name beats the default from the steps
// that measured both: the rule over rounds (beats). name is the search's
// best ("default" when the search never moved).
func Judge(steps []Step, name string, dirs []string) Verdict {
	v := Verdict{Candidate: name, Best: "default", Rule: VerdictRule}
	if name == "default" {
		v.ReasonKind = tunedoc.ReasonNeverMoved
		renderVerdict(&v, dirs)
		return v
	}
	pairs := pairsOf(steps, name, "default")
	recs, rounds := record(pairs, dirs)
	v.Rounds = rounds
	v.Records = map[string]DirRecord{}
	for _, d := range dirs {
		v.Records[d] = recs[d]
	}
	switch {
	case beats(recs, dirs):
		v.Found, v.Best = true, name
	case len(pairs) == 0:
		v.ReasonKind = tunedoc.ReasonNeverMeasured
	default:
		v.ReasonKind = tunedoc.ReasonNotEveryRound
	}
	renderVerdict(&v, dirs)
	return v
}

// recordText is a candidate's records in dirs, in words.
func recordText(recs map[string]DirRecord, dirs []string) string {
	var parts []string
	for _, d := range dirs {
		parts = append(parts, fmt.Sprintf("%s %s", d, recs[d]))
	}
	return strings.Join(parts, "; ")
}

// renderVerdict writes v's Message and Reason from its typed fields
// (Found, Candidate, Best, Records, BestRecords, ReasonKind, AlsoJudged):
// the one place these sentences are written.
func renderVerdict(v *Verdict, dirs []string) {
	why := ""
	switch v.ReasonKind {
	case tunedoc.ReasonNeverMoved:
		why = "no candidate beat the current best in any round"
	case tunedoc.ReasonNeverMeasured:
		why = fmt.Sprintf("the search's best, %s, was never measured in a round with the default", v.Candidate)
	case tunedoc.ReasonNotEveryRound:
		why = fmt.Sprintf("the search's best, %s, did not beat the default in every round that measured both (%s)", v.Candidate, recordText(v.Records, dirs))
	}
	switch {
	case v.Found && v.Best == v.Candidate:
		v.Message, v.Reason = fmt.Sprintf("%s beats the default in every round that measured both (%s)", v.Best, recordText(v.Records, dirs)), ""
	case v.Found:
		// An earlier best or advise's variant; why the search's best
		// did not beat the default follows.
		v.Message, v.Reason = fmt.Sprintf("%s beats the default in every round that measured both (%s); %s", v.Best, recordText(v.BestRecords, dirs), why), ""
	default:
		if len(v.AlsoJudged) > 0 {
			why += fmt.Sprintf("; nor did %s, measured beside the default too", strings.Join(v.AlsoJudged, ", "))
		}
		v.Message, v.Reason = "nothing beats the default: "+why, why
	}
}

// Decide is the verdict of a search: its best, best, by Judge, or when
// best does not beat the default, the latest of others (the bests it
// moved through, advise's variant) that does; those are measured beside
// the default in every round they were the best or a reference, so a
// search that moved on from a candidate that beat the default, to one
// that does not, still reports it. When none does, "nothing beats the
// default" holds for every candidate that met the default in two rounds.
func Decide(steps []Step, best string, others []string, dirs []string) Verdict {
	v := Judge(steps, best, dirs)
	if v.Found {
		return v
	}
	var tried []string
	for _, o := range others {
		if o == "" || o == best || o == "default" || contains(tried, o) {
			continue
		}
		tried = append(tried, o)
		if vo := Judge(steps, o, dirs); vo.Found {
			// The verdict's rounds are those of the candidate reported.
			v.Found, v.Best, v.BestRecords, v.Rounds = true, vo.Best, vo.Records, vo.Rounds
			renderVerdict(&v, dirs)
			return v
		}
	}
	if len(tried) > 0 {
		v.AlsoJudged = tried
		renderVerdict(&v, dirs)
	}
	return v
}

// compareRounds compares a with b in direction d over the rounds in pairs.
func compareRounds(pairs []RoundPair, d string) Comparison {
	var pa, pb, ratios []float64
	for _, p := range pairs {
		a, b := p.A[d], p.B[d]
		pa = append(pa, a...)
		pb = append(pb, b...)
		for i := 0; i < len(a) && i < len(b); i++ {
			if b[i] > 0 {
				ratios = append(ratios, a[i]/b[i])
			}
		}
	}
	recs, _ := record(pairs, []string{d})
	c := Comparison{Best: verdict.Of(pa), Other: verdict.Of(pb), Record: recs[d], BeyondSpread: recs[d].Won()}
	if len(ratios) > 0 {
		s := verdict.Of(ratios)
		c.Ratio, c.RatioMin, c.RatioMax, c.Pairs = s.Median, s.Min, s.Max, s.N
	}
	return c
}
