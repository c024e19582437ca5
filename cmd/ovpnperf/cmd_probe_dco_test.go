package main

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/probe"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// kernelHasOVPN looks at this kernel independently of the code under
// test: the ovpn module loaded, or CONFIG_OVPN set in /proc/config.gz.
func kernelHasOVPN(t *testing.T) (has bool, why string) {
	t.Helper()
	if _, err := os.Stat("/sys/module/ovpn"); err == nil {
		return true, "/sys/module/ovpn"
	}
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		t.Fatalf("cannot tell whether this kernel has the ovpn driver: %v", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(z)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "CONFIG_OVPN=") {
			return true, l
		}
	}
	return false, "CONFIG_OVPN is not set"
}

// TestProbeDCO: probe reads the kernel, its modules and OpenVPN's build;
// on a kernel without the ovpn driver (this project's machines) it says
// DCO is not available and names CONFIG_OVPN; with --config it lists the
// config's options that turn DCO off, each with its source line, and the
// host's gap.
func TestProbeDCO(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "openvpn", "ping")
	has, why := kernelHasOVPN(t)
	dir := t.TempDir()
	cfg := writeConf(t, dir, "server.conf", "dev tun\ntls-server\ndh none\nserver 10.8.0.0 255.255.255.0\ncompress lz4-v2\nfragment 1300\n")
	r := ovpnperf(t, "probe", "127.0.0.1", "--pings", "10", "--no-crypto", "--pps-port", "0", "--config", cfg, "--json").mustSucceed(t)
	rep, err := probe.Decode(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	p := rep.Path
	if p.KernelRelease.Source != probe.Read || p.KernelRelease.Value == "" || p.OpenVPNBuild.Source != probe.Read {
		t.Errorf("kernel %+v, build %+v", p.KernelRelease, p.OpenVPNBuild)
	}
	built := strings.Contains(strings.Join(p.OpenVPNBuild.Value, " "), "DCO")
	if !has {
		// This project's kernel: no driver, so no DCO, and the reason.
		if p.DCO.Source != probe.Read || p.DCO.Value || !strings.Contains(p.DCO.Note, "CONFIG_OVPN=n") {
			t.Errorf("%s, but dco_available %+v", why, p.DCO)
		}
		if p.ModuleOVPN.Value != "absent" || p.KernelOVPN.Value != "n" {
			t.Errorf("module_ovpn %+v, kernel_config_ovpn %+v", p.ModuleOVPN, p.KernelOVPN)
		}
	} else if built && !p.DCO.Value && strings.HasPrefix(p.OpenVPNVersion.Value, "2.7") {
		t.Errorf("kernel has the ovpn driver (%s) and OpenVPN 2.7 has [DCO], but dco_available %+v", why, p.DCO)
	}
	if p.DCOWithConfig.Source != probe.Read || p.DCOWithConfig.Value {
		t.Errorf("dco_with_config %+v", p.DCOWithConfig)
	}
	reasons := strings.Join(p.DCOOffReasons.Value, "\n")
	for _, want := range []string{"server.conf:4: no topology line", "dco.c:386 at v2.6.14", "server.conf:5: compress lz4-v2", "server.conf:6: fragment 1300", "dco.c:241 at v2.6.14"} {
		if strings.HasPrefix(p.OpenVPNVersion.Value, "2.6") && !strings.Contains(reasons, want) {
			t.Errorf("dco_off_reasons lack %q:\n%s", want, reasons)
		}
	}
	if !has && !strings.Contains(reasons, "kernel") {
		t.Errorf("dco_off_reasons lack the kernel:\n%s", reasons)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatal(err)
	}
	// Text output lists the reasons one per line.
	r = ovpnperf(t, "probe", "127.0.0.1", "--pings", "10", "--no-crypto", "--pps-port", "0", "--config", cfg).mustSucceed(t)
	if !strings.Contains(r.stdout, "DCO would not be used with "+cfg+" here, because:\n  - "+cfg+":4: ") {
		t.Errorf("text output:\n%s", r.stdout)
	}
	ovpnperf(t, "probe", "127.0.0.1", "--config", dir+"/nope.conf").mustBeUsageError(t, "--config")
}
