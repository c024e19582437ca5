// Package tunedoc holds the document of `ovpnperf tune` (Result, schema
// ovpnperf/tune/v3): the search's rounds, the verdict, the comparisons and
// the findings, with the reader of older versions. Readers of the document (report)
// import it instead of internal/tune, which runs the search; internal/tune
// names these types too and judges the rounds.
package tunedoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Schema names the JSON document a tune run (tune.Run) is written as.
//
// Version 3: findings are records (finding.Finding: kind, subject,
// outcome, figures), judged by Findings; in version 2 they were sentences,
// and vs_advise held advise's gap as a sentence too ("finding", now the
// advise-short record).
// Version 2: the verdict and the comparisons are judged round by round
// (ratio: median of pairs of samples of the same round; beyond_spread:
// faster in every round that judged it); in version 1 they pooled the
// samples of all rounds.
const Schema = "ovpnperf/tune/v3"

// SchemaV2 names version 2, whose findings were sentences; Read reads it
// and judges its findings again (Findings).
const SchemaV2 = "ovpnperf/tune/v2"

// SchemaV2Legacy is version 2's first name, in the style the other
// documents did not use; readers accept it as SchemaV2.
const SchemaV2Legacy = "ovpnperf.tune/2"

// StepCandidate is one candidate's figures in one round.
type StepCandidate struct {
	Name    string                    `json:"name"`
	Variant string                    `json:"variant"`
	Proto   string                    `json:"proto"`
	Samples Samples                   `json:"samples_bps"`
	Spread  map[string]verdict.Spread `json:"spread"`
}

// Step is one round of the search: what was measured and what it decided.
type Step struct {
	Round      int             `json:"round"`
	Axis       string          `json:"axis"`
	Incumbent  string          `json:"incumbent"`
	Candidates []StepCandidate `json:"candidates"`
	// Kind is what the round decided (Decision*); Decision says it in
	// words, with the names and values.
	Kind     string `json:"kind,omitempty"`
	Decision string `json:"decision"`
	Moved    bool   `json:"moved"`
	// Noise is true when the axis was left because a value was faster by
	// the medians but within the spread.
	Noise    bool     `json:"noise"`
	Errors   []string `json:"errors,omitempty"`
	Seconds  float64  `json:"seconds"`
	Complete bool     `json:"complete"`
	// Best is the search's best after this round's decision.
	Best string `json:"best"`
}

// Kinds of a step's decision (Step.Kind).
const (
	// DecisionMoved: the search moved to a value of the axis (or, in the
	// start round, to advise's variant).
	DecisionMoved = "moved"
	// DecisionKept: the start round kept the default (it beat advise's
	// variant).
	DecisionKept = "kept"
	// DecisionStopped: no value of the axis beat the current best (Noise
	// says whether one was faster by the medians within the spread).
	DecisionStopped = "stopped"
	// DecisionFailed: the round failed (its errors say why).
	DecisionFailed = "failed"
	// DecisionCut: the budget or an interrupt cut the round short.
	DecisionCut = "cut"
	// DecisionConfirm: a confirmation round measured the best beside the
	// default again.
	DecisionConfirm = "confirm"
)

// Reasons an axis value was not tried (NotTried.Reason).
const (
	// NotTriedPathLoss: the path loses more than a jumbo tunnel's outer
	// fragments pass (LossPercent above LimitPercent).
	NotTriedPathLoss = "path-loss"
	// NotTriedBufferCap: buffers above the host's cap (CapBytes).
	NotTriedBufferCap = "buffer-cap"
	// NotTriedNotAllowed: TCP, without --allow-tcp.
	NotTriedNotAllowed = "not-allowed"
	// NotTriedHost: the host cannot offload (Detail says why).
	NotTriedHost = "host"
)

// NotTried is an axis, or values of one, the run did not search, and why.
type NotTried struct {
	Axis string `json:"axis"`
	// Value is the value not tried; "" for the whole axis (or, with
	// NotTriedBufferCap, every size above CapBytes).
	Value  string `json:"value,omitempty"`
	Reason string `json:"reason"`
	// LossPercent is the path's loss and LimitPercent the loss at which
	// a jumbo tunnel's fragments still pass (NotTriedPathLoss).
	LossPercent  float64 `json:"loss_percent,omitempty"`
	LimitPercent float64 `json:"limit_percent,omitempty"`
	// CapBytes is the host's net.core.rmem_max/wmem_max (NotTriedBufferCap).
	CapBytes int `json:"cap_bytes,omitempty"`
	// Detail is the host's reason in words (NotTriedHost).
	Detail string `json:"detail,omitempty"`
}

