package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ovpnperf/ovpnperf/internal/advise"
	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/report"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/shellquote"
	"github.com/ovpnperf/ovpnperf/internal/tune"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newTuneCommand) }

type tuneOptions struct {
	flags     pathFlags
	probe     string
	budget    time.Duration
	fix       []string
	allowTCP  bool
	start     string
	repeat    int
	duration  time.Duration
	omit      time.Duration
	direction string
	json      bool
	out       string
	html      string
	name      string
	pki       string
}

func newTuneCommand() *cobra.Command { return tuneCommand(new(tuneOptions)) }

// tuneCommand is the command with its options parsed into o (the flag tests
// read them).
func tuneCommand(o *tuneOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "tune [flags]",
		Short: "Search a lab twin of a path for an OpenVPN configuration faster than the defaults and advise's",
		Long: `tune builds a lab twin of a path (the same flags as lab up, or a probe
JSON), measures OpenVPN's defaults and advise's variant, then searches one
parameter at a time (coordinate descent): tun-mtu/mssfix/fragment,
sndbuf/rcvbuf (up to the twin's net.core.rmem_max/wmem_max, raised inside
the twin where the kernel allows it, never on the host),
proto (with --allow-tcp), data cipher, txqueuelen, fast-io, and any other
directive advise proposes. Each round measures the current best, the
default, advise's variant and the other values of one parameter, with
interleaved samples and lab run's validity rules. It moves only to a
candidate faster beyond the spread (its slowest sample above the current
best's fastest, in at least one direction, slower beyond the spread in
none); when the differences are within the spread it says so and stops
that parameter.

The best is reported only if it beats the default round by round: one
direction faster beyond the spread in every interleaved round that
measured both, at least 2 besides the round that chose it (samples of
different rounds are never pooled), no direction slower in any;
otherwise tune says that nothing beats the default, and why. Ctrl-C or the end of --budget stops the search and
prints the best so far.`,
		Example: `  ovpnperf tune --rate 20mbit --rtt 200ms --budget 10m
  ovpnperf tune --rate 100mbit --rtt 10ms --mtu 1400 --icmp-blackhole --fix proto=udp
  ovpnperf tune --rate 5mbit --rtt 300ms --loss 2% --allow-tcp --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTune(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), *o)
		},
	}
	f := c.Flags()
	o.flags.bind(f)
	f.StringVar(&o.probe, "probe", "", "build the twin from this probe JSON (ovpnperf probe) instead of path flags")
	durationRangeFlag(f, &o.budget, "budget", "", tune.DefaultBudget, tune.BudgetRange(), "stop the search after this long and report the best so far (%s)")
	f.StringArrayVar(&o.fix, "fix", nil, "pin a parameter (repeatable): proto=udp|tcp, cipher=CIPHER|default, mtu='DIRECTIVES'|default, buffers=BYTES|default, txqueuelen=N|default, fast-io=on|off")
	f.BoolVar(&o.allowTCP, "allow-tcp", false, "let the search try OpenVPN over TCP")
	f.StringVar(&o.start, "start", "", "a starting variant of your own (NAME=DIRECTIVES…), used in place of advise's")
	rangeFlag(f, &o.repeat, "repeat", "", tune.MinSamples, tune.RepeatRange(), "samples per candidate and round, interleaved (%s; "+strconv.Itoa(tune.MinSamples)+" are needed to call a difference beyond the spread)")
	durationRangeFlag(f, &o.duration, "time", "", 0, tune.SampleTimeRange(), "length of each iperf3 sample (whole seconds, %s)")
	durationRangeFlag(f, &o.omit, "omit", "", 0, experiment.OmitRange(), "warm-up left out of each sample (iperf3 -O; whole seconds, %s)")
	f.Lookup("time").DefValue = timeRule
	f.Lookup("omit").DefValue = omitRule
	f.StringVar(&o.direction, "direction", "both", "up (client→server), down (server→client) or both")
	f.BoolVar(&o.json, "json", false, "print the run as one JSON document (schema "+tune.Schema+")")
	f.StringVar(&o.out, "out", "", "also write the JSON document to this file")
	f.StringVar(&o.html, "html", "", "also write the report page (as `ovpnperf report` makes it: the search path charted) to this file")
	f.StringVar(&o.name, "name", "", "name the twin's labs NAME-rN (round N), to watch them with lab exec (default random)")
	f.StringVar(&o.pki, "pki", "", "reuse the PKI in this directory instead of a throw-away one per round")
	return c
}

// tuneSetup is a validated tune run.
type tuneSetup struct {
	opts tune.Options
	twin tune.TwinOptions
	args string // path flags as lab run takes them
}

func (o tuneOptions) setup() (tuneSetup, error) {
	var s tuneSetup
	if err := checkOutPath("--out", o.out); err != nil {
		return s, err
	}
	if err := checkOutPath("--html", o.html); err != nil {
		return s, err
	}
	if r := tune.BudgetRange(); !r.Contains(o.budget) {
		return s, usage.Errorf("--budget %v: want %s", o.budget, r)
	}
	dirs, ok := experiment.Directions(o.direction)
	if !ok {
		return s, usage.Errorf("--direction %q: want up, down or both", o.direction)
	}
	fixed := map[string]string{}
	for _, f := range o.fix {
		axis, value, err := tune.ParseFix(f)
		if err != nil {
			return s, err
		}
		if _, dup := fixed[axis]; dup {
			return s, usage.Errorf("--fix %q: %s is fixed twice", f, axis)
		}
		fixed[axis] = value
	}
	if fixed[tune.AxisProto] == "tcp" && !o.allowTCP {
		// Fixing TCP is an explicit choice of TCP.
		o.allowTCP = true
	}
	custom := o.flags.given()
	var p labpath.Path
	var err error
	var probeInput *advise.Input
	switch {
	case o.probe != "" && custom:
		return s, usage.Errorf("--probe and path flags: give one or the other")
	case o.probe != "":
		var in advise.Input
		if p, in, err = pathFromProbe(o.probe, tune.HostBufferCap()); err != nil {
			return s, err
		}
		probeInput = &in
		// The best's lab run line must rebuild the twin's path, which
		// came from the probe, not from flags.
		s.args = pathArgsOf(p)
	default:
		// No flags: the unshaped LAN, like lab up.
		if p, err = o.flags.path(); err != nil {
			return s, err
		}
		s.args = pathArgs(o.flags.fs)
	}
	if o.name != "" {
		// Round N's lab is NAME-rN; room is kept for "-r9999" (a 24 h
		// budget of short rounds), so every round's name is a lab name.
		maxLen := lab.MaxNameLen - len("-r9999")
		if len(o.name) > maxLen || lab.ValidateName(o.name) != nil {
			return s, usage.Errorf("--name %q: want 1–%d lower-case letters, digits or dashes, starting with a letter or digit", o.name, maxLen)
		}
	}
	if o.pki != "" {
		if _, err := openvpn.LoadPKI(o.pki); err != nil {
			return s, usage.Errorf("--pki %q: %v", o.pki, err)
		}
	}
	var advice tune.Advice
	if probeInput != nil {
		advice, err = tune.AdviceFor(*probeInput, "from the probe "+o.probe)
	} else {
		advice, err = tune.AdviceForPath(p, tune.HostBufferCap())
	}
	if err != nil {
		return s, err
	}
	if o.start != "" {
		v, err := openvpn.ParseVariant(o.start)
		if err != nil {
			return s, usage.Errorf("--start: %v", err)
		}
		c := tune.FromVariant(v, "udp")
		advice = tune.Advice{Candidate: &c, Variant: o.start, Note: "starting variant given with --start (not advise's); " + advice.Note}
	}
	desc := describePath(p)
	s.opts = tune.Options{Path: p, PathDescription: desc, Directions: dirs, Budget: o.budget, AllowTCP: o.allowTCP, Fixed: fixed, Advice: advice}
	s.twin = tune.TwinOptions{Path: p, Description: desc, Directions: dirs, Repeat: o.repeat, Duration: o.duration, Omit: o.omit, LabName: o.name, PKIDir: o.pki}
	// As lab run: the sample length not given follows from the path.
	d, w := experiment.SampleTiming(p)
	if o.flags.fs != nil && !o.flags.fs.Changed("time") {
		s.twin.Duration = d
	}
	if o.flags.fs != nil && !o.flags.fs.Changed("omit") {
		s.twin.Omit = w
	}
	return s, s.twin.Validate()
}

// pathArgs renders the path flags the user gave, for the lab run line.
func pathArgs(fs *pflag.FlagSet) string {
	var parts []string
	for _, n := range pathFlagNames {
		fl := fs.Lookup(n)
		if fl == nil || !fl.Changed {
			continue
		}
		if fl.Value.Type() == "bool" {
			parts = append(parts, "--"+n)
		} else {
			parts = append(parts, "--"+n+" "+shellquote.Arg(fl.Value.String()))
		}
	}
	return strings.Join(parts, " ")
}

// pathArgsOf renders a path as the per-direction path flags lab run takes
// (a twin built from a probe has no flags of its own).
func pathArgsOf(p labpath.Path) string {
	var parts []string
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + "ms"
	}
	for _, d := range []struct {
		name string
		l    labpath.Link
	}{{"up", p.Up}, {"down", p.Down}} {
		if d.l.RateBitsPerSec > 0 {
			parts = append(parts, fmt.Sprintf("--%s-rate %dbit", d.name, d.l.RateBitsPerSec))
		}
		if d.l.Delay > 0 {
			parts = append(parts, fmt.Sprintf("--%s-delay %s", d.name, ms(d.l.Delay)))
		}
		if d.l.Jitter > 0 {
			parts = append(parts, fmt.Sprintf("--%s-jitter %s", d.name, ms(d.l.Jitter)))
		}
		if d.l.LossPercent > 0 {
			parts = append(parts, fmt.Sprintf("--%s-loss %s%%", d.name, strconv.FormatFloat(d.l.LossPercent, 'f', -1, 64)))
		}
	}
	if p.MTU > 0 {
		parts = append(parts, fmt.Sprintf("--mtu %d", p.MTU))
	}
	if p.QueueBytes > 0 {
		parts = append(parts, fmt.Sprintf("--queue-bytes %d", p.QueueBytes))
	}
	if p.ICMPBlackhole {
		parts = append(parts, "--icmp-blackhole")
	}
	if p.NoIPv6 {
		parts = append(parts, "--no-ipv6")
	}
	return strings.Join(parts, " ")
}

func runTune(ctx context.Context, stdout, stderr io.Writer, o tuneOptions) error {
	s, err := o.setup()
	if err != nil {
		return err
	}
	if err := lab.Preflight(); err != nil {
		return err
	}
	if err := runner.Require("openvpn", "iperf3"); err != nil {
		return err
	}
	var notes []string
	s.twin.Notes = func(n string) { notes = append(notes, n) }
	// Progress goes to stderr also with --json: stdout holds the document.
	s.opts.Progress = stderr
	s.twin.Progress = stderr
	s.opts.Measure = tune.Twin(s.twin)
	s.opts.BufferCap = tune.HostBufferCap()
	// The dco axis only where the host can offload: probed, not assumed.
	h := dco.ProbeHost(ctx)
	if why := h.Missing(""); len(why) > 0 {
		s.opts.DCO = tune.DCOHost{NotTested: experiment.NotTestedDCO(h, why)}
	} else {
		s.opts.DCO = tune.DCOHost{Available: true}
	}
	res, err := tune.Run(ctx, s.opts)
	if res == nil {
		return err
	}
	res.Notes = append(res.Notes, tune.Uniq(notes)...)
	res.Argv = os.Args
	if o.out != "" {
		if werr := writeOut(o.out, func(w io.Writer) error { return writeTuneJSON(w, res) }); werr != nil {
			return werr
		}
	}
	if o.html != "" {
		doc := report.Document{File: "this run", Schema: res.Schema, Tune: res}
		if herr := report.WriteFile(o.html, []report.Document{doc}, report.Options{Argv: os.Args}); herr != nil {
			return fmt.Errorf("writing the report page: %w", herr)
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if jerr := enc.Encode(res); jerr != nil {
			return jerr
		}
	} else {
		printTune(stdout, res, s.args)
	}
	return err
}

func writeTuneJSON(w io.Writer, res *tune.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(res)
}

// printTune writes the result for people.
func printTune(w io.Writer, res *tune.Result, pathArgs string) {
	fmt.Fprintf(w, "path: %s\n", res.PathDescription)
	fmt.Fprintf(w, "search: %d rounds in %.0f s (budget %.0f s), %s\n", len(res.Steps), res.ElapsedSeconds, res.BudgetSeconds, res.Stopped)
	for _, st := range res.Steps {
		fmt.Fprintf(w, "  round %d %-10s %s\n", st.Round, st.Axis, st.Decision)
	}
	fmt.Fprintln(w, res.Verdict.Message)
	b := res.Best
	if res.Verdict.Found {
		args := strings.TrimSpace(pathArgs + " --proto " + shellquote.Arg(b.Proto) + " --variant " + shellquote.Arg(b.Variant))
		fmt.Fprintf(w, "best: ovpnperf lab run %s\n", args)
		fmt.Fprintf(w, "server.conf:\n  %s\nclient.conf:\n  %s\n", strings.Join(b.Server, "\n  "), strings.Join(b.Client, "\n  "))
		if len(b.Sysctl) > 0 {
			fmt.Fprintf(w, "sysctl.conf (both machines):\n  %s\n", strings.Join(b.Sysctl, "\n  "))
		}
	}
	// Ratios are medians of pairs of samples taken in the same round; the
	// Mbit/s figures pool the rounds and are for orientation only.
	for _, d := range res.Directions {
		c := res.VsDefault[d]
		if b.Name == "default" {
			fmt.Fprintf(w, "%s: default %s Mbit/s", d, measure.FormatMbpsSpread(c.Other))
		} else {
			fmt.Fprintf(w, "%s: best %s vs default %s Mbit/s, %s (%s)", d, measure.FormatMbpsSpread(c.Best), measure.FormatMbpsSpread(c.Other), pairedRatio(c), c.Record)
		}
		if g, ok := res.VsAdvise[d]; ok && len(g.ClosedBy) == 0 {
			fmt.Fprint(w, "; advise's variant is the best reported")
		} else if ok {
			fmt.Fprintf(w, "; advise %s Mbit/s, gap %s (%s)", measure.FormatMbpsSpread(g.Other), pairedRatio(g.Comparison), g.Record)
			fmt.Fprintf(w, ", differs in %s", strings.Join(g.ClosedBy, ", "))
		}
		fmt.Fprintln(w)
	}
	for _, f := range res.Findings {
		fmt.Fprintln(w, f.Text)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// pairedRatio is "×1.30 (1.25–1.35, 9 pairs)", or "no ratio" when no pair
// has a positive denominator (a stalled side).
func pairedRatio(c tune.Comparison) string {
	if c.Pairs == 0 {
		return "no ratio (no pair with a positive denominator)"
	}
	return fmt.Sprintf("×%.2f (%.2f–%.2f over %d pairs)", c.Ratio, c.RatioMin, c.RatioMax, c.Pairs)
}
