package iperf

import (
	"math"
	"time"
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
//   - measured part (iperf3 -t): at least 2 s and at least 4 round trips,
//     rounded up to whole seconds, so that one loss recovery (a round trip
//     or more) is a small part of a sample.
//
// With a 20 Mbit/s, 200 ms path that is -O 2 -t 2; with 10 Mbit/s, 600 ms,
// -O 5 -t 3; any path up to 100 ms keeps -O 1 -t 2.
//
// The windows themselves are judged by Result.Check with the path's
// largest round trip as slack (a lab path's lab.Path.MaxRoundTrip, a real
// path's RealPathSlack); this rule only makes them measure the rate after
// slow start.
const (
	initialWindowBytes = 10 * 1448
	unshapedWindowCap  = 4 << 20
	minSampleTime      = 2 * time.Second
	minWarmup          = time.Second
	sampleRoundTrips   = 4
)

// SampleTiming returns the default measured length (iperf3 -t) and
// warm-up (iperf3 -O) of a sample on a path of this round trip and rate
// (0: unknown, as on a user's own path measured by probe or measure,
// where stock Linux's largest send buffer bounds the window instead).
func SampleTiming(rtt time.Duration, rate uint64) (duration, omit time.Duration) {
	bdp := float64(unshapedWindowCap)
	if rate > 0 {
		bdp = min(bdp, float64(rate)/8*rtt.Seconds())
	}
	rounds := 1.0
	if bdp > initialWindowBytes {
		rounds += math.Ceil(math.Log2(bdp / initialWindowBytes))
	}
	omit = max(minWarmup, ceilSeconds(time.Duration(rounds*float64(rtt))))
	duration = max(minSampleTime, ceilSeconds(sampleRoundTrips*rtt))
	return duration, omit
}

// RealPathSlack is how much longer than asked a sample's measuring window
// may run on a user's own path whose largest round trip seen by echoes is
// maxRTT (iperf.ClientOptions.PathSlack): the receiver's window ends about
// one round trip after the sender's, and a bottleneck queue filled by the
// flow itself can add up to about another (a buffer of one bandwidth-delay
// product), so twice the largest echo round trip. A lab path knows its
// delays and queues (lab.Path.MaxRoundTrip) and needs no estimate.
func RealPathSlack(maxRTT time.Duration) time.Duration { return 2 * maxRTT }

func ceilSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}
