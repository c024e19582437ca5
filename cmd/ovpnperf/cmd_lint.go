package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lint"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newLintCommand) }

type lintOptions struct {
	config  string
	log     string
	rtt     string
	rate    string
	pmtu    int
	json    bool
	fix     bool
	in      io.Reader
	out     io.Writer
	errOut  io.Writer
	context lint.Context
}

func newLintCommand() *cobra.Command {
	o := lintOptions{}
	c := &cobra.Command{
		Use:   "lint [CONFIG]",
		Short: "Review an OpenVPN config (and its log) for speed, security and 2.6 compatibility",
		Long: `lint reads an OpenVPN server or client config as OpenVPN 2.6 reads it
(quoting, comments, inline blocks, config includes, --options) and says, line by
line, what costs speed, what is insecure and what OpenVPN 2.6 no longer
accepts, with the replacement lines and the fact each finding rests on.

--log FILE (or --log - for standard input, e.g. journalctl -u openvpn@NAME
output) also reads the log: socket buffers requested vs granted, the negotiated
cipher, a cipher mismatch, compression, "packet too large", replay warnings,
reconnect storms and DCO status.

--rtt, --rate and --pmtu describe the path (measure them with ovpnperf pmtu
and ping); buffer, MTU and fragment findings then use them instead of saying
"not tested here".

--fix writes a corrected copy next to CONFIG as CONFIG` + lint.FixSuffix + ` (mode
0600, never in place), with every fix that needs no decision of yours applied
and comments, order and inline blocks kept.

Exit status: 0 no findings or only info, 1 warnings, 3 errors, 2 bad usage.
Inline key material is never printed.`,
		Example: `  ovpnperf lint /etc/openvpn/server/server.conf
  ovpnperf lint client.ovpn --rtt 200ms --rate 50mbit --pmtu 1492 --json
  journalctl -u openvpn-server@server | ovpnperf lint server.conf --log -
  ovpnperf lint server.conf --fix`,
		Args: args(cobra.RangeArgs(0, 1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 1 {
				o.config = a[0]
			}
			o.in, o.out, o.errOut = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			return runLint(o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.log, "log", "", "also read this OpenVPN log (- for standard input)")
	f.StringVar(&o.rtt, "rtt", "", "round-trip time of the path, e.g. 200ms")
	f.StringVar(&o.rate, "rate", "", "bottleneck rate of the path, e.g. 100mbit")
	f.IntVar(&o.pmtu, "pmtu", 0, "path MTU between the peers in bytes (ovpnperf pmtu measures it)")
	f.BoolVar(&o.json, "json", false, "print the findings as JSON")
	f.BoolVar(&o.fix, "fix", false, "write a corrected copy of CONFIG next to it as CONFIG"+lint.FixSuffix)
	return c
}

// lintReport is the JSON contract of `ovpnperf lint --json`.
type lintReport struct {
	Schema     string         `json:"schema"`
	Config     string         `json:"config,omitempty"`
	Log        string         `json:"log,omitempty"`
	Findings   []lint.Finding `json:"findings"`
	Fixed      string         `json:"fixed,omitempty"`
	FixApplied int            `json:"fix_applied,omitempty"`
	ExitStatus int            `json:"exit_status"`
}

func runLint(o lintOptions) error {
	if o.config == "" && o.log == "" {
		return usage.Errorf("lint: give a CONFIG file, --log FILE, or both")
	}
	if o.fix && o.config == "" {
		return usage.Errorf("lint: --fix needs a CONFIG file")
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
	if o.pmtu != 0 && (o.pmtu < 576 || o.pmtu > 65535) {
		return usage.Errorf("--pmtu %d: want a path MTU between 576 and 65535 bytes", o.pmtu)
	}
	o.context.PathMTU = o.pmtu
	rep := lintReport{Schema: "ovpnperf/lint/v1", Config: o.config, Log: o.log, Findings: []lint.Finding{}}
	var cfg *openvpn.ConfigFile
	if o.config != "" {
		if _, err := os.Stat(o.config); err != nil {
			return usage.Errorf("lint: %v", err)
		}
		var err error
		cfg, err = openvpn.ReadConfigFile(o.config)
		var perr *openvpn.ParseError
		switch {
		case errors.As(err, &perr):
			// OpenVPN would refuse the file: an error finding, not bad usage.
			rep.Findings = append(rep.Findings, lint.Finding{Rule: "parse-error", Severity: lint.Error, Category: lint.Compatibility,
				File: perr.File, Line: perr.Line, Problem: fmt.Sprintf("column %d: %s.", perr.Col, perr.Msg),
				Reason: "OpenVPN 2.6's config reader (options.c parse_line/read_config_file) refuses this line, so nothing else was checked.", Decision: true})
			cfg = nil
		case err != nil:
			return usage.Errorf("lint: %v", err)
		default:
			rep.Findings = append(rep.Findings, lint.CheckConfig(cfg, o.context)...)
		}
	}
	if o.log != "" {
		var r io.Reader = o.in
		name := "stdin"
		if o.log != "-" {
			f, err := os.Open(o.log)
			if err != nil {
				return usage.Errorf("lint: --log: %v", err)
			}
			defer f.Close()
			r, name = f, o.log
		}
		lr, err := openvpn.ScanLog(r)
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		rep.Findings = append(rep.Findings, lint.CheckLog(lr, name, cfg, o.context)...)
	}
	if o.fix && cfg != nil {
		text, n := lint.Fix(cfg, rep.Findings)
		out, err := lint.WriteFix(o.config, text)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return fmt.Errorf("writing the corrected copy next to %s: %w", o.config, err)
			}
			return err
		}
		rep.Fixed, rep.FixApplied = out, n
	}
	// Every output below (text, JSON) renders these findings: key
	// material is taken out here, once, whatever rule made the finding.
	rep.Findings = lint.Redact(rep.Findings, cfg)
	rep.ExitStatus = lint.ExitStatus(rep.Findings)
	if o.json {
		enc := json.NewEncoder(o.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		if len(rep.Findings) == 0 {
			fmt.Fprintln(o.out, "no findings")
		}
		fmt.Fprint(o.out, lint.Text(rep.Findings))
		if rep.Fixed != "" {
			fmt.Fprintf(o.out, "wrote %s (%d fixes applied; findings marked \"needs your decision\" were left alone)\n", rep.Fixed, rep.FixApplied)
		}
	}
	if rep.ExitStatus != 0 {
		return exitCode(rep.ExitStatus)
	}
	return nil
}
