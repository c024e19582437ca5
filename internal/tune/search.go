package tune

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/verdict"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
)

// searcher holds a run's state.
type searcher struct {
	o     Options
	res   *Result
	names map[string]string // key → name
	cands map[string]Candidate
	start time.Time

	// axes are the settings searched; advName names advise's variant
	// among the candidates ("" without one, "default" when it is
	// OpenVPN's default).
	axes    []Axis
	advName string
	// runCtx ends with the budget; incumbent is the best so far; round
	// counts the rounds measured; failures the failed rounds in a row,
	// of which two end the search with runErr.
	runCtx    context.Context
	incumbent string
	round     int
	failures  int
	runErr    error
}

func (s *searcher) name(c Candidate) string {
	k := c.Key()
	if n, ok := s.names[k]; ok {
		return n
	}
	n := fmt.Sprintf("c%d", len(s.names))
	s.names[k] = n
	s.cands[n] = c
	return n
}

func (s *searcher) logf(format string, a ...any) {
	if s.o.Progress != nil {
		fmt.Fprintf(s.o.Progress, "tune: "+format+"\n", a...)
	}
}

// Run searches. It returns the result also when ctx is cancelled or the
// budget ends (Stopped says which), with the best found so far.
func Run(ctx context.Context, o Options) (*Result, error) {
	if len(o.Directions) == 0 {
		o.Directions = []string{measure.DirectionUp, measure.DirectionDown}
	}
	if o.Passes <= 0 {
		o.Passes = 2
	}
	s := &searcher{o: o, names: map[string]string{}, cands: map[string]Candidate{}, start: time.Now(), incumbent: "default"}
	s.res = &Result{Schema: Schema, Path: o.Path, PathDescription: o.PathDescription, Directions: o.Directions,
		BudgetSeconds: o.Budget.Seconds(), Findings: []finding.Finding{}}
	s.plan()

	runCtx, cancel := context.WithCancel(ctx)
	if o.Budget > 0 {
		runCtx, cancel = context.WithTimeout(ctx, o.Budget)
	}
	defer cancel()
	s.runCtx = runCtx

	s.startFromAdvise()
	for pass := 0; pass < o.Passes && s.going(); pass++ {
		movedThisPass := false
		for _, ax := range s.axes {
			if !s.going() {
				break
			}
			if s.searchAxis(ax) {
				movedThisPass = true
			}
		}
		if !movedThisPass {
			break
		}
	}
	s.confirm()
	s.res.ElapsedSeconds = time.Since(s.start).Seconds()
	switch {
	case ctx.Err() != nil:
		s.res.Stopped = StoppedInterrupted
	case runCtx.Err() != nil:
		s.res.Stopped = StoppedBudget
	case s.runErr != nil:
		s.res.Stopped = stoppedFailed(s.runErr)
	default:
		s.res.Stopped = StoppedDone
	}
	s.finish(s.incumbent, s.advName)
	if ctx.Err() != nil {
		return s.res, ctx.Err()
	}
	return s.res, s.runErr
}

// going says the search may measure another round: the budget is not used
// up and the search has not failed.
func (s *searcher) going() bool { return s.runCtx.Err() == nil && s.runErr == nil }

