package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/advise"
	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/openvpn/openvpntest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// TestAdviseDCO: advise --dco yes on 100 Mbit/s, 10 ms, path MTU 1400
// with an ICMP black hole sizes tun-mtu to the path and clamps TCP with
// a TCPMSS rule instead of mssfix (Linux DCO does not apply it): no
// mssfix, no fragment, no non-AEAD cipher. The firewall lines run as
// printed (iptables and nft) in a throw-away network namespace; the
// advised server config has no option that turns DCO off (the dco rules
// lint uses) and OpenVPN 2.6 reads it past option parsing.
func TestAdviseDCO(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "openvpn", "unshare", "ip", "iptables", "ip6tables", "nft")
	r := ovpnperf(t, "advise", "--rate", "100mbit", "--rtt", "10ms", "--pmtu", "1400", "--blackhole", "--dco", "yes", "--json").mustSucceed(t)
	var a advise.Advice
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatal(err)
	}
	tun := fmt.Sprintf("tun-mtu %d", a.TunMTU)
	var server []string
	for _, l := range append(append(append([]advise.Line{}, a.Server...), a.Client...), a.Push...) {
		for _, bad := range []string{"mssfix", "fragment", "CBC", "comp"} {
			if strings.Contains(l.Directive, bad) {
				t.Errorf("advised line %q with DCO", l.Directive)
			}
		}
	}
	for _, l := range a.Server {
		server = append(server, l.Directive)
	}
	if a.TunMTU != 1348 || !strings.Contains(strings.Join(server, "\n"), tun) {
		t.Errorf("tun-mtu %d (want 1348: 1400 − 52 bytes AES-GCM/UDP/IPv4), server lines %v", a.TunMTU, server)
	}
	var script []string
	kinds := map[string]int{}
	for _, l := range a.Firewall {
		script = append(script, l.Directive)
		kinds[strings.Fields(l.Directive)[0]]++
		if strings.Contains(l.Directive, "TCPMSS") && !strings.Contains(l.Directive, fmt.Sprintf("--set-mss %d", a.TunMTU-40)) && !strings.Contains(l.Directive, fmt.Sprintf("--set-mss %d", a.TunMTU-60)) {
			t.Errorf("clamp rule %q does not clamp to tun-mtu − 40/60", l.Directive)
		}
	}
	if kinds["iptables"] != 2 || kinds["ip6tables"] != 2 || kinds["nft"] != 6 {
		t.Fatalf("firewall lines %v", script)
	}
	// Run the lines exactly as printed in a new network namespace (it
	// disappears with the shell: nothing is left on the host).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "unshare", "-n", "sh", "-ec", strings.Join(script, "\n")+"\niptables-save -t mangle\nip6tables-save -t mangle\nnft list ruleset\n").CombinedOutput()
	if err != nil {
		t.Fatalf("firewall lines failed: %v\n%s", err, out)
	}
	for _, want := range []string{"--set-mss 1308", "--set-mss 1288", "maxseg size set 1308", "maxseg size set 1288"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("rules in force lack %q:\n%s", want, out)
		}
	}
	// The text output shows the same: tun-mtu and the clamp, no mssfix.
	txt := ovpnperf(t, "advise", "--rate", "100mbit", "--rtt", "10ms", "--pmtu", "1400", "--blackhole", "--dco", "yes").mustSucceed(t).stdout
	settings, _, _ := strings.Cut(txt, "do not:")
	if !strings.Contains(settings, "  "+tun+"\n") || !strings.Contains(settings, "-j TCPMSS --set-mss 1308") || strings.Contains(settings, "\n  mssfix") {
		t.Errorf("text advice:\n%s", txt)
	}
	// The advised lines in a server config: no DCO blocker, and OpenVPN
	// reads it.
	dir := t.TempDir()
	pki, err := openvpn.NewPKI(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("dev tun\nproto udp\nport 0\nca %s\ncert %s\nkey %s\ndh none\ntopology subnet\nserver 10.8.0.0 255.255.255.0\n",
		filepath.Join(pki.Dir, "ca.crt"), filepath.Join(pki.Dir, "server.crt"), filepath.Join(pki.Dir, "server.key"))
	for _, l := range append(append([]advise.Line{}, a.Server...), a.Push...) {
		conf += l.Directive + "\n"
	}
	path := writeConf(t, dir, "server.conf", conf)
	cf, err := openvpn.ReadConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{dco.V26, dco.V27} {
		if bs := dco.Check(cf, target); len(bs) != 0 {
			t.Errorf("advised server config turns DCO off in %s: %+v", target, bs)
		}
	}
	openvpntest.CheckParses(t, dir, path)
	// Without DCO on a path where one process's CPU binds, advise says
	// what DCO takes.
	txt = ovpnperf(t, "advise", "--rate", "10gbit", "--rtt", "1ms", "--pmtu", "1500").mustSucceed(t).stdout
	if !strings.Contains(txt, "data channel offload (DCO) would move the data channel into the kernel") || !strings.Contains(txt, "CONFIG_OVPN") {
		t.Errorf("CPU-bound advice without DCO does not say what DCO takes:\n%s", txt)
	}
}
