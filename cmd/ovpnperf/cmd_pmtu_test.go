package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

func TestPMTUUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pmtu"}, "HOST"},
		{[]string{"pmtu", "-4", "-6", "192.0.2.1"}, "-4 and -6"},
		{[]string{"pmtu", "--cipher", "ROT13", "192.0.2.1"}, "ROT13"},
		{[]string{"pmtu", "--timeout", "1ns", "192.0.2.1"}, "--timeout"},
		{[]string{"pmtu", "--max", "10", "192.0.2.1"}, "--max"},
		{[]string{"pmtu", "--through-tunnel", "tun-far-end"}, "not an IP address"},
		{[]string{"pmtu", "--through-tunnel", "10.8.0.1", "192.0.2.1"}, "not both"},
		{[]string{"pmtu", "-6", "192.0.2.1"}, "not an IPv6 address"},
		{[]string{"pmtu", "a", "b"}, "accepts between 0 and 1 arg"},
	} {
		ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
	}
}

// Without CAP_NET_RAW the command says what it needs, in one line, exit 1.
func TestPMTUNoPermission(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "setpriv")
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ovpnperf")
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := runner.Command(context.Background(), "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", bin, "pmtu", "127.0.0.1")
	var se bytes.Buffer
	cmd.Stderr = &se
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("unprivileged pmtu: %v (stderr %q), want exit 1", err, se.String())
	}
	if !strings.Contains(se.String(), "CAP_NET_RAW") || strings.Count(strings.TrimSpace(se.String()), "\n") != 0 {
		t.Errorf("stderr %q, want one line naming CAP_NET_RAW", se.String())
	}
}

