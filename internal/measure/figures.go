package measure

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Bounds of the figures a document may hold. They are far beyond any real
// measurement and far below where arithmetic on them overflows (a time
// converted to nanoseconds must fit an int64 time.Duration).
const (
	// MaxRate is the largest rate read, in any unit per second.
	MaxRate = 1e15
	// MaxSeconds is the largest time read (about 3 years), in seconds.
	MaxSeconds = 1e8
	// MaxBytes is the largest size or byte count read (1 PB).
	MaxBytes = 1e15
)

// Keys carry their unit (the JSON contract of every ovpnperf document):
// rates end in bps, pps, per_sec(ond) or per_second_per_core, times in
// _s, _ms, _us, _ns or seconds. Such figures are never negative.
var (
	rateKey = regexp.MustCompile(`(^|_)(bps|pps|per_sec|per_second)(_|$)|^pps_|_per_sec_|bits_per_s|bytes_per_s`)
	lossKey = regexp.MustCompile(`(^|_)(loss|lost)(_.*)?_percent$`)
	timeKey = regexp.MustCompile(`(_s|_ms|_us|_ns|seconds|^rtt|_rtt)(_|$)|seconds_per_`)
	// Sizes end in bytes or mtu; an overhead is left out, since a
	// measured one (datagram minus payload) is below 0 when a tunnel
	// compresses.
	sizeKey     = regexp.MustCompile(`(^|_)(bytes|mtu)(_|$)`)
	overheadKey = regexp.MustCompile(`overhead`)
	// Counts a run was made of.
	countKey = regexp.MustCompile(`^(rounds|probes|flows|repeat|parallel|tries|cpus)$`)
)

// timeScale is how many of the key's unit make a second.
func timeScale(key string) float64 {
	switch {
	case strings.HasSuffix(key, "_ms") || strings.Contains(key, "_ms_"):
		return 1e3
	case strings.HasSuffix(key, "_us") || strings.Contains(key, "_us_"):
		return 1e6
	case strings.HasSuffix(key, "_ns") || strings.Contains(key, "_ns_"):
		return 1e9
	}
	return 1
}

// CheckFigures refuses a JSON document holding a figure no measurement
// gives: a number that does not fit a float64 (1e400), a negative rate,
// time, size or count, a rate above MaxRate, a time above MaxSeconds or a
// size above MaxBytes. Rates, times and sizes are recognised by their
// keys' units, counts by their names, in any document of any schema, so
// every document reader applies the same rule. The error names the figure
// by its path in the document, e.g. rows[2].median_bps.
func CheckFigures(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		// Not JSON at all: the caller's decoder says so in its words.
		return nil
	}
	return checkValue("", "", v)
}

func checkValue(path, key string, v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			unit := k
			if k == "value" {
				// A field with its provenance ({"value": …,
				// "source": …}) has its unit in its own key.
				unit = key
			}
			if err := checkValue(p, unit, e); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := checkValue(fmt.Sprintf("%s[%d]", path, i), key, e); err != nil {
				return err
			}
		}
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("%s = %.40s: not a finite number", path, x)
		}
		k := strings.ToLower(key)
		switch {
		case rateKey.MatchString(k):
			if f < 0 || f > MaxRate {
				return fmt.Errorf("%s = %s: want a rate from 0 to %g per second", path, x, float64(MaxRate))
			}
		case timeKey.MatchString(k):
			if f < 0 || f/timeScale(k) > MaxSeconds {
				return fmt.Errorf("%s = %s: want a time from 0 to %g s", path, x, float64(MaxSeconds))
			}
		case lossKey.MatchString(k):
			if f < 0 || f > 100 {
				return fmt.Errorf("%s = %s: want a loss from 0 to 100 %%", path, x)
			}
		case sizeKey.MatchString(k) && !overheadKey.MatchString(k):
			if f < 0 || f > MaxBytes {
				return fmt.Errorf("%s = %s: want a size from 0 to %g bytes", path, x, float64(MaxBytes))
			}
		case countKey.MatchString(k):
			if f < 0 {
				return fmt.Errorf("%s = %s: want a count of 0 or more", path, x)
			}
		}
	}
	return nil
}

// CheckRows refuses a run document whose rows cannot be told apart: two
// rows of the same network, variant, direction and transport (a reader
// would have to pick one silently); and a row whose figures contradict
// each other: the per-sample series (samples[].bps) and samples_bps
// holding different rates, or median_bps, min_bps and max_bps that are
// not those of samples_bps (a table drawn from one and a verdict from the
// other would disagree).
func (r *Report) CheckRows() error {
	seen := map[string]bool{}
	for i := range r.Rows {
		row := &r.Rows[i]
		k := row.Key()
		if seen[k] {
			return fmt.Errorf("rows[%d]: a second row for %s", i, k)
		}
		seen[k] = true
		if len(row.Samples) > 0 && len(row.Samples) != len(row.SamplesBps) {
			return fmt.Errorf("rows[%d] (%s): %d samples and %d samples_bps: the two lists of the same samples disagree", i, k, len(row.Samples), len(row.SamplesBps))
		}
		for j := range row.Samples {
			if !sameFigure(row.Samples[j].Bps, row.SamplesBps[j]) {
				return fmt.Errorf("rows[%d] (%s): samples[%d].bps = %g but samples_bps[%d] = %g: the two lists of the same samples disagree", i, k, j, row.Samples[j].Bps, j, row.SamplesBps[j])
			}
		}
		if len(row.SamplesBps) == 0 {
			continue
		}
		st := verdict.Of(row.SamplesBps)
		for _, f := range []struct {
			key       string
			doc, want float64
		}{{"median_bps", row.MedianBps, st.Median}, {"min_bps", row.MinBps, st.Min}, {"max_bps", row.MaxBps, st.Max}} {
			if !sameFigure(f.doc, f.want) {
				return fmt.Errorf("rows[%d] (%s): %s = %g but its samples_bps give %g", i, k, f.key, f.doc, f.want)
			}
		}
	}
	return nil
}

// sameFigure reports whether two rates are equal up to the rounding a
// JSON round trip or a sum in another order may leave.
func sameFigure(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}
