package tune

import "github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"

// The document's types live in tunedoc, so that its readers need not link
// the search; these are their names here.
type (
	Result         = tunedoc.Result
	Step           = tunedoc.Step
	StepCandidate  = tunedoc.StepCandidate
	Best           = tunedoc.Best
	Gap            = tunedoc.Gap
	AdviseInfo     = tunedoc.AdviseInfo
	Axis           = tunedoc.Axis
	Samples        = tunedoc.Samples
	Verdict        = tunedoc.Verdict
	Comparison     = tunedoc.Comparison
	RoundJudgement = tunedoc.RoundJudgement
	DirRecord      = tunedoc.DirRecord
)

// Schemas of the document (tunedoc).
const (
	Schema         = tunedoc.Schema
	SchemaV2Legacy = tunedoc.SchemaV2Legacy
	SchemaV1       = tunedoc.SchemaV1
)

// MinRounds is how many rounds must judge a direction before a win in
// every one of them counts (tunedoc.MinRounds).
const MinRounds = tunedoc.MinRounds

// Outcomes of one direction in one round, as the JSON writes them
// (tunedoc).
const (
	OutcomeFaster = tunedoc.OutcomeFaster
	OutcomeSlower = tunedoc.OutcomeSlower
	OutcomeWithin = tunedoc.OutcomeWithin
	OutcomeTooFew = tunedoc.OutcomeTooFew
)
