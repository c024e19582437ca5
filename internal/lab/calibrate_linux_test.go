package lab_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/emulate"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// A short real calibration: two low rates, a second each, through real
// labs and the backend this host's labs use. No figure is asserted (the
// machine is shared), only that the record is consistent with itself and
// with this host, and that nothing is left.
func TestCalibrate(t *testing.T) {
	testenv.Exclusive(t)
	labtest.Require(t)
	name := "cal-" + lab.NewName()
	t.Cleanup(func() { labtest.CheckGone(t, name) })
	var progress bytes.Buffer
	start := time.Now()
	rates := []float64{1000, 2000}
	c, err := lab.Calibrate(context.Background(), lab.CalibrateOptions{Name: name, StepDuration: time.Second, Env: labtest.Env(),
		Rates: rates, Progress: &progress, Version: "test", Argv: []string{"ovpnperf", "lab", "calibrate"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v\n%s", c, progress.String())
	want, err := lab.CalibrationBackend("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Schema != emulate.CeilingSchema || c.Backend != want || c.Backend == labpath.BackendNone ||
		c.Kernel != hostinfo.KernelRelease() || c.CPUs != hostinfo.CPUCount() || c.CPUs < 1 || c.Version != "test" || len(c.Argv) != 3 ||
		c.PacketBytes != 1400 || c.Delay != 20*time.Millisecond || c.Tolerance != time.Millisecond || c.StepDuration != time.Second {
		t.Errorf("record's settings: %+v", c)
	}
	if c.Time.Before(start.Add(-time.Second)) || c.Time.After(time.Now()) {
		t.Errorf("record's time %v, the test started at %v", c.Time, start)
	}
	for i, l := range [][3]float64{c.LoadBefore, c.LoadAfter} {
		if l[0] < 0 || l[1] < 0 || l[2] < 0 || l == [3]float64{} {
			t.Errorf("load %d: %v", i, l)
		}
	}
	if len(c.Steps) == 0 || len(c.Steps) > len(rates) {
		t.Fatalf("%d steps for %d rates", len(c.Steps), len(rates))
	}
	var held, carried float64
	for i, s := range c.Steps {
		if s.RatePPS != rates[i] {
			t.Errorf("step %d at %v pps, want %v", i, s.RatePPS, rates[i])
		}
		// The calibration stops at the first step not carried.
		last := i == len(c.Steps)-1
		if !s.Carried && !last || last && len(c.Steps) < len(rates) && s.Carried {
			t.Errorf("step %d of %d: carried %v", i, len(c.Steps), s.Carried)
		}
		// A rate not carried was tried CalibrationTries times.
		if s.Tries < 1 || s.Tries > lab.CalibrationTries || !s.Carried && s.Tries != lab.CalibrationTries {
			t.Errorf("step %d: %d tries, carried %v", i, s.Tries, s.Carried)
		}
		if s.Held && !s.Carried || (s.Why == "") != s.Held {
			t.Errorf("step %d: held %v, carried %v, why %q", i, s.Held, s.Carried, s.Why)
		}
		for j, d := range s.Directions {
			if d.Sent != int(s.RatePPS) || d.Received > d.Sent || d.SentPPS <= 0 {
				t.Errorf("step %d direction %d: sent %d (want %v), received %d, %v pps", i, j, d.Sent, s.RatePPS, d.Received, d.SentPPS)
			}
			if d.Late > d.Released || d.Stalled > d.Late || d.MaxLateness < d.LatenessP99 {
				t.Errorf("step %d direction %d: counters disagree: %+v", i, j, d)
			}
			want := "emulator"
			if c.Backend != labpath.BackendNFQueue {
				want = "receiver"
			}
			if d.LatenessFrom != want {
				t.Errorf("step %d direction %d: lateness from %q, want %q with backend %s", i, j, d.LatenessFrom, want, c.Backend)
			}
			// The emulator saw every packet the receiver got.
			if d.LatenessFrom == "emulator" && d.Released < uint64(d.Received) {
				t.Errorf("step %d direction %d: the emulator released %d, the receiver got %d", i, j, d.Released, d.Received)
			}
		}
		if s.Held {
			held = s.RatePPS
		}
		if s.Carried {
			carried = s.RatePPS
		}
	}
	if c.HeldPPS != held || c.CarriedPPS != carried {
		t.Errorf("held %v, carried %v; the steps say %v and %v", c.HeldPPS, c.CarriedPPS, held, carried)
	}
	tries := 0
	for _, s := range c.Steps {
		tries += s.Tries
	}
	if n := strings.Count(progress.String(), "pps/direction, try "); n != tries {
		t.Errorf("%d progress lines for %d tries:\n%s", n, tries, progress.String())
	}
}

// Interrupted (Ctrl-C) during a step, the calibration takes its lab down
// and says so.
func TestCalibrateInterrupted(t *testing.T) {
	testenv.Exclusive(t)
	labtest.Require(t)
	name := "cal-" + lab.NewName()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(2*time.Second, cancel)
	_, err := lab.Calibrate(ctx, lab.CalibrateOptions{Name: name, StepDuration: time.Minute, Rates: []float64{1000}, Env: labtest.Env()})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted calibration: %v, want context.Canceled", err)
	}
	labtest.CheckGone(t, name)
}
