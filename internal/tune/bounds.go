package tune

import (
	"time"

	"github.com/ovpnperf/ovpnperf/internal/bounds"
)

// The bounds and defaults of a tune run: tune's flags, their help and the
// checks of Options and TwinOptions read them here. A round measures every
// candidate, so its samples are bounded tighter than lab run's
// (experiment.RepeatRange, SampleTimeRange); the warm-up is lab run's
// (experiment.OmitRange).

// DefaultBudget is how long a search runs unless told.
const DefaultBudget = 10 * time.Minute

// BudgetRange is the search's length tune's --budget accepts: at least a
// few rounds, at most a day. Run itself takes any budget (its tests search
// fakes for a fraction of a second).
func BudgetRange() bounds.Duration {
	return bounds.Duration{Min: 30 * time.Second, Max: 24 * time.Hour}
}

// RepeatRange is the samples per candidate and round: MinSamples, which a
// difference beyond the spread needs, to 20.
func RepeatRange() bounds.Int { return bounds.Int{Min: MinSamples, Max: 20} }

// SampleTimeRange is the measured length of a round's samples.
func SampleTimeRange() bounds.Duration {
	return bounds.Duration{Min: time.Second, Max: time.Minute, Whole: true}
}
