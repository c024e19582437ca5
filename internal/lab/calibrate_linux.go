package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/bounds"
	"github.com/ovpnperf/ovpnperf/internal/emulate"
	"github.com/ovpnperf/ovpnperf/internal/emulate/ceilingdoc"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
)

// Calibration: the packet rate this host's lab emulation holds, measured by
// building labs that carry nothing but a load generator (no OpenVPN, no
// iperf3) and stepping the rate up.
//
//	client ns ──► router ns: the backend any lab here would use ──► server ns
//	   flow up, 1400 B, RATE pps ──────────────► (20 ms) ──────►
//	   ◄────── (20 ms) ◄────────────── flow down, 1400 B, RATE pps
//
// Each rate gets a fresh lab named cal-ID (ID one per run), so that the
// emulator's lateness p99 and maximum are of that rate alone, as in
// BenchmarkRateBoth, which builds a fresh path per rate. A warm-up of
// CalibrationWarmUp at the rate comes first and is left out of the
// counters. Every lab is taken down before the next, also on an error or
// Ctrl-C, and is ephemeral: if this process dies, its owner takes it down.

// The calibration's load.
const (
	CalibrationPacketBytes = 1400
	CalibrationDelay       = 20 * time.Millisecond
	// CalibrationTolerance is the lateness beyond which a release counts
	// as late, the benchmarks' threshold. Labs count late beyond 1 ms or a
	// tenth of the delay, whichever is larger (2 ms at 20 ms): at 1 ms the
	// calibration is the stricter judge.
	CalibrationTolerance = time.Millisecond
	// DefaultCalibrationStep is how long each rate is offered and counted.
	DefaultCalibrationStep = 3 * time.Second
	// CalibrationWarmUp is how long each rate is offered before that,
	// uncounted.
	CalibrationWarmUp = time.Second
	// CalibrationTries is how often a rate not carried is tried, as lab
	// run tries a sample (experiment.Spec.Retries 2, and the first).
	CalibrationTries = 3
	// calibrationStepOverhead is what a step takes beyond its load: a lab
	// up and down, the last packets' delay, the emulator's last counters
	// (0.4 s a step on a 2-CPU host at load 3.5).
	calibrationStepOverhead = time.Second
)

// CalibrationRates are the packet rates per direction tried, ascending,
// until one is not carried; the slice is the caller's own.
func CalibrationRates() []float64 {
	return []float64{5e3, 10e3, 15e3, 20e3, 25e3, 30e3, 40e3, 50e3, 60e3, 80e3, 100e3}
}

// CalibrationRateRange is the packet rates per direction a calibration
// may offer (whole packets a second), the range lab calibrate's --rates
// takes.
func CalibrationRateRange() bounds.Int { return bounds.Int{Min: 100, Max: 1000000} }

// CalibrationStepRange is how long each rate may be offered.
func CalibrationStepRange() bounds.Duration {
	return bounds.Duration{Min: time.Second, Max: time.Minute}
}

// CalibrateOptions configure Calibrate.
type CalibrateOptions struct {
	// Name is the labs' name; empty means cal-ID, ID random.
	Name string
	// StepDuration is how long each rate is offered; 0 means
	// DefaultCalibrationStep.
	StepDuration time.Duration
	// Rates to try, ascending; nil means CalibrationRates.
	Rates []float64
	// Version and Argv are recorded.
	Version string
	Argv    []string
	// Progress, when set, gets a line per rate.
	Progress io.Writer
	// Emulator is the backend to measure, as Path.Emulator: "" for the
	// one this host's labs use by default.
	Emulator string
	// Env is where the calibration's labs live and which program owns
	// them, as Options.Env.
	Env Env
}

// CalibrationTime is the longest a calibration with these options takes:
// every rate tried, the last one CalibrationTries times.
func CalibrationTime(o CalibrateOptions) time.Duration {
	o = o.withDefaults()
	return time.Duration(len(o.Rates)+CalibrationTries-1) * (CalibrationWarmUp + o.StepDuration + calibrationStepOverhead)
}

func (o CalibrateOptions) withDefaults() CalibrateOptions {
	if o.StepDuration == 0 {
		o.StepDuration = DefaultCalibrationStep
	}
	if o.Rates == nil {
		o.Rates = CalibrationRates()
	}
	return o
}

// calibrationPath is the path each calibration lab emulates.
func calibrationPath(emulator string) labpath.Path {
	l := labpath.Link{Delay: CalibrationDelay}
	return labpath.Path{Up: l, Down: l, LateTolerance: CalibrationTolerance, Emulator: emulator}
}