// plan sets up the search space, the default and advise's candidate, with
// a note for each thing the run does not try.
func (s *searcher) plan() {
	o := s.o
	var adv *Candidate
	if o.Advice.Candidate != nil {
		a := *o.Advice.Candidate
		for _, ax := range sortedKeys(o.Fixed) {
			if v := o.Fixed[ax]; a.get(ax) != v {
				s.res.Notes = append(s.res.Notes, fmt.Sprintf("advise's %s (%q) replaced by --fix %s", ax, a.get(ax), ax))
				a = a.with(ax, v)
			}
		}
		adv = &a
		s.res.Advise = AdviseInfo{Available: true, Variant: o.Advice.Variant, Note: o.Advice.Note}
	} else {
		s.res.Advise = AdviseInfo{Note: o.Advice.Note}
	}
	so := SpaceOptions{PathMTU: o.Path.EffectiveMTU(), LossPercent: max(o.Path.Up.LossPercent, o.Path.Down.LossPercent),
		AllowTCP: o.AllowTCP, Fixed: o.Fixed, Advice: adv, BufferCap: o.BufferCap, DCO: o.DCO.Available}
	s.axes = Space(so)
	if !o.DCO.Available && o.DCO.NotTested != "" {
		s.notTried(tunedoc.NotTried{Axis: AxisDCO, Reason: tunedoc.NotTriedHost, Detail: o.DCO.NotTested})
	}
	if ok, why := JumboTried(so); !ok {
		if _, fixed := o.Fixed[AxisMTU]; !fixed {
			s.notTried(why)
		}
	}
	if o.BufferCap > 0 && o.BufferCap < bufferSizes[len(bufferSizes)-1] {
		s.notTried(tunedoc.NotTried{Axis: AxisBuffers, Reason: tunedoc.NotTriedBufferCap, CapBytes: o.BufferCap})
	}
	s.res.Axes = s.axes
	if _, fixed := o.Fixed[AxisProto]; !fixed && !o.AllowTCP {
		s.notTried(tunedoc.NotTried{Axis: AxisProto, Value: "tcp", Reason: tunedoc.NotTriedNotAllowed})
	}
	def := Candidate{Proto: "udp", Settings: map[string]string{}}
	for ax, v := range o.Fixed {
		def = def.with(ax, v)
	}
	s.names[def.Key()] = "default"
	s.cands["default"] = def
	if def.Body() != "" || def.Proto != "udp" {
		// "Beats the default" is then about this candidate, not about
		// OpenVPN's own defaults.
		s.res.Notes = append(s.res.Notes, fmt.Sprintf("\"default\" in this run is OpenVPN's defaults with the --fix settings: proto %s%s", def.Proto, map[bool]string{true: "; " + def.Body()}[def.Body() != ""]))
	}
	if adv != nil {
		if adv.Key() == def.Key() {
			s.advName = "default"
			s.res.Notes = append(s.res.Notes, "advise's variant is OpenVPN's default here")
		} else {
			s.advName = "advise"
			s.names[adv.Key()] = "advise"
			s.cands["advise"] = *adv
		}
	}
}

// notTried records what the run does not search, and its note.
func (s *searcher) notTried(n tunedoc.NotTried) {
	s.res.NotTried = append(s.res.NotTried, n)
	s.res.Notes = append(s.res.Notes, n.Text())
}

// measureRound measures names (the references default and advise are
// always among them, so that every comparison with them is within one
// interleaved round) and records the step.
func (s *searcher) measureRound(axis string, names []string) (map[string]Samples, bool) {
	o := s.o
	s.round++
	round := s.round
	names = Uniq(append([]string{s.incumbent, "default", s.advName}, names...))
	var named []Named
	for _, n := range names {
		named = append(named, Named{Name: n, Candidate: s.cands[n]})
	}
	t0 := time.Now()
	s.logf("round %d (%s): measuring %s", round, axis, strings.Join(names, ", "))
	sam, errs, err := o.Measure(s.runCtx, round, named)
	step := Step{Round: round, Axis: axis, Incumbent: s.incumbent, Errors: errs, Seconds: time.Since(t0).Seconds(), Complete: err == nil}
	for _, n := range named {
		sc := StepCandidate{Name: n.Name, Variant: variantString(n.Name, n.Candidate), Proto: n.Proto, Samples: Samples{}, Spread: map[string]verdict.Spread{}}
		for _, d := range o.Directions {
			sc.Samples[d] = append([]float64{}, sam[n.Name][d]...)
			sc.Spread[d] = verdict.Of(sam[n.Name][d])
		}
		step.Candidates = append(step.Candidates, sc)
	}
	if err != nil && s.runCtx.Err() == nil {
		// A round that failed (a tunnel that would not start, a lab
		// that would not build) is recorded and the search goes on
		// with the next axis; two failures in a row end it.
		step.Errors = append(step.Errors, "round failed: "+err.Error())
		s.logf("round %d failed: %v", round, err)
		s.failures++
		if s.failures >= 2 {
			s.runErr = err
		}
	} else if err == nil {
		s.failures = 0
	}
	s.res.Steps = append(s.res.Steps, step)
	return sam, err == nil
}

// decide records the decision of the last round: its kind
// (tunedoc.Decision*) and the sentence that says it.
func (s *searcher) decide(kind, dec string, noise bool) {
	st := &s.res.Steps[len(s.res.Steps)-1]
	st.Kind, st.Decision, st.Moved, st.Noise, st.Best = kind, dec, kind == tunedoc.DecisionMoved, noise, s.incumbent
	s.logf("round %d: %s; current best %s%s", st.Round, dec, s.incumbent, s.bestFigures(s.incumbent))
}

// startFromAdvise is round 0: advise against the default; advise is the
// starting point unless the default beats it beyond the spread.
func (s *searcher) startFromAdvise() {
	if s.advName != "advise" {
		return
	}
	sam, _ := s.measureRound("start", nil)
	switch {
	case Better(sam["default"], sam["advise"], s.o.Directions):
		s.decide(tunedoc.DecisionKept, "the default beats advise's variant beyond the spread: starting from the default", false)
	default:
		s.incumbent = "advise"
		s.decide(tunedoc.DecisionMoved, "starting from advise's variant (the default does not beat it beyond the spread)", false)
	}
}

