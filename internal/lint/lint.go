// Package lint reviews an OpenVPN config (and optionally its log) the way
// an experienced admin would: line by line, what costs speed, what is
// insecure, and what OpenVPN 2.6 no longer accepts, with the replacement
// lines. Every finding cites the documented or measured fact it rests on
// (docs/openvpn-facts.md, OpenVPN 2.6 options.c / Changes.rst, or the
// log line); findings that need facts lint was not given (the path's RTT,
// rate or MTU) say "not tested here" instead of guessing.
//
// Findings never contain inline block text (keys, certificates): only
// directive names, parameters of non-inline directives, and log lines.
package lint

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Severities, worst first.
const (
	Error   = "error"
	Warning = "warning"
	Info    = "info"
)

// Categories.
const (
	Performance   = "performance"
	Security      = "security"
	Compatibility = "compatibility"
	Operations    = "operations"
)

// Edit changes one line of a config file: Delete it, or Replace it with
// the given lines; Line 0 with Append adds lines at the end of the
// directives (before the first inline block, so the new lines stay
// visible).
type Edit struct {
	File   string `json:"file"`
	Line   int    `json:"line,omitempty"`
	Delete bool   `json:"delete,omitempty"`
	// EndLine, with Delete, deletes the lines Line…EndLine (an inline
	// block).
	EndLine int      `json:"end_line,omitempty"`
	Replace []string `json:"replace,omitempty"`
	Append  []string `json:"append,omitempty"`
}

// Finding is one thing lint says about one line.
type Finding struct {
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	Category string `json:"category"`
	// File and Line locate the directive (or log line); Line 0 means the
	// finding is about something missing from the file.
	File    string `json:"file"`
	Line    int    `json:"line"`
	Problem string `json:"problem"`
	Reason  string `json:"reason"`
	// Edits are the replacement lines. Decision marks a fix that --fix
	// does not apply because it needs the user (the peer must change
	// too, a name or file must be chosen, or it is outside the config).
	Edits    []Edit `json:"edits,omitempty"`
	Decision bool   `json:"needs_decision"`
	// Action is a command to run outside the config (chmod, sysctl).
	Action string `json:"action,omitempty"`
}

// Context is what lint knows about the path, from flags or a probe.
// Zero values mean unknown.
type Context struct {
	RTT            time.Duration
	RateBitsPerSec uint64
	PathMTU        int
	// Target is the OpenVPN version the config is checked for: "2.6" or
	// "2.7" (dco.V26, dco.V27). "" skips the version-specific rules (DCO,
	// 2.7 changes, dh).
	Target string
}

// BDPBytes is the bandwidth-delay product, 0 when RTT or rate is unknown.
func (c Context) BDPBytes() int {
	if c.RTT <= 0 || c.RateBitsPerSec == 0 {
		return 0
	}
	return int(float64(c.RateBitsPerSec) / 8 * c.RTT.Seconds())
}

func sevRank(s string) int {
	switch s {
	case Error:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// Sort orders findings by file, line, then severity and rule, so that
// output is stable.
func Sort(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if sevRank(a.Severity) != sevRank(b.Severity) {
			return sevRank(a.Severity) < sevRank(b.Severity)
		}
		return a.Rule < b.Rule
	})
}

// ExitStatus is the process exit status for these findings: 3 with any
// error, 1 with any warning, 0 otherwise (info only or none).
func ExitStatus(fs []Finding) int {
	st := 0
	for _, f := range fs {
		switch f.Severity {
		case Error:
			return 3
		case Warning:
			st = 1
		}
	}
	return st
}

// Text writes findings for people: one line with place, severity,
// category, rule and problem, then why, and the fix.
func Text(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		loc := f.File
		if f.Line > 0 {
			loc = fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		fmt.Fprintf(&b, "%s: %s [%s] %s: %s\n", loc, f.Severity, f.Category, f.Rule, f.Problem)
		fmt.Fprintf(&b, "    why: %s\n", f.Reason)
		for _, e := range f.Edits {
			switch {
			case e.Delete && e.EndLine > e.Line:
				fmt.Fprintf(&b, "    fix: delete lines %d-%d\n", e.Line, e.EndLine)
			case e.Delete:
				fmt.Fprintf(&b, "    fix: delete line %d\n", e.Line)
			case len(e.Replace) > 0:
				fmt.Fprintf(&b, "    fix: replace line %d with: %s\n", e.Line, strings.Join(e.Replace, " / "))
			case len(e.Append) > 0:
				fmt.Fprintf(&b, "    fix: add: %s\n", strings.Join(e.Append, " / "))
			}
		}
		if f.Action != "" {
			fmt.Fprintf(&b, "    run: %s\n", f.Action)
		}
		if f.Decision && (len(f.Edits) > 0 || f.Action != "") {
			b.WriteString("    (needs your decision: --fix leaves this alone)\n")
		}
	}
	return b.String()
}