// Text is the note a run prints for n: the one place these sentences are
// written.
func (n NotTried) Text() string {
	switch n.Reason {
	case NotTriedPathLoss:
		return fmt.Sprintf("%s not tried: the path loses %g%% of packets, above the %g%% at which a jumbo tunnel's outer fragments pass (one lost fragment of seven loses the whole 9000-byte packet; advise's rule)",
			n.Value, n.LossPercent, n.LimitPercent)
	case NotTriedBufferCap:
		return fmt.Sprintf("socket buffers above %d bytes not tried: the twin's net.core.rmem_max/wmem_max is the host's %d and tune does not change the host's sysctls", n.CapBytes, n.CapBytes)
	case NotTriedNotAllowed:
		return "OpenVPN over TCP not tried (--allow-tcp)"
	case NotTriedHost:
		return n.Axis + " axis " + n.Detail
	}
	return fmt.Sprintf("%s %s not tried (%s)", n.Axis, n.Value, n.Reason)
}

// Gap is advise's gap in one direction: best/advise.
type Gap struct {
	Comparison
	// ClosedBy lists the axes where the best differs from advise's variant.
	ClosedBy []string `json:"closed_by"`
}

// Best is the search's result.
type Best struct {
	Name    string `json:"name"`
	Proto   string `json:"proto"`
	Body    string `json:"body"`
	Variant string `json:"variant"`
	// Server and Client are config fragments; Sysctl the lines a machine
	// needs for the buffers (when they exceed its rmem_max/wmem_max).
	Server []string `json:"server"`
	Client []string `json:"client"`
	Sysctl []string `json:"sysctl,omitempty"`
}

// Result is a tune run, written as JSON (Schema).
type Result struct {
	Schema string `json:"schema"`
	// Argv is the command line that produced the document.
	Argv            []string              `json:"argv,omitempty"`
	Path            labpath.Path          `json:"path"`
	PathDescription string                `json:"path_description"`
	Directions      []string              `json:"directions"`
	BudgetSeconds   float64               `json:"budget_seconds"`
	ElapsedSeconds  float64               `json:"elapsed_seconds"`
	Stopped         string                `json:"stopped"`
	Advise          AdviseInfo            `json:"advise"`
	Axes            []Axis                `json:"axes"`
	Steps           []Step                `json:"steps"`
	Best            Best                  `json:"best"`
	Verdict         Verdict               `json:"verdict"`
	VsDefault       map[string]Comparison `json:"vs_default"`
	VsAdvise        map[string]Gap        `json:"vs_advise,omitempty"`
	// Findings are the judgements of the verdict and the comparisons
	// (Findings), for scripts; their Text is what people read.
	Findings []finding.Finding `json:"findings"`
	Notes    []string          `json:"notes,omitempty"`
	// NotTried are the axes and values the run did not search, each with
	// its reason; their Text is among Notes.
	NotTried []NotTried `json:"not_tried,omitempty"`
}

// AdviseInfo says whether advise's variant took part.
type AdviseInfo struct {
	Available bool   `json:"available"`
	Variant   string `json:"variant,omitempty"`
	Note      string `json:"note"`
}

// Samples are one candidate's receiver rates per direction (bit/s).
type Samples map[string][]float64

// Outcomes of one direction in one round, as the JSON writes them.
const (
	OutcomeFaster = "faster beyond the spread"
	OutcomeSlower = "slower beyond the spread"
	OutcomeWithin = "within the spread"
	OutcomeTooFew = "not judged: too few samples"
)

// RoundJudgement is one round's outcome per direction.
type RoundJudgement struct {
	Round   int               `json:"round"`
	Outcome map[string]string `json:"outcome"`
	// Chose is true for the round in which the search moved to the
	// candidate for its win there (not counted towards MinRounds).
	Chose bool `json:"chose,omitempty"`
}

