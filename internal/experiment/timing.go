package experiment

import (
	"time"

	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
)

// SampleTiming returns the default measured length (iperf3 -t) and warm-up
// (iperf3 -O) of a sample on lab path p: iperf.SampleTiming's rule at the
// path's round trip and its faster direction's rate.
func SampleTiming(p labpath.Path) (duration, omit time.Duration) {
	return iperf.SampleTiming(p.RTT(), p.LoadedRoundTrip(), max(p.Up.RateBitsPerSec, p.Down.RateBitsPerSec))
}
