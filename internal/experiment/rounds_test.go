package experiment

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/ui"
)

// A row whose sample stays invalid through its retries is given up: its
// later rounds are not measured (before, every round retried it again,
// (1+Retries)×Repeat samples for nothing), the reason says how many tries
// failed, and the other rows are measured as before.
func TestRowGivenUpAfterItsRetries(t *testing.T) {
	t.Parallel()
	calls := map[string]int{}
	fake := func(_ context.Context, _ *lab.Lab, _ Spec, _ Network, s subject, d string, _ *iperfServers, _ iperf.CommandFunc) (*sampleResult, map[string]float64, error) {
		calls[s.name+"/"+d]++
		if s.name == "bad" {
			return nil, nil, fmt.Errorf("running iperf3: %w", &iperf.InconsistentError{Rule: iperf.RuleWindowLong, Side: "receiver",
				Window: 3 * time.Second, Requested: 2 * time.Second, Limit: 2150 * time.Millisecond, TolerancePercent: 7.5})
		}
		return &sampleResult{Result: &iperf.Result{ReceivedBitsPerSec: 10e6}}, map[string]float64{}, nil
	}
	spec := Spec{Repeat: 3, Retries: 2, Directions: []string{measure.DirectionUp}}
	n := Network{Name: "path"}
	subjects := []subject{{name: Routed}, {name: "bad"}}
	rows, index := newRows(spec, n, subjects)
	var log strings.Builder
	prog := ui.NewProgress(len(rows)*spec.Repeat, &log)
	if err := measureRounds(context.Background(), spec, n, nil, subjects, rows, index, &iperfServers{}, prog, fake); err != nil {
		t.Fatal(err)
	}
	prog.Done()
	if got := calls["bad/up"]; got != 1+spec.Retries {
		t.Errorf("the invalid row was sampled %d times, want %d (one sample's tries, then given up)", got, 1+spec.Retries)
	}
	if got := calls[Routed+"/up"]; got != spec.Repeat {
		t.Errorf("the valid row was sampled %d times, want %d", got, spec.Repeat)
	}
	bad := rows[index[[2]string{"bad", measure.DirectionUp}]]
	rf := bad.Refusal
	if bad.Valid || rf == nil || rf.Kind != measure.RefusalWindowLong || rf.Side != "receiver" || rf.Figures[measure.FigureWindowSeconds] != 3 ||
		rf.Figures[measure.FigureLimitSeconds] != 2.15 || rf.Tries != 3 || rf.Sample != 1 || rf.Samples != 3 || rf.NotMeasured != 2 {
		t.Errorf("given-up row: valid %v, refusal %+v; want window-long of the receiver, 3 s of 2.15 s allowed, 3 tries of sample 1 of 3, 2 not measured", bad.Valid, rf)
	}
	// Its sentence is the refusal's, rendered from the record.
	if rf != nil && bad.Error != rf.Text() {
		t.Errorf("given-up row: error %q, want the refusal's sentence %q", bad.Error, rf.Text())
	}
	if !strings.Contains(log.String(), "gave up") {
		t.Errorf("progress does not say the row was given up:\n%s", log.String())
	}
	if ok := rows[index[[2]string{Routed, measure.DirectionUp}]]; !ok.Valid || len(ok.SamplesBps) != spec.Repeat {
		t.Errorf("valid row: %+v", ok)
	}
}

// The default sample follows from the path: a warm-up that covers slow
// start, a measured part of at least 2 s, 4 round trips and 10 loaded
// round trips (one BDP of queue by default).
func TestSampleTiming(t *testing.T) {
	t.Parallel()
	path := func(rate uint64, rtt time.Duration) labpath.Path {
		l := labpath.Link{RateBitsPerSec: rate, Delay: rtt / 2}
		return labpath.Path{Up: l, Down: l}
	}
	for _, c := range []struct {
		name       string
		p          labpath.Path
		time, omit time.Duration
	}{
		{"LAN", labpath.Path{}, 2 * time.Second, time.Second},
		{"built-in WAN, 50 Mbit/s 60 ms", path(50e6, 60*time.Millisecond), 2 * time.Second, time.Second},
		{"unshaped 100 ms", path(0, 100*time.Millisecond), 2 * time.Second, time.Second},
		// 500 kB BDP = 34.5 × 10 segments: 6 doublings + 1 = 7 RTTs = 1.4 s;
		// loaded round trip 200 ms + 500 kB at 20 Mbit/s = 0.4 s.
		{"radio, 20 Mbit/s 200 ms", path(20e6, 200*time.Millisecond), 4 * time.Second, 2 * time.Second},
		// 750 kB = 51.8 × 10 segments: 7 RTTs = 4.2 s; loaded 1.2 s.
		{"satellite, 10 Mbit/s 600 ms", path(10e6, 600*time.Millisecond), 12 * time.Second, 5 * time.Second},
		// 1.5 MB: 8 RTTs = 4.8 s.
		{"satellite, 20 Mbit/s 600 ms", path(20e6, 600*time.Millisecond), 12 * time.Second, 5 * time.Second},
		// A 2 s round trip: 250 kB BDP, 6 RTTs of slow start = 12 s; loaded 4 s.
		{"2 s, 1 Mbit/s", path(1e6, 2*time.Second), 40 * time.Second, 12 * time.Second},
	} {
		d, o := SampleTiming(c.p)
		if d != c.time || o != c.omit {
			t.Errorf("%s: -t %v -O %v, want -t %v -O %v", c.name, d, o, c.time, c.omit)
		}
	}
}

// The window slack of a path: its round trip, jitter, and each rate
// limiter's full queue (one BDP by default).
func TestMaxRoundTrip(t *testing.T) {
	t.Parallel()
	l := labpath.Link{RateBitsPerSec: 20e6, Delay: 100 * time.Millisecond}
	p := labpath.Path{Up: l, Down: l}
	if got, want := p.MaxRoundTrip(), 600*time.Millisecond; got != want {
		t.Errorf("20 Mbit/s 200 ms: %v, want %v (200 ms + two 500 kB queues)", got, want)
	}
	p.QueueBytes = 25000
	p.Up.Jitter = 10 * time.Millisecond
	if got, want := p.MaxRoundTrip(), 230*time.Millisecond; got != want {
		t.Errorf("with 25 kB queues and 10 ms jitter: %v, want %v", got, want)
	}
	if got := (labpath.Path{}).MaxRoundTrip(); got != 0 {
		t.Errorf("LAN: %v, want 0", got)
	}
}
