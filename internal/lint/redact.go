package lint

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// Key material must never be echoed, whatever the parser made of it: a
// PEM key pasted without its inline block reads as one "option" per
// base64 line, and a static key's hex lines likewise. Redact is the one
// place every finding passes before any output format (text, JSON, the
// --fix copy's report) renders it:
//
//   - a finding about a line that lies inside -----BEGIN …----- /
//     -----END …----- markers, or that looks like a key line by itself,
//     gets a problem text that names the line but not its content, and
//     its replacement lines are dropped (deleting it stays possible);
//   - in every text of every finding, runs that look like key material
//     (base64 of 20 or more characters, hex of 32 or more) are replaced
//     by [redacted];
//   - a file included with `config` whose first directive is no option
//     OpenVPN knows is not a config at all (a hostile or mistaken
//     `config /etc/shadow`, a password file, a log): its findings become
//     one that names the file and shows none of its text.

// Redacted replaces key material in finding texts.
const Redacted = "[redacted]"

var (
	// base64RunRE: a PEM body line is 64 characters, DER keys start with
	// "MI"; 20 or more base64 characters with both letters and digits
	// are no option name, path, cipher or number lint would print.
	base64RunRE = regexp.MustCompile(`[A-Za-z0-9+/]{20,}={0,2}`)
	// hexRunRE: an OpenVPN static key line is 32 hex digits; a SHA-256
	// fingerprint written without colons is 64.
	hexRunRE = regexp.MustCompile(`(?i)\b[0-9a-f]{32,}\b`)
	// keyLineRE: a line that is nothing but base64 or hex, as a key
	// body's lines are (the last PEM line may be short, hence 4).
	keyLineRE  = regexp.MustCompile(`^\s*(?:[A-Za-z0-9+/]{4,}={0,2}|[0-9a-fA-F]{16,})\s*$`)
	pemBeginRE = regexp.MustCompile(`-----BEGIN [^-]*-----`)
	pemEndRE   = regexp.MustCompile(`-----END [^-]*-----`)
)

// looksLikeKeyRun reports whether s is a base64 run with lower-case,
// upper-case letters and digits mixed, as random key bytes are (a word,
// a number or a lower-case path such as /etc/openvpn/keys/client1 is
// not; the short last line of a PEM body is caught by its markers).
func looksLikeKeyRun(s string) bool {
	var lower, upper, digit bool
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		}
	}
	return lower && upper && digit
}

// RedactText replaces runs of key material in s.
func RedactText(s string) string {
	s = hexRunRE.ReplaceAllStringFunc(s, func(m string) string {
		if strings.Trim(m, "0123456789") == "" {
			return m // a long number, not a key
		}
		return Redacted
	})
	return base64RunRE.ReplaceAllStringFunc(s, func(m string) string {
		if looksLikeKeyRun(m) {
			return Redacted
		}
		return m
	})
}

// secretLines are the lines of each config file that hold key material
// outside inline blocks: between BEGIN and END markers (markers
// included), and lines made of base64 or hex alone.
func secretLines(f *openvpn.ConfigFile) map[string]map[int]bool {
	out := map[string]map[int]bool{}
	var walk func(f *openvpn.ConfigFile)
	walk = func(f *openvpn.ConfigFile) {
		if f == nil {
			return
		}
		m := out[f.Path]
		if m == nil {
			m = map[int]bool{}
			out[f.Path] = m
		}
		inside := false
		for i, l := range f.Lines {
			n := i + 1
			switch {
			case pemBeginRE.MatchString(l):
				inside = true
				m[n] = true
			case pemEndRE.MatchString(l):
				inside = false
				m[n] = true
			case inside || keyLineRE.MatchString(l) && looksLikeKeyRun(strings.TrimSpace(l)):
				m[n] = true
			}
		}
		for _, inc := range f.Includes {
			walk(inc)
		}
	}
	walk(f)
	return out
}

