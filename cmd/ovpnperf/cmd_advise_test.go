package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

const adviseProbe = `{"schema":"ovpnperf/probe/v1","host":"198.51.100.2","time":"2026-11-23T10:00:00Z","path":{
 "pmtu_ipv4":{"value":{"bytes":1400,"blackhole":true},"source":"measured"},
 "rtt_ms":{"value":10.1,"source":"measured"},"loss_percent":{"value":0,"source":"measured"},
 "path_rate_bps":{"value":9.8e7,"source":"measured"},
 "rmem_max":{"value":4194304,"source":"read"},"wmem_max":{"value":4194304,"source":"read"}}}`

// Must show 4: bad input is one line and exit 2.
func TestAdviseBadInput(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.json")
	trunc := filepath.Join(dir, "trunc.json")
	os.WriteFile(other, []byte(strings.Replace(adviseProbe, "ovpnperf/probe/v1", "ovpnperf/run/v1", 1)), 0o600)
	os.WriteFile(trunc, []byte(adviseProbe[:120]), 0o600)
	ovpnperf(t, "advise", "--rtt", "-20ms").mustBeUsageError(t, "must not be negative")
	ovpnperf(t, "advise", "--loss", "150%").mustBeUsageError(t, "100%")
	ovpnperf(t, "advise", "--probe", other).mustBeUsageError(t, `schema "ovpnperf/run/v1"`)
	ovpnperf(t, "advise", "--probe", trunc).mustBeUsageError(t, "truncated")
	ovpnperf(t, "advise", "--pmtu", "100").mustBeUsageError(t, `--pmtu "100"`)
	ovpnperf(t, "advise", "--rate", "10mbit", "--openvpn", "2.4").mustBeUsageError(t, "2.5 or 2.6")
	ovpnperf(t, "advise").mustBeUsageError(t, "needs a path")
	ovpnperf(t, "probe", "x", "--pings", "1").mustBeUsageError(t, "--pings")
	ovpnperf(t, "probe", "x", "--pps-port", "70000").mustBeUsageError(t, `--pps-port "70000"`)
	ovpnperf(t, "probe", "x", "--pps-key-file", filepath.Join(dir, "nokey")).mustBeUsageError(t, "--pps-key-file")
	ovpnperf(t, "advise", "--rtt", "1ms", "--packet-rate", "0").mustBeUsageError(t, `--packet-rate "0"`)
	ovpnperf(t, "probe", "x", "--pps-key-file", "").mustBeUsageError(t, "--pps-key-file")
}

// The packet cost per core is an assumption unless --packet-rate gives
// it: the text output says so where a prediction rests on it.
func TestAdvisePacketCostAssumed(t *testing.T) {
	r := ovpnperf(t, "advise", "--rtt", "0.1ms", "--pmtu", "1500").mustSucceed(t)
	if !strings.Contains(r.stdout, "bound by packet cost per core, an assumed figure") || !strings.Contains(r.stdout, "packet cost per core: assumed, not measured") {
		t.Errorf("LAN advice does not say the packet cost is assumed:\n%s", r.stdout)
	}
	r = ovpnperf(t, "advise", "--rtt", "0.1ms", "--pmtu", "1500", "--packet-rate", "2600").mustSucceed(t)
	if strings.Contains(r.stdout, "packet cost per core: assumed") || !strings.Contains(r.stdout, "2600 packets/s") {
		t.Errorf("--packet-rate 2600 not used:\n%s", r.stdout)
	}
}

// A probe file becomes advice whose variant lab run accepts; flags
// override the probe.
func TestAdviseFromProbe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(p, []byte(adviseProbe), 0o600)
	r := ovpnperf(t, "advise", "--probe", p, "--json").mustSucceed(t)
	var a struct {
		Variant  string `json:"variant"`
		Ceilings []struct {
			Binding    string  `json:"binding"`
			BitsPerSec float64 `json:"bits_per_sec"`
		} `json:"ceilings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatal(err)
	}
	if a.Variant != "advised=mssfix 1400 mtu;tun-mtu 1348" {
		t.Errorf("variant %q", a.Variant)
	}
	if _, err := openvpn.ParseVariant(a.Variant); err != nil {
		t.Errorf("lab run refuses %q: %v", a.Variant, err)
	}
	if len(a.Ceilings) != 1 || a.Ceilings[0].Binding != "path rate × header efficiency" {
		t.Errorf("ceilings %+v", a.Ceilings)
	}
	r = ovpnperf(t, "advise", "--probe", p, "--pmtu", "1500", "--format", "conf").mustSucceed(t)
	if strings.Contains(r.stdout, "tun-mtu 1348") || !strings.Contains(r.stdout, "# --- server.conf ---") {
		t.Errorf("--pmtu 1500 should override the probe's 1400:\n%s", r.stdout)
	}
	r = ovpnperf(t, "advise", "--rtt", "80ms", "--client-os", "windows").mustSucceed(t)
	if !strings.Contains(r.stdout, "mssfix 1500 mtu") || !strings.Contains(r.stdout, "wintun") {
		t.Errorf("windows notes missing:\n%s", r.stdout)
	}
}
