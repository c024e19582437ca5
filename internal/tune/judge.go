package tune

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// MinSamples is how many samples each side needs before a difference can
// be called beyond the spread; with fewer, min and max say too little
// (the recipes' rule: no verdict from fewer than 3 samples).
const MinSamples = 3

// Samples are one candidate's receiver rates per direction (bit/s).
type Samples map[string][]float64

// compare returns +1 when a is faster than b beyond the spread (a's slowest
// sample above b's fastest), -1 when slower beyond the spread, 0 when the
// ranges overlap or either side has fewer than MinSamples samples. A side
// with no valid sample at all, measured in the same interleaved rounds as
// one with MinSamples valid samples, is the slower one: the other worked
// at the same times under the same load (on a black-holed path OpenVPN's
// defaults stall and every sample of them fails).
func compare(a, b []float64) int {
	sa, sb := measure.Summarize(a), measure.Summarize(b)
	switch {
	case sa.N >= MinSamples && sb.N == 0:
		return 1
	case sa.N == 0 && sb.N >= MinSamples:
		return -1
	case sa.N < MinSamples || sb.N < MinSamples:
		return 0
	}
	switch {
	case sa.Min > sb.Max:
		return 1
	case sa.Max < sb.Min:
		return -1
	}
	return 0
}

// Better reports whether a beats b: faster beyond the spread in at least
// one direction and slower beyond the spread in none.
func Better(a, b Samples, dirs []string) bool {
	won := false
	for _, d := range dirs {
		switch compare(a[d], b[d]) {
		case 1:
			won = true
		case -1:
			return false
		}
	}
	return won
}

// Verdict is the decision about the best candidate against the defaults.
type Verdict struct {
	// Found is true only when the best beats the defaults beyond the
	// spread (Better); then and only then a best variant is reported.
	Found bool `json:"found"`
	// Message says it in one line, with the figures.
	Message string `json:"message"`
}

// Decide judges best against the defaults from samples measured in the
// same rounds. name is the best candidate's name ("default" when the
// search never moved).
func Decide(name string, best, def Samples, dirs []string) Verdict {
	if name == "default" {
		return Verdict{Message: "nothing beats the default: no candidate was faster than OpenVPN's defaults beyond the spread"}
	}
	var parts []string
	for _, d := range dirs {
		b, o := measure.Summarize(best[d]), measure.Summarize(def[d])
		rel := "within the spread"
		switch compare(best[d], def[d]) {
		case 1:
			rel = "faster beyond the spread"
		case -1:
			rel = "slower beyond the spread"
		}
		switch {
		case b.N >= MinSamples && o.N == 0:
			rel = "the default gave no valid sample"
		case b.N < MinSamples || o.N < MinSamples:
			rel = fmt.Sprintf("too few samples (%d vs %d, need %d)", b.N, o.N, MinSamples)
		}
		parts = append(parts, fmt.Sprintf("%s %s vs %s Mbit/s: %s", d, measure.FormatMbpsSpread(b), measure.FormatMbpsSpread(o), rel))
	}
	if Better(best, def, dirs) {
		return Verdict{Found: true, Message: fmt.Sprintf("%s beats the default (%s)", name, strings.Join(parts, "; "))}
	}
	return Verdict{Message: fmt.Sprintf("nothing beats the default: the search's best, %s, is not faster beyond the spread (%s)", name, strings.Join(parts, "; "))}
}
