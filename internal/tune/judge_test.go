package tune

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

var both = []string{"up", "down"}

func mbit(xs ...float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * 1e6
	}
	return out
}

// steps builds the steps of a run in which best ("c3") and the default
// were measured in the given rounds.
func steps(rounds ...[2]Samples) []Step {
	var out []Step
	for i, r := range rounds {
		out = append(out, Step{Round: i + 1, Candidates: []StepCandidate{
			{Name: "c3", Samples: r[0]}, {Name: "default", Samples: r[1]}}})
	}
	return out
}

func round(best, def Samples) [2]Samples { return [2]Samples{best, def} }

// Must show 2: a best is reported only when it beats the default in every
// interleaved round (paired samples of the same round), never from samples
// pooled across rounds; otherwise nothing beats the default, with the
// reason's kind and the rounds it is written from. Fabricated sample sets
// on both sides of the line.
func TestJudge(t *testing.T) {
	t.Parallel()
	def := Samples{"up": mbit(17, 18, 19), "down": mbit(17, 18, 19)}
	fast := Samples{"up": mbit(25, 26, 27), "down": mbit(25, 26, 27)}
	upOnly := Samples{"up": mbit(25, 26, 27), "down": mbit(17, 18, 19)}
	type rec = DirRecord
	for _, tc := range []struct {
		name     string
		rounds   [][2]Samples
		found    bool
		up, down rec
	}{
		{"faster both ways in every round", [][2]Samples{round(fast, def), round(fast, def)}, true, rec{Faster: 2}, rec{Faster: 2}},
		{"faster one way, same the other, every round", [][2]Samples{round(upOnly, def), round(upOnly, def)}, true, rec{Faster: 2}, rec{Within: 2}},
		{"higher median but ranges overlap", [][2]Samples{round(Samples{"up": mbit(18.9, 21, 22), "down": mbit(18.5, 20, 21)}, def)}, false, rec{Within: 1}, rec{Within: 1}},
		{"touching: best's slowest equals default's fastest", [][2]Samples{round(Samples{"up": mbit(19, 25, 26), "down": mbit(19, 25, 26)}, def)}, false, rec{Within: 1}, rec{Within: 1}},
		{"faster up but slower down beyond the spread", [][2]Samples{round(Samples{"up": mbit(25, 26, 27), "down": mbit(10, 11, 12)}, def)}, false, rec{Faster: 1}, rec{Slower: 1}},
		{"far faster but only two samples", [][2]Samples{round(Samples{"up": mbit(50, 51), "down": mbit(50, 51)}, def)}, false, rec{Unjudge: 1}, rec{Unjudge: 1}},
		// Won two rounds, within the spread in the third: not every round.
		{"won two rounds of three", [][2]Samples{round(fast, def), round(fast, def), round(Samples{"up": mbit(18, 19, 20), "down": mbit(18, 19, 20)}, def)}, false, rec{Faster: 2, Within: 1}, rec{Faster: 2, Within: 1}},
		// The pooled medians say better both ways (down 40 vs 20 Mbit/s)
		// and the pooled down ranges overlap (10–42 vs 14–22), so the old
		// pooled rule called down "within the spread" and, up being
		// faster, reported a best. But in round 3 down was slower beyond
		// the spread: not better.
		{"pooled medians better, one round a loss", [][2]Samples{
			round(Samples{"up": mbit(30, 31, 32), "down": mbit(40, 41, 42)}, Samples{"up": mbit(20, 21, 22), "down": mbit(20, 21, 22)}),
			round(Samples{"up": mbit(30, 31, 32), "down": mbit(40, 41, 42)}, Samples{"up": mbit(20, 21, 22), "down": mbit(20, 21, 22)}),
			round(Samples{"up": mbit(30, 31, 32), "down": mbit(10, 11, 12)}, Samples{"up": mbit(20, 21, 22), "down": mbit(14, 15, 16)}),
		}, false, rec{Faster: 3}, rec{Faster: 2, Slower: 1}},
		// The load halves between rounds: pooled, the ranges overlap
		// (13–40 vs 10–31), but best wins every round by 30 %.
		{"steady win under drifting load", [][2]Samples{
			round(Samples{"up": mbit(39, 40, 40.5), "down": mbit(39, 40, 40.5)}, Samples{"up": mbit(30, 30.5, 31), "down": mbit(30, 30.5, 31)}),
			round(Samples{"up": mbit(13, 13.3, 13.5), "down": mbit(13, 13.3, 13.5)}, Samples{"up": mbit(10, 10.2, 10.4), "down": mbit(10, 10.2, 10.4)}),
		}, true, rec{Faster: 2}, rec{Faster: 2}},
		// The default's samples were all refused (the emulator fell behind):
		// that says nothing about the default, so no win up.
		{"default has no valid sample up", [][2]Samples{round(upOnly, Samples{"down": mbit(17, 18, 19)})}, false, rec{Unjudge: 1}, rec{Within: 1}},
		// A stalled tunnel gives valid 0 bit/s samples and loses by the rule.
		{"default stalled at 0 bit/s up", [][2]Samples{round(upOnly, Samples{"up": mbit(0, 0, 0), "down": mbit(17, 18, 19)}), round(upOnly, Samples{"up": mbit(0, 0, 0), "down": mbit(17, 18, 19)})}, true, rec{Faster: 2}, rec{Within: 2}},
		// One round, however clear, is not enough: noise alone separates
		// 3 samples from 3 in 1 round of 10.
		{"won the only round", [][2]Samples{round(fast, def)}, false, rec{Faster: 1}, rec{Faster: 1}},
		{"never measured with the default", nil, false, rec{}, rec{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(steps(tc.rounds...), "c3", both)
			if v.Found != tc.found || v.Records["up"] != tc.up || v.Records["down"] != tc.down {
				t.Errorf("Judge = %+v\nwant found=%v, up %+v, down %+v", v, tc.found, tc.up, tc.down)
			}
			wantKind, wantBest := "", "c3"
			switch {
			case !tc.found && tc.rounds == nil:
				wantKind, wantBest = tunedoc.ReasonNeverMeasured, "default"
			case !tc.found:
				wantKind, wantBest = tunedoc.ReasonNotEveryRound, "default"
			}
			if v.ReasonKind != wantKind || v.Best != wantBest || (v.Reason == "") == !tc.found {
				t.Errorf("reason kind %q (want %q), best %q (want %q), reason %q", v.ReasonKind, wantKind, v.Best, wantBest, v.Reason)
			}
			if len(v.Rounds) != len(tc.rounds) || v.Candidate != "c3" || v.Rule == "" {
				t.Errorf("verdict does not carry its rounds, candidate and rule: %+v", v)
			}
		})
	}
	if v := Judge(nil, "default", both); v.Found || v.Best != "default" || v.ReasonKind != tunedoc.ReasonNeverMoved || v.Records != nil || v.Reason == "" {
		t.Errorf("a search that never moved: %+v", v)
	}
}

