package rules

import (
	"strings"
	"testing"
	"time"
)

func TestSocketBuffers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		p           Path
		tun         int
		size, floor int
		undecided   bool
	}{
		{"udp long path", Path{Proto: "udp", RateBitsPerSec: 100e6, RTT: 300 * time.Millisecond}, 1500, 0, 0, false},
		{"udp jumbo", Path{Proto: "udp"}, 9000, JumboSockBuf, 0, false},
		{"tcp 20mbit 200ms", Path{Proto: "tcp", RateBitsPerSec: 20e6, RTT: 200 * time.Millisecond}, 1500, 0, 500000, false},
		{"tcp beyond autotuning", Path{Proto: "tcp", RateBitsPerSec: 1e9, RTT: 300 * time.Millisecond}, 1500, 0, 37500000, true},
		{"tcp no path", Path{Proto: "tcp"}, 9000, 0, 0, false},
	} {
		b := SocketBuffers(c.p, c.tun)
		if b.Size != c.size || b.Floor != c.floor || (len(b.Undecided) > 0) != c.undecided || b.Why == "" {
			t.Errorf("%s: %+v", c.name, b)
		}
	}
}

func TestProtection(t *testing.T) {
	t.Parallel()
	rules := func(c Crypto) string {
		var out []string
		for _, p := range Protection(c) {
			out = append(out, p.Directive+":"+p.Rule+":"+p.Severity)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		in   Crypto
		want string
	}{
		{Crypto{Mode: StaticKey, Cipher: "none", Auth: "none"}, "cipher:no-encryption:error auth:no-authentication:error"},
		{Crypto{Mode: StaticKey, Auth: "none"}, "auth:no-authentication:error"}, // BF-CBC without HMAC
		{Crypto{Mode: PeerToPeerTLS, Cipher: "none"}, "cipher:no-encryption:error"},
		{Crypto{Mode: ClientServer, Cipher: "none"}, "cipher:no-encryption:warning"},
		{Crypto{Mode: ClientServer, Cipher: "none", DataCiphers: "none"}, "data-ciphers:no-encryption:error"},
		{Crypto{Mode: ClientServer, Fallback: "none"}, "data-ciphers-fallback:no-encryption:error"},
		{Crypto{Mode: ClientServer, Auth: "none"}, ""}, // AEAD only: --auth ignored
		{Crypto{Mode: ClientServer, Auth: "none", DataCiphers: "AES-256-GCM:AES-128-CBC"}, "auth:no-authentication:error"},
		{Crypto{Mode: ClientServer, OldPeerSigns: []string{"comp-lzo"}}, ":old-peer-cipher:info"},
		{Crypto{Mode: ClientServer, OldPeerSigns: []string{"comp-lzo"}, DataCiphers: "AES-256-GCM:BF-CBC"}, ""},
		{Crypto{Mode: ClientServer, Cipher: "AES-256-CBC", OldPeerSigns: []string{"comp-lzo"}}, ""},
	} {
		if got := rules(c.in); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.in, got, c.want)
		}
	}
	for _, p := range Protection(Crypto{Mode: StaticKey, Cipher: "none"}) {
		// Protection's reason carries the one sentence, OuterLayer, on
		// the setup where no encryption can be meant.
		if !strings.Contains(p.Reason, OuterLayer) {
			t.Errorf("reason does not name the outer layer: %s", p.Reason)
		}
	}
}

func TestBufferAfterDrops(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		got  int
		want string
	}{
		{32768, "rcvbuf 4194304"},   // rcvbuf 16384, doubled by the kernel
		{425984, "rcvbuf 4194304"},  // the stock 212992, doubled
		{8388608, "rcvbuf 8388608"}, // 4 MiB asked: twice that
		{0, "rcvbuf 4194304"},
	} {
		d, s := BufferAfterDrops(c.got)
		if d != c.want || !strings.HasSuffix(s, strings.TrimPrefix(d, "rcvbuf ")) {
			t.Errorf("BufferAfterDrops(%d) = %q, %q; want %q", c.got, d, s, c.want)
		}
	}
}
