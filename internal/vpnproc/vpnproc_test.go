package vpnproc

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseFdinfoIff(t *testing.T) {
	if got := ParseFdinfoIff(read(t, "fdinfo_tun.txt")); got != "ovpnperf-c0" {
		t.Errorf("iff %q", got)
	}
	if got := ParseFdinfoIff([]byte("pos:\t0\nflags:\t02\n")); got != "" {
		t.Errorf("iff of a plain file %q", got)
	}
}

func TestParseSocketInode(t *testing.T) {
	if n, ok := ParseSocketInode("socket:[54321]"); !ok || n != 54321 {
		t.Errorf("%d %v", n, ok)
	}
	for _, s := range []string{"/dev/net/tun", "socket:[x]", "socket:[1", "anon_inode:[eventfd]"} {
		if _, ok := ParseSocketInode(s); ok {
			t.Errorf("%q parsed as a socket", s)
		}
	}
}

func TestParseNetTable(t *testing.T) {
	m, err := ParseNetTable(read(t, "udp.txt"), "udp", false)
	if err != nil {
		t.Fatal(err)
	}
	s := m[54321]
	if s.Drops != 9665 || s.Local != netip.MustParseAddrPort("10.0.0.2:1194") || s.Remote != netip.MustParseAddrPort("10.0.0.1:1194") {
		t.Errorf("%+v", s)
	}
	if m[54322].Drops != 0 || m[54322].Local.Port() != 5353 {
		t.Errorf("%+v", m[54322])
	}
	m6, err := ParseNetTable(read(t, "udp6.txt"), "udp", true)
	if err != nil {
		t.Fatal(err)
	}
	if s := m6[65432]; s.Local != netip.MustParseAddrPort("[::1]:1194") || s.Drops != 3 || !s.IPv6 {
		t.Errorf("%+v", s)
	}
	mt, err := ParseNetTable(read(t, "tcp.txt"), "tcp", false)
	if err != nil {
		t.Fatal(err)
	}
	if s := mt[777]; s.Proto != "tcp" || s.Remote.Port() != 1194 || s.Drops != 0 {
		t.Errorf("%+v", s)
	}
	if _, err := ParseNetTable([]byte("garbage\n"), "udp", false); err == nil {
		t.Error("no error for a file without the header")
	}
}

func TestParseSNMP(t *testing.T) {
	s, err := ParseSNMP(read(t, "snmp.txt"))
	if err != nil {
		t.Fatal(err)
	}
	a := s
	a.FragCreates += 10
	a.ReasmReqds += 4
	if d := a.Sub(s); d.FragCreates != 10 || d.ReasmReqds != 4 || d.RetransSegs != 0 {
		t.Errorf("%+v", d)
	}
	if _, err := ParseSNMP([]byte("Ip: Forwarding\nIp: 1\n")); err == nil {
		t.Error("no error without the fragment counters")
	}
}

func TestParseSKMemInfo(t *testing.T) {
	b := make([]byte, 9*4)
	for i, v := range []uint32{0, 32768, 0, 425984, 0, 0, 0, 0, 17} {
		binary.NativeEndian.PutUint32(b[4*i:], v)
	}
	r, s, d, ok, err := ParseSKMemInfo(b)
	if err != nil || r != 32768 || s != 425984 || d != 17 || !ok {
		t.Errorf("%d %d %d %v %v", r, s, d, ok, err)
	}
	if _, _, _, ok, err := ParseSKMemInfo(b[:8*4]); err != nil || ok {
		t.Errorf("8 values: ok %v err %v", ok, err)
	}
	if _, _, _, _, err := ParseSKMemInfo(b[:8]); err == nil {
		t.Error("no error for 8 bytes")
	}
}