// DirRecord counts a's rounds against b in one direction.
type DirRecord struct {
	Faster  int `json:"faster"`
	Slower  int `json:"slower"`
	Within  int `json:"within"`
	Unjudge int `json:"not_judged"`
	// Chose counts the judged rounds in which the search moved to a for
	// its win there (RoundPair.Chose): judged, but not towards MinRounds.
	Chose int `json:"chose"`
}

// Judged is the number of rounds that judged the direction.
func (r DirRecord) Judged() int { return r.Faster + r.Slower + r.Within }

// MinRounds is how many rounds must judge a direction before a win in
// every one of them counts. One round is not enough: with 3 samples a
// side, a candidate of the same speed as the other is faster beyond the
// spread in 1 round of 20 by chance (one of the 20 equally likely orders
// of the six samples puts all three of it above; 1 in 10 for either one
// above the other), per direction and per candidate compared; two rounds
// in a row bring that to 1 in 400. docs/evidence.md explains it.
const MinRounds = 2

// Fresh is the number of judged rounds other than those that chose a.
func (r DirRecord) Fresh() int { return r.Judged() - r.Chose }

// Won is true when the direction was faster in every round that judged
// it, and at least MinRounds did besides the rounds that chose a.
func (r DirRecord) Won() bool { return r.Fresh() >= MinRounds && r.Faster == r.Judged() }

func (r DirRecord) String() string {
	if r.Judged() == 0 {
		return fmt.Sprintf("not judged: fewer than %d valid samples a side in all %d rounds", verdict.MinSamples, r.Unjudge)
	}
	s := fmt.Sprintf("faster beyond the spread in %d of %d judged rounds", r.Faster, r.Judged())
	if r.Slower > 0 {
		s += fmt.Sprintf(", slower in %d", r.Slower)
	}
	var notes []string
	if r.Chose > 0 {
		notes = append(notes, fmt.Sprintf("%d of them the round that chose it, which does not count", r.Chose))
	}
	if r.Faster == r.Judged() && r.Fresh() < MinRounds {
		notes = append(notes, fmt.Sprintf("%d needed besides", MinRounds))
	}
	if r.Unjudge > 0 {
		notes = append(notes, fmt.Sprintf("%d more with too few samples", r.Unjudge))
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, "; ") + ")"
	}
	return s
}

// Verdict is the decision about the search's best against the defaults.
type Verdict struct {
	// Found is true only when the best beats the defaults by the rule over
	// rounds (see the top of this file); then and only then a best other
	// than the default is reported.
	Found bool `json:"found"`
	// Candidate is the search's best before this judgement (the last
	// candidate it moved to; "default" when it never moved).
	Candidate string `json:"candidate"`
	// Best is the candidate reported as the best: Candidate, an earlier
	// best or advise's variant that beats the default (Decide), or
	// "default" when none does.
	Best string `json:"best"`
	// Message says it in one line, with the figures.
	Message string `json:"message"`
	// Reason says, when nothing beats the default, why not.
	Reason string `json:"reason,omitempty"`
	// Rule is the rule the verdict applies, in words.
	Rule string `json:"rule"`
	// Rounds are the outcomes against the default, round by round, of
	// the candidate reported: Best when found, else Candidate.
	Rounds []RoundJudgement `json:"rounds,omitempty"`
	// Records count, per direction, Candidate's rounds against the
	// default (absent when Candidate is the default); BestRecords those
	// of Best when it is another candidate. Message and Reason are
	// written from them.
	Records     map[string]DirRecord `json:"records,omitempty"`
	BestRecords map[string]DirRecord `json:"best_records,omitempty"`
	// ReasonKind says why Candidate does not beat the default
	// (Reason*); "" when it does. With Found, another candidate does.
	ReasonKind string `json:"reason_kind,omitempty"`
	// AlsoJudged are the other candidates (earlier bests, advise's
	// variant) judged against the default when Candidate did not beat it.
	AlsoJudged []string `json:"also_judged,omitempty"`
}

// Why nothing beats the default (Verdict.ReasonKind).
const (
	// ReasonNeverMoved: the search never moved from the default.
	ReasonNeverMoved = "never-moved"
	// ReasonNeverMeasured: the search's best never met the default in a
	// round.
	ReasonNeverMeasured = "never-measured"
	// ReasonNotEveryRound: the search's best did not beat the default by
	// the rule over rounds (Records say how it did).
	ReasonNotEveryRound = "not-every-round"
)

