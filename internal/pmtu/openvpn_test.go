package pmtu

import (
	"strings"
	"testing"
)

var (
	udp4 = Transport{Proto: "udp", Family: IPv4}
	udp6 = Transport{Proto: "udp", Family: IPv6}
	tcp4 = Transport{Proto: "tcp", Family: IPv4}
	tcp6 = Transport{Proto: "tcp", Family: IPv6}
)

// Overheads from docs/openvpn-facts.md#per-packet-overhead, outer headers
// included: UDP 8, TCP 20 (+2 length), IPv4 20, IPv6 40.
func TestOverheadFacts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dc       DataChannel
		tr       Transport
		min, max int // over all inner sizes (CBC padding varies)
	}{
		{DataChannel{Cipher: "AES-256-GCM"}, udp4, 52, 52}, // the facts page's example
		{DataChannel{}, udp4, 52, 52},                      // default cipher
		{DataChannel{Cipher: "AES-128-GCM"}, udp6, 72, 72},
		{DataChannel{Cipher: "CHACHA20-POLY1305"}, udp4, 52, 52},
		{DataChannel{Cipher: "AES-256-GCM", Auth: "SHA512"}, udp4, 52, 52}, // auth ignored for AEAD
		{DataChannel{Cipher: "AES-256-GCM"}, tcp4, 24 + 2 + 40, 24 + 2 + 40},
		{DataChannel{Cipher: "AES-256-GCM"}, tcp6, 24 + 2 + 60, 24 + 2 + 60},
		{DataChannel{Cipher: "AES-256-CBC"}, udp4, 45 + 28, 60 + 28}, // HMAC-SHA1 default
		{DataChannel{Cipher: "AES-256-CBC", Auth: "SHA256"}, udp4, 57 + 28, 72 + 28},
		{DataChannel{Cipher: "AES-128-CBC", Auth: "SHA256"}, tcp6, 57 + 62, 72 + 62},
		{DataChannel{Cipher: "none", Auth: "none"}, udp4, 8 + 28, 8 + 28},
		{DataChannel{Cipher: "AES-256-GCM", Compress: "lzo"}, udp4, 53, 53},
		{DataChannel{Cipher: "AES-256-GCM", Compress: "stub-v2"}, udp4, 52, 52},
		{DataChannel{Cipher: "AES-256-GCM", Fragment: true}, udp4, 56, 56},
		{DataChannel{Cipher: "BF-CBC"}, udp4, 4 + 20 + 8 + 4 + 1 + 28, 4 + 20 + 8 + 4 + 8 + 28},
	} {
		lo, hi := 1<<30, 0
		for n := 1; n <= 1500; n++ {
			o, err := c.dc.Overhead(c.tr, n)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi = min(lo, o), max(hi, o)
		}
		if lo != c.min || hi != c.max {
			t.Errorf("%+v %v: overhead %d–%d, want %d–%d", c.dc, c.tr, lo, hi, c.min, c.max)
		}
	}
}

// "mssfix 1492 mtu → inner MSS 1400 (IPv4), 1380 (IPv6)" for default GCM
// over IPv4 UDP, and the same frame arithmetic for the other modes.
func TestMSS(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dc     DataChannel
		tr     Transport
		value  int
		encap  bool
		v4, v6 int
	}{
		{DataChannel{Cipher: "AES-256-GCM"}, udp4, 1492, true, 1400, 1380},
		{DataChannel{Cipher: "AES-256-GCM"}, udp6, 1492, true, 1380, 1360},
		{DataChannel{Cipher: "AES-256-GCM"}, udp4, 1400, true, 1308, 1288},
		{DataChannel{Cipher: "AES-256-GCM"}, udp4, 1450, false, 1386, 1366}, // 2.5-style value, no outer headers
		{DataChannel{Cipher: "AES-256-GCM"}, tcp4, 1492, true, 1492 - 40 - 26 - 40, 1492 - 40 - 26 - 60},
		// CBC: target rounded down to the block, minus one pad byte, minus
		// the encrypted packet-id. 1492-28-40 = 1424 → 1423 - 4 - 40.
		{DataChannel{Cipher: "AES-256-CBC"}, udp4, 1492, true, 1379, 1359},
		// SHA256: 1492-28-52 = 1412 → 1408-1 = 1407 - 4 - 40.
		{DataChannel{Cipher: "AES-256-CBC", Auth: "SHA256"}, udp4, 1492, true, 1363, 1343},
	} {
		v4, err := c.dc.MSS(c.tr, c.value, c.encap, false)
		if err != nil {
			t.Fatal(err)
		}
		v6, _ := c.dc.MSS(c.tr, c.value, c.encap, true)
		if v4 != c.v4 || v6 != c.v6 {
			t.Errorf("%+v %v mssfix %d (encap %v): MSS %d/%d, want %d/%d", c.dc, c.tr, c.value, c.encap, v4, v6, c.v4, c.v6)
		}
	}
}