// pmtuJSON holds the keys the issue requires of --json.
type pmtuJSON struct {
	PathMTU        int     `json:"path_mtu"`
	Blackhole      bool    `json:"blackhole"`
	Hop            *string `json:"hop"`
	HopMTU         int     `json:"hop_mtu"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	Family         string  `json:"family"`
	OpenVPN        struct {
		Rows []pmtu.Translation `json:"translations"`
	} `json:"openvpn"`
}

// pmtu's main cases (bottleneck, black hole, IPv4 and IPv6) through the
// command line, on labs with a 100 ms round trip: the figures are logged,
// the time bound is loose. The IPv4 and IPv6 cases of one path share its
// lab: pmtu changes nothing in it, and what the kernel learns from an ICMP
// "too big" (the route's cached path MTU) belongs to one family, so the
// IPv4 probe leaves nothing the IPv6 probe reads.
func TestPMTUMustShow(t *testing.T) {
	labs := map[[2]int]*lab.Lab{}
	labOf := func(t *testing.T, mtu int, blackhole bool) *lab.Lab {
		k := [2]int{mtu, 0}
		if blackhole {
			k[1] = 1
		}
		if labs[k] == nil {
			// labtest.New tears the lab down when this test (the parent,
			// not the subtest) ends.
			labs[k] = labtest.New(t, labpath.Path{MTU: mtu, ICMPBlackhole: blackhole,
				Up: labpath.Link{Delay: 50 * time.Millisecond}, Down: labpath.Link{Delay: 50 * time.Millisecond}})
		}
		return labs[k]
	}
	for _, c := range []struct {
		name      string
		mtu       int
		blackhole bool
		dst       string
		family    string
		hop       string
	}{
		{"v4-1400", 1400, false, lab.ServerV4().String(), "ipv4", lab.RouterClientV4().String()},
		{"v6-1400", 1400, false, lab.ServerV6().String(), "ipv6", lab.RouterClientV6().String()},
		{"v4-1400-blackhole", 1400, true, lab.ServerV4().String(), "ipv4", ""},
		{"v6-1400-blackhole", 1400, true, lab.ServerV6().String(), "ipv6", ""},
		{"v4-1492", 1492, false, lab.ServerV4().String(), "ipv4", lab.RouterClientV4().String()},
	} {
		l := labOf(t, c.mtu, c.blackhole)
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			out, err := runner.RunIn(context.Background(), l.Namespace(lab.Client), binary, "pmtu", c.dst, "--json")
			wall := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			checkSchema(t, "pmtu --json", string(out), false)
			var r pmtuJSON
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			checkReportable(t, string(out), fmt.Sprintf("Path MTU</dt><dd>%d bytes", c.mtu))
			checkReportable(t, string(out), "Probe sizes tried, round by round")
			t.Logf("%s: path_mtu %d blackhole %v hop %v elapsed_seconds %.3f (wall %.3f s)", c.name, r.PathMTU, r.Blackhole, deref(r.Hop), r.ElapsedSeconds, wall.Seconds())
			if r.PathMTU != c.mtu || r.Blackhole != c.blackhole || r.Family != c.family || deref(r.Hop) != c.hop {
				t.Errorf("got %+v, want path_mtu %d blackhole %v family %s hop %q", r, c.mtu, c.blackhole, c.family, c.hop)
			}
			if r.ElapsedSeconds <= 0 || r.ElapsedSeconds > 10 {
				t.Errorf("elapsed_seconds %v, want (0, 10]", r.ElapsedSeconds)
			}
			if len(r.OpenVPN.Rows) != 4 || r.OpenVPN.Rows[0].PathMTU != c.mtu || r.OpenVPN.Rows[0].FragmentNeeded != c.blackhole {
				t.Errorf("openvpn translation: %+v", r.OpenVPN.Rows)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The text report for people, from a fixed result: golden lines.
func TestPMTUText(t *testing.T) {
	res := pmtu.Result{Family: pmtu.IPv4, PathMTU: 1400, Blackhole: true, LocalMTU: 1500, Rounds: 2, Probes: 44,
		RTT: 100 * time.Millisecond, Elapsed: 600 * time.Millisecond}
	sec, err := pmtu.TranslateResult("AES-256-GCM", "SHA1", res)
	if err != nil {
		t.Fatal(err)
	}
	rep := pmtu.Document{Host: "vpn.example.net", Address: "198.51.100.2", Family: "ipv4", PathMTU: 1400, Blackhole: true,
		Interface: "eth0", LocalMTU: 1500, ElapsedSeconds: 0.6, RTTMillis: 100, Rounds: 2, Probes: 44,
		Explanation: pmtu.Explain(res, false, "eth0", 0), OpenVPN: sec}
	var b bytes.Buffer
	writePMTUText(&b, rep)
	for _, want := range []string{
		"path MTU to vpn.example.net (198.51.100.2, ipv4 via eth0): 1400 bytes — ICMP BLACK HOLE\n",
		"found in 0.60 s: 2 rounds, 44 probes, RTT 100.0 ms\n",
		"Path-MTU discovery is broken on this path: TCP connections that send full-size segments stall",
		"  udp/ipv4    52        1348         mssfix 1400 mtu  mssfix 1372   1308/1288        fragment 1400 mtu\n",
		"  tcp/ipv4    66        1334         mssfix 1400 mtu  mssfix 1360   1294/1274        n/a (TCP)\n",
		"  udp/ipv6 *  72        1328         mssfix 1400 mtu  mssfix 1352   1288/1268        fragment 1400 mtu\n",
		"* assumes the same path MTU over ipv6 (not probed)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, b.String())
		}
	}
	var j bytes.Buffer
	if err := writeJSON(&j, rep); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(j.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"path_mtu", "blackhole", "hop", "elapsed_seconds", "family"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, j.String())
		}
	}
	if m["hop"] != nil {
		t.Errorf("hop %v, want null on a black hole", m["hop"])
	}
}

// --through-tunnel across real OpenVPN over a 1400-byte black-hole path:
// the inner MTU is 1400 minus AES-256-GCM's 52 bytes.
func TestPMTUThroughTunnel(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn")
	l := labtest.New(t, labpath.Path{MTU: 1400, ICMPBlackhole: true,
		Up: labpath.Link{Delay: 10 * time.Millisecond}, Down: labpath.Link{Delay: 10 * time.Millisecond}})
	dir := t.TempDir()
	pki, err := openvpn.NewPKI(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := openvpn.ServerConfig(openvpn.ServerParams{Local: lab.ServerV4(), Tunnel: lab.TunnelV4(), Credentials: pki.Server()})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := openvpn.ClientConfig(openvpn.ClientParams{Remote: lab.ServerV4(), Credentials: pki.Client("")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := openvpn.Start(ctx, l.Namespace(lab.Server), srv, dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	if err := s.WaitReady(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	c, err := openvpn.Start(ctx, l.Namespace(lab.Client), cli, dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	if err := c.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	far := lab.TunnelV4().Addr().Next().String()
	out, err := runner.RunIn(ctx, l.Namespace(lab.Client), binary, "pmtu", "--through-tunnel", far, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		pmtuJSON
		ThroughTunnel   bool   `json:"through_tunnel"`
		LargestPassed   int    `json:"largest_passed"`
		ImpliedOuterMTU int    `json:"implied_outer_path_mtu"`
		Interface       string `json:"interface"`
		Explanation     string `json:"explanation"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("through the tunnel: path_mtu %d blackhole %v largest_passed %d implied outer %d via %s in %.3f s\n%s",
		r.PathMTU, r.Blackhole, r.LargestPassed, r.ImpliedOuterMTU, r.Interface, r.ElapsedSeconds, r.Explanation)
	if !r.ThroughTunnel || r.PathMTU != 1348 || !r.Blackhole || r.ImpliedOuterMTU != 1400 || r.OpenVPN.Rows != nil {
		t.Errorf("got %+v, want through_tunnel, path_mtu 1348, blackhole, implied outer 1400, no translation rows", r)
	}
	if !strings.Contains(r.Explanation, "Measured inside the tunnel") || !strings.Contains(r.Explanation, "mssfix 1400 mtu") {
		t.Errorf("explanation does not say it measured inside the tunnel: %s", r.Explanation)
	}
}
