package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/ui"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

type labRunOptions struct {
	flags     pathFlags
	variants  []string
	proto     string
	repeat    int
	duration  time.Duration
	omit      time.Duration
	parallel  int
	payload   string
	direction string
	noRouted  bool
	json      bool
	out       string
	html      string
	pki       string
	name      string
	network   string
	emulator  string
}

func newLabRunCommand() *cobra.Command { return labRunCommand(new(labRunOptions)) }

// labRunCommand is the command with its options parsed into o (the flag tests
// read them).
func labRunCommand(o *labRunOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "run [flags]",
		Short: "Run real OpenVPN across an emulated path and measure it against the bare routed path",
		Long: `lab run builds a lab, starts a real OpenVPN server (server namespace) and
client (client namespace) for each variant, and measures with iperf3, in both
directions, the tunnel against the bare routed path in the same run. Samples are
interleaved (routed A B …, routed A B …) and each row reports the median with
min–max, the ratio to the routed baseline, and the CPU-seconds per GB moved of
the OpenVPN server and client and the iperf3 server.

Without --time and --omit each sample's length follows from the path: a
warm-up (iperf3 -O) that covers TCP slow start (one round trip per doubling
of 10 segments up to the bandwidth-delay product, plus one round trip; whole
seconds, at least 1s), then at least 2s, 4 round trips and 10 loaded round
trips (with the bottleneck queue full; at most a minute) measured, so that
one loaded round trip of the path is at most 10 % of a window, the error a
window's edges can carry (20 Mbit/s at 200 ms: -O 2 -t 4;
10 Mbit/s at 600 ms: -O 5 -t 12). A row whose sample
stays invalid after 3 tries is given up with the reason, and progress goes
to stderr, also with --json. docs/evidence.md explains the rules.

Without path flags it measures two built-in paths: an unshaped LAN, where the
tunnel is CPU-bound, and a 50 Mbit/s, 60 ms WAN, where it should not be.
Without --variant it measures OpenVPN's defaults, CHACHA20-POLY1305 and cipher
none on the LAN, and the defaults on the WAN.

A variant is a built-in name (` + strings.Join(openvpn.BuiltinVariantNames(), ", ") + `)
or NAME=DIRECTIVE ARGS;DIRECTIVE ARGS, e.g. 'gcm128=data-ciphers AES-128-GCM'
or 'jumbo=tun-mtu 9000;mssfix 0'. Only data-channel and transport tuning
directives are accepted; each is checked before anything starts.

The variant dco (or the item dco in a variant, e.g. 'dcobig=dco;sndbuf
1048576') leaves out the lab's disable-dco so that OpenVPN uses data channel
offload. lab run probes the host first (OpenVPN's [DCO] build flag, the ovpn
or ovpn-dco-v2 kernel module, CONFIG_OVPN): where it cannot offload, each
row of that variant says "not tested here: kernel lacks the ovpn driver"
(or what else is missing) with no number, the JSON row holds the configs it
would have run, and the run still exits 0; where it can, the rows name the
module.`,
		Example: `  ovpnperf lab run
  ovpnperf lab run --rate 50mbit --rtt 20ms --variant default --repeat 3 --json
  ovpnperf lab run --variant default --variant jumbo --variant 'gcm128=data-ciphers AES-128-GCM'
  ovpnperf lab run --rate 15mbit --rtt 150ms --proto tcp --variant default
  ovpnperf lab run --rate 50mbit --variant dco --variant default`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLabRun(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), *o)
		},
	}
	f := c.Flags()
	o.flags.bind(f)
	emulatorFlag(f, &o.emulator)
	f.StringArrayVar(&o.variants, "variant", nil, "OpenVPN variant to measure (repeatable): a built-in name or NAME=DIRECTIVE ARGS;…")
	f.StringVar(&o.proto, "proto", experiment.DefaultProto, "OpenVPN transport: "+openvpn.UDP+" or "+openvpn.TCP)
	rangeFlag(f, &o.repeat, "repeat", "", experiment.DefaultRepeat, experiment.RepeatRange(), "samples per row, interleaved across variants (%s)")
	sampleTimeFlags(f, &o.duration, &o.omit, "", timeRule, omitRule)
	rangeFlag(f, &o.parallel, "parallel", "", experiment.DefaultParallel, experiment.ParallelRange(), "parallel iperf3 streams (%s)")
	payloads := strings.Join(experiment.Payloads(), " or ")
	stringFlag(f, &o.payload, "payload", "", "", payloads, "send a file of "+payloads+" data instead of iperf3's own (for compression experiments)")
	f.StringVar(&o.direction, "direction", "both", "up (client→server), down (server→client) or both")
	f.StringVar(&o.network, "network", "both", "built-in path(s) to measure when no path flag is given: lan, wan or both")
	f.BoolVar(&o.noRouted, "no-routed", false, "skip the routed baseline")
	f.BoolVar(&o.json, "json", false, "print one JSON document (schema "+measure.Schema+") instead of tables")
	stringFlag(f, &o.out, "out", "", "", "a file path", "also write the JSON document to this file (checked before the run)")
	stringFlag(f, &o.html, "html", "", "", "a file path", "also write the report page (as `ovpnperf report` makes it) to this file")
	stringFlag(f, &o.name, "name", "", "", "a lab name of lower-case letters, digits and dashes", "name the run's labs, to watch them with `ovpnperf lab exec` while it runs (NAME-lan and NAME-wan for the built-in paths; default random)")
	stringFlag(f, &o.pki, "pki", "", "", "a PKI directory", "reuse the PKI in this directory (made by an earlier run) instead of a throw-away one")
	return c
}

