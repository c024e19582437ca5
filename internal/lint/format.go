package lint

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// RuleDoc documents one rule ID. IDs are stable: a rule is never renamed,
// so suppressions and SARIF baselines keep working.
type RuleDoc struct {
	Severity string // the usual severity (a finding may differ)
	Help     string
}

// Rules documents every rule lint can report (docs/lint.md lists them too),
// in a map of the caller's own.
func Rules() map[string]RuleDoc {
	return map[string]RuleDoc{
		"parse-error":                 {Error, "OpenVPN's config reader refuses this line (options.c parse_line/read_config_file); nothing after it was checked."},
		"unknown-inline-block":        {Error, "An <inline> block OpenVPN does not read; it stops at it."},
		"removed-option":              {Error, "An option removed from OpenVPN; the target version refuses the config. The finding names the replacement."},
		"deprecated-option":           {Warning, "An option deprecated in OpenVPN; it still works but will be removed."},
		"unknown-option":              {Error, "An option the target OpenVPN does not know: it stops with \"Unrecognized option\"."},
		"not-a-config":                {Error, "A file included with `config` whose first directive (comments aside) is no OpenVPN option: not a config (it may hold secrets, so none of its text is shown)."},
		"parameter-count":             {Error, "An option with fewer or more parameters than OpenVPN 2.6 accepts: it stops with \"Unrecognized option or missing or extra parameter(s)\"."},
		"compression":                 {Warning, "Compression before encryption leaks plaintext through packet sizes (VORACLE) and keeps DCO off."},
		"weak-cipher":                 {Error, "A 64-bit block or single-DES cipher (SWEET32)."},
		"cipher-without-data-ciphers": {Warning, "--cipher without --data-ciphers: OpenVPN 2.6 negotiates from data-ciphers and ignores --cipher."},
		"tls-auth":                    {Info, "tls-auth leaves the TLS handshake readable; tls-crypt also encrypts it at no data-channel cost."},
		"remote-cert-tls":             {Warning, "A client that does not check the server certificate's key usage (remote-cert-tls server)."},
		"script-security":             {Warning, "script-security 3 passes passwords to scripts in environment variables."},
		"management-password":         {Warning, "A TCP management interface without a password file."},
		"duplicate-cn":                {Warning, "duplicate-cn lets many clients share one certificate."},
		"key-file-mode":               {Warning, "A key file that group or others can read."},
		"verb":                        {Warning, "verb 5 or more logs per packet."},
		"socket-buffer":               {Warning, "sndbuf/rcvbuf judged by the rule advise follows: over TCP transport below the bandwidth-delay product (warning) or the OS default; over UDP raised or lowered from the OS default (info), except below 4 MiB with a jumbo tunnel (info)."},
		"socket-buffer-asymmetric":    {Info, "sndbuf and rcvbuf set differently."},
		"fragment":                    {Warning, "OpenVPN's own fragmentation: 4 bytes per packet, and DCO off."},
		"tun-mtu-path":                {Warning, "tun-mtu plus OpenVPN's overhead larger than the path MTU."},
		"tcp-nodelay":                 {Info, "A TCP server without tcp-nodelay (a published LAN figure; not tested here)."},
		"no-encryption":               {Error, "A data channel without encryption: cipher none where it takes effect, none in data-ciphers or data-ciphers-fallback (a warning for cipher none that 2.6 ignores in client/server mode)."},
		"no-authentication":           {Error, "auth none with a CBC cipher (or none): packets are not authenticated."},
		"old-peer-cipher":             {Info, "No cipher line in a config with options of pre-2.4 configs: OpenVPN 2.6 refuses such old peers unless BF-CBC is in data-ciphers or data-ciphers-fallback."},
		"fast-io":                     {Info, "fast-io where it has no effect."},
		"txqueuelen":                  {Warning, "The pre-2.5 tun queue length of 100 packets."},
		"dco-off":                     {Warning, "An option that turns data channel offload (DCO) off on Linux with the target OpenVPN version (dco.c), or a pushed option DCO clients refuse; the finding names the source line and the replacement."},
		"dh-missing":                  {Error, "A TLS server without a dh line: OpenVPN 2.6 refuses it (dh none is enough)."},
		"v27-compression":             {Warning, "OpenVPN 2.7 never compresses on send; allow-compression yes means asym."},
		"v27-secret":                  {Error, "OpenVPN 2.7 refuses static-key mode (secret) unless allow-deprecated-insecure-static-crypto is set."},
		"v27-topology":                {Warning, "A tun server without a topology line: net30 on 2.6, subnet on 2.7."},
		"v27-dh":                      {Info, "OpenVPN 2.7 defaults to dh none."},
		"v27-persist-key":             {Info, "persist-key is the default in OpenVPN 2.7."},
		"v27-fast-io":                 {Info, "OpenVPN 2.7 ignores fast-io."},
		"v27-reneg":                   {Info, "OpenVPN 2.7 ignores reneg-bytes/reneg-pkts when DCO is in use."},
		"log-buffer-capped":           {Warning, "The log shows the kernel granted smaller socket buffers than the config asked for."},
		"log-buffer-small":            {Warning, "A TCP transport's configured socket buffer in force is below the path's bandwidth-delay product."},
		"log-cipher-mismatch":         {Error, "The peers found no data cipher in common."},
		"log-data-cipher":             {Warning, "The negotiated data cipher is CBC, none or weak."},
		"log-compression":             {Warning, "The log shows compression in use."},
		"log-packet-too-large":        {Warning, "The log shows packets too large for the tun or path MTU."},
		"log-replay":                  {Warning, "Replay / bad packet ID warnings (mostly reordering over UDP)."},
		"log-long-lines":              {Info, "Log lines longer than 64 KiB, read cut short; the rest of the log was read."},
		"log-restarts":                {Warning, "A reconnect storm."},
		"log-mtu":                     {Info, "The tun MTU in force makes packets larger than the path MTU."},
		"log-dco":                     {Warning, "The log says data channel offload is off, and why."},
	}
}

