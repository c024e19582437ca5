package emulate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/emulate/ceilingdoc"
)

func TestCeilingStepJudge(t *testing.T) {
	t.Parallel()
	good := ceilingdoc.DirectionOutcome{Sent: 50000, Received: 50000, SentPPS: 24990, Released: 50000, Tolerance: time.Millisecond, LatenessP99: 300 * time.Microsecond}
	for _, c := range []struct {
		name          string
		up            func(*ceilingdoc.DirectionOutcome)
		held, carried bool
		why           string
	}{
		{"clean", func(*ceilingdoc.DirectionOutcome) {}, true, true, ""},
		{"0.01 % late holds", func(o *ceilingdoc.DirectionOutcome) { o.Late = 5 }, true, true, ""},
		{"0.02 % late is carried only", func(o *ceilingdoc.DirectionOutcome) { o.Late = 10 }, false, true, "up: 0.020 % late"},
		// With a 1 ms tolerance the late share decides (it implies the
		// p99); with a larger one the p99 figure is judged.
		{"p99 at 1 ms, nothing late", func(o *ceilingdoc.DirectionOutcome) { o.LatenessP99 = time.Millisecond }, true, true, ""},
		{"p99 at 1 ms, 2 ms tolerance", func(o *ceilingdoc.DirectionOutcome) {
			o.LatenessP99, o.Tolerance = time.Millisecond, 2*time.Millisecond
		}, false, true, "up: p99 lateness 1ms"},
		{"1 % late is carried", func(o *ceilingdoc.DirectionOutcome) { o.Late = 500 }, false, true, "up: 1.000 % late"},
		{"above 1 % late is not", func(o *ceilingdoc.DirectionOutcome) { o.Late = 501 }, false, false, "up: 1.00 % late"},
		{"a stall is not carried", func(o *ceilingdoc.DirectionOutcome) { o.Stalled = 1; o.Late = 1 }, true, false, "up: 1 releases stalled"},
		{"a lost packet", func(o *ceilingdoc.DirectionOutcome) { o.Received-- }, false, false, "up: 49999 of 50000 packets arrived"},
		{"a kernel drop", func(o *ceilingdoc.DirectionOutcome) { o.Drops = 1 }, false, false, "up: 1 kernel drops"},
		{"a slow sender", func(o *ceilingdoc.DirectionOutcome) { o.SentPPS = 24000 }, false, false, "up: sender reached 24000 pps"},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := good
			c.up(&up)
			s := ceilingdoc.Step{RatePPS: 25000, Directions: [2]ceilingdoc.DirectionOutcome{up, good}}
			JudgeStep(&s)
			if s.Held != c.held || s.Carried != c.carried || !strings.HasPrefix(s.Why, c.why) {
				t.Errorf("held %v carried %v why %q; want %v %v %q", s.Held, s.Carried, s.Why, c.held, c.carried, c.why)
			}
		})
	}
	// The down direction is judged as well.
	down := good
	down.Drops = 3
	s := ceilingdoc.Step{RatePPS: 25000, Directions: [2]ceilingdoc.DirectionOutcome{good, down}}
	JudgeStep(&s)
	if s.Held || s.Carried || s.Why != "down: 3 kernel drops" {
		t.Errorf("down drops: %+v", s)
	}
}

func TestOutcomeFromDelays(t *testing.T) {
	t.Parallel()
	const delay = 20 * time.Millisecond
	f := FlowResult{Sent: 4, Received: 4, SendTime: time.Second}
	for _, late := range []time.Duration{0, 500 * time.Microsecond, 2 * time.Millisecond, 60 * time.Millisecond} {
		f.Delays = append(f.Delays, delay+late)
	}
	o := OutcomeFromDelays(f, delay, time.Millisecond)
	if o.Late != 2 || o.Stalled != 1 || o.MaxLateness != 60*time.Millisecond || o.Released != 4 || o.LatenessFrom != "receiver" ||
		o.LateDelay != 62*time.Millisecond {
		t.Errorf("%+v", o)
	}
}