// renderVerdict is the one place a verdict's message and reason are
// written, from its typed fields; these are its sentences.
func TestRenderVerdict(t *testing.T) {
	t.Parallel()
	recs := map[string]DirRecord{"up": {Faster: 3, Unjudge: 3}, "down": {Unjudge: 6}}
	v := Verdict{Found: true, Candidate: "advise", Best: "advise", Records: recs}
	renderVerdict(&v, both)
	if want := "advise beats the default in every round that measured both (up faster beyond the spread in 3 of 3 judged rounds (3 more with too few samples); down not judged: fewer than 3 valid samples a side in all 6 rounds)"; v.Message != want || v.Reason != "" {
		t.Errorf("renderVerdict(found) = %q, reason %q\nwant %q", v.Message, v.Reason, want)
	}
	v = Verdict{Candidate: "c3", Best: "default", ReasonKind: tunedoc.ReasonNotEveryRound, AlsoJudged: []string{"advise"},
		Records: map[string]DirRecord{"up": {Faster: 2, Chose: 1}, "down": {Faster: 2, Slower: 1}}}
	renderVerdict(&v, both)
	if want := "the search's best, c3, did not beat the default in every round that measured both (up faster beyond the spread in 2 of 2 judged rounds (1 of them the round that chose it, which does not count; 2 needed besides); down faster beyond the spread in 2 of 3 judged rounds, slower in 1); nor did advise, measured beside the default too"; v.Reason != want || v.Message != "nothing beats the default: "+want {
		t.Errorf("renderVerdict(not found) = %q, %q\nwant reason %q", v.Message, v.Reason, want)
	}
	v = Verdict{Found: true, Candidate: "c5", Best: "advise", ReasonKind: tunedoc.ReasonNeverMeasured, BestRecords: map[string]DirRecord{"up": {Faster: 2}, "down": {Within: 2}}}
	renderVerdict(&v, both)
	if want := "advise beats the default in every round that measured both (up faster beyond the spread in 2 of 2 judged rounds; down faster beyond the spread in 0 of 2 judged rounds); the search's best, c5, was never measured in a round with the default"; v.Message != want || v.Reason != "" {
		t.Errorf("renderVerdict(fallback) = %q\nwant %q", v.Message, want)
	}
	v = Verdict{Candidate: "default", Best: "default", ReasonKind: tunedoc.ReasonNeverMoved}
	renderVerdict(&v, both)
	if v.Message != "nothing beats the default: no candidate beat the current best in any round" {
		t.Errorf("renderVerdict(never moved) = %q", v.Message)
	}
}

