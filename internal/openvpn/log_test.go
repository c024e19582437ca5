package openvpn

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The logs under testdata/logs were captured from OpenVPN 2.6.14 by
// TestTunnelVariants with OVPNPERF_CAPTURE=1.

func parseLogFile(t *testing.T, name string) *Log {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "logs", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := ParseLog(f)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParseLogCaptured(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file         string
		cipher, auth string
		tunMTU       int
		warnings     int
	}{
		{"default-server.log", "AES-256-GCM", "", 1500, 0},
		{"default-client.log", "AES-256-GCM", "", 1500, 0},
		{"aes128gcm-client.log", "AES-128-GCM", "", 1500, 0},
		{"chacha20-server.log", "CHACHA20-POLY1305", "", 1500, 0},
		{"aes256cbc-server.log", "AES-256-CBC", "SHA256", 1500, 0},
		{"aes256cbc-client.log", "AES-256-CBC", "SHA256", 1500, 0},
		{"none-server.log", "none", "none", 1500, 3},
		{"none-client.log", "none", "none", 1500, 3},
		{"jumbo-server.log", "AES-256-GCM", "", 9000, 0},
		{"jumbo-client.log", "AES-256-GCM", "", 9000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			l := parseLogFile(t, tt.file)
			if l.Version != "2.6.14" || !strings.HasPrefix(l.VersionLine, "OpenVPN 2.6.14 x86_64-pc-linux-gnu") {
				t.Errorf("version %q / %q", l.Version, l.VersionLine)
			}
			if !reflect.DeepEqual(l.Features, []string{"SSL (OpenSSL)", "LZO", "LZ4", "EPOLL", "PKCS11", "MH/PKTINFO", "AEAD", "DCO"}) {
				t.Errorf("features %q", l.Features)
			}
			if !strings.HasPrefix(l.Libraries, "OpenSSL 3.0") {
				t.Errorf("libraries %q", l.Libraries)
			}
			if l.DCOVersion != "N/A" {
				t.Errorf("DCO version %q", l.DCOVersion)
			}
			if l.DataCipher != tt.cipher || l.DataAuth != tt.auth {
				t.Errorf("data channel %q/%q, want %q/%q", l.DataCipher, l.DataAuth, tt.cipher, tt.auth)
			}
			if l.TunMTU != tt.tunMTU || !strings.HasPrefix(l.TunDev, "ovpnperf-") {
				t.Errorf("tun %s MTU %d, want %d", l.TunDev, l.TunMTU, tt.tunMTU)
			}
			if len(l.SocketBuffers) == 0 || l.SocketBuffers[0].RecvBefore == 0 || l.SocketBuffers[0].SendAfter == 0 {
				t.Errorf("socket buffers %+v", l.SocketBuffers)
			}
			if !l.Ready || !l.PeerConnected {
				t.Errorf("ready=%v peer=%v", l.Ready, l.PeerConnected)
			}
			if !strings.HasPrefix(l.ControlChannel, "TLSv1.3, cipher TLSv1.3 ") {
				t.Errorf("control channel %q", l.ControlChannel)
			}
			if !strings.HasPrefix(l.PushReply, "PUSH_REPLY,") || !strings.Contains(l.PushReply, "tun-mtu "+strconv.Itoa(tt.tunMTU)) {
				t.Errorf("push reply %q", l.PushReply)
			}
			if len(l.Errors) != 0 {
				t.Errorf("errors %q", l.Errors)
			}
			if len(l.Warnings) != tt.warnings {
				t.Errorf("%d warnings, want %d: %q", len(l.Warnings), tt.warnings, l.Warnings)
			}
			if l.Exit != "SIGTERM[hard,] received, process exiting" {
				t.Errorf("exit %q", l.Exit)
			}
			if len(l.Compression) != 0 {
				t.Errorf("compression %q", l.Compression)
			}
		})
	}
}

func TestParseLogFailure(t *testing.T) {
	t.Parallel()
	l := parseLogFile(t, "bfcbc-nolegacy-server.log")
	if l.Ready {
		t.Error("ready in a failed start")
	}
	want := []string{"Unsupported cipher in --data-ciphers: BF-CBC", "Options error: --data-ciphers list contains unsupported ciphers or is too long."}
	if !reflect.DeepEqual(l.Errors, want) {
		t.Errorf("errors %q, want %q", l.Errors, want)
	}
}

// Lines from a verb 4 run with compression and pushed buffers (captured by
// hand from OpenVPN 2.6.14 on the same host), for the fields verb 3 lacks.
func TestParseLogVerb4Lines(t *testing.T) {
	t.Parallel()
	in := `2026-11-22 02:16:10 us=212200 Data Channel MTU parms [ mss_fix:0 max_frag:0 tun_mtu:1500 tun_max_mtu:1600 headroom:136 payload:1768 tailroom:562 ET:0 ]
2026-11-22 02:16:10 us=212218 Socket Buffers: R=[212992->786432] S=[212992->786432]
2026-11-22 02:16:10 us=513828 198.51.100.3:53921 LZ4v2 compression initializing
2026-11-22 02:16:10 WARNING: Compression for sending and receiving enabled. Compression has been used in the past to break encryption. Allowing compression allows attacks that break encryption. Using "--allow-compression yes" is strongly discouraged for common usage. See --compress in the manual page for more information 
2026-11-22 02:16:10 us=517448 ovpnperf client/198.51.100.3:53921 Outgoing Data Channel: Cipher 'AES-256-GCM' initialized with 256 bit key
2026-11-22 02:16:10 us=517658 Socket Buffers: R=[212992->212992] S=[212992->786432]
2026-11-22 02:13:58 Note: Kernel support for ovpn-dco missing, disabling data channel offload.
`
	l, err := ParseLog(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if l.MTUParms["tun_max_mtu"] != 1600 || l.MTUParms["payload"] != 1768 || len(l.MTUParms) != 8 {
		t.Errorf("MTU parms %v", l.MTUParms)
	}
	if want := []SocketBuffers{{212992, 786432, 212992, 786432}, {212992, 212992, 212992, 786432}}; !reflect.DeepEqual(l.SocketBuffers, want) {
		t.Errorf("socket buffers %v", l.SocketBuffers)
	}
	if len(l.Compression) != 2 {
		t.Errorf("compression %q", l.Compression)
	}
	if l.DataCipher != "" {
		t.Errorf("Outgoing line taken as the negotiated cipher: %q", l.DataCipher)
	}
	if !strings.Contains(l.DCODisabled, "ovpn-dco missing") {
		t.Errorf("DCO disabled %q", l.DCODisabled)
	}
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "openvpn-version.txt"))
	if err != nil {
		t.Fatal(err)
	}
	v := ParseVersion(string(b))
	if v.Version != "2.6.14" || v.DCOVersion != "N/A" || v.DCO() || len(v.Features) != 8 || !strings.HasPrefix(v.Libraries, "OpenSSL") {
		t.Errorf("%+v", v)
	}
	if (Version{DCOVersion: "2.0.0"}).DCO() != true {
		t.Error("DCO version 2.0.0 not taken as available")
	}
}

func FuzzParseLog(f *testing.F) {
	f.Add("2026-11-22 02:13:58 Data Channel: cipher 'AES-256-GCM', peer-id: 0\n")
	f.Add("Socket Buffers: R=[1->2] S=[3->4]\nData Channel MTU parms [ a:1 b: :2 ]\n")
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := ParseLog(strings.NewReader(s)); err != nil && !strings.Contains(err.Error(), "too long") {
			t.Fatal(err)
		}
	})
}