func TestCeilingRecordAndReport(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ceiling.json")
	how := "`ovpnperf lab calibrate` measures it (about 60 s)"
	r := reportCeiling(path, "nfqueue", "6.18.0", 2, how)
	if r.Status != CeilingNotMeasured || r.Record != nil || r.Summary != "emulator: nfqueue, ceiling not measured on this host: "+how {
		t.Errorf("no record: %+v", r)
	}
	c := ceilingdoc.Ceiling{Schema: CeilingSchema, Backend: "nfqueue", Time: time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC),
		Kernel: "6.18.0", CPUs: 2, LoadBefore: [3]float64{0.4, 0.3, 0.2}, PacketBytes: 1400, Delay: 20 * time.Millisecond,
		Steps: []ceilingdoc.Step{{RatePPS: 20000, Held: true, Carried: true}, {RatePPS: 25000, Carried: true}, {RatePPS: 30000}}}
	c.Summarize()
	if c.HeldPPS != 20000 || c.CarriedPPS != 25000 {
		t.Fatalf("summarize: held %v carried %v", c.HeldPPS, c.CarriedPPS)
	}
	writeCeiling(t, path, c)
	r = reportCeiling(path, "nfqueue", "6.18.0", 2, how)
	want := "emulator: nfqueue, held 20 000 pps/direction (1400 B, 20ms), at most 1 % late up to 25 000 pps, measured 2026-11-28 at load 0.40"
	if r.Status != CeilingMeasured || r.Busy || r.Summary != want || r.Record == nil || r.Record.HeldPPS != 20000 {
		t.Errorf("measured:\n got %+v\nwant %q", r, want)
	}
	for _, c := range []struct {
		backend, kernel string
		cpus            int
		want            string
	}{
		{"nfqueue", "6.19.0", 2, "stale (measured on kernel 6.18.0 with 2 CPUs, this host runs 6.19.0 with 2)"},
		{"nfqueue", "6.18.0", 4, "stale (measured on kernel 6.18.0 with 2 CPUs, this host runs 6.18.0 with 4)"},
		{"netem", "6.18.0", 2, "emulator: netem, ceiling not measured for it (the record is of nfqueue)"},
	} {
		r := reportCeiling(path, c.backend, c.kernel, c.cpus, how)
		if r.Status != CeilingStale || !strings.Contains(r.Summary, c.want) || !strings.HasSuffix(r.Summary, how) || strings.Contains(r.Summary, "held") {
			t.Errorf("%+v: %q, want %q", c, r.Summary, c.want)
		}
	}
	// The generator, not the emulator, fell short at the last rate.
	c.Steps[2].Why = "up: sender reached 28000 pps"
	c.Summarize()
	writeCeiling(t, path, c)
	r = reportCeiling(path, "nfqueue", "6.18.0", 2, how)
	if !c.SenderLimited || !strings.Contains(r.Summary, "up to 25 000 pps (above it the load generator fell short, not the emulator), measured") {
		t.Errorf("sender-limited: %+v", r)
	}
	c.Steps = nil
	c.Summarize()
	c.LoadBefore[0] = 1.2
	writeCeiling(t, path, c)
	r = reportCeiling(path, "nfqueue", "6.18.0", 2, how)
	if !r.Busy || !strings.Contains(r.Summary, "held none of the rates tried (1400 B, 20ms), none with at most 1 % late, measured") || !strings.Contains(r.Summary, "at load 1.20 on 2 CPUs: a busy host") {
		t.Errorf("busy: %+v", r)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := reportCeiling(path, "nfqueue", "6.18.0", 2, how); r.Status != CeilingNotMeasured || !strings.Contains(r.Summary, "unreadable") {
		t.Errorf("corrupt record: %+v", r)
	}
}

