package experiment

import (
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/bounds"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/usage"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// The bounds and defaults of a sample: how many per row, how long, the
// warm-up, the parallel streams. This is the one place they are decided:
// the flags of lab run, recipe, measure and watch take their ranges,
// defaults and help text from here, Spec.Validate refuses what lies
// outside, and Spec.WithDefaults fills what a Go caller left zero.

// Defaults of a Spec's sample options.
const (
	// DefaultRepeat: a finding and a verdict need this many samples a
	// side (verdict.MinSamples).
	DefaultRepeat = verdict.MinSamples
	// DefaultParallel: one iperf3 stream, as a single connection through
	// the tunnel would be.
	DefaultParallel = 1
	// DefaultProto is OpenVPN's own default transport.
	DefaultProto = openvpn.UDP
)

// RepeatRange is the samples per row a run takes: at least one, and few
// enough that a run of the built-in paths ends within the hour.
func RepeatRange() bounds.Int { return bounds.Int{Min: 1, Max: 50} }

// ParallelRange is the iperf3 streams (-P) of a sample.
func ParallelRange() bounds.Int { return bounds.Int{Min: 1, Max: 32} }

// SampleTimeRange is the measured length of a sample (iperf3 -t).
func SampleTimeRange() bounds.Duration {
	return bounds.Duration{Min: time.Second, Max: 300 * time.Second, Whole: true}
}

// OmitRange is the warm-up left out of a sample (iperf3 -O): up to two
// minutes, which holds the slow start SampleTiming gives the longest lab
// path (a 10 s round trip at a rate whose window takes ten round trips to
// open: 100 s).
func OmitRange() bounds.Duration {
	return bounds.Duration{Min: 0, Max: 2 * time.Minute, Whole: true}
}

// DirectionBoth is the --direction that measures up and down.
const DirectionBoth = "both"

// ParseDirections returns the directions a run measures for the name
// --direction takes: DirectionBoth, measure.DirectionUp or
// measure.DirectionDown. Lab run, tune, measure and watch parse their flag
// with it.
func ParseDirections(name string) ([]string, error) {
	switch name {
	case DirectionBoth:
		return []string{measure.DirectionUp, measure.DirectionDown}, nil
	case measure.DirectionUp, measure.DirectionDown:
		return []string{name}, nil
	}
	return nil, directionError(name)
}

// CheckDirections refuses a list of directions with one that is not
// measure.DirectionUp or measure.DirectionDown: Spec.Validate and realnet's
// check.
func CheckDirections(dirs []string) error {
	for _, d := range dirs {
		if d != measure.DirectionUp && d != measure.DirectionDown {
			return directionError(d)
		}
	}
	return nil
}

// directionError is the one refusal of a direction, a usage error naming
// the flag and the names it takes.
func directionError(name string) error {
	return usage.Errorf("--direction %q: want %s, %s or %s", name, measure.DirectionUp, measure.DirectionDown, DirectionBoth)
}

// WithDefaults returns spec with the options a Go caller left zero filled:
// Repeat DefaultRepeat, Parallel DefaultParallel, Proto DefaultProto,
// Directions both, and Duration, when zero, from the networks' paths (SampleTiming: the longest any of them
// needs). Omit 0 is no warm-up and stays 0 (Network.Omit sets one per
// path).
func (spec Spec) WithDefaults() Spec {
	if spec.Repeat == 0 {
		spec.Repeat = DefaultRepeat
	}
	if spec.Parallel == 0 {
		spec.Parallel = DefaultParallel
	}
	if spec.Proto == "" {
		spec.Proto = DefaultProto
	}
	if len(spec.Directions) == 0 {
		spec.Directions, _ = ParseDirections(DirectionBoth)
	}
	if spec.Duration == 0 {
		for _, n := range spec.Networks {
			d, _ := SampleTiming(n.Path)
			spec.Duration = max(spec.Duration, d)
		}
	}
	return spec
}

// CheckRepeat, CheckSampleTime and CheckOmit refuse a sample option outside
// its range, naming the flag, as a usage error: the one check, and the one
// sentence, of every command that takes these flags (lab run, recipe,
// measure, watch; tune's --omit).
func CheckRepeat(n int) error {
	if r := RepeatRange(); !r.Contains(n) {
		return usage.Errorf("--repeat %d: want %s samples per row", n, r)
	}
	return nil
}

// CheckSampleTime: see CheckRepeat.
func CheckSampleTime(d time.Duration) error {
	if r := SampleTimeRange(); !r.Contains(d) {
		return usage.Errorf("--time %v: want whole seconds from %s (iperf3 -t)", d, r)
	}
	return nil
}

// CheckOmit: see CheckRepeat.
func CheckOmit(d time.Duration) error {
	if r := OmitRange(); !r.Contains(d) {
		return usage.Errorf("--omit %v: want whole seconds from %s (iperf3 -O)", d, r)
	}
	return nil
}

// Validate refuses a spec whose sample options are outside their ranges
// (a zero left for WithDefaults is refused too: call it first), naming the
// lab run flag that sets each, as a usage error.
func (spec Spec) Validate() error {
	for _, err := range []error{CheckRepeat(spec.Repeat), CheckSampleTime(spec.Duration), CheckOmit(spec.Omit)} {
		if err != nil {
			return err
		}
	}
	for _, n := range spec.Networks {
		if r := OmitRange(); n.Omit != nil && !r.Contains(*n.Omit) {
			return usage.Errorf("network %s: warm-up %v: want whole seconds from %s (iperf3 -O)", n.Name, *n.Omit, r)
		}
	}
	for _, n := range spec.Networks {
		if k := len(n.variants(spec)); k > tunnel.MaxSlots {
			return usage.Errorf("--variant: %d variants; at most %d in one run (a tunnel slot each)", k, tunnel.MaxSlots)
		}
	}
	if len(spec.Networks) == 0 && len(spec.Variants) > tunnel.MaxSlots {
		return usage.Errorf("--variant: %d variants; at most %d in one run (a tunnel slot each)", len(spec.Variants), tunnel.MaxSlots)
	}
	if r := ParallelRange(); !r.Contains(spec.Parallel) {
		return usage.Errorf("--parallel %d: want %s streams", spec.Parallel, r)
	}
	if err := checkProto("--proto", spec.Proto); err != nil {
		return err
	}
	for v, p := range spec.Protos {
		if err := checkProto("variant "+v, p); err != nil {
			return err
		}
	}
	if err := CheckDirections(spec.Directions); err != nil {
		return err
	}
	if err := checkPayload("--payload", spec.Payload); err != nil {
		return err
	}
	for _, n := range spec.Networks {
		if err := checkPayload("network "+n.Name+" payload", n.Payload); err != nil {
			return err
		}
	}
	if spec.Retries < 0 {
		return usage.Errorf("retries %d: must not be negative", spec.Retries)
	}
	return nil
}

func checkProto(what, p string) error {
	if p != openvpn.UDP && p != openvpn.TCP {
		return usage.Errorf("%s %q: want %s or %s", what, p, openvpn.UDP, openvpn.TCP)
	}
	return nil
}

// Payloads are the payloads a sample can send besides iperf3's own (""):
// iperf's kinds of payload file.
func Payloads() []string { return []string{iperf.PayloadRandom, iperf.PayloadZeros} }

func checkPayload(what, p string) error {
	if p == "" {
		return nil
	}
	for _, ok := range Payloads() {
		if p == ok {
			return nil
		}
	}
	return usage.Errorf("%s %q: want %s", what, p, strings.Join(Payloads(), " or "))
}
