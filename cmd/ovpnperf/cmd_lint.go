package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lint"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newLintCommand) }

type lintOptions struct {
	configs []string
	log     string
	rtt     string
	rate    string
	pmtu    int
	json    bool
	format  string
	target  string
	failOn  string
	fix     bool
	ctx     context.Context
	in      io.Reader
	out     io.Writer
	errOut  io.Writer
	context lint.Context
	// installed returns the installed OpenVPN's version (a seam for tests).
	installed func() (string, error)
}

func newLintCommand() *cobra.Command {
	o := lintOptions{}
	c := &cobra.Command{
		Use:   "lint [CONFIG|DIR]...",
		Short: "Review OpenVPN configs (and a log) for speed, DCO, security and 2.6/2.7 compatibility",
		Long: `lint reads OpenVPN server or client configs as OpenVPN reads them
(quoting, comments, inline blocks, config includes, --options) and says, line by
line, what costs speed, what turns data channel offload (DCO) off, what is
insecure and what the target OpenVPN version refuses or reads differently,
with the replacement lines and the fact each finding rests on.

Give one or more CONFIG files, or a DIR (its *.conf and *.ovpn files, e.g. a
directory of client configs); every file is checked in one run.

--target 2.6|2.7 is the OpenVPN version to check for (default: the installed
openvpn's version, 2.6 when none is installed). The dco-off rule names every
option that turns DCO off on Linux with that version (and, for a server, every
pushed option DCO clients refuse), with the OpenVPN source line deciding it;
with 2.7 the 2.7 changes (compression on send removed, secret refused, topology
subnet and dh none by default, persist-key default, fast-io ignored,
reneg-bytes/reneg-pkts ignored with DCO) are findings too.

--log FILE (or --log - for standard input, e.g. journalctl -u openvpn@NAME
output) also reads the log: socket buffers requested vs granted, the negotiated
cipher, a cipher mismatch, compression, "packet too large", replay warnings,
reconnect storms and why DCO is off.

--rtt, --rate and --pmtu describe the path (measure them with ovpnperf pmtu
and ping); buffer, MTU and fragment findings then use them instead of saying
"not tested here".

--format text|gcc|json|sarif: gcc prints one line per finding,
FILE:LINE:COL: SEVERITY: MESSAGE [RULE]; sarif prints SARIF 2.1.0 (GitHub code
scanning reads it); --json is --format json.

Suppress a finding with a comment on its line or the line before:
  fragment 1300  # ovpnperf-lint: disable=dco-off
or for the whole file: # ovpnperf-lint: disable-file=RULE[,RULE]. Only a
comment as OpenVPN reads the file counts: the same text in a quoted parameter
or an inline block suppresses nothing. The rule IDs are stable and listed,
with what each checks, in docs/lint.md.

--fix writes a corrected copy next to each CONFIG as CONFIG` + lint.FixSuffix + ` (mode
0600, never in place), with every fix that needs no decision of yours applied
and comments, order and inline blocks kept.

Exit status: 0 no findings at or above --fail-on (default warning), 1 warnings
(or infos with --fail-on info), 3 errors, 2 bad usage. Inline key material is
never printed.`,
		Example: `  ovpnperf lint /etc/openvpn/server/server.conf
  ovpnperf lint client.ovpn --rtt 200ms --rate 50mbit --pmtu 1492 --json
  ovpnperf lint --target 2.7 /etc/openvpn/server/server.conf
  ovpnperf lint --format gcc --fail-on error /etc/openvpn/client/
  ovpnperf lint --format sarif server.conf > lint.sarif
  journalctl -u openvpn-server@server | ovpnperf lint server.conf --log -
  ovpnperf lint server.conf --fix`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.configs = a
			o.ctx, o.in, o.out, o.errOut = cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			return runLint(o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.log, "log", "", "also read this OpenVPN log (- for standard input)")
	f.StringVar(&o.rtt, "rtt", "", "round-trip time of the path, e.g. 200ms")
	f.StringVar(&o.rate, "rate", "", "bottleneck rate of the path, e.g. 100mbit")
	f.IntVar(&o.pmtu, "pmtu", 0, "path MTU between the peers in bytes (ovpnperf pmtu measures it)")
	f.BoolVar(&o.json, "json", false, "print the findings as JSON (same as --format json)")
	f.StringVar(&o.format, "format", "text", "output format: text, gcc, json or sarif")
	f.StringVar(&o.target, "target", "", "OpenVPN version to check for: 2.6 or 2.7 (default: the installed openvpn's)")
	f.StringVar(&o.failOn, "fail-on", lint.Warning, "lowest severity that makes the exit status non-zero: info, warning or error")
	f.BoolVar(&o.fix, "fix", false, "write a corrected copy of each CONFIG next to it as CONFIG"+lint.FixSuffix)
	return c
}

// lintReport is the JSON contract of `ovpnperf lint --json`.
type lintReport struct {
	Schema string `json:"schema"`
	// Config is the first (usually only) config; Configs all of them.
	Config  string   `json:"config,omitempty"`
	Configs []string `json:"configs,omitempty"`
	Log     string   `json:"log,omitempty"`
	// Target is the OpenVPN version checked for; TargetFrom says why.
	Target     string         `json:"target"`
	TargetFrom string         `json:"target_from"`
	Findings   []lint.Finding `json:"findings"`
	Suppressed int            `json:"suppressed,omitempty"`
	Fixed      string         `json:"fixed,omitempty"`
	FixApplied int            `json:"fix_applied,omitempty"`
	ExitStatus int            `json:"exit_status"`
}

// lintConfigs expands directories into their *.conf and *.ovpn files.
func lintConfigs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, usage.Errorf("lint: %v", err)
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, usage.Errorf("lint: %v", err)
		}
		n := 0
		for _, e := range ents {
			if e.Type().IsRegular() && (strings.HasSuffix(e.Name(), ".conf") || strings.HasSuffix(e.Name(), ".ovpn")) {
				out = append(out, filepath.Join(a, e.Name()))
				n++
			}
		}
		if n == 0 {
			return nil, usage.Errorf("lint: directory %s has no *.conf or *.ovpn files", a)
		}
	}
	return out, nil
}

