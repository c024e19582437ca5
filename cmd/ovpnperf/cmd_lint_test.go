package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/lint"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

func writeConf(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLintExitStatus: 0 clean (or info only), 1 warnings, 3 errors, 2 bad
// usage with nothing written.
func TestLintExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clean := writeConf(t, dir, "clean.conf", "client\nremote vpn.example.net 1194\nremote-cert-tls server\n")
	warn := writeConf(t, dir, "warn.conf", "client\nremote vpn.example.net\nremote-cert-tls server\nverb 6\n")
	bad := writeConf(t, dir, "bad.conf", "client\nremote-cert-tls server\nncp-disable\n<key>\nSUPERSECRETKEYTEXT\n</key>\n")
	broken := writeConf(t, dir, "broken.conf", "verb 3\nremote \"unclosed\n")
	if r := ovpnperf(t, "lint", clean); r.code != 0 || !strings.Contains(r.stdout, "no findings") {
		t.Errorf("clean: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := ovpnperf(t, "lint", warn); r.code != 1 || !strings.Contains(r.stdout, "warn.conf:4: warning [operations] verb") {
		t.Errorf("warn: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := ovpnperf(t, "lint", bad, "--json")
	if r.code != 3 {
		t.Errorf("bad: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "SUPERSECRET") {
		t.Errorf("key printed in JSON:\n%s", r.stdout)
	}
	var rep lint.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, r.stdout)
	}
	if rep.Schema != "ovpnperf/lint/v1" || rep.ExitStatus != 3 || len(rep.Findings) != 1 || rep.Findings[0].Rule != "removed-option" || rep.Findings[0].Line != 3 {
		t.Errorf("JSON report %+v", rep)
	}
	r = ovpnperf(t, "lint", broken)
	if r.code != 3 || !strings.Contains(r.stdout, "broken.conf:2: error [compatibility] parse-error: column 17: no closing quotation") {
		t.Errorf("broken: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// --fix: a copy next to the original, 0600, the original untouched,
	// the key kept in the file but never printed.
	orig, _ := os.ReadFile(bad)
	r = ovpnperf(t, "lint", bad, "--fix")
	if strings.Contains(r.stdout+r.stderr, "SUPERSECRET") {
		t.Errorf("key printed:\n%s%s", r.stdout, r.stderr)
	}
	fixed, err := os.ReadFile(bad + ".lint-fixed")
	if err != nil {
		t.Fatalf("no fixed copy: %v\n%s%s", err, r.stdout, r.stderr)
	}
	if st, _ := os.Stat(bad + ".lint-fixed"); st.Mode().Perm() != 0o600 {
		t.Errorf("fixed copy mode %v", st.Mode().Perm())
	}
	if now, _ := os.ReadFile(bad); string(now) != string(orig) {
		t.Error("--fix changed the original")
	}
	if !strings.Contains(string(fixed), "SUPERSECRETKEYTEXT") || strings.Contains(string(fixed), "\nncp-disable") {
		t.Errorf("fixed copy:\n%s", fixed)
	}
	if r := ovpnperf(t, "lint", bad+".lint-fixed"); r.code != 0 {
		t.Errorf("fixed copy still has findings: exit %d\n%s", r.code, r.stdout)
	}

	before, _ := os.ReadDir(dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lint"}, "give a CONFIG"},
		{[]string{"lint", filepath.Join(dir, "nope.conf")}, "nope.conf"},
		{[]string{"lint", clean, "--rtt", "fast"}, "--rtt"},
		{[]string{"lint", clean, "--rate", "lots"}, "--rate"},
		{[]string{"lint", clean, "--pmtu", "20"}, "--pmtu"},
		{[]string{"lint", "--log", "-", "--fix"}, "--fix needs"},
		{[]string{"lint", "--log", filepath.Join(dir, "nope.log")}, "nope.log"},
	} {
		ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("usage errors created files: %d → %d entries", len(before), len(after))
	}
}

// TestLintLogStdin reads a real OpenVPN 2.6 log (captured by
// internal/openvpn's TestLintLogsLive) as journalctl prints it, on
// standard input.
func TestLintLogStdin(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../internal/openvpn/testdata/logs/lint-capped-mismatch-server.log")
	if err != nil {
		t.Fatal(err)
	}
	var j strings.Builder
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		j.WriteString("Nov 23 10:26:28 vpn ovpn-server[4242]: " + l[len("2026-11-23 10:26:28 "):] + "\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := runner.Command(ctx, binary, "lint", "--log", "-", "--json")
	cmd.Stdin = strings.NewReader(j.String())
	out, err := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit %d (%v)\n%s", code, err, out)
	}
	var rep lint.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	rules := map[string]int{}
	for _, f := range rep.Findings {
		rules[f.Rule] = f.Line
		if f.File != "stdin" {
			t.Errorf("finding file %q, want stdin", f.File)
		}
	}
	if rules["log-cipher-mismatch"] != 41 || rules["log-compression"] != 1 {
		t.Errorf("findings %v", rules)
	}
}

// TestLintPipeline: a directory of configs in one run, --format gcc and
// sarif, --fail-on, suppression comments, --target and the default target
// (the installed openvpn's version), with the exit codes of text output.
func TestLintPipeline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeConf(t, dir, "a.conf", "client\ndev tun\nremote vpn.example.net 1194\nremote-cert-tls server\nfragment 1300\n")
	writeConf(t, dir, "b.ovpn", "client\ndev tun\nremote vpn.example.net 1194\nremote-cert-tls server\nuser nobody\n")
	writeConf(t, dir, "notes.txt", "not a config\n")
	r := ovpnperf(t, "lint", "--target", "2.7", "--format", "gcc", dir)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 1 || len(lines) != 3 {
		t.Fatalf("exit %d, want 1 and 3 lines\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, l := range lines {
		if !lint.GCCLineRE().MatchString(l) {
			t.Errorf("not gcc format: %q", l)
		}
	}
	if !strings.Contains(r.stdout, "a.conf:5:1: warning: DCO off because of fragment 1300: OpenVPN 2.7") || !strings.Contains(r.stdout, "b.ovpn:5:1: info: DCO may be off because of user nobody") {
		t.Errorf("gcc output:\n%s", r.stdout)
	}
	// --fail-on error: warnings pass; --fail-on info: the info fails.
	if r := ovpnperf(t, "lint", "--target", "2.7", "--fail-on", "error", dir); r.code != 0 {
		t.Errorf("--fail-on error: exit %d\n%s", r.code, r.stdout)
	}
	b := filepath.Join(dir, "b.ovpn")
	if r := ovpnperf(t, "lint", "--target", "2.7", b); r.code != 0 {
		t.Errorf("info only: exit %d\n%s", r.code, r.stdout)
	}
	if r := ovpnperf(t, "lint", "--target", "2.7", "--fail-on", "info", b); r.code != 1 {
		t.Errorf("--fail-on info: exit %d\n%s", r.code, r.stdout)
	}
	// A suppression comment removes exactly that finding.
	a := writeConf(t, dir, "a.conf", "client\ndev tun\nremote vpn.example.net 1194\nremote-cert-tls server\nfragment 1300 # ovpnperf-lint: disable=dco-off\n")
	r = ovpnperf(t, "lint", "--target", "2.7", "--json", a)
	var rep lint.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Suppressed != 1 || len(rep.Findings) != 1 || rep.Findings[0].Rule != "fragment" || rep.Target != "2.7" || r.code != 1 {
		t.Errorf("suppressed %d, findings %+v, target %s, exit %d", rep.Suppressed, rep.Findings, rep.Target, r.code)
	}
	// SARIF is JSON with one result per finding.
	r = ovpnperf(t, "lint", "--target", "2.6", "--format", "sarif", dir)
	var sarif struct {
		Version string `json:"version"`
		Runs    []struct {
			Results []struct {
				RuleID string `json:"ruleId"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &sarif); err != nil || sarif.Version != "2.1.0" || len(sarif.Runs) != 1 || len(sarif.Runs[0].Results) != 2 || r.code != 1 {
		t.Errorf("sarif (exit %d, %v):\n%s", r.code, err, r.stdout)
	}
	// The default target is the installed OpenVPN's version.
	v, err := lint.InstalledOpenVPN()
	if err != nil {
		t.Fatalf("openvpn --version: %v (Debian package openvpn)", err)
	}
	r = ovpnperf(t, "lint", "--json", a)
	rep = lint.Report{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("lint --json: %v\n%s", err, r.stdout)
	}
	if want, _ := dco.NormTarget(v); rep.Target != want || rep.TargetFrom != "installed OpenVPN "+v {
		t.Errorf("default target %q from %q; installed %s", rep.Target, rep.TargetFrom, v)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lint", a, "--target", "2.5"}, "--target"},
		{[]string{"lint", a, "--format", "xml"}, "--format"},
		{[]string{"lint", a, "--fail-on", "never"}, "--fail-on"},
		{[]string{"lint", a, "--json", "--format", "gcc"}, "--json"},
		{[]string{"lint", t.TempDir()}, "no *.conf"},
	} {
		ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
	}
}
