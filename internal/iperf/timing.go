package iperf

import (
	"fmt"
	"math"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/overhead"
)

// The default sample of a path (the --time and --omit of lab run, tune,
// measure and probe's iperf3 sample when not given), the rule stated in
// their help and docs/lab.md:
//
//   - warm-up (iperf3 -O): TCP's slow start, which doubles the window once
//     per round trip from an initial window of 10 segments (RFC 6928)
//     until it holds the path's bandwidth-delay product, takes
//     ceil(log2(BDP / 10 segments)) round trips; one more brings the first
//     full-rate data to the receiver. The warm-up is that many round trips
//     of the path, rounded up to whole seconds, at least 1 s.
//     The BDP is at the faster direction's rate; on a path without a rate
//     limit Linux's default largest send buffer (net.ipv4.tcp_wmem, 4 MiB)
//     bounds the window instead.
//   - measured part (iperf3 -t): at least 2 s, at least 4 round trips, and
//     at least 10 loaded round trips (the round trip with the bottleneck
//     queue the flow fills, up to a minute), rounded up to whole seconds:
//     a window's edges can fall before or after a loss recovery's release
//     of up to one loaded round trip of data, so ten keep that error within
//     10 % (docs/evidence.md).
//
// With a 20 Mbit/s, 200 ms path and its one-BDP queue (loaded round trip
// 0.4 s) that is -O 2 -t 4; with 10 Mbit/s, 600 ms (1.2 s), -O 5 -t 12; any
// path up to 100 ms with a queue of up to one BDP keeps -O 1 -t 2.
//
// The windows themselves are judged by Result.Check with the path's
// largest round trip as slack (a lab path's labpath.Path.MaxRoundTrip, a real
// path's RealPathSlack); this rule only makes them measure the rate after
// slow start.
const (
	initialWindowBytes = 10 * overhead.TCPSegmentBytes
	unshapedWindowCap  = 4 << 20
	minSampleTime      = 2 * time.Second
	minWarmup          = time.Second
	sampleRoundTrips   = 4
	edgeRoundTrips     = 10
	maxEdgeTime        = time.Minute
)

// SampleTiming returns the default measured length (iperf3 -t) and
// warm-up (iperf3 -O) of a sample on a path of this idle round trip,
// loaded round trip (with the queue the flow fills: a lab path's
// labpath.Path.LoadedRoundTrip, a user's path's RealPathSlack) and rate (0:
// unknown, as on a user's own path measured by probe or measure, where
// stock Linux's largest send buffer bounds the window instead).
func SampleTiming(rtt, loaded time.Duration, rate uint64) (duration, omit time.Duration) {
	bdp := float64(unshapedWindowCap)
	if rate > 0 {
		bdp = min(bdp, float64(rate)/8*rtt.Seconds())
	}
	rounds := 1.0
	if bdp > initialWindowBytes {
		rounds += math.Ceil(math.Log2(bdp / initialWindowBytes))
	}
	omit = max(minWarmup, ceilSeconds(time.Duration(rounds*float64(rtt))))
	duration = max(minSampleTime, ceilSeconds(sampleRoundTrips*rtt), min(maxEdgeTime, ceilSeconds(edgeRoundTrips*loaded)))
	return duration, omit
}

// RealPathSlack is how much longer than asked a sample's measuring window
// may run on a user's own path whose largest round trip seen by echoes is
// maxRTT (iperf.ClientOptions.PathSlack): the receiver's window ends about
// one round trip after the sender's, and a bottleneck queue filled by the
// flow itself can add up to about another (a buffer of one bandwidth-delay
// product), so twice the largest echo round trip. A lab path knows its
// delays and queues (labpath.Path.MaxRoundTrip) and needs no estimate.
func RealPathSlack(maxRTT time.Duration) time.Duration { return 2 * maxRTT }

// RealPathTiming is SampleTiming for a user's own path, which ovpnperf
// knows only by the largest round trip its ICMP echoes saw (measure: the
// largest of its echoes outside and inside the tunnel; probe: the mean
// plus four mean deviations): that round trip sizes the warm-up, and
// RealPathSlack of it stands for the loaded round trip and is the window
// check's slack. measure and probe both size their samples here, so the
// same echoes give the same sample.
//
// echoed says whether any echo answered; largest is read only then. An
// answered echo sizes the sample whatever its round trip, 0 included (a
// LAN's round trip can round to nothing): at least 1 s of warm-up and
// 2 s measured, no slack. Without an echo nothing sizes the sample:
// NoEchoWarmup of warm-up, the command's own length (duration 0) and no
// slack.
func RealPathTiming(largest time.Duration, echoed bool) (duration, omit, slack time.Duration) {
	if !echoed {
		return 0, NoEchoWarmup, 0
	}
	largest = max(largest, 0)
	slack = RealPathSlack(largest)
	duration, omit = SampleTiming(largest, slack, 0)
	return duration, omit, slack
}

// NoEchoWarmup is the warm-up of a sample on a user's path that answered
// no ICMP echo: slow start from 10 segments to Linux's largest default
// send buffer (4 MiB) takes about 10 round trips, 2 s on a path of up to
// 200 ms.
const NoEchoWarmup = 2 * time.Second

func ceilSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}

// TimeRule is SampleTiming's rule for the measured length in words, for a
// help text, with least as the shortest sample (0: the rule's own).
func TimeRule(least time.Duration) string {
	return fmt.Sprintf("%v, or %d round trips or %d loaded round trips if longer", max(least, minSampleTime), sampleRoundTrips, edgeRoundTrips)
}

// WarmupRule is SampleTiming's rule for the warm-up in words, for a help
// text.
func WarmupRule() string { return fmt.Sprintf("its TCP slow start, at least %v", minWarmup) }
