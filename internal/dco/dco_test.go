package dco

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// TestNotesMapBack: every rule's log note (as OpenVPN prints it, with its
// %s filled) is recognised as that rule in a log.
func TestNotesMapBack(t *testing.T) {
	t.Parallel()
	for id, r := range Rules() {
		if strings.HasPrefix(r.Note, "(") {
			continue // no log line (disable-dco, build)
		}
		note := strings.ReplaceAll(r.Note, "%s", "X")
		if got := RuleForLogLine("2026-11-25 11:26:57 " + note); got != id {
			t.Errorf("%s: note %q maps to %q", id, note, got)
		}
		for _, target := range []string{V26, V27} {
			if s, ok := r.Sources[target]; ok && (s.Line <= 0 || !strings.HasPrefix(s.File, "src/openvpn/") || s.Tag != map[string]string{V26: Tag26, V27: Tag27}[target]) {
				t.Errorf("%s: source %+v for %s", id, s, target)
			}
		}
	}
	// 2.6.14's own wording of the changed notes.
	for line, want := range map[string]string{
		"Note: Kernel support for ovpn-dco missing, disabling data channel offload.":         "kernel",
		"Interface tun0 exists and is non-DCO. Disabling data channel offload":               "interface-exists",
		"--user specified but not permitted to retain CAP_NET_ADMIN. Disabling data channel": "user",
	} {
		if got := RuleForLogLine(line); got != want {
			t.Errorf("%q → %q, want %q", line, got, want)
		}
	}
}

func TestNormTarget(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"2.6": V26, "2.6.14": V26, "v2.7.6": V27, "2.7_rc2": V27, "2.7": V27, "2.5.9": "", "2.60": "", "": ""} {
		got, ok := NormTarget(in)
		if got != want || ok != (want != "") {
			t.Errorf("NormTarget(%q) = %q %v", in, got, ok)
		}
	}
}

// TestHostMissing: what a host lacks, from what probe read (fakes of the
// real shapes: this kernel's CONFIG_OVPN=n, a kernel with the module, a
// build without [DCO]).
func TestHostMissing(t *testing.T) {
	t.Parallel()
	v26 := openvpn.ParseVersion("OpenVPN 2.6.14 x86_64-pc-linux-gnu [SSL (OpenSSL)] [LZO] [LZ4] [EPOLL] [PKCS11] [MH/PKTINFO] [AEAD] [DCO]\nDCO version: N/A\n")
	v27 := openvpn.ParseVersion("OpenVPN 2.7.6 x86_64-pc-linux-gnu [SSL (OpenSSL)] [LZO] [LZ4] [EPOLL] [MH/PKTINFO] [AEAD] [DCO]\n")
	noDCO := openvpn.ParseVersion("OpenVPN 2.6.14 x86_64-pc-linux-gnu [SSL (OpenSSL)] [LZO] [AEAD]\n")
	absent := []KernelModule{{Name: "ovpn", How: "not loaded"}, {Name: "ovpn-dco-v2", How: "not loaded"}}
	loaded := []KernelModule{{Name: "ovpn", Loaded: true}, {Name: "ovpn-dco-v2", How: "not loaded"}}
	cases := []struct {
		name string
		h    Host
		want []string // substrings, in order; none = can offload
	}{
		{"this kernel, 2.6", Host{KernelRelease: "6.18.44", KernelConfig: "n", KernelConfigFrom: "/proc/config.gz", Modules: absent, OpenVPN: &v26}, []string{"no ovpn-dco-v2 module", "CONFIG_OVPN=n in /proc/config.gz"}},
		{"this kernel, 2.7", Host{KernelRelease: "6.18.44", KernelConfig: "n", KernelConfigFrom: "/proc/config.gz", Modules: absent, OpenVPN: &v27}, []string{"lacks the ovpn driver: CONFIG_OVPN=n"}},
		{"6.16 with ovpn, 2.7", Host{KernelRelease: "6.16.1", KernelConfig: "m", Modules: loaded, OpenVPN: &v27}, nil},
		{"6.16 with ovpn, 2.6 needs ovpn-dco-v2", Host{KernelRelease: "6.16.1", KernelConfig: "m", Modules: loaded, OpenVPN: &v26}, []string{"no ovpn-dco-v2 module"}},
		{"built without DCO", Host{KernelRelease: "6.16.1", Modules: loaded, OpenVPN: &noDCO}, []string{"built without DCO"}},
		{"no openvpn", Host{KernelRelease: "6.16.1", Modules: loaded, OpenVPNErr: "exec: not found"}, []string{"not installed"}},
	}
	for _, c := range cases {
		got := strings.Join(c.h.Missing(""), " | ")
		if (len(c.want) == 0) != (got == "") {
			t.Errorf("%s: missing %q, want %v", c.name, got, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: missing %q lacks %q", c.name, got, w)
			}
		}
	}
	if h := (Host{OpenVPN: &v27}); h.Target() != V27 || !h.BuiltWithDCO() || fmt.Sprint(ModuleFor(V26)) != "ovpn-dco-v2" {
		t.Errorf("target %q, built %v", h.Target(), h.BuiltWithDCO())
	}
}
