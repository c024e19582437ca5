package main

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/measure"
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
	checkSchema(t, "probe --json", r.stdout, false)
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

// TestLabRunDCONotTested: on a kernel without the ovpn driver (probed
// here, as lab run probes it), `lab run --variant dco` measures nothing
// for that variant, says "not tested here: kernel lacks the ovpn driver"
// in every DCO row with no number, shows the configs it would have run,
// and exits 0.
func TestLabRunDCONotTested(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "openvpn")
	r := ovpnperf(t, "lab", "run", "--variant", "dco", "--no-routed", "--rate", "50mbit", "--repeat", "1", "--time", "1s", "--json").mustSucceed(t)
	var rep measure.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("want one dco row per direction, got %d", len(rep.Rows))
	}
	if has, why := kernelHasOVPN(t); has {
		// A kernel with the driver: the variant runs, and its rows say
		// which driver.
		for _, row := range rep.Rows {
			if row.NotTested != "" || len(row.SamplesBps) == 0 || row.Extra["dco_host"] == nil {
				t.Errorf("kernel has the ovpn driver (%s), row %+v", why, row)
			}
		}
		return
	}
	for _, row := range rep.Rows {
		if row.Variant != "dco" || !strings.HasPrefix(row.NotTested, "not tested here: kernel lacks the ovpn driver") || len(row.SamplesBps) != 0 || row.MedianBps != 0 || row.RatioToRouted != 0 {
			t.Errorf("row %+v", row)
		}
		srv, _ := row.Extra["server_config"].(string)
		cli, _ := row.Extra["client_config"].(string)
		if !strings.Contains(srv, "topology subnet") || strings.Contains(srv+cli, "disable-dco") || !strings.Contains(cli, "client\n") {
			t.Errorf("rendered configs:\n%s\n%s", srv, cli)
		}
	}
	txt := ovpnperf(t, "lab", "run", "--variant", "dco", "--no-routed", "--direction", "up", "--rate", "50mbit", "--repeat", "1", "--time", "1s").mustSucceed(t).stdout
	if !strings.Contains(txt, "not tested here: kernel lacks the ovpn driver") {
		t.Errorf("table:\n%s", txt)
	}
}
