package tune

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/rules"
	"github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
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
	Path            labpath.Path
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
	// StoppedFailed, followed by ": " and the error, when two rounds in a
	// row failed (Stopped names it with stoppedFailed).
	StoppedFailed = "failed"
)

// stoppedFailed is Stopped for a search that ended with err.
func stoppedFailed(err error) string { return StoppedFailed + ": " + err.Error() }

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
	defer func() { res.Findings = tunedoc.Findings(res) }()
	if advName == "" {
		res.VsAdvise = nil
		return
	}
	res.VsAdvise = map[string]Gap{}
	pairs = pairsOf(res.Steps, best, advName)
	for _, d := range dirs {
		res.VsAdvise[d] = Gap{Comparison: compareRounds(pairs, d), ClosedBy: differs(c, cands[advName])}
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
		ma, mb := verdict.Median(a[d]), verdict.Median(b[d])
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
