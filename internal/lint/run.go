package lint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Schema names the document of `ovpnperf lint --json` (docs/schemas.md).
const Schema = "ovpnperf/lint/v1"

// Report is the lint document: what was checked, for which OpenVPN
// version, and the findings.
type Report struct {
	Schema string `json:"schema"`
	// Config is the first (usually only) config; Configs all of them.
	Config  string   `json:"config,omitempty"`
	Configs []string `json:"configs,omitempty"`
	Log     string   `json:"log,omitempty"`
	// Target is the OpenVPN version checked for; TargetFrom says why.
	Target     string    `json:"target"`
	TargetFrom string    `json:"target_from"`
	Findings   []Finding `json:"findings"`
	Suppressed int       `json:"suppressed,omitempty"`
	Fixed      string    `json:"fixed,omitempty"`
	FixApplied int       `json:"fix_applied,omitempty"`
	ExitStatus int       `json:"exit_status"`
}

// Options are what one lint run checks.
type Options struct {
	// Configs are config files or directories (their *.conf and *.ovpn).
	Configs []string
	// Log names a log file, "-" for Stdin, "" for none.
	Log   string
	Stdin io.Reader
	// Target is the OpenVPN version to check for ("2.6", "2.7"); ""
	// asks Installed, and takes 2.6 when that fails.
	Target    string
	Installed func() (string, error)
	// Context holds what is known of the path (RTT, rate, path MTU).
	Context Context
	// Fix writes a corrected copy of each config next to it
	// (CONFIG+FixSuffix); CheckFix, if set, is asked about each such
	// name before any work.
	Fix      bool
	CheckFix func(path string) error
	// FailOn is the least severity that makes ExitStatus non-zero.
	FailOn string
}

// InstalledOpenVPN is the version `openvpn --version` reports.
func InstalledOpenVPN() (string, error) {
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

// Run checks the configs and the log of o. A mistake in o is a usage
// error; a config OpenVPN would refuse is a parse-error finding.
func Run(ctx context.Context, o Options) (*Report, error) {
	if len(o.Configs) == 0 && o.Log == "" {
		return nil, usage.Errorf("lint: give a CONFIG file (or directory), --log FILE, or both")
	}
	if o.Fix && len(o.Configs) == 0 {
		return nil, usage.Errorf("lint: --fix needs a CONFIG file")
	}
	switch o.FailOn {
	case Info, Warning, Error:
	default:
		return nil, usage.Errorf("--fail-on %q: want info, warning or error", o.FailOn)
	}
	rep := &Report{Schema: Schema, Log: o.Log, Findings: []Finding{}}
	if o.Target != "" {
		t, ok := dco.NormTarget(o.Target)
		if !ok {
			return nil, usage.Errorf("--target %q: want 2.6 or 2.7", o.Target)
		}
		rep.Target, rep.TargetFrom = t, "--target"
	} else {
		get := o.Installed
		if get == nil {
			get = InstalledOpenVPN
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
	o.Context.Target = rep.Target
	configs, err := expandConfigs(o.Configs)
	if err != nil {
		return nil, err
	}
	if o.Fix && o.CheckFix != nil {
		for _, c := range configs {
			if err := o.CheckFix(c + FixSuffix); err != nil {
				return nil, err
			}
		}
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
			rep.Findings = append(rep.Findings, Finding{Rule: "parse-error", Severity: Error, Category: Compatibility,
				File: perr.File, Line: perr.Line, Problem: fmt.Sprintf("column %d: %s.", perr.Col, perr.Msg),
				Reason: "OpenVPN 2.6's config reader (options.c parse_line/read_config_file) refuses this line, so nothing else was checked.", Decision: true})
			if b, rerr := inputfile.ReadFile(ctx, perr.File, inputfile.Config()); rerr == nil {
				lines[perr.File] = strings.Split(string(b), "\n")
			}
			cfgs = append(cfgs, nil)
		case err != nil:
			return nil, usage.Errorf("lint: %v", err)
		default:
			addLines(lines, cfg)
			rep.Findings = append(rep.Findings, CheckConfig(cfg, o.Context)...)
			cfgs = append(cfgs, cfg)
		}
	}
	if o.Log != "" {
		name := "stdin"
		var r io.Reader = inputfile.Stream(ctx, o.Stdin, name, inputfile.Log())
		if o.Log != "-" {
			f, err := inputfile.Open(ctx, o.Log, inputfile.Log())
			if err != nil {
				return nil, usage.Errorf("lint: --log %v", err)
			}
			defer f.Close()
			r, name = f, o.Log
		}
		lr, err := openvpn.ScanLog(r)
		if err != nil {
			if errors.Is(err, inputfile.ErrTooLarge) || ctx.Err() != nil {
				return nil, err
			}
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		var cfg *openvpn.ConfigFile
		if len(cfgs) == 1 {
			cfg = cfgs[0]
		}
		rep.Findings = append(rep.Findings, CheckLog(lr, name, cfg, o.Context)...)
	}
	kept, dropped := Suppressed(rep.Findings, lines)
	rep.Findings, rep.Suppressed = kept, len(dropped)
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	if o.Fix {
		var fixed []string
		for i, cfg := range cfgs {
			if cfg == nil {
				continue
			}
			text, n := Fix(cfg, rep.Findings)
			out, err := WriteFix(configs[i], text)
			if err != nil {
				if errors.Is(err, fs.ErrPermission) {
					return nil, fmt.Errorf("writing the corrected copy next to %s: %w", configs[i], err)
				}
				return nil, err
			}
			fixed = append(fixed, out)
			rep.FixApplied += n
		}
		rep.Fixed = strings.Join(fixed, " ")
	}
	// Every output (text, JSON, …) renders these findings: key material
	// is taken out here, once, whatever rule made the finding.
	rep.Findings = Redact(rep.Findings, cfgs...)
	rep.ExitStatus = FailStatus(rep.Findings, o.FailOn)
	return rep, nil
}

// expandConfigs expands directories into their *.conf and *.ovpn files.
func expandConfigs(args []string) ([]string, error) {
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

// addLines records the lines of cfg and the files it includes, for
// suppression comments.
func addLines(m map[string][]string, cfg *openvpn.ConfigFile) {
	m[cfg.Path] = cfg.Lines
	for _, inc := range cfg.Includes {
		addLines(m, inc)
	}
}
