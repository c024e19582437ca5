package overhead

import "testing"

// The published per-packet figures (docs/openvpn-facts.md#per-packet-overhead, OpenVPN's mtu.c
// comments) for inner packets of 1000 bytes; the capture test checks the
// model against real tunnels.
func TestOverheadTable(t *testing.T) {
	t.Parallel()
	udp4 := Transport{Proto: "udp"}
	udp6 := Transport{Proto: "udp", IPv6: true}
	tcp4 := Transport{Proto: "tcp"}
	for _, c := range []struct {
		dc    DataChannel
		tr    Transport
		inner int
		want  int
	}{
		{DataChannel{Cipher: "AES-256-GCM"}, udp4, 1000, 52},
		{DataChannel{Cipher: "AES-128-GCM"}, udp6, 1000, 72},
		{DataChannel{Cipher: "CHACHA20-POLY1305"}, tcp4, 1000, 24 + 2 + 40},
		{DataChannel{Cipher: "none", Auth: "none"}, udp4, 1000, 36},
		{DataChannel{Cipher: "none"}, udp4, 1000, 56}, // HMAC-SHA1 kept
		// CBC: 4 op + 32 HMAC + 16 IV + pad(4 pid + n) to 16.
		{DataChannel{Cipher: "AES-256-CBC", Auth: "SHA256"}, udp4, 1000, 28 + 52 + 1008 - 1000},
		{DataChannel{Cipher: "AES-256-CBC", Auth: "SHA256"}, udp4, 1004, 28 + 52 + 1024 - 1004},
		{DataChannel{Cipher: "AES-256-CBC", Auth: "SHA256"}, udp4, 1003, 28 + 52 + 1008 - 1003},
		{DataChannel{Cipher: "AES-256-GCM", Fragment: true}, udp4, 1000, 56},
		{DataChannel{Cipher: "AES-256-GCM", Compress: "stub"}, udp4, 1000, 53},
		{DataChannel{Cipher: "AES-256-GCM", Compress: "stub-v2"}, udp4, 1000, 52},
		{DataChannel{Cipher: "AES-256-GCM", Opcode: PDataV1}, udp4, 1000, 49},
		{DataChannel{Cipher: "BF-CBC", Opcode: StaticKey}, udp4, 1000, 28 + 8 + 20 + 1016 - 1000}, // IV 8, HMAC-SHA1 20, pad(8 pid + n) to 8,
	} {
		f, err := New(c.dc, c.tr)
		if err != nil {
			t.Fatalf("%+v %v: %v", c.dc, c.tr, err)
		}
		if got := f.Overhead(c.inner); got != c.want {
			t.Errorf("%+v %v inner %d: overhead %d, want %d", c.dc, c.tr, c.inner, got, c.want)
		}
	}
}

// 2.6's default mssfix 1492 mtu gives MSS 1400 (IPv4) / 1380 (IPv6) with
// GCM over UDP/IPv4, as OpenVPN logs and the mtu recipe measured.
func TestDefaultMSS(t *testing.T) {
	t.Parallel()
	f, _ := New(DataChannel{}, Transport{Proto: "udp"})
	if m4, m6 := f.MSS(1492, true, false), f.MSS(1492, true, true); m4 != 1400 || m6 != 1380 {
		t.Fatalf("MSS %d/%d, want 1400/1380", m4, m6)
	}
	if got := f.MaxInner(1400); got != 1348 {
		t.Fatalf("MaxInner(1400) = %d, want 1348", got)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dc DataChannel
		tr Transport
	}{
		{DataChannel{Cipher: "ROT13"}, Transport{Proto: "udp"}},
		{DataChannel{Cipher: "AES-256-CBC", Auth: "MD0"}, Transport{Proto: "udp"}},
		{DataChannel{Fragment: true}, Transport{Proto: "tcp"}},
		{DataChannel{}, Transport{Proto: "sctp"}},
		{DataChannel{Compress: "zstd"}, Transport{Proto: "udp"}},
	} {
		if _, err := New(c.dc, c.tr); err == nil {
			t.Errorf("%+v %v: no error", c.dc, c.tr)
		}
	}
}
