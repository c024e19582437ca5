package probe

import (
	"time"

	"github.com/ovpnperf/ovpnperf/internal/bounds"
)

// The defaults and ranges of a probe's options: probe's flags, their help
// text and Run's check read them here.
const (
	// DefaultPings: 300 echoes, 3 s at DefaultInterval, show a loss of a
	// third of a percent.
	DefaultPings    = 300
	DefaultInterval = 10 * time.Millisecond
	// DefaultIPerf3Duration is the iperf3 test's length on a short path
	// (a long one lengthens it: iperfTiming).
	DefaultIPerf3Duration = 5 * time.Second
)

// PingsRange is the echoes a probe sends: enough for a jitter, at most a
// hundred seconds of them.
func PingsRange() bounds.Int { return bounds.Int{Min: 10, Max: 10000} }

// IPerf3DurationRange is the iperf3 test's length.
func IPerf3DurationRange() bounds.Duration {
	return bounds.Duration{Min: time.Second, Max: time.Minute}
}