// Comparison is one candidate against another in one direction, from the
// rounds that measured both.
type Comparison struct {
	// Best and Other are the samples of the rounds that measured both,
	// pooled for display only: the judgement is round by round.
	Best  verdict.Spread `json:"best"`
	Other verdict.Spread `json:"other"`
	// Ratio is the median of best/other over pairs of samples taken in
	// the same round (sample i of one with sample i of the other, which
	// the interleaving ran back to back); RatioMin and RatioMax are the
	// pairs' range. 0 when no pair has a positive other.
	Ratio    float64 `json:"ratio"`
	RatioMin float64 `json:"ratio_min"`
	RatioMax float64 `json:"ratio_max"`
	Pairs    int     `json:"pairs"`
	// Record counts the rounds: faster, slower, within, not judged.
	Record DirRecord `json:"rounds"`
	// BeyondSpread is true when best was faster beyond the spread in
	// every round that judged this direction (Won: at least MinRounds
	// besides the round that chose it).
	BeyondSpread bool `json:"beyond_spread"`
}

// Axis is one dimension of the search: the values it may take. A value is
// a variant body (DIRECTIVE ARGS;…), "" for OpenVPN's default; on the proto
// axis it is "udp" or "tcp".
type Axis struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
	// Fixed is true when --fix pinned the axis to its one value.
	Fixed bool `json:"fixed,omitempty"`
}

// SchemaV1 names the first version of the document, whose verdict and
// comparisons pooled the samples of all rounds.
const SchemaV1 = "ovpnperf.tune/1"

// Rejudger fills res's judgement of best again from res.Steps alone
// (tune.Rejudge).
type Rejudger func(res *Result, best string) error

// UpgradeV1 judges a SchemaV1 document again by the round-by-round rules
// of rejudge (its rounds are the same) and makes it a Schema document.
// Version 1 did not record the search's best when nothing beat the
// default; its message named it ("the search's best, c3, is not faster …").
func UpgradeV1(res *Result, rejudge Rejudger) error {
	if res.Schema != SchemaV1 {
		return fmt.Errorf("schema %q, want %q", res.Schema, SchemaV1)
	}
	if rejudge == nil {
		return errors.New("a tune document of schema " + SchemaV1 + " needs judging again, and no judge was given")
	}
	best := "default"
	switch {
	case res.Verdict.Found:
		best = res.Best.Name
	case strings.HasPrefix(res.Verdict.Message, "nothing beats the default: the search's best, "):
		rest := strings.TrimPrefix(res.Verdict.Message, "nothing beats the default: the search's best, ")
		best, _, _ = strings.Cut(rest, ",")
	}
	res.Schema = Schema
	res.Notes = append(res.Notes, "judged again by the round-by-round rules of "+Schema+" (recorded as "+SchemaV1+", which pooled the rounds)")
	return rejudge(res, best)
}

// Read reads a tune document of any version as a Schema document:
// version 2's findings (sentences) are judged again from its verdict and
// comparisons by Findings; version 1 is judged again from its rounds by
// rejudge (UpgradeV1).
func Read(data []byte, rejudge Rejudger) (*Result, error) {
	var doc struct {
		Result
		// The sentences of versions 1 and 2, shadowing Result's
		// records; not read from version 3.
		Findings json.RawMessage `json:"findings"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	res := doc.Result
	switch res.Schema {
	case Schema:
		if len(doc.Findings) > 0 && string(doc.Findings) != "null" {
			if err := json.Unmarshal(doc.Findings, &res.Findings); err != nil {
				return nil, fmt.Errorf("findings: %w", err)
			}
		} else {
			res.Findings = Findings(&res)
		}
		for i, f := range res.Findings {
			if err := f.Check(); err != nil {
				return nil, fmt.Errorf("findings[%d]: %w", i, err)
			}
		}
	case SchemaV2, SchemaV2Legacy:
		res.Schema = Schema
		res.Findings = Findings(&res)
	case SchemaV1:
		if err := UpgradeV1(&res, rejudge); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("schema %q is not a tune document (%s, %s, %s or %s)", res.Schema, Schema, SchemaV2, SchemaV2Legacy, SchemaV1)
	}
	return &res, nil
}
