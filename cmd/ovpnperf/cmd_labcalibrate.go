package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/emulate"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/outputfile"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

type labCalibrateOptions struct {
	duration time.Duration
	rates    []int
	record   string
	json     bool
	emulator string
}

func newLabCalibrateCommand() *cobra.Command {
	var o labCalibrateOptions
	c := &cobra.Command{
		Use:   "calibrate [flags]",
		Short: "Measure the packet rate this host's lab emulation holds, for lab status and lab run to report",
		Long: `lab calibrate measures the ceiling of the emulation backend this host's labs
use (the userspace NFQUEUE emulator on kernels without sch_netem, netem where
the kernel has it), or of the one --emulator names: it builds a lab with 20 ms of delay each way and nothing
else, sends 1400-byte UDP packets both ways at once at ascending rates, each
rate in a fresh lab for a 1 s warm-up and then --duration, and stops at the
first rate not carried in three tries.

A rate is held when both directions got every packet, the kernel dropped
none, the p99 release lateness stayed below 1 ms, at most 0.01 % of releases
were more than 1 ms late and the senders reached 98 % of the rate (the
definition of BenchmarkRateBoth); it is carried when at most 1 % were late
and none stalled, the rule by which lab run refuses a sample. A lab whose
packet rate nears the carried rate measures the host, not the path.

The record (backend, figures per rate, the load average before and after,
kernel, CPU count, ovpnperf version) goes to /var/lib/ovpnperf/emulator-ceiling.json
(mode 0644), which lab status and the documents of lab run report; a record
of another kernel or CPU count is reported as stale. Measure on an idle host:
a record taken at a 1-minute load of half the CPU count or more says so. The
host keeps one record: lab status shows it only beside labs of its backend.
Needs root; takes about a minute.`,
		Example: `  ovpnperf lab calibrate --duration 1s`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLabCalibrate(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := c.Flags()
	durationFlag(f, &o.duration, "duration", "", lab.DefaultCalibrationStep, time.Second, time.Minute, false, "how long each rate is offered (1s–1m)")
	var def []int
	for _, r := range lab.CalibrationRates() {
		def = append(def, int(r))
	}
	intListFlag(f, &o.rates, "rates", def, 100, 1000000, "packet rates per direction to try, ascending, until one is not carried")
	stringFlag(f, &o.record, "record", "", emulate.DefaultCeilingPath, "a file path", "write the record here (lab status and lab run read only the default)")
	emulatorFlag(f, &o.emulator)
	f.BoolVar(&o.json, "json", false, "print the record (schema "+emulate.CeilingSchema+") instead of text; progress goes to stderr")
	return c
}

func runLabCalibrate(ctx context.Context, w, errw io.Writer, o labCalibrateOptions) error {
	var rates []float64
	for i, r := range o.rates {
		if i > 0 && r <= o.rates[i-1] {
			return usage.Errorf("--rates: %d after %d; want ascending rates", r, o.rates[i-1])
		}
		rates = append(rates, float64(r))
	}
	// The default record's directory is made when the record is written
	// (and the record checked now if the directory exists); any other
	// path is checked now, before anything is built.
	if _, err := os.Stat(filepath.Dir(o.record)); err == nil || o.record != emulate.DefaultCeilingPath {
		if err := checkOutPath("--record", o.record); err != nil {
			return err
		}
	}
	backend, err := lab.CalibrationBackend(o.emulator)
	if err != nil {
		return err
	}
	if err := lab.Preflight(); err != nil {
		return err
	}
	opts := lab.CalibrateOptions{Name: "cal-" + lab.NewName(), StepDuration: o.duration, Rates: rates, Progress: errw,
		Version: versionString(), Argv: os.Args, Emulator: o.emulator}
	fmt.Fprintf(errw, "calibrating the %s emulation in lab %s: %d-byte packets both ways through %v, %v per rate (up to %.0f s)\n",
		backend, opts.Name, lab.CalibrationPacketBytes, lab.CalibrationDelay, o.duration, lab.CalibrationTime(opts).Seconds())
	c, err := lab.Calibrate(ctx, opts)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if o.record == emulate.DefaultCeilingPath {
		if err := os.MkdirAll(filepath.Dir(o.record), 0o755); err != nil {
			return fmt.Errorf("recording the ceiling: %w", err)
		}
	}
	if err := outputfile.WriteBytes(o.record, 0o644, append(b, '\n')); err != nil {
		return fmt.Errorf("recording the ceiling: %w", err)
	}
	if o.json {
		_, err := w.Write(append(b, '\n'))
		return err
	}
	r := emulate.ReportCeiling(c, nil, c.Backend, c.Kernel, c.CPUs, "")
	fmt.Fprintln(w, r.Summary)
	fmt.Fprintf(w, "load %.2f before, %.2f after (1 minute; the calibration's own load is in the second)\n", c.LoadBefore[0], c.LoadAfter[0])
	fmt.Fprintf(w, "recorded in %s\n", o.record)
	return nil
}

// versionString is the binary's version for records: the module version
// and the commit when the build stamped one.
func versionString() string {
	v := buildVersion()
	s := v.Version
	if v.Revision != "" {
		s += " " + v.Revision[:min(12, len(v.Revision))]
		if v.Modified {
			s += " (modified)"
		}
	}
	return s
}