// The comparisons of the best with the default and with advise are
// round by round too: the ratio is that of samples paired within a round.
func TestCompareRounds(t *testing.T) {
	t.Parallel()
	pairs := pairsOf(steps(
		round(Samples{"up": mbit(39, 40, 40.5)}, Samples{"up": mbit(30, 30.5, 31)}),
		round(Samples{"up": mbit(13, 13.3, 13.5)}, Samples{"up": mbit(10, 10.2, 10.4)}),
	), "c3", "default")
	c := compareRounds(pairs, "up")
	if !c.BeyondSpread || c.Pairs != 6 || c.Ratio < 1.29 || c.Ratio > 1.32 || c.RatioMin < 1.25 || c.Record.Faster != 2 {
		t.Errorf("comparison %+v", c)
	}
	// Pooled, best's range overlaps the default's; that is display only.
	if c.Best.Min > c.Other.Max {
		t.Errorf("pooled spreads %+v %+v", c.Best, c.Other)
	}
}

// A saved run judged again: the black-holed path (b) measured under load
// with the old rule (schema 1, which pooled the rounds), as `ovpnperf
// report` reads it. advise's variant
// won up in every round with 3 samples a side (the default stalls at
// 0 bit/s); down never had 3 valid samples a side in one round, so down
// is not judged, and the message says so.
func TestJudgeSavedRun(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/tune-blackhole.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := tunedoc.Read(b, Rejudge)
	if err != nil {
		t.Fatal(err)
	}
	res := *doc
	if res.Schema != Schema || res.Verdict.Candidate != "advise" {
		t.Errorf("upgraded: schema %q, candidate %q", res.Schema, res.Verdict.Candidate)
	}
	v := res.Verdict
	// Up won all 3 judged rounds (3 more had too few samples); down was
	// judged in none of the 6.
	if !v.Found || v.Best != "advise" || v.Records["up"] != (DirRecord{Faster: 3, Unjudge: 3}) || v.Records["down"] != (DirRecord{Unjudge: 6}) {
		t.Errorf("verdict %+v", v)
	}
	if res.Best.Name != "advise" || res.Best.Body != "mssfix 1400 mtu;tun-mtu 1348" || !res.VsDefault["up"].BeyondSpread || res.VsDefault["down"].BeyondSpread {
		t.Errorf("best %+v, vs default %+v", res.Best, res.VsDefault)
	}
	// The stalled default's 0 bit/s pairs give no ratio.
	if r := res.VsDefault["up"]; r.Ratio != 0 || r.Pairs != 0 {
		t.Errorf("ratio over 0 bit/s: %+v", r)
	}
	// Its findings are records: advise's variant is faster up, and only
	// up (down was not judged).
	var faster []string
	for _, f := range res.Findings {
		if err := f.Check(); err != nil {
			t.Error(err)
		}
		if f.Kind == finding.TunedFaster {
			faster = append(faster, f.Subject.Direction)
			if f.Outcome != verdict.Confirmed || f.Settings["best"] != "advise" || f.Figures["judged_rounds"] != 3 || f.Figures["faster_rounds"] != 3 {
				t.Errorf("tuned-faster: %+v", f)
			}
		}
	}
	if len(faster) != 1 || faster[0] != "up" {
		t.Errorf("tuned-faster in %v, want up alone: %+v", faster, res.Findings)
	}
}

// Judgement is a pure function of the rounds: judging a run's steps
// again gives the run's own verdict, best, comparisons and findings.
func TestRejudgeReproducesRun(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]Options{
		"lost round": {Path: labpath.Path{}, Budget: time.Minute, Measure: judgedMeasure(3, nil)},
		"advise gap": {Path: fakePath, PathDescription: "b", Budget: time.Minute, Measure: judgedMeasure(0, nil),
			Advice: Advice{Candidate: &Candidate{Proto: "udp", Settings: map[string]string{AxisMTU: "mssfix 1400 mtu"}}, Variant: "advise=mssfix 1400 mtu", Note: "test"}},
	} {
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(res)
		again := *res
		if err := Rejudge(&again, res.Verdict.Candidate); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(&again)
		if string(got) != string(want) {
			t.Errorf("%s: judged again differs:\nrun   %s\nagain %s", name, want, got)
		}
		short := 0
		for _, f := range res.Findings {
			if f.Kind == finding.AdviseShort && f.Outcome == verdict.Confirmed && f.Figures["short_percent"] > 5 && f.Settings["differs_in"] != "" {
				short++
			}
		}
		if name == "advise gap" && short == 0 {
			t.Errorf("advise gap: no confirmed advise-short finding in %+v", res.Findings)
		}
	}
}