// CalibrationBackend is the backend Calibrate measures for emulator (as
// Path.Emulator; "" is the one this host's labs use by default for delay,
// jitter and loss). A backend this host lacks is a usage error.
func CalibrationBackend(emulator string) (string, error) {
	backend, _, err := EmulationChoice(calibrationPath(emulator))
	return backend, err
}

// Calibrate measures the highest packet rate per direction this host's lab
// emulation holds, and the highest it carries with at most 1 % late (see
// ceilingdoc.DirectionOutcome), with both directions loaded at once.
func Calibrate(ctx context.Context, o CalibrateOptions) (ceilingdoc.Ceiling, error) {
	o = o.withDefaults()
	backend, err := CalibrationBackend(o.Emulator)
	if err != nil {
		return ceilingdoc.Ceiling{}, err
	}
	c := ceilingdoc.Ceiling{Schema: emulate.CeilingSchema, Backend: backend, Time: time.Now().UTC(),
		Kernel: hostinfo.KernelRelease(), CPUs: hostinfo.CPUCount(), Version: o.Version, Argv: o.Argv,
		PacketBytes: CalibrationPacketBytes, Delay: CalibrationDelay, Tolerance: CalibrationTolerance,
		StepDuration: o.StepDuration}
	if r := CalibrationStepRange(); !r.Contains(o.StepDuration) {
		return c, fmt.Errorf("calibration step %v: want %s", o.StepDuration, r)
	}
	for i, r := range o.Rates {
		if !CalibrationRateRange().Contains(int(r)) || float64(int(r)) != r || i > 0 && r <= o.Rates[i-1] {
			return c, fmt.Errorf("calibration rates %v: want whole rates from %s, ascending", o.Rates, CalibrationRateRange())
		}
	}
	if c.LoadBefore, err = hostinfo.LoadAvg(); err != nil {
		return c, err
	}
	name := o.Name
	if name == "" {
		name = "cal-" + NewName()
	}
	for _, rate := range o.Rates {
		var step ceilingdoc.Step
		// A rate not carried is tried again, up to CalibrationTries in
		// all, as lab run measures a refused sample again: the step is
		// its last try.
		for try := 1; try <= CalibrationTries; try++ {
			if step, err = calibrateStep(ctx, o.Env, name, rate, o.StepDuration, c.Backend); err != nil {
				return c, err
			}
			step.Tries = try
			emulate.JudgeStep(&step)
			if o.Progress != nil {
				verdict := "held"
				switch {
				case !step.Carried:
					verdict = "not carried (" + step.Why + ")"
				case !step.Held:
					verdict = "carried, not held (" + step.Why + ")"
				}
				fmt.Fprintf(o.Progress, "%7.0f pps/direction, try %d: %s\n", rate, try, verdict)
			}
			if step.Carried {
				break
			}
		}
		c.Steps = append(c.Steps, step)
		if !step.Carried {
			break
		}
	}
	c.Summarize()
	if c.LoadAfter, err = hostinfo.LoadAvg(); err != nil {
		return c, err
	}
	return c, nil
}

// calibrateStep offers rate packets a second each way through a fresh lab
// for d and returns what each direction saw.
func calibrateStep(ctx context.Context, env Env, name string, rate float64, d time.Duration, backend string) (_ ceilingdoc.Step, err error) {
	step := ceilingdoc.Step{RatePPS: rate}
	l, err := Up(ctx, Options{Name: name, Path: calibrationPath(backend), Ephemeral: true, Env: env})
	if err != nil {
		return step, err
	}
	defer func() {
		if derr := l.Down(); derr != nil {
			err = errors.Join(err, fmt.Errorf("lab %s: %w", name, derr))
		}
	}()
	if l.Backend() != backend {
		return step, fmt.Errorf("lab %s: emulation backend %s, expected %s", name, l.Backend(), backend)
	}
	// A warm-up at the rate first, left out of the counters: a lab's
	// sample never sees its emulator's first moments either (its counters
	// are read before and after each sample), and a fresh emulator
	// releases tens of packets late in them, whatever the rate.
	warm, err := calibrationLoad(ctx, l, rate, CalibrationWarmUp)
	if err != nil {
		return step, err
	}
	var before emulate.Stats
	if UserspaceBackend(backend) {
		if before, err = finalStats(ctx, l, warm); err != nil {
			return step, err
		}
	}
	res, err := calibrationFlows(ctx, l, rate, d)
	if err != nil {
		return step, err
	}
	end := time.Now()
	if !UserspaceBackend(backend) {
		// No counters of its own (netem): judged at the receivers.
		for i := range res {
			step.Directions[i] = emulate.OutcomeFromDelays(res[i], CalibrationDelay, CalibrationTolerance)
		}
		return step, nil
	}
	after, err := finalStats(ctx, l, end)
	if err != nil {
		return step, err
	}
	for i, num := range []uint16{queueUp, queueDown} {
		b, okb := queueStats(before, num)
		a, oka := queueStats(after, num)
		if !okb || !oka {
			return step, fmt.Errorf("lab %s: the emulator's counters have no queue %d", name, num)
		}
		step.Directions[i] = emulate.OutcomeFromStatsSince(res[i], b, a)
	}
	return step, nil
}

