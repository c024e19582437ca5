package realnet

import (
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
)

// measure's and watch's spec takes experiment's ranges: a zero Spec gets
// the defaults and passes (its samples sized by the path), each value just
// outside a range is refused naming the flag, each bound passes.
func TestSpecBounds(t *testing.T) {
	s := Spec{Omit: -1}.WithDefaults()
	if s.Repeat != experiment.DefaultRepeat || s.Port != iperf.DefaultPort {
		t.Errorf("defaults: repeat %d port %d, want %d %d", s.Repeat, s.Port, experiment.DefaultRepeat, iperf.DefaultPort)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
	rr, tr, or := experiment.RepeatRange(), experiment.SampleTimeRange(), experiment.OmitRange()
	for _, c := range []struct {
		set  func(*Spec)
		flag string
	}{
		{func(s *Spec) { s.Repeat = rr.Max + 1 }, "--repeat"},
		{func(s *Spec) { s.Repeat = -1 }, "--repeat"},
		{func(s *Spec) { s.Duration = tr.Min - time.Second/2 }, "--time"},
		{func(s *Spec) { s.Duration = tr.Max + time.Second }, "--time"},
		{func(s *Spec) { s.Omit = or.Max + time.Second }, "--omit"},
		{func(s *Spec) { s.Port = 65536 }, "--port"},
		{func(s *Spec) { s.Directions = []string{"both"} }, "--direction"},
	} {
		b := s
		c.set(&b)
		if err := b.Validate(); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%+v: Validate = %v, want an error naming %s", b, err, c.flag)
		}
	}
	for _, set := range []func(*Spec){
		func(s *Spec) { s.Repeat, s.Duration, s.Omit = rr.Min, tr.Min, or.Min },
		func(s *Spec) { s.Repeat, s.Duration, s.Omit = rr.Max, tr.Max, or.Max },
	} {
		b := s
		set(&b)
		if err := b.Validate(); err != nil {
			t.Errorf("at the bounds: %v", err)
		}
	}
}