// When the search's last best does not beat the default round by round,
// an earlier best or advise's variant that does is reported (they were
// measured beside the default in every round); when none does, the
// reason names them too.
func TestDecideFallsBack(t *testing.T) {
	t.Parallel()
	def := Samples{"up": mbit(0, 0, 0), "down": mbit(17, 18, 19)}
	adv := Samples{"up": mbit(80, 81, 82), "down": mbit(17, 18, 19)}
	c5 := Samples{"up": mbit(90, 91, 92), "down": mbit(10, 11, 12)} // slower down
	st := func(r int, inc string, cands map[string]Samples) Step {
		s := Step{Round: r, Incumbent: inc}
		for _, n := range []string{"advise", "default", "c5"} {
			if x, ok := cands[n]; ok {
				s.Candidates = append(s.Candidates, StepCandidate{Name: n, Samples: x})
			}
		}
		return s
	}
	steps := []Step{
		st(1, "default", map[string]Samples{"advise": adv, "default": def}),
		st(2, "advise", map[string]Samples{"advise": adv, "default": def, "c5": {"up": mbit(90, 91, 92), "down": mbit(17, 18, 19)}}),
		st(3, "c5", map[string]Samples{"advise": adv, "default": def, "c5": c5}),
	}
	// c5 lost down in round 3; advise won up in all 3 rounds.
	v := Decide(steps, "c5", []string{"c5", "advise", "default", "advise"}, both)
	if !v.Found || v.Best != "advise" || v.Candidate != "c5" || v.ReasonKind != tunedoc.ReasonNotEveryRound || v.Records["down"].Slower != 1 ||
		v.BestRecords["up"] != (DirRecord{Faster: 3}) || v.Reason != "" {
		t.Errorf("fallback: %+v", v)
	}
	// advise loses down in round 3 too: nothing beats the default, and
	// the verdict names advise as judged too.
	steps[2].Candidates[0].Samples = Samples{"up": mbit(80, 81, 82), "down": mbit(10, 11, 12)}
	v = Decide(steps, "c5", []string{"c5", "advise"}, both)
	if v.Found || v.Best != "default" || v.BestRecords != nil || len(v.AlsoJudged) != 1 || v.AlsoJudged[0] != "advise" || v.ReasonKind != tunedoc.ReasonNotEveryRound {
		t.Errorf("no fallback: %+v", v)
	}
}

// Version 1 did not record the search's best when nothing beat the
// default; UpgradeV1 reads it from the message.
func TestUpgradeV1NamesTheBest(t *testing.T) {
	t.Parallel()
	res := Result{Schema: SchemaV1, Directions: both, Steps: steps(round(Samples{"up": mbit(25, 26, 27)}, Samples{"up": mbit(17, 18, 19)})),
		Verdict: Verdict{Message: "nothing beats the default: the search's best, c3, is not faster beyond the spread (up …)"}}
	res.Steps[0].Candidates[0].Variant, res.Steps[0].Candidates[1].Variant = "c3=fast-io", "default"
	// One round won up: judged again, 2 are needed besides it.
	if err := UpgradeV1(&res); err != nil || res.Verdict.Candidate != "c3" || res.Verdict.Found || res.Verdict.ReasonKind != tunedoc.ReasonNotEveryRound ||
		res.Verdict.Records["up"] != (DirRecord{Faster: 1}) || res.Verdict.Records["up"].Won() {
		t.Errorf("err %v, verdict %+v", err, res.Verdict)
	}
}

// The round in which the search moved to a candidate for its win there
// is no fair evidence of it (of several candidates the luckiest wins):
// it is judged but does not count towards MinRounds.
func TestJudgeDiscountsTheChoosingRound(t *testing.T) {
	t.Parallel()
	def := Samples{"up": mbit(17, 18, 19), "down": mbit(17, 18, 19)}
	fast := Samples{"up": mbit(25, 26, 27), "down": mbit(17, 18, 19)}
	st := steps(round(fast, def), round(fast, def), round(fast, def))
	st[0].Moved, st[0].Axis, st[0].Best = true, AxisMTU, "c3"
	if v := Judge(st[:2], "c3", both); v.Found || v.Records["up"] != (DirRecord{Faster: 2, Chose: 1}) || v.Records["up"].Fresh() >= MinRounds {
		t.Errorf("chosen + 1 round: %+v", v)
	}
	if v := Judge(st, "c3", both); !v.Found || !v.Rounds[0].Chose || v.Rounds[1].Chose || v.Records["up"] != (DirRecord{Faster: 3, Chose: 1}) {
		t.Errorf("chosen + 2 rounds: %+v", v)
	}
	// A document without Step.Best: the next step's incumbent names the
	// candidate moved to.
	st[0].Best, st[1].Incumbent = "", "c3"
	if v := Judge(st[:2], "c3", both); v.Found {
		t.Errorf("chosen (by the next incumbent) + 1 round: %+v", v)
	}
}
