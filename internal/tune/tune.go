package tune

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/rules"
	"github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
)

// Named is a candidate with the name its tunnel and rows carry.
type Named struct {
	Name string
	Candidate
}

// MeasureFunc measures the candidates of one round, interleaved, and
// returns each one's samples by name and direction, plus why samples were
// refused (row errors). On cancellation it returns what it has.
type MeasureFunc func(ctx context.Context, round int, cands []Named) (map[string]Samples, []string, error)

// Advice is advise's starting point, when there is one.
type Advice struct {
	// Candidate is advise's variant; nil when advise was not available.
	Candidate *Candidate
	// Variant is advise's variant as advise wrote it.
	Variant string
	// Note says where the advice came from or why there is none.
	Note string
}

// DCOHost is what a probe of the host said about data channel offload.
type DCOHost struct {
	Available bool
	// NotTested is the reason the dco axis is not searched ("not tested
	// here: kernel lacks the ovpn driver (…)").
	NotTested string
}

// Options are a tune run.
type Options struct {
	Path            lab.Path
	PathDescription string
	Directions      []string
	Budget          time.Duration
	AllowTCP        bool
	Fixed           map[string]string
	Advice          Advice
	// BufferCap is the twin's socket-buffer cap (SpaceOptions.BufferCap).
	BufferCap int
	// DCO says whether the host can offload (the dco axis is searched)
	// and, when it cannot, why: the note the result carries instead.
	DCO DCOHost
	// Passes bounds the coordinate-descent passes over the axes (default 2).
	Passes int
	// Progress receives one line per round with the current best.
	Progress io.Writer
	Measure  MeasureFunc
}

// Stop reasons.
const (
	StoppedDone        = "search complete"
	StoppedBudget      = "budget used"
	StoppedInterrupted = "interrupted"
)