// searchAxis measures the current best against each other value of one
// axis in one round and moves to the value that beats it beyond the
// spread, if one does. It says whether the best moved.
func (s *searcher) searchAxis(ax Axis) (moved bool) {
	o := s.o
	if ax.Fixed || len(ax.Values) < 2 {
		return false
	}
	cur := s.cands[s.incumbent]
	var alts []string
	for _, v := range ax.Values {
		c := cur.with(ax.Name, v)
		if v == cur.get(ax.Name) || !c.valid() {
			continue
		}
		alts = append(alts, s.name(c))
	}
	if len(alts) == 0 || len(alts)+3 > tunnel.MaxSlots {
		return false
	}
	sam, complete := s.measureRound(ax.Name, alts)
	bestAlt, bestScore := "", 0.0
	var noise, tradeoff, unjudged []string
	for _, a := range alts {
		switch classify(sam[a], sam[s.incumbent], o.Directions) {
		case altWins:
			if sc := score(sam[a], sam[s.incumbent], o.Directions); bestAlt == "" || sc > bestScore {
				bestAlt, bestScore = a, sc
			}
		case altTradeoff:
			tradeoff = append(tradeoff, a)
		case altUnjudged:
			unjudged = append(unjudged, a)
		case altWithin:
			// A higher median inside the spread is the case
			// "noise" names: a difference the samples cannot
			// tell from the load's.
			if score(sam[a], sam[s.incumbent], o.Directions) > 1 {
				noise = append(noise, a)
			}
		}
	}
	var also []string
	if len(tradeoff) > 0 {
		also = append(also, fmt.Sprintf("%s faster one way and slower the other beyond the spread: not a win", strings.Join(tradeoff, ", ")))
	}
	if len(unjudged) > 0 {
		also = append(also, fmt.Sprintf("%s not judged: fewer than %d valid samples a side in every direction", strings.Join(unjudged, ", "), MinSamples))
	}
	tail := ""
	if len(also) > 0 {
		tail = " (" + strings.Join(also, "; ") + ")"
	}
	switch {
	case bestAlt != "":
		s.incumbent = bestAlt
		s.decide(tunedoc.DecisionMoved, fmt.Sprintf("%s=%s beats the current best beyond the spread in this round: moved to %s%s", ax.Name, valueName(s.cands[bestAlt].get(ax.Name)), bestAlt, tail), false)
		return true
	case !complete && s.runCtx.Err() == nil:
		s.decide(tunedoc.DecisionFailed, fmt.Sprintf("round failed (see its errors): axis %s not judged%s", ax.Name, tail), false)
	case !complete:
		s.decide(tunedoc.DecisionCut, "round cut short: too few samples to decide"+tail, false)
	case len(noise) > 0:
		s.decide(tunedoc.DecisionStopped, fmt.Sprintf("axis %s stopped: %s faster by the medians but within the spread (noise)%s", ax.Name, strings.Join(noise, ", "), tail), true)
	case len(unjudged) == len(alts):
		s.decide(tunedoc.DecisionStopped, fmt.Sprintf("axis %s stopped: too few valid samples to judge any value%s", ax.Name, tail), false)
	default:
		s.decide(tunedoc.DecisionStopped, fmt.Sprintf("axis %s stopped: no value beats %s%s", ax.Name, valueName(cur.get(ax.Name)), tail), false)
	}
	return false
}

// confirm: a best that moved late has met the default in fewer than
// MinRounds rounds besides the one that chose it, which the verdict needs
// (judge.go): confirm it while the budget allows rather than report a win
// it has not shown.
func (s *searcher) confirm() {
	for try := 0; try < MinRounds && s.incumbent != "default" && s.going() && freshRounds(s.res.Steps, s.incumbent) < MinRounds; try++ {
		_, complete := s.measureRound("confirm", nil)
		switch {
		case complete:
			s.decide(tunedoc.DecisionConfirm, fmt.Sprintf("confirmation round: %s measured again beside the default (the verdict needs %d rounds besides the one that chose it)", s.incumbent, MinRounds), false)
		case s.runCtx.Err() == nil:
			s.decide(tunedoc.DecisionFailed, "confirmation round failed (see its errors)", false)
		default:
			s.decide(tunedoc.DecisionCut, "confirmation round cut short", false)
		}
	}
}

// finish fills the verdict, the comparisons and advise's gap.
func (s *searcher) finish(best, advName string) {
	judgeResult(s.res, best, advName, s.cands)
}
