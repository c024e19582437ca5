package hostcollect

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestHost(t *testing.T) {
	h, err := Host(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Kernel == "" || h.Arch == "" || h.CPUs < 1 {
		t.Errorf("%+v", h)
	}
	if _, err := os.Stat("/usr/sbin/openvpn"); err == nil && !strings.HasPrefix(h.OpenVPNVersion, "OpenVPN 2.") {
		t.Errorf("openvpn version %q", h.OpenVPNVersion)
	}
	if _, err := os.Stat("/usr/bin/iperf3"); err == nil && !strings.HasPrefix(h.Iperf3Version, "iperf 3.") {
		t.Errorf("iperf3 version %q", h.Iperf3Version)
	}
	if s := h.String(); !strings.Contains(s, h.Kernel) {
		t.Errorf("String() = %q", s)
	}
}