// ruleHelp is the rule's help text; a rule missing from Rules still gets
// one (so new rules never break SARIF output).
func ruleHelp(id string) string {
	if d, ok := Rules()[id]; ok {
		return d.Help
	}
	return "ovpnperf lint rule " + id + "."
}

// GCCLineRE returns a pattern matching one line of --format gcc output.
func GCCLineRE() *regexp.Regexp {
	return regexp.MustCompile(`^(.+):(\d+):(\d+): (error|warning|info): (.*) \[([a-z0-9-]+)\]$`)
}

// GCC writes one line per finding as compilers do,
// file:line:col: severity: message [rule]; editors and CI log parsers
// read it. Line and column are 1 for a finding about the whole file.
func GCC(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		line := max(f.Line, 1)
		msg := strings.ReplaceAll(f.Problem, "\n", " ")
		fmt.Fprintf(&b, "%s:%d:%d: %s: %s [%s]\n", f.File, line, 1, f.Severity, msg, f.Rule)
	}
	return b.String()
}

// SARIF 2.1.0 (OASIS), the subset lint fills in.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri,omitempty"`
	Version        string      `json:"version,omitempty"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID                   string      `json:"id"`
	ShortDescription     sarifText   `json:"shortDescription"`
	FullDescription      sarifText   `json:"fullDescription"`
	Help                 sarifText   `json:"help"`
	DefaultConfiguration sarifConfig `json:"defaultConfiguration"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           sarifRegion   `json:"region"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

func sarifLevel(sev string) string {
	switch sev {
	case Error:
		return "error"
	case Warning:
		return "warning"
	}
	return "note"
}

// SARIF returns the findings as a SARIF 2.1.0 log (GitHub code scanning
// reads it): one run, the rules that occur with their help text, one
// result per finding with ruleId and region.startLine.
func SARIF(fs []Finding, version string) ([]byte, error) {
	ids := map[string]bool{}
	for _, f := range fs {
		ids[f.Rule] = true
	}
	var sorted []string
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	index := map[string]int{}
	drv := sarifDriver{Name: "ovpnperf-lint", Version: version, InformationURI: "https://github.com/ovpnperf/ovpnperf", Rules: []sarifRule{}}
	for i, id := range sorted {
		index[id] = i
		sev := Warning
		if d, ok := Rules()[id]; ok {
			sev = d.Severity
		}
		h := ruleHelp(id)
		drv.Rules = append(drv.Rules, sarifRule{ID: id, ShortDescription: sarifText{h}, FullDescription: sarifText{h},
			Help: sarifText{h + " Suppress one finding with `# ovpnperf-lint: disable=" + id + "` on its line or the line before."}, DefaultConfiguration: sarifConfig{sarifLevel(sev)}})
	}
	run := sarifRun{Tool: sarifTool{drv}, Results: []sarifResult{}}
	for _, f := range fs {
		msg := f.Problem
		if f.Reason != "" {
			msg += " " + f.Reason
		}
		run.Results = append(run.Results, sarifResult{RuleID: f.Rule, RuleIndex: index[f.Rule], Level: sarifLevel(f.Severity), Message: sarifText{msg},
			Locations: []sarifLocation{{sarifPhysical{sarifArtifact{fileURI(f.File)}, sarifRegion{max(f.Line, 1)}}}}})
	}
	return json.MarshalIndent(sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0", Runs: []sarifRun{run}}, "", "  ")
}

