package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/advise"
	"github.com/ovpnperf/ovpnperf/internal/lint"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// runInProcess runs one command as the binary would (flags parsed by
// cobra) and returns what it printed; exit statuses of lint's findings are
// not errors here.
func runInProcess(t *testing.T, c *cobra.Command, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	c.SetArgs(args)
	c.SetOut(&out)
	c.SetErr(&errOut)
	c.SilenceUsage, c.SilenceErrors = true, true
	if err := c.Execute(); err != nil {
		if _, ok := err.(exitCode); !ok {
			t.Fatalf("%s %s: %v\n%s", c.Name(), strings.Join(args, " "), err, errOut.String())
		}
	}
	return out.String()
}

// TestAdviseLintAgree runs advise and lint over a matrix of paths and
// configs and fails on any pair where one recommends what the other warns
// against:
//
//   - lint of (a config + advise's lines for that path) has no warning or
//     error at advise's lines and no fix that changes them;
//   - lint --fix on the config alone only moves a setting towards advise:
//     to advise's value, or (where advise sets none) to the default.
//
// Matrix: proto udp/tcp × RTT 1/50/300 ms × rate 10 Mbit/s–10 Gbit/s ×
// path MTU unknown/1500/1400 × tun-mtu 1500/9000 × config with/without
// socket buffers.
func TestAdviseLintAgree(t *testing.T) {
	dir := t.TempDir()
	n := 0
	for _, proto := range []string{"udp", "tcp"} {
		for _, rtt := range []string{"1ms", "50ms", "300ms"} {
			for _, rate := range []string{"10mbit", "100mbit", "1gbit", "10gbit"} {
				for _, pmtu := range []string{"", "1500", "1400"} {
					path := []string{"--rtt", rtt, "--rate", rate}
					if pmtu != "" {
						path = append(path, "--pmtu", pmtu)
					}
					var a advise.Advice
					js := runInProcess(t, newAdviseCommand(), append([]string{"--json", "--proto", proto}, path...)...)
					if err := json.Unmarshal([]byte(js), &a); err != nil {
						t.Fatalf("advise %v: %v\n%s", path, err, js)
					}
					for _, tun := range []int{1500, 9000} {
						for _, bufs := range []bool{false, true} {
							n++
							name := fmt.Sprintf("%s rtt %s rate %s pmtu %q tun-mtu %d buffers %v", proto, rtt, rate, pmtu, tun, bufs)
							base := agreeConfig(proto, tun, bufs)
							checkAdviseLines(t, dir, name, base, a, path)
							checkFixDirection(t, dir, name, base, a, path)
						}
					}
				}
			}
		}
	}
	t.Logf("%d path × config pairs", n)
}

// agreeConfig is a server config for the matrix.
func agreeConfig(proto string, tun int, bufs bool) []string {
	p := "udp"
	if proto == "tcp" {
		p = "tcp-server"
	}
	c := []string{"port 1194", "proto " + p, "dev tun", "topology subnet", "server 10.8.0.0 255.255.255.0",
		"ca ca.crt", "cert server.crt", "key server.key", "dh none", "tls-crypt ta.key", fmt.Sprintf("tun-mtu %d", tun)}
	if bufs {
		c = append(c, "sndbuf 524288", "rcvbuf 524288")
	}
	return c
}

func directiveName(l string) string { n, _, _ := strings.Cut(l, " "); return n }

func lintJSON(t *testing.T, file string, path []string, fix bool) lint.Report {
	t.Helper()
	args := append([]string{file, "--json"}, path...)
	if fix {
		args = append(args, "--fix")
	}
	var rep lint.Report
	if err := json.Unmarshal([]byte(runInProcess(t, newLintCommand(), args...)), &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// checkAdviseLines: the config with advise's server lines in place of its
// own lines of the same names; lint must not warn against them or fix them
// away.
func checkAdviseLines(t *testing.T, dir, name string, base []string, a advise.Advice, path []string) {
	t.Helper()
	set := map[string]bool{}
	for _, l := range a.Server {
		set[directiveName(l.Directive)] = true
	}
	var lines []string
	for _, l := range base {
		if !set[directiveName(l)] {
			lines = append(lines, l)
		}
	}
	first := len(lines) + 1
	for _, l := range a.Server {
		lines = append(lines, l.Directive)
	}
	for _, l := range a.Push {
		lines = append(lines, l.Directive)
	}
	f := filepath.Join(dir, "with-advice.conf")
	os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	rep := lintJSON(t, f, path, false)
	adviseLine := func(n int) bool { return n >= first && n < first+len(a.Server) }
	for _, fd := range rep.Findings {
		bad := adviseLine(fd.Line) && (fd.Severity == lint.Error || fd.Severity == lint.Warning)
		for _, e := range fd.Edits {
			bad = bad || (e.Line > 0 && adviseLine(e.Line))
		}
		if bad {
			t.Errorf("%s: lint %s %s against advise's line %q: %s %s", name, fd.Severity, fd.Rule, lines[fd.Line-1], fd.Problem, fd.Reason)
		}
	}
}

// checkFixDirection: lint --fix on the config alone changes sndbuf, rcvbuf,
// tun-mtu and mssfix only towards advise: to advise's value, or to absent
// where advise keeps the default. A config whose tun-mtu is not advise's
// is a different tunnel; its fixes are not compared.
func checkFixDirection(t *testing.T, dir, name string, base []string, a advise.Advice, path []string) {
	t.Helper()
	if base[10] != fmt.Sprintf("tun-mtu %d", a.TunMTU) {
		return
	}
	f := filepath.Join(dir, "alone.conf")
	os.WriteFile(f, []byte(strings.Join(base, "\n")+"\n"), 0o600)
	rep := lintJSON(t, f, path, true)
	values := func(file string) map[string]string {
		c, err := openvpn.ReadConfigFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, d := range c.Directives {
			m[d.Name] = strings.Join(d.Args, " ")
		}
		return m
	}
	before, after := values(f), values(rep.Fixed)
	advised := map[string]string{}
	for _, l := range a.Server {
		n, v, _ := strings.Cut(l.Directive, " ")
		advised[n] = v
	}
	for _, d := range []string{"sndbuf", "rcvbuf", "tun-mtu", "mssfix"} {
		b, hadB := before[d]
		x, hasX := after[d]
		if b == x && hadB == hasX {
			continue
		}
		want, ok := advised[d]
		switch {
		case ok && (!hasX || x != want):
			t.Errorf("%s: lint --fix sets %s %q (was %q), advise says %s %s", name, d, x, b, d, want)
		case !ok && hasX:
			t.Errorf("%s: lint --fix sets %s %q (was %q), advise leaves it at the default", name, d, x, b)
		}
	}
}