// The MSS that OpenVPN announces makes full-size segments fit the path
// exactly: one more byte would not fit (for every cipher and transport).
func TestMSSFitsPathExactly(t *testing.T) {
	t.Parallel()
	for _, cipher := range Ciphers() {
		for _, tr := range []Transport{udp4, udp6, tcp4, tcp6} {
			dc := DataChannel{Cipher: cipher}
			f, _ := dc.frame(tr)
			for _, path := range []int{1280, 1400, 1492, 1500} {
				mss, _ := dc.MSS(tr, path, true, false)
				if got := f.OuterSize(mss + 40); got > path {
					t.Errorf("%s %v path %d: MSS %d makes %d-byte outer packets", cipher, tr, path, mss, got)
				}
				if got := f.OuterSize(mss + 41); got <= path {
					t.Errorf("%s %v path %d: MSS %d is not the largest (MSS+1 makes %d)", cipher, tr, path, mss, got)
				}
				tun, _ := dc.MaxTunMTU(tr, path)
				if f.OuterSize(tun) > path || f.OuterSize(tun+1) <= path {
					t.Errorf("%s %v path %d: MaxTunMTU %d is not the largest that fits", cipher, tr, path, tun)
				}
			}
		}
	}
}

func TestTranslate(t *testing.T) {
	t.Parallel()
	dc := DataChannel{Cipher: "AES-256-GCM"}
	for _, c := range []struct {
		tr        Transport
		path      int
		blackhole bool
		want      Translation
		advice    string
	}{
		{udp4, 1400, false, Translation{Transport: "udp", Family: "ipv4", Measured: true, PathMTU: 1400, Overhead: 52,
			MaxTunMTU: 1348, MSSFix: "mssfix 1400 mtu", MSSFix25: "mssfix 1372", InnerMSS4: 1308, InnerMSS6: 1288}, "set mssfix 1400 mtu"},
		{udp4, 1400, true, Translation{Transport: "udp", Family: "ipv4", Measured: true, PathMTU: 1400, Overhead: 52,
			MaxTunMTU: 1348, MSSFix: "mssfix 1400 mtu", MSSFix25: "mssfix 1372", InnerMSS4: 1308, InnerMSS6: 1288,
			FragmentNeeded: true, Fragment: "fragment 1400 mtu"}, "cannot learn this path MTU"},
		{udp4, 1492, false, Translation{Transport: "udp", Family: "ipv4", Measured: true, PathMTU: 1492, Overhead: 52,
			MaxTunMTU: 1440, MSSFix: "mssfix 1492 mtu", MSSFix25: "mssfix 1464", InnerMSS4: 1400, InnerMSS6: 1380, DefaultMSSFixOK: true}, "default mssfix 1492 mtu is fine"},
		{udp6, 1400, false, Translation{Transport: "udp", Family: "ipv6", Measured: true, PathMTU: 1400, Overhead: 72,
			MaxTunMTU: 1328, MSSFix: "mssfix 1400 mtu", MSSFix25: "mssfix 1352", InnerMSS4: 1288, InnerMSS6: 1268}, ""},
		{tcp4, 1400, true, Translation{Transport: "tcp", Family: "ipv4", Measured: true, PathMTU: 1400, Overhead: 66,
			MaxTunMTU: 1334, MSSFix: "mssfix 1400 mtu", MSSFix25: "mssfix 1360", InnerMSS4: 1294, InnerMSS6: 1274}, "outer TCP connection itself stalls"},
		{udp4, 9000, false, Translation{Transport: "udp", Family: "ipv4", Measured: true, PathMTU: 9000, Overhead: 52,
			MaxTunMTU: 8948, TunMTU1500Fits: true, MSSFix: "mssfix 9000 mtu", MSSFix25: "mssfix 8972", InnerMSS4: 8908, InnerMSS6: 8888, DefaultMSSFixOK: true}, "defaults fit"},
	} {
		got, err := dc.Translate(c.tr, c.path, c.blackhole, true)
		if err != nil {
			t.Fatal(err)
		}
		advice := got.Advice
		got.Advice = ""
		if got != c.want {
			t.Errorf("%v path %d blackhole %v:\n got %+v\nwant %+v", c.tr, c.path, c.blackhole, got, c.want)
		}
		if !strings.Contains(advice, c.advice) {
			t.Errorf("%v path %d: advice %q lacks %q", c.tr, c.path, advice, c.advice)
		}
	}
}

func TestDataChannelErrors(t *testing.T) {
	t.Parallel()
	for _, dc := range []DataChannel{{Cipher: "ROT13"}, {Cipher: "AES-256-CBC", Auth: "MD4X"}, {Compress: "zip"}} {
		if _, err := dc.Overhead(udp4, 100); err == nil {
			t.Errorf("%+v: no error", dc)
		}
	}
	if _, err := (DataChannel{Fragment: true}).Overhead(tcp4, 100); err == nil {
		t.Error("fragment over TCP accepted")
	}
}