// fileURI is a file name as the URI reference SARIF's artifactLocation.uri
// is: percent-encoded (a space, '#', '%', '?', control and non-ASCII
// bytes), and a relative name whose first segment holds a ':' prefixed
// with "./" so that it does not read as a scheme.
func fileURI(name string) string {
	return (&url.URL{Path: name}).String()
}

// suppressRE matches an inline suppression comment:
// `# ovpnperf-lint: disable=RULE[,RULE…]` (this line or the next) or
// `# ovpnperf-lint: disable-file=RULE[,RULE…]` (the whole file); `;`
// starts a comment too. It counts only in a comment as OpenVPN reads the
// file (openvpn.Comments): not in a quoted parameter, in the middle of a
// word, or in an inline block's data.
var suppressRE = regexp.MustCompile(`[#;]\s*ovpnperf-lint:\s*(disable|disable-file)=([a-z0-9,-]+|all)`)

// Suppressed splits fs into the findings to report and those a
// suppression comment in their file removes (a comment as OpenVPN sees
// one: `setenv X "# ovpnperf-lint: disable-file=all"` suppresses
// nothing). lines maps a file name to its lines (as read, 1-based by
// index+1).
func Suppressed(fs []Finding, lines map[string][]string) (keep, dropped []Finding) {
	type key struct {
		file string
		line int
	}
	byLine := map[key]map[string]bool{}
	byFile := map[string]map[string]bool{}
	for file, ls := range lines {
		comments, code := openvpn.Comments(ls)
		for i, l := range comments {
			for _, m := range suppressRE.FindAllStringSubmatch(l, -1) {
				set := map[string]bool{}
				for _, r := range strings.Split(m[2], ",") {
					set[r] = true
				}
				if m[1] == "disable-file" {
					if byFile[file] == nil {
						byFile[file] = map[string]bool{}
					}
					for r := range set {
						byFile[file][r] = true
					}
					continue
				}
				// A trailing comment covers its own line; a comment line
				// covers the line after it.
				n := i + 1
				if !code[i] {
					n = i + 2
				}
				{
					k := key{file, n}
					if byLine[k] == nil {
						byLine[k] = map[string]bool{}
					}
					for r := range set {
						byLine[k][r] = true
					}
				}
			}
		}
	}
	for _, f := range fs {
		s := byLine[key{f.File, f.Line}]
		if byFile[f.File][f.Rule] || byFile[f.File]["all"] || f.Line > 0 && (s[f.Rule] || s["all"]) {
			dropped = append(dropped, f)
			continue
		}
		keep = append(keep, f)
	}
	return keep, dropped
}

// FailStatus is the exit status for fs when the pipeline fails on
// findings of severity failOn or worse (Error, Warning or Info): 3 with
// an error, 1 with a warning (or an info at --fail-on info), else 0.
// ExitStatus is FailStatus(fs, Warning).
func FailStatus(fs []Finding, failOn string) int {
	st := 0
	for _, f := range fs {
		if sevRank(f.Severity) > sevRank(failOn) {
			continue
		}
		if f.Severity == Error {
			return 3
		}
		st = 1
	}
	return st
}
