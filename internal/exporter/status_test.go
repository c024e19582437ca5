package exporter

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The status files in testdata are constructed after OpenVPN 2.6's
// multi_print_status (versions 1, 2, 3) and print_status (a client's
// statistics); the lab test reads the files a real OpenVPN writes.
func TestParseStatus(t *testing.T) {
	clients := []StatusClient{
		{CommonName: "alice", RealAddress: "198.51.100.10:50001", BytesReceived: 1000, BytesSent: 2000},
		{CommonName: "alice", RealAddress: "198.51.100.11:50002", BytesReceived: 10, BytesSent: 20},
		{CommonName: "UNDEF", RealAddress: "198.51.100.12:50003", BytesReceived: 5, BytesSent: 0},
		{CommonName: "bob", RealAddress: "[2001:db8::2]:50004", BytesReceived: 300, BytesSent: 400},
	}
	for _, tc := range []struct {
		file     string
		version  int
		clients  []StatusClient
		counters map[string]int64
	}{
		{"status-v1.txt", 1, clients, map[string]int64{"Max bcast/mcast queue length": 1}},
		{"status-v2.txt", 2, clients, map[string]int64{"Max bcast/mcast queue length": 1, "dco_enabled": 0}},
		{"status-v3.txt", 3, clients, map[string]int64{"Max bcast/mcast queue length": 1, "dco_enabled": 0}},
		{"status-client.txt", 0, nil, map[string]int64{"TUN/TAP read bytes": 1234, "TUN/TAP write bytes": 5678,
			"TCP/UDP read bytes": 7000, "TCP/UDP write bytes": 3000, "Auth read bytes": 5700}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			s, err := ParseStatus(b)
			if err != nil {
				t.Fatal(err)
			}
			if s.Version != tc.version {
				t.Errorf("version %d, want %d", s.Version, tc.version)
			}
			if !reflect.DeepEqual(s.Clients, tc.clients) {
				t.Errorf("clients\n%+v\nwant\n%+v", s.Clients, tc.clients)
			}
			for k, v := range tc.counters {
				if got, ok := s.Counters[k]; !ok || got != v {
					t.Errorf("counter %q = %d (present %v), want %d", k, got, ok, v)
				}
			}
		})
	}
}

func TestParseStatusRefuses(t *testing.T) {
	partial, err := os.ReadFile(filepath.Join("testdata", "status-v2-partial.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseStatus(partial); !errors.Is(err, ErrIncomplete) {
		t.Errorf("half-written file: err %v, want ErrIncomplete", err)
	}
	for name, text := range map[string]string{
		"empty":        "",
		"not status":   "hello\nEND\n",
		"bad bytes":    "OpenVPN CLIENT LIST\nUpdated,x\nCommon Name,Real Address,Bytes Received,Bytes Sent,Connected Since\na,b,many,1,x\nEND\n",
		"bad bytes v3": "TITLE\tx\nHEADER\tCLIENT_LIST\tCommon Name\tBytes Received\tBytes Sent\nCLIENT_LIST\ta\t1\t-2\nEND\n",
		"no header v1": "OpenVPN CLIENT LIST\nEND\n",
	} {
		if s, err := ParseStatus([]byte(text)); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, s)
		}
	}
}

func TestParseCmdline(t *testing.T) {
	files := map[string]string{
		"/etc/openvpn/server.conf": "dev tun0\nstatus /run/openvpn/server.status 10\nstatus-version 3\n",
		"rel.conf":                 "status rel.status\n",
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	for _, tc := range []struct {
		argv []string
		want statusOptions
	}{
		{[]string{"openvpn", "--config", "/etc/openvpn/server.conf"}, statusOptions{Status: "/run/openvpn/server.status", Dev: "tun0", Version: 3}},
		// Later options win, as in OpenVPN.
		{[]string{"openvpn", "--config", "/etc/openvpn/server.conf", "--status-version", "2", "--dev", "tun9"}, statusOptions{Status: "/run/openvpn/server.status", Dev: "tun9", Version: 2}},
		{[]string{"openvpn", "--cd", "/etc/openvpn", "--config", "rel.conf"}, statusOptions{Status: "rel.status", Cd: "/etc/openvpn"}},
		{[]string{"openvpn", "/etc/openvpn/server.conf"}, statusOptions{Status: "/run/openvpn/server.status", Dev: "tun0", Version: 3}},
		{[]string{"openvpn", "--dev", "ovpn0", "--status", "/tmp/s"}, statusOptions{Status: "/tmp/s", Dev: "ovpn0"}},
	} {
		got, err := parseCmdline(tc.argv, read)
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.argv, got, err, tc.want)
		}
	}
	if _, err := parseCmdline([]string{"openvpn", "--config", "/missing.conf"}, read); err == nil {
		t.Error("a config that cannot be read: no error")
	}
	if _, err := parseCmdline([]string{"openvpn", "--status-version", "7"}, read); err == nil {
		t.Error("status-version 7: no error")
	}
}

// FuzzParseStatus: a status file carries names clients chose (common
// names); whatever it holds, the parser returns a status or an error and
// every client row it returns has counts it read.
func FuzzParseStatus(f *testing.F) {
	for _, name := range []string{"status-v1.txt", "status-v2.txt", "status-v3.txt", "status-client.txt", "status-v2-partial.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStatus(b)
		if err != nil {
			return
		}
		if s.Version < 0 || s.Version > 3 {
			t.Fatalf("version %d", s.Version)
		}
	})
}