// builtinNetworks is what lab run measures without path flags: on the
// unshaped LAN, where OpenVPN is CPU-bound, the variants (defaults, the
// other AEAD cipher and cipher none) show how much of the cost is crypto;
// on the WAN, where the link is the limit, the defaults alone show the
// header overhead. Sized to finish within two minutes on two cores.
func builtinNetworks(wanVariants []openvpn.Variant) []experiment.Network {
	noOmit := time.Duration(0)
	return []experiment.Network{
		{Name: "lan", Description: "unshaped LAN, CPU-bound", Path: labpath.Path{}, Omit: &noOmit},
		{Name: "wan", Description: "50 Mbit/s, 60 ms RTT", Path: labpath.Path{
			Up:   labpath.Link{RateBitsPerSec: 50e6, Delay: 30 * time.Millisecond},
			Down: labpath.Link{RateBitsPerSec: 50e6, Delay: 30 * time.Millisecond},
		}, Variants: wanVariants},
	}
}

// pathFlagNames are the flags that describe a path; any of them replaces the
// built-in networks by one network built from the flags.
var pathFlagNames = []string{"rate", "up-rate", "down-rate", "rtt", "up-delay", "down-delay", "jitter", "up-jitter", "down-jitter", "loss", "up-loss", "down-loss", "mtu", "queue-bytes", "icmp-blackhole", "no-ipv6"}

// buildSpec validates every option and turns them into an experiment, before
// anything is created; it asks nothing of the host (runLabRun checks the
// emulator).
func (o labRunOptions) buildSpec(command string) (experiment.Spec, error) {
	spec := experiment.Spec{Command: command, Routed: !o.noRouted, Retries: iperf.Retries, Proto: o.proto, Repeat: o.repeat,
		Duration: o.duration, Omit: o.omit, Parallel: o.parallel, Payload: o.payload, PKIDir: o.pki}
	dirs, ok := experiment.Directions(o.direction)
	if !ok {
		return spec, usage.Errorf("--direction %q: want up, down or both", o.direction)
	}
	spec.Directions = dirs
	seen := map[string]bool{}
	for _, s := range o.variants {
		v, err := openvpn.ParseVariant(s)
		if err != nil {
			return spec, err
		}
		if seen[v.Name] || v.Name == experiment.Routed {
			return spec, usage.Errorf("--variant %q: the name %s is used twice (or is reserved)", s, v.Name)
		}
		seen[v.Name] = true
		spec.Variants = append(spec.Variants, v)
	}
	if len(spec.Variants) == 0 {
		for _, name := range []string{"default", "chacha20", "none"} {
			v, err := openvpn.ParseVariant(name)
			if err != nil {
				return spec, err
			}
			spec.Variants = append(spec.Variants, v)
		}
	}
	custom := o.flags.given()
	if custom {
		p, err := o.flags.path()
		if err != nil {
			return spec, err
		}
		spec.Networks = []experiment.Network{{Name: "path", Description: describePath(p), Path: p}}
	} else {
		wanVariants := spec.Variants
		if len(o.variants) == 0 {
			wanVariants = spec.Variants[:1]
		}
		nets := builtinNetworks(wanVariants)
		switch o.network {
		case "both":
			spec.Networks = nets
		case "lan":
			spec.Networks = nets[:1]
		case "wan":
			nets[1].Variants = nil
			spec.Networks = nets[1:]
		default:
			return spec, usage.Errorf("--network %q: want lan, wan or both", o.network)
		}
	}
	// The sample length follows from the path unless given (see
	// experiment.SampleTiming); the ranges are experiment's, checked
	// here, before anything is built.
	o.sampleTiming(&spec)
	if err := spec.Validate(); err != nil {
		return spec, err
	}
	for i := range spec.Networks {
		spec.Networks[i].Path.Emulator = o.emulator
	}
	if o.name != "" {
		if err := lab.ValidateName(o.name + "-lan"); err != nil {
			return spec, usage.Errorf("--name %q: want 1–%d lower-case letters, digits or dashes", o.name, lab.MaxNameLen-len("-lan"))
		}
		spec.LabName = o.name
	}
	if o.pki != "" {
		if _, err := openvpn.LoadPKI(o.pki); err != nil {
			return spec, usage.Errorf("--pki %q: %v", o.pki, err)
		}
	}
	if err := checkOutPath("--out", o.out); err != nil {
		return spec, err
	}
	if err := checkOutPath("--html", o.html); err != nil {
		return spec, err
	}
	return spec, nil
}

