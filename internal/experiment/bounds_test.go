package experiment

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// A zero Spec gets the documented defaults, and those pass Validate.
func TestSpecWithDefaults(t *testing.T) {
	p := labpath.Path{Up: labpath.Link{RateBitsPerSec: 20e6, Delay: 100 * time.Millisecond}, Down: labpath.Link{RateBitsPerSec: 20e6, Delay: 100 * time.Millisecond}}
	s := Spec{Networks: []Network{{Name: "lan"}, {Name: "wan", Path: p}}}.WithDefaults()
	wantDur, _ := SampleTiming(p)
	if s.Repeat != DefaultRepeat || s.Parallel != DefaultParallel || s.Proto != DefaultProto || s.Duration != wantDur || s.Omit != 0 {
		t.Errorf("defaults: repeat %d parallel %d proto %q duration %v omit %v; want %d %d %q %v 0s",
			s.Repeat, s.Parallel, s.Proto, s.Duration, s.Omit, DefaultRepeat, DefaultParallel, DefaultProto, wantDur)
	}
	if len(s.Directions) != 2 || s.Directions[0] != measure.DirectionUp || s.Directions[1] != measure.DirectionDown {
		t.Errorf("directions %v, want up and down", s.Directions)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
	// Given values stay.
	g := Spec{Repeat: 7, Parallel: 2, Proto: "tcp", Duration: 4 * time.Second, Directions: []string{measure.DirectionDown}}.WithDefaults()
	if g.Repeat != 7 || g.Parallel != 2 || g.Proto != "tcp" || g.Duration != 4*time.Second || len(g.Directions) != 1 {
		t.Errorf("given values changed: %+v", g)
	}
}

// Each range is refused just outside and accepted at both ends, by
// Validate, with a usage error naming the lab run flag; Run refuses the
// same spec before it builds anything (no host is asked, no lab made),
// instead of raising it to a default (a negative Repeat was run once).
func TestSpecValidateBounds(t *testing.T) {
	base := Spec{Duration: 2 * time.Second}.WithDefaults()
	rr, tr, or, pr := RepeatRange(), SampleTimeRange(), OmitRange(), ParallelRange()
	type tc struct {
		name string
		set  func(*Spec)
		flag string
	}
	var bad, good []tc
	for _, n := range []int{rr.Min - 1, rr.Max + 1, -1} {
		bad = append(bad, tc{"repeat", func(s *Spec) { s.Repeat = n }, "--repeat"})
	}
	for _, n := range []int{rr.Min, rr.Max} {
		good = append(good, tc{"repeat", func(s *Spec) { s.Repeat = n }, ""})
	}
	for _, n := range []int{pr.Min - 1, pr.Max + 1} {
		bad = append(bad, tc{"parallel", func(s *Spec) { s.Parallel = n }, "--parallel"})
	}
	for _, n := range []int{pr.Min, pr.Max} {
		good = append(good, tc{"parallel", func(s *Spec) { s.Parallel = n }, ""})
	}
	for _, d := range []time.Duration{tr.Min - time.Second, tr.Max + time.Second, tr.Min + time.Second/2} {
		bad = append(bad, tc{"time", func(s *Spec) { s.Duration = d }, "--time"})
	}
	for _, d := range []time.Duration{tr.Min, tr.Max} {
		good = append(good, tc{"time", func(s *Spec) { s.Duration = d }, ""})
	}
	for _, d := range []time.Duration{or.Min - time.Second, or.Max + time.Second} {
		bad = append(bad, tc{"omit", func(s *Spec) { s.Omit = d }, "--omit"})
		bad = append(bad, tc{"network omit", func(s *Spec) { s.Networks = []Network{{Name: "x", Omit: &d}} }, "warm-up"})
	}
	for _, d := range []time.Duration{or.Min, or.Max} {
		good = append(good, tc{"omit", func(s *Spec) { s.Omit = d }, ""})
	}
	bad = append(bad,
		tc{"proto", func(s *Spec) { s.Proto = "sctp" }, "--proto"},
		tc{"protos", func(s *Spec) { s.Protos = map[string]string{"a": "sctp"} }, "variant a"},
		tc{"direction", func(s *Spec) { s.Directions = []string{"sideways"} }, "--direction"},
		tc{"payload", func(s *Spec) { s.Payload = "ones" }, "--payload"},
		tc{"retries", func(s *Spec) { s.Retries = -1 }, "retries"},
		tc{"variants", func(s *Spec) { s.Variants = make([]openvpn.Variant, tunnel.MaxSlots+1) }, "--variant"},
		tc{"network variants", func(s *Spec) {
			s.Networks = []Network{{Name: "x", Variants: make([]openvpn.Variant, tunnel.MaxSlots+1)}}
		}, "--variant"},
	)
	good = append(good, tc{"variants", func(s *Spec) { s.Variants = make([]openvpn.Variant, tunnel.MaxSlots) }, ""})
	runRefused := 0
	for _, c := range bad {
		s := base
		c.set(&s)
		err := s.Validate()
		var u *usage.Error
		if !errors.As(err, &u) || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%s: %+v: Validate = %v, want a usage error naming %s", c.name, s, err, c.flag)
		}
		// Run refuses it before anything (no host facts, no lab), unless
		// it is a zero that Run fills with its default.
		if s.WithDefaults().Validate() == nil {
			continue
		}
		runRefused++
		rep, rerr := Run(context.Background(), s)
		if rep != nil || rerr == nil || rerr.Error() != err.Error() {
			t.Errorf("%s: Run = %v, %v; want no report and %v", c.name, rep, rerr, err)
		}
	}
	if runRefused < len(bad)-2 {
		t.Errorf("Run was asked %d of %d bad specs", runRefused, len(bad))
	}
	for _, c := range good {
		s := base
		c.set(&s)
		if err := s.Validate(); err != nil {
			t.Errorf("%s at its bound: %v", c.name, err)
		}
	}
}

// The sample lab run sizes from a path (SampleTiming) stays inside the
// ranges Validate enforces, up to the longest round trip a lab takes at
// any rate: a spec lab run builds is never refused for its own defaults.
func TestSampleTimingWithinRanges(t *testing.T) {
	for _, rtt := range []time.Duration{0, time.Millisecond, 200 * time.Millisecond, 2 * time.Second, labpath.MaxRTT} {
		for _, rate := range []uint64{0, 64e3, 10e6, 1e9, 100e9} {
			link := labpath.Link{RateBitsPerSec: rate, Delay: rtt / 2}
			p := labpath.Path{Up: link, Down: link}
			d, w := SampleTiming(p)
			if !SampleTimeRange().Contains(d) || !OmitRange().Contains(w) {
				t.Errorf("rtt %v rate %d: -t %v -O %v outside %s, %s", rtt, rate, d, w, SampleTimeRange(), OmitRange())
			}
		}
	}
}