// calibrationLoad runs calibrationFlows and returns when they ended.
func calibrationLoad(ctx context.Context, l *Lab, rate float64, d time.Duration) (time.Time, error) {
	_, err := calibrationFlows(ctx, l, rate, d)
	return time.Now(), err
}

// calibrationFlows sends rate packets a second for d both ways at once:
// up from the client to the server, down from the server to the client.
func calibrationFlows(ctx context.Context, l *Lab, rate float64, d time.Duration) ([2]emulate.FlowResult, error) {
	count := max(1, int(rate*d.Seconds()))
	flow := func(from, to Node) emulate.Flow {
		return emulate.Flow{From: l.Namespace(from), To: l.Namespace(to), ToAddr: Addr(to, 4).String(),
			Rate: rate, Count: count, PayloadBytes: CalibrationPacketBytes - 28, // IPv4 and UDP headers
			Drain: CalibrationDelay + time.Second, Stop: ctx.Done()}
	}
	var res [2]emulate.FlowResult
	var errs [2]error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res[1], errs[1] = emulate.SendFlow(flow(Server, Client))
	}()
	res[0], errs[0] = emulate.SendFlow(flow(Client, Server))
	<-done
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := errors.Join(errs[:]...); err != nil {
		return res, fmt.Errorf("calibration load at %.0f pps: %w", rate, err)
	}
	return res, nil
}

// queueStats finds queue num in st.
func queueStats(st emulate.Stats, num uint16) (emulate.QueueStats, bool) {
	for _, q := range st.Queues {
		if q.Num == num {
			return q, true
		}
	}
	return emulate.QueueStats{}, false
}

// finalStats waits for the emulator's first counters written after end
// with nothing pending: every packet of the load released.
func finalStats(ctx context.Context, l *Lab, end time.Time) (emulate.Stats, error) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, err := l.Stats()
		if err == nil && st.Time.After(end) {
			pending := uint64(0)
			for _, q := range st.Queues {
				pending += q.Pending
			}
			if pending == 0 {
				return st, nil
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("packets still pending")
			}
			return st, fmt.Errorf("lab %s: the emulator's final counters: %w", l.Name(), err)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// EmulationCeiling is what this host's calibration record says about
// backend's ceiling, for `lab status` and the documents measured across a
// lab; nil for a lab without emulation.
func EmulationCeiling(backend string) *ceilingdoc.Report {
	return Env{}.EmulationCeiling(backend)
}

// EmulationCeiling is what the calibration record of e says about
// backend's ceiling.
func (e Env) EmulationCeiling(backend string) *ceilingdoc.Report {
	if backend == "" || backend == labpath.BackendNone {
		return nil
	}
	how := fmt.Sprintf("`ovpnperf lab calibrate` measures it (up to %.0f s)", CalibrationTime(CalibrateOptions{}).Seconds())
	c, err := ReadCeiling(e.CeilingPath())
	r := emulate.ReportCeiling(c, err, backend, hostinfo.KernelRelease(), hostinfo.CPUCount(), how)
	return &r
}

// ReadCeiling reads the ceiling record at path as any input is read (a
// regular file, capped): a FIFO or a device there must not hang `lab
// status` and every `lab run`.
func ReadCeiling(path string) (ceilingdoc.Ceiling, error) {
	b, err := inputfile.ReadFile(context.Background(), path, ceilingKind)
	if errors.Is(err, os.ErrNotExist) {
		return ceilingdoc.Ceiling{}, err
	}
	if err != nil {
		return ceilingdoc.Ceiling{}, fmt.Errorf("%s: %s", path, inputfile.Reason(err))
	}
	return emulate.ParseCeiling(path, b)
}