// The default sample timing, in words, for help texts (the rule is
// experiment.SampleTiming's, iperf's).
var (
	omitRule = "from the path: " + iperf.WarmupRule()
	timeRule = "from the path: " + iperf.TimeRule(0)
)

// sampleTiming sets the sample length and warm-up the user did not give
// from the networks' paths: the longest any of them needs (a network's own
// Omit still wins).
func (o labRunOptions) sampleTiming(spec *experiment.Spec) {
	var d, w time.Duration
	for _, n := range spec.Networks {
		nd, nw := experiment.SampleTiming(n.Path)
		d, w = max(d, nd), max(w, nw)
	}
	if o.flags.fs == nil {
		return
	}
	if !o.flags.fs.Changed("time") {
		spec.Duration = d
	}
	if !o.flags.fs.Changed("omit") {
		spec.Omit = w
	}
}

func runLabRun(ctx context.Context, stdout, stderr io.Writer, o labRunOptions) error {
	spec, err := o.buildSpec("lab run")
	if err != nil {
		return err
	}
	// Whether this host has the emulator asked for: a fact of the host,
	// checked before anything is built.
	if err := lab.CheckEmulator(o.emulator); err != nil {
		return err
	}
	if err := lab.Preflight(); err != nil {
		return err
	}
	if err := runner.Require("openvpn", "iperf3"); err != nil {
		return err
	}
	// Progress goes to stderr also with --json: stdout holds the document,
	// and a long path's run should not look hung.
	spec.Progress = stderr
	return measureAndShow(ctx, stdout, spec, o.json, o.out, o.html)
}

// measureAndShow runs an experiment and prints its report as tables or
// JSON, to a file with --out and as an HTML page with --html. A partial
// report is still written on failure.
func measureAndShow(ctx context.Context, stdout io.Writer, spec experiment.Spec, asJSON bool, out, html string) (err error) {
	rep, err := experiment.Run(ctx, spec)
	if rep == nil {
		return err
	}
	rep.Scenario.Argv = os.Args
	var outErr error
	if out != "" {
		outErr = writeOut(out, func(w io.Writer) error { return rep.WriteJSON(w) })
	}
	defer func() {
		if outErr != nil {
			err = errors.Join(err, outErr)
		}
	}()
	if html != "" {
		if herr := writeHTML(html, []*measure.Report{rep}); herr != nil {
			return herr
		}
	}
	if asJSON {
		if jerr := rep.WriteJSON(stdout); jerr != nil {
			return jerr
		}
	} else {
		if terr := ui.RenderTable(stdout, rep); terr != nil {
			return terr
		}
		for _, line := range measure.FindingLines(rep) {
			fmt.Fprintln(stdout, line)
		}
		if h := rep.Host; h.EmulationBackendWhy != "" {
			fmt.Fprintf(stdout, "emulation backend %s: %s\n", h.EmulationBackend, h.EmulationBackendWhy)
		}
		if c := rep.Host.EmulationCeiling; c != nil {
			fmt.Fprintln(stdout, c.Summary)
		}
	}
	return err
}