// searcher holds a run's state.
type searcher struct {
	o     Options
	res   *Result
	names map[string]string // key → name
	cands map[string]Candidate
	start time.Time
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
	s := &searcher{o: o, names: map[string]string{}, cands: map[string]Candidate{}, start: time.Now()}
	s.res = &Result{Schema: Schema, Path: o.Path, PathDescription: o.PathDescription, Directions: o.Directions,
		BudgetSeconds: o.Budget.Seconds(), Findings: []string{}}
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
	axes := Space(so)
	if !o.DCO.Available && o.DCO.NotTested != "" {
		s.res.Notes = append(s.res.Notes, "dco axis "+o.DCO.NotTested)
	}
	if ok, why := JumboTried(so); !ok {
		if _, fixed := o.Fixed[AxisMTU]; !fixed {
			s.res.Notes = append(s.res.Notes, why)
		}
	}
	if o.BufferCap > 0 && o.BufferCap < bufferSizes[len(bufferSizes)-1] {
		s.res.Notes = append(s.res.Notes, fmt.Sprintf("socket buffers above %d bytes not tried: the twin's net.core.rmem_max/wmem_max is the host's %d and tune does not change the host's sysctls", o.BufferCap, o.BufferCap))
	}
	s.res.Axes = axes
	if _, fixed := o.Fixed[AxisProto]; !fixed && !o.AllowTCP {
		s.res.Notes = append(s.res.Notes, "OpenVPN over TCP not tried (--allow-tcp)")
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
	advName := ""
	if adv != nil {
		if adv.Key() == def.Key() {
			advName = "default"
			s.res.Notes = append(s.res.Notes, "advise's variant is OpenVPN's default here")
		} else {
			advName = "advise"
			s.names[adv.Key()] = "advise"
			s.cands["advise"] = *adv
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	if o.Budget > 0 {
		runCtx, cancel = context.WithTimeout(ctx, o.Budget)
	}
	defer cancel()
	incumbent := "default"
	var runErr error
	failures := 0
	round := 0
	// measureRound measures names (the references default and advise are
	// always among them, so that every comparison with them is within
	// one interleaved round) and records the step.
	measureRound := func(axis string, names []string) (map[string]Samples, bool) {
		round++
		names = Uniq(append([]string{incumbent, "default", advName}, names...))
		var named []Named
		for _, n := range names {
			named = append(named, Named{Name: n, Candidate: s.cands[n]})
		}
		t0 := time.Now()
		s.logf("round %d (%s): measuring %s", round, axis, strings.Join(names, ", "))
		sam, errs, err := o.Measure(runCtx, round, named)
		step := Step{Round: round, Axis: axis, Incumbent: incumbent, Errors: errs, Seconds: time.Since(t0).Seconds(), Complete: err == nil}
		for _, n := range named {
			sc := StepCandidate{Name: n.Name, Variant: variantString(n.Name, n.Candidate), Proto: n.Proto, Samples: Samples{}, Spread: map[string]measure.Spread{}}
			for _, d := range o.Directions {
				sc.Samples[d] = append([]float64{}, sam[n.Name][d]...)
				sc.Spread[d] = measure.Summarize(sam[n.Name][d])
			}
			step.Candidates = append(step.Candidates, sc)
		}
		if err != nil && runCtx.Err() == nil {
			// A round that failed (a tunnel that would not start, a lab
			// that would not build) is recorded and the search goes on
			// with the next axis; two failures in a row end it.
			step.Errors = append(step.Errors, "round failed: "+err.Error())
			s.logf("round %d failed: %v", round, err)
			failures++
			if failures >= 2 {
				runErr = err
			}
		} else if err == nil {
			failures = 0
		}
		s.res.Steps = append(s.res.Steps, step)
		return sam, err == nil
	}
	decide := func(dec string, moved, noise bool) {
		st := &s.res.Steps[len(s.res.Steps)-1]
		st.Decision, st.Moved, st.Noise, st.Best = dec, moved, noise, incumbent
		s.logf("round %d: %s; current best %s%s", st.Round, dec, incumbent, s.bestFigures(incumbent))
	}

	// Round 0: advise against the default; advise is the starting point
	// unless the default beats it beyond the spread.
	if advName == "advise" {
		sam, _ := measureRound("start", nil)
		switch {
		case Better(sam["default"], sam["advise"], o.Directions):
			decide("the default beats advise's variant beyond the spread: starting from the default", false, false)
		default:
			incumbent = "advise"
			decide("starting from advise's variant (the default does not beat it beyond the spread)", true, false)
		}
	}
	for pass := 0; pass < o.Passes && runCtx.Err() == nil && runErr == nil; pass++ {
		movedThisPass := false
		for _, ax := range axes {
			if runCtx.Err() != nil || runErr != nil {
				break
			}
			if ax.Fixed || len(ax.Values) < 2 {
				continue
			}
			cur := s.cands[incumbent]
			var alts []string
			for _, v := range ax.Values {
				c := cur.with(ax.Name, v)
				if v == cur.get(ax.Name) || !c.valid() {
					continue
				}
				alts = append(alts, s.name(c))
			}
			if len(alts) == 0 || len(alts)+3 > tunnel.MaxSlots {
				continue
			}
			sam, complete := measureRound(ax.Name, alts)
			bestAlt, bestScore := "", 0.0
			var noise, tradeoff, unjudged []string
			for _, a := range alts {
				switch classify(sam[a], sam[incumbent], o.Directions) {
				case altWins:
					if sc := score(sam[a], sam[incumbent], o.Directions); bestAlt == "" || sc > bestScore {
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
					if score(sam[a], sam[incumbent], o.Directions) > 1 {
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
				incumbent = bestAlt
				movedThisPass = true
				decide(fmt.Sprintf("%s=%s beats the current best beyond the spread in this round: moved to %s%s", ax.Name, valueName(s.cands[bestAlt].get(ax.Name)), bestAlt, tail), true, false)
			case !complete && runCtx.Err() == nil:
				decide(fmt.Sprintf("round failed (see its errors): axis %s not judged%s", ax.Name, tail), false, false)
			case !complete:
				decide("round cut short: too few samples to decide"+tail, false, false)
			case len(noise) > 0:
				decide(fmt.Sprintf("axis %s stopped: %s faster by the medians but within the spread (noise)%s", ax.Name, strings.Join(noise, ", "), tail), false, true)
			case len(unjudged) == len(alts):
				decide(fmt.Sprintf("axis %s stopped: too few valid samples to judge any value%s", ax.Name, tail), false, false)
			default:
				decide(fmt.Sprintf("axis %s stopped: no value beats %s%s", ax.Name, valueName(cur.get(ax.Name)), tail), false, false)
			}
		}
		if !movedThisPass {
			break
		}
	}
	// A best that moved late has met the default in fewer than MinRounds
	// rounds besides the one that chose it, which the verdict needs
	// (judge.go): confirm it while the budget allows rather than report
	// a win it has not shown.
	for try := 0; try < MinRounds && incumbent != "default" && runCtx.Err() == nil && runErr == nil && freshRounds(s.res.Steps, incumbent) < MinRounds; try++ {
		_, complete := measureRound("confirm", nil)
		switch {
		case complete:
			decide(fmt.Sprintf("confirmation round: %s measured again beside the default (the verdict needs %d rounds besides the one that chose it)", incumbent, MinRounds), false, false)
		case runCtx.Err() == nil:
			decide("confirmation round failed (see its errors)", false, false)
		default:
			decide("confirmation round cut short", false, false)
		}
	}
	s.res.ElapsedSeconds = time.Since(s.start).Seconds()
	switch {
	case ctx.Err() != nil:
		s.res.Stopped = StoppedInterrupted
	case runCtx.Err() != nil:
		s.res.Stopped = StoppedBudget
	case runErr != nil:
		s.res.Stopped = "failed: " + runErr.Error()
	default:
		s.res.Stopped = StoppedDone
	}
	s.finish(incumbent, advName)
	if ctx.Err() != nil {
		return s.res, ctx.Err()
	}
	return s.res, runErr
}

// finish fills the verdict, the comparisons and advise's gap.
func (s *searcher) finish(best, advName string) {
	judgeResult(s.res, best, advName, s.cands)
}

// Rejudge fills res's verdict, best, comparisons with the default,
// advise's gap and findings about advise again from res.Steps alone, for
// best, the search's best (Verdict.Candidate in a saved run): judgement
// is a pure function of the rounds, so a saved run can be judged again
// (after a change of the rules, or to check one).
func Rejudge(res *Result, best string) error {
	cands := map[string]Candidate{}
	advName := ""
	for _, st := range res.Steps {
		for _, c := range st.Candidates {
			v, err := openvpn.ParseVariant(c.Variant)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", st.Round, c.Name, err)
			}
			cands[c.Name] = FromVariant(v, c.Proto)
			if c.Name == "advise" {
				advName = "advise"
			}
		}
	}
	if _, ok := cands[best]; !ok && best != "default" {
		return fmt.Errorf("%s was not measured in any round", best)
	}
	if _, ok := cands["default"]; !ok {
		cands["default"] = Candidate{Proto: "udp", Settings: map[string]string{}}
	}
	if advName == "" && res.Advise.Available {
		advName = "default"
	}
	res.Findings = []string{}
	judgeResult(res, best, advName, cands)
	return nil
}

// UpgradeV1 judges a SchemaV1 document again by the round-by-round rules
// (tunedoc.UpgradeV1 with Rejudge).
func UpgradeV1(res *Result) error { return tunedoc.UpgradeV1(res, Rejudge) }

// judgeResult fills res's judgement of best from res.Steps; cands maps
// the names of the rounds to their candidates, advName names advise's
// variant ("" when advise took no part).
func judgeResult(res *Result, best, advName string, cands map[string]Candidate) {
	dirs := res.Directions
	// A "best" that does not beat the default is no best; an earlier one
	// (or advise's variant) that does is reported instead.
	var others []string
	for i := len(res.Steps) - 1; i >= 0; i-- {
		others = append(others, res.Steps[i].Incumbent)
	}
	if advName != "" {
		others = append(others, advName)
	}
	res.Verdict = Decide(res.Steps, best, others, dirs)
	best = res.Verdict.Best
	c := cands[best]
	res.Best = Best{Name: best, Proto: c.Proto, Body: c.Body(), Variant: variantString(best, c)}
	res.Best.Server, res.Best.Client, res.Best.Sysctl = Fragments(c)
	res.VsDefault = map[string]Comparison{}
	pairs := pairsOf(res.Steps, best, "default")
	for _, d := range dirs {
		res.VsDefault[d] = compareRounds(pairs, d)
	}
	if advName == "" {
		res.VsAdvise = nil
		res.Findings = append(res.Findings, "advise's gap not measured: "+res.Advise.Note)
		return
	}
	res.VsAdvise = map[string]Gap{}
	pairs = pairsOf(res.Steps, best, advName)
	for _, d := range dirs {
		g := Gap{Comparison: compareRounds(pairs, d), ClosedBy: differs(c, cands[advName])}
		switch {
		case best == advName:
		case g.Ratio > 1.05 && g.BeyondSpread:
			g.Finding = fmt.Sprintf("advise is %.0f%% short of the best on %s (%s; best/advise ×%.2f over %d pairs, faster beyond the spread in every one of %d judged rounds); the best differs from advise's variant in %s",
				100*(g.Ratio-1), res.PathDescription, d, g.Ratio, g.Pairs, g.Record.Judged(), strings.Join(g.ClosedBy, ", "))
			res.Findings = append(res.Findings, "finding about advise: "+g.Finding)
		case g.Ratio > 1.05:
			res.Findings = append(res.Findings, fmt.Sprintf("%s: best/advise ×%.2f, but not faster beyond the spread in every round (%s): not a finding", d, g.Ratio, g.Record))
		}
		res.VsAdvise[d] = g
	}
}

// bestFigures are name's figures in the latest round that has samples of
// it (rounds are not pooled: the load drifts between them).
func (s *searcher) bestFigures(name string) string {
	fig := "no samples yet"
	for i := len(s.res.Steps) - 1; i >= 0; i-- {
		var parts []string
		for _, c := range s.res.Steps[i].Candidates {
			if c.Name != name {
				continue
			}
			for _, d := range s.o.Directions {
				if c.Spread[d].N > 0 {
					parts = append(parts, fmt.Sprintf("%s %s", d, measure.FormatMbpsSpread(c.Spread[d])))
				}
			}
		}
		if len(parts) > 0 {
			fig = fmt.Sprintf("round %d: %s Mbit/s", s.res.Steps[i].Round, strings.Join(parts, ", "))
			break
		}
	}
	return fmt.Sprintf(" (%s; %.0fs of %v)", fig, time.Since(s.start).Seconds(), s.o.Budget)
}

// Kinds of an alternative against the current best in one round.
const (
	altLoses = iota
	altWins
	altTradeoff
	altWithin
	altUnjudged
)

// classify says how alt did against cur in one round: a win (Better),
// faster one way and slower the other (a trade-off, not a win), within
// the spread in every judged direction, not judged at all (too few
// samples), or slower.
func classify(alt, cur Samples, dirs []string) int {
	if Better(alt, cur, dirs) {
		return altWins
	}
	faster, slower, judged := false, false, false
	for _, d := range dirs {
		c, ok := compare(alt[d], cur[d])
		judged = judged || ok
		faster = faster || c > 0
		slower = slower || c < 0
	}
	switch {
	case faster && slower:
		return altTradeoff
	case !judged:
		return altUnjudged
	case !slower:
		return altWithin
	}
	return altLoses
}

// score is the mean ratio of medians over the directions: which of several
// winners to move to (within one round, so the medians share its load).
func score(a, b Samples, dirs []string) float64 {
	sum, n := 0.0, 0
	for _, d := range dirs {
		ma, mb := measure.Median(a[d]), measure.Median(b[d])
		if len(a[d]) == 0 || len(b[d]) == 0 || mb <= 0 {
			continue
		}
		sum += ma / mb
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// freshRounds counts the rounds that measured name beside the default,
// besides those that chose it.
func freshRounds(steps []Step, name string) int {
	n := 0
	for _, p := range pairsOf(steps, name, "default") {
		if !p.Chose {
			n++
		}
	}
	return n
}

// valueName quotes an axis value for a decision; "" is OpenVPN's default.
func valueName(v string) string {
	if v == "" {
		return "OpenVPN's default"
	}
	return strconv.Quote(v)
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Uniq returns the non-empty strings of in, each once, in first-seen order
// (candidate names of a round; notes gathered over rounds).
func Uniq(names []string) []string {
	seen := map[string]bool{"": true}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// variantString renders a candidate as lab run --variant accepts it.
func variantString(name string, c Candidate) string {
	if c.Body() == "" && name == "default" {
		return "default"
	}
	return name + "=" + c.Body()
}

// Fragments renders a candidate as server and client config lines, and
// the sysctl lines a Linux machine needs for its socket buffers when they
// exceed the kernel's default caps.
func Fragments(c Candidate) (server, client, sysctl []string) {
	server = []string{"proto " + c.Proto}
	client = []string{"proto " + c.Proto}
	v, err := c.Variant("x")
	if err != nil {
		return server, client, nil
	}
	maxBuf := 0
	for _, it := range v.Items {
		line := it.Directive.String()
		if it.Side&openvpn.ServerSide != 0 {
			server = append(server, line)
		}
		if it.Side&openvpn.ClientSide != 0 {
			client = append(client, line)
		}
		if it.Name == "sndbuf" || it.Name == "rcvbuf" {
			var n int
			if _, err := fmt.Sscan(it.Args[0], &n); err == nil && n > maxBuf {
				maxBuf = n
			}
		}
	}
	// OpenVPN sets its buffers with plain SO_SNDBUF/SO_RCVBUF, which the
	// kernel caps at net.core.{r,w}mem_max.
	if maxBuf > rules.LinuxDefaultSockBuf {
		sysctl = []string{fmt.Sprintf("net.core.rmem_max = %d", maxBuf), fmt.Sprintf("net.core.wmem_max = %d", maxBuf)}
	}
	return server, client, sysctl
}