func installedOpenVPN() (string, error) {
	out, err := runner.RunBounded(context.Background(), runner.VersionTimeout, "openvpn", "--version")
	v := openvpn.ParseVersion(string(out))
	if v.Version == "" {
		if err == nil {
			err = errors.New("openvpn --version printed no version")
		}
		return "", err
	}
	return v.Version, nil
}

func runLint(o lintOptions) error {
	if len(o.configs) == 0 && o.log == "" {
		return usage.Errorf("lint: give a CONFIG file (or directory), --log FILE, or both")
	}
	if o.fix && len(o.configs) == 0 {
		return usage.Errorf("lint: --fix needs a CONFIG file")
	}
	if o.json {
		if o.format != "text" && o.format != "json" {
			return usage.Errorf("lint: --json and --format %s: choose one", o.format)
		}
		o.format = "json"
	}
	switch o.format {
	case "text", "gcc", "json", "sarif":
	default:
		return usage.Errorf("--format %q: want text, gcc, json or sarif", o.format)
	}
	switch o.failOn {
	case lint.Info, lint.Warning, lint.Error:
	default:
		return usage.Errorf("--fail-on %q: want info, warning or error", o.failOn)
	}
	rep := lintReport{Schema: "ovpnperf/lint/v1", Log: o.log, Findings: []lint.Finding{}}
	if o.target != "" {
		t, ok := dco.NormTarget(o.target)
		if !ok {
			return usage.Errorf("--target %q: want 2.6 or 2.7", o.target)
		}
		rep.Target, rep.TargetFrom = t, "--target"
	} else {
		get := o.installed
		if get == nil {
			get = installedOpenVPN
		}
		v, err := get()
		t, ok := dco.NormTarget(v)
		switch {
		case err != nil:
			rep.Target, rep.TargetFrom = dco.V26, fmt.Sprintf("default 2.6: no installed OpenVPN (%v)", err)
		case !ok:
			rep.Target, rep.TargetFrom = dco.V26, fmt.Sprintf("default 2.6: installed OpenVPN %s is neither 2.6 nor 2.7", v)
		default:
			rep.Target, rep.TargetFrom = t, "installed OpenVPN "+v
		}
	}
	o.context.Target = rep.Target
	if o.rtt != "" {
		d, err := lab.ParseTime("--rtt", o.rtt)
		if err != nil {
			return err
		}
		o.context.RTT = d
	}
	if o.rate != "" {
		r, err := lab.ParseRate("--rate", o.rate)
		if err != nil {
			return err
		}
		o.context.RateBitsPerSec = r
	}
	if o.pmtu != 0 && (o.pmtu < 576 || o.pmtu > 65535) {
		return usage.Errorf("--pmtu %d: want a path MTU between 576 and 65535 bytes", o.pmtu)
	}
	o.context.PathMTU = o.pmtu
	configs, err := lintConfigs(o.configs)
	if err != nil {
		return err
	}
	if o.fix {
		for _, c := range configs {
			if err := checkOutPath("--fix", c+lint.FixSuffix); err != nil {
				return err
			}
		}
	}
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	rep.Configs = configs
	if len(configs) > 0 {
		rep.Config = configs[0]
	}
	if len(configs) < 2 {
		rep.Configs = nil
	}
	lines := map[string][]string{}
	var cfgs []*openvpn.ConfigFile
	for _, path := range configs {
		cfg, err := openvpn.ReadConfigFile(path)
		var perr *openvpn.ParseError
		switch {
		case errors.As(err, &perr):
			// OpenVPN would refuse the file: an error finding, not bad usage.
			rep.Findings = append(rep.Findings, lint.Finding{Rule: "parse-error", Severity: lint.Error, Category: lint.Compatibility,
				File: perr.File, Line: perr.Line, Problem: fmt.Sprintf("column %d: %s.", perr.Col, perr.Msg),
				Reason: "OpenVPN 2.6's config reader (options.c parse_line/read_config_file) refuses this line, so nothing else was checked.", Decision: true})
			if b, rerr := inputfile.ReadFile(ctx, perr.File, inputfile.Config); rerr == nil {
				lines[perr.File] = strings.Split(string(b), "\n")
			}
			cfgs = append(cfgs, nil)
		case err != nil:
			return usage.Errorf("lint: %v", err)
		default:
			addLines(lines, cfg)
			rep.Findings = append(rep.Findings, lint.CheckConfig(cfg, o.context)...)
			cfgs = append(cfgs, cfg)
		}
	}
	if o.log != "" {
		name := "stdin"
		var r io.Reader = inputfile.Stream(ctx, o.in, name, inputfile.Log)
		if o.log != "-" {
			f, err := inputfile.Open(ctx, o.log, inputfile.Log)
			if err != nil {
				return usage.Errorf("lint: --log %v", err)
			}
			defer f.Close()
			r, name = f, o.log
		}
		lr, err := openvpn.ScanLog(r)
		if err != nil {
			if errors.Is(err, inputfile.ErrTooLarge) || ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("reading %s: %w", name, err)
		}
		var cfg *openvpn.ConfigFile
		if len(cfgs) == 1 {
			cfg = cfgs[0]
		}
		rep.Findings = append(rep.Findings, lint.CheckLog(lr, name, cfg, o.context)...)
	}
	kept, dropped := lint.Suppressed(rep.Findings, lines)
	rep.Findings, rep.Suppressed = kept, len(dropped)
	if rep.Findings == nil {
		rep.Findings = []lint.Finding{}
	}
	if o.fix {
		var fixed []string
		for i, cfg := range cfgs {
			if cfg == nil {
				continue
			}
			text, n := lint.Fix(cfg, rep.Findings)
			out, err := lint.WriteFix(configs[i], text)
			if err != nil {
				if errors.Is(err, fs.ErrPermission) {
					return fmt.Errorf("writing the corrected copy next to %s: %w", configs[i], err)
				}
				return err
			}
			fixed = append(fixed, out)
			rep.FixApplied += n
		}
		rep.Fixed = strings.Join(fixed, " ")
	}
	// Every output below (text, JSON, …) renders these findings: key
	// material is taken out here, once, whatever rule made the finding.
	rep.Findings = lint.Redact(rep.Findings, cfgs...)
	rep.ExitStatus = lint.FailStatus(rep.Findings, o.failOn)
	switch o.format {
	case "json":
		enc := json.NewEncoder(o.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	case "gcc":
		fmt.Fprint(o.out, lint.GCC(rep.Findings))
	case "sarif":
		b, err := lint.SARIF(rep.Findings, toolVersion())
		if err != nil {
			return err
		}
		fmt.Fprintf(o.out, "%s\n", b)
	default:
		if len(rep.Findings) == 0 {
			fmt.Fprintln(o.out, "no findings")
		}
		fmt.Fprint(o.out, lint.Text(rep.Findings))
		if rep.Suppressed > 0 {
			fmt.Fprintf(o.out, "%d finding(s) suppressed by ovpnperf-lint comments\n", rep.Suppressed)
		}
		if rep.Fixed != "" {
			fmt.Fprintf(o.out, "wrote %s (%d fixes applied; findings marked \"needs your decision\" were left alone)\n", rep.Fixed, rep.FixApplied)
		}
	}
	if rep.ExitStatus != 0 {
		return exitCode(rep.ExitStatus)
	}
	return nil
}

// addLines records the lines of cfg and the files it includes, for
// suppression comments.
func addLines(m map[string][]string, cfg *openvpn.ConfigFile) {
	m[cfg.Path] = cfg.Lines
	for _, inc := range cfg.Includes {
		addLines(m, inc)
	}
}

// toolVersion is ovpnperf's module version as the Go toolchain stamped it
// ("" for a development build).
func toolVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return ""
}