func TestGroupThousands(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0", 500: "500", 5000: "5 000", 25000: "25 000", 100000: "100 000", 1250000: "1 250 000"} {
		if got := groupThousands(v); got != want {
			t.Errorf("%v: %q, want %q", v, got, want)
		}
	}
}

func writeCeiling(t *testing.T, path string, c ceilingdoc.Ceiling) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOutcomeFromStatsSince(t *testing.T) {
	t.Parallel()
	before := QueueStats{Released: 1000, Late: 50, Stalled: 1, KernelQueueDrops: 2, Tolerance: time.Millisecond}
	after := QueueStats{Released: 31000, Late: 52, Stalled: 1, KernelQueueDrops: 2, ENOBUFS: 1, Tolerance: time.Millisecond,
		LatenessP99: 80 * time.Microsecond, MaxLateness: 4 * time.Millisecond}
	f := FlowResult{Sent: 30000, Received: 30000, SendTime: time.Second}
	o := OutcomeFromStatsSince(f, before, after)
	if o.Released != 30000 || o.Late != 2 || o.Stalled != 0 || o.Drops != 1 || o.Tolerance != time.Millisecond || o.MaxLateness != 4*time.Millisecond || o.LatenessFrom != "emulator" {
		t.Errorf("%+v", o)
	}
	if o := OutcomeFromStats(f, after); o.Released != 31000 || o.Late != 52 || o.Drops != 3 {
		t.Errorf("from the start: %+v", o)
	}
}

// reportCeiling is ReportCeiling of the record at path, read as tests
// read it (the commands read it with lab.ReadCeiling).
func reportCeiling(path, backend, kernel string, cpus int, how string) ceilingdoc.Report {
	b, err := os.ReadFile(path)
	var c ceilingdoc.Ceiling
	if err == nil {
		c, err = ParseCeiling(path, b)
	}
	return ReportCeiling(c, err, backend, kernel, cpus, how)
}

// A record on disk is read only if lab calibrate could have written it: a
// newline in the kernel would start a line of its own in lab status, a
// negative rate would be printed as measured.
func TestParseCeilingRefusesWhatNoCalibrationWrites(t *testing.T) {
	t.Parallel()
	good := ceilingdoc.Ceiling{Schema: CeilingSchema, Backend: "nfqueue", Kernel: "6.18.0", CPUs: 2, PacketBytes: 1400,
		Delay: 20 * time.Millisecond, HeldPPS: 20000, CarriedPPS: 25000, LoadBefore: [3]float64{0.4, 0.3, 0.2},
		Steps: []ceilingdoc.Step{{RatePPS: 20000, Held: true, Carried: true}}}
	for _, c := range []struct {
		name string
		edit func(*ceilingdoc.Ceiling)
		want string // "" = read
	}{
		{"as written", func(*ceilingdoc.Ceiling) {}, ""},
		{"newline in the kernel", func(c *ceilingdoc.Ceiling) { c.Kernel = "6.18.0\nemulator: afxdp, held 1 000 000 pps" }, "kernel"},
		{"escape in the backend", func(c *ceilingdoc.Ceiling) { c.Backend = "nfqueue\x1b[2J" }, "backend"},
		{"negative held rate", func(c *ceilingdoc.Ceiling) { c.HeldPPS = -5 }, "a rate of -5 pps"},
		{"absurd step rate", func(c *ceilingdoc.Ceiling) { c.Steps[0].RatePPS = 1e300 }, "a rate of 1e+300 pps"},
		{"negative CPUs", func(c *ceilingdoc.Ceiling) { c.CPUs = -2 }, "cpus -2"},
		{"negative delay", func(c *ceilingdoc.Ceiling) { c.Delay = -time.Second }, "delay -1s"},
		{"negative load", func(c *ceilingdoc.Ceiling) { c.LoadAfter[1] = -1 }, "a load average of -1"},
	} {
		rec := good
		rec.Steps = slices.Clone(good.Steps)
		c.edit(&rec)
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseCeiling("rec.json", b)
		if (c.want == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n"))) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