// notConfigs are the files cfg includes (at any depth, not cfg itself)
// whose first directive is no option OpenVPN 2.6 or 2.7 knows or once
// knew, and holds no key material (Redact names key lines as such), each
// with that directive's line.
func notConfigs(cfg *openvpn.ConfigFile, secret map[string]map[int]bool, out map[string]int) {
	if cfg == nil {
		return
	}
	for _, inc := range cfg.Includes {
		// A file's own first directive comes first: an include's
		// directives follow its config line.
		if len(inc.Directives) > 0 {
			d := inc.Directives[0]
			_, removed := openvpn.RemovedOption(d.Name)
			if !d.Inline && !secret[inc.Path][d.Pos.Line] && !openvpn.KnownOption26(d.Name) && !options27[d.Name] && !removed {
				out[inc.Path] = d.Pos.Line
			}
		}
		notConfigs(inc, secret, out)
	}
}

// Redact returns the findings with key material removed (see above).
// cfgs are the configs the findings are about (nil ones are skipped).
func Redact(fs []Finding, cfgs ...*openvpn.ConfigFile) []Finding {
	secret := map[string]map[int]bool{}
	notConfig := map[string]int{} // file: its first directive's line
	for _, cfg := range cfgs {
		for file, lines := range secretLines(cfg) {
			secret[file] = lines
		}
	}
	for _, cfg := range cfgs {
		notConfigs(cfg, secret, notConfig)
	}
	out := make([]Finding, 0, len(fs))
	// keyEnd[i] is the last line of the run of key lines out[i] stands
	// for (0: not a key-line finding).
	var keyEnd []int
	named := map[string]bool{} // not-config files already reported
	for _, f := range fs {
		end := 0
		if line, ok := notConfig[f.File]; ok {
			if named[f.File] {
				continue
			}
			named[f.File] = true
			out = append(out, Finding{Rule: "not-a-config", Severity: Error, Category: Compatibility, File: f.File, Line: line, Decision: true,
				Problem: "this file, included with `config`, is not an OpenVPN config: its first directive is no option OpenVPN 2.6 knows, and 2.6 stops there. Its text is not shown.",
				Reason:  "`config FILE` makes OpenVPN read FILE as more of the config; a file that is not one (a password or key file, a log) may hold secrets, so lint neither quotes nor checks it. Remove the `config` line that names it, or name the config that was meant."})
			keyEnd = append(keyEnd, 0)
			continue
		}
		if f.Line > 0 && secret[f.File][f.Line] {
			// One finding for a whole pasted key: the run of secret
			// lines with the same rule.
			if n := len(out); n > 0 {
				p := &out[n-1]
				if end := keyEnd[n-1]; p.File == f.File && p.Rule == f.Rule && end > 0 && f.Line == end+1 {
					keyEnd[n-1] = f.Line
					p.Edits = []Edit{{File: f.File, Line: p.Line, EndLine: f.Line, Delete: true}}
					p.Problem = fmt.Sprintf("lines %d-%d hold key material (PEM or static-key lines) outside an inline block; OpenVPN 2.6 reads each as an option and stops. Their text is not shown.", p.Line, f.Line)
					continue
				}
			}
			end = f.Line
			f.Problem = fmt.Sprintf("line %d holds key material (a PEM or static-key line) outside an inline block; OpenVPN 2.6 reads it as an option and stops. Its text is not shown.", f.Line)
			f.Reason = "a key or certificate belongs in an inline block (<key> … </key> on lines of their own) or in a file named by its option (key FILE); pasted bare, every line is an unknown option to OpenVPN."
			var edits []Edit
			for _, e := range f.Edits {
				if e.Delete {
					edits = append(edits, e)
				}
			}
			f.Edits, f.Decision = edits, true
		}
		f.Problem, f.Reason, f.Action = RedactText(f.Problem), RedactText(f.Reason), RedactText(f.Action)
		if len(f.Edits) > 0 {
			edits := make([]Edit, len(f.Edits))
			for j, e := range f.Edits {
				e.Replace, e.Append = redactAll(e.Replace), redactAll(e.Append)
				edits[j] = e
			}
			f.Edits = edits
		}
		out, keyEnd = append(out, f), append(keyEnd, end)
	}
	return out
}

func redactAll(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = RedactText(s)
	}
	return out
}
