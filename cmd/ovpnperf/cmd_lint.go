package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lint"
	"github.com/ovpnperf/ovpnperf/internal/rules"
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
	rangeFlag(f, &o.pmtu, "pmtu", "", 0, rules.PathMTURange(), "path MTU between the peers in bytes, %s (ovpnperf pmtu measures it)")
	f.BoolVar(&o.json, "json", false, "print the findings as JSON (same as --format json)")
	f.StringVar(&o.format, "format", "text", "output format: text, gcc, json or sarif")
	f.StringVar(&o.target, "target", "", "OpenVPN version to check for: 2.6 or 2.7 (default: the installed openvpn's)")
	f.StringVar(&o.failOn, "fail-on", lint.Warning, "lowest severity that makes the exit status non-zero: info, warning or error")
	f.BoolVar(&o.fix, "fix", false, "write a corrected copy of each CONFIG next to it as CONFIG"+lint.FixSuffix)
	return c
}

func runLint(o lintOptions) error {
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
	if r := rules.PathMTURange(); o.pmtu != 0 && !r.Contains(o.pmtu) {
		return usage.Errorf("--pmtu %d: want a path MTU of %s bytes", o.pmtu, r)
	}
	o.context.PathMTU = o.pmtu
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	rep, err := lint.Run(ctx, lint.Options{
		Configs: o.configs, Log: o.log, Stdin: o.in,
		Target: o.target, Installed: o.installed, Context: o.context,
		Fix: o.fix, CheckFix: func(path string) error { return checkOutPath("--fix", path) },
		FailOn: o.failOn,
	})
	if err != nil {
		return err
	}
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

// toolVersion is ovpnperf's module version as the Go toolchain stamped it
// ("" for a development build).
func toolVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return ""
}
