package pmtu

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"
)

// The pcap files in testdata were captured on the client's interface of a
// lab with a 1400-byte bottleneck while `ovpnperf pmtu` ran (tcpdump
// --immediate-mode -s 256 -i c0 icmp / icmp6 without neighbour discovery):
//
//	lab-mtu1400-ipv4.pcap     pmtu 198.51.100.2
//	lab-mtu1400-ipv6.pcap     pmtu 2001:db8:5::2
//	lab-netunreach-ipv4.pcap  pmtu 203.0.113.99 (the router has no route)
//
// The prober's parser is fed the ICMP messages exactly as a raw socket
// delivers them (IPv4: Go strips the IP header; IPv6: the kernel never
// passes it).

// capturedPacket is one IP packet from a pcap file.
type capturedPacket struct {
	src, dst netip.Addr
	size     int    // whole IP packet on the wire
	icmp     []byte // the ICMP message, as captured (may be cut at the snap length)
}

// readPcap reads an Ethernet pcap file (classic format, either byte order).
func readPcap(t testing.TB, path string) []capturedPacket {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 {
		t.Fatalf("%s: too short for a pcap file", path)
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if binary.BigEndian.Uint32(b) == 0xa1b2c3d4 {
		bo = binary.BigEndian
	} else if bo.Uint32(b) != 0xa1b2c3d4 {
		t.Fatalf("%s: not a classic pcap file", path)
	}
	if lt := bo.Uint32(b[20:]); lt != 1 {
		t.Fatalf("%s: link type %d, want Ethernet", path, lt)
	}
	var out []capturedPacket
	for off := 24; off+16 <= len(b); {
		incl, orig := int(bo.Uint32(b[off+8:])), int(bo.Uint32(b[off+12:]))
		data := b[off+16 : off+16+incl]
		off += 16 + incl
		if len(data) < 14 {
			continue
		}
		var p capturedPacket
		p.size = orig - 14
		ip := data[14:]
		switch binary.BigEndian.Uint16(data[12:]) {
		case 0x0800:
			ihl := int(ip[0]&0x0f) * 4
			if ip[9] != 1 {
				continue
			}
			p.src, _ = netip.AddrFromSlice(ip[12:16])
			p.dst, _ = netip.AddrFromSlice(ip[16:20])
			p.icmp = ip[ihl:]
		case 0x86dd:
			if ip[6] != 58 {
				continue
			}
			p.src, _ = netip.AddrFromSlice(ip[8:24])
			p.dst, _ = netip.AddrFromSlice(ip[24:40])
			p.icmp = ip[40:]
		default:
			continue
		}
		out = append(out, p)
	}
	return out
}

// proberFor rebuilds the prober that sent the capture's echo requests: its
// id and cookie come from the first request.
func proberFor(t *testing.T, pkts []capturedPacket, client netip.Addr) (*rawProber, map[uint16]int) {
	t.Helper()
	sizes := map[uint16]int{} // seq → probe size
	var p *rawProber
	for _, pk := range pkts {
		if pk.src != client || (pk.icmp[0] != 8 && pk.icmp[0] != 128) {
			continue
		}
		if p == nil {
			p = &rawProber{fam: IPv4, dst: pk.dst, id: binary.BigEndian.Uint16(pk.icmp[4:])}
			if pk.dst.Is6() {
				p.fam = IPv6
			}
			copy(p.cookie[:], pk.icmp[8:16])
		}
		sizes[binary.BigEndian.Uint16(pk.icmp[6:])] = pk.size
	}
	if p == nil {
		t.Fatal("no echo request in the capture")
	}
	return p, sizes
}

func TestParseCaptured(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file           string
		client, router netip.Addr
	}{
		{"testdata/lab-mtu1400-ipv4.pcap", netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.1")},
		{"testdata/lab-mtu1400-ipv6.pcap", netip.MustParseAddr("2001:db8:c::2"), netip.MustParseAddr("2001:db8:c::1")},
	} {
		t.Run(c.file, func(t *testing.T) {
			pkts := readPcap(t, c.file)
			p, sizes := proberFor(t, pkts, c.client)
			answered := map[uint16]Answer{}
			for _, pk := range pkts {
				if pk.dst != c.client {
					continue
				}
				seq, a, ok := p.parse(pk.icmp, pk.src)
				if !ok {
					t.Errorf("ICMP type %d from %v not recognised as an answer", pk.icmp[0], pk.src)
					continue
				}
				if _, dup := answered[seq]; dup {
					t.Errorf("seq %d answered twice", seq)
				}
				answered[seq] = a
			}
			replies, tooBig := 0, 0
			for seq, size := range sizes {
				a, ok := answered[seq]
				switch {
				case !ok:
					t.Errorf("probe seq %d (%d bytes) has no answer in the capture", seq, size)
				case size <= 1400 && a.Outcome != Reply:
					t.Errorf("probe of %d bytes: %v, want reply", size, a.Outcome)
				case size > 1400 && (a.Outcome != TooBig || a.MTU != 1400 || a.From != c.router):
					t.Errorf("probe of %d bytes: %v MTU %d from %v, want too-big naming 1400 from %v", size, a.Outcome, a.MTU, a.From, c.router)
				case a.Outcome == Reply:
					replies++
				default:
					tooBig++
				}
			}
			t.Logf("%d probes: %d replies, %d too-big", len(sizes), replies, tooBig)
			if replies == 0 || tooBig == 0 {
				t.Errorf("capture lacks replies or errors")
			}
			// Another prober (other id, or same id and other cookie) must
			// not take these answers for its own.
			other := &rawProber{fam: p.fam, dst: p.dst, id: p.id + 1, cookie: p.cookie}
			otherCookie := &rawProber{fam: p.fam, dst: p.dst, id: p.id, cookie: p.cookie}
			otherCookie.cookie[0] ^= 0xff
			for _, pk := range pkts {
				if pk.dst != c.client {
					continue
				}
				if _, _, ok := other.parse(pk.icmp, pk.src); ok {
					t.Errorf("a prober with another id accepted %v from %v", pk.icmp[0], pk.src)
				}
				if _, _, ok := otherCookie.parse(pk.icmp, pk.src); ok {
					t.Errorf("a prober with another cookie accepted %v from %v", pk.icmp[0], pk.src)
				}
			}
		})
	}
}

func TestParseCapturedUnreachable(t *testing.T) {
	t.Parallel()
	client, router := netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.1")
	pkts := readPcap(t, "testdata/lab-netunreach-ipv4.pcap")
	p, _ := proberFor(t, pkts, client)
	n := 0
	for _, pk := range pkts {
		if pk.dst != client {
			continue
		}
		_, a, ok := p.parse(pk.icmp, pk.src)
		if !ok || a.Outcome != Unreachable || a.Detail != "network unreachable" || a.From != router {
			t.Errorf("got %v %+v, want unreachable 'network unreachable' from %v", ok, a, router)
		}
		n++
	}
	if n == 0 {
		t.Error("no ICMP errors in the capture")
	}
}

func TestChecksum(t *testing.T) {
	t.Parallel()
	// RFC 1071's example: the one's complement sum of these words is 0xddf2.
	if got := checksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); got != ^uint16(0xddf2) {
		t.Errorf("checksum = %#04x, want %#04x", got, ^uint16(0xddf2))
	}
	// A message with its checksum filled in sums to zero.
	p := &rawProber{fam: IPv4, id: 0x1234}
	msg := p.echo(7, 1400)
	if checksum(msg) != 0 || len(msg) != 1380 {
		t.Errorf("echo request: checksum over message %#04x (want 0), length %d (want 1380)", checksum(msg), len(msg))
	}
}

// FuzzParse feeds arbitrary bytes (a raw socket delivers whatever arrives)
// to both parsers; seeds are the captured answers.
func FuzzParse(f *testing.F) {
	for _, file := range []string{"testdata/lab-mtu1400-ipv4.pcap", "testdata/lab-mtu1400-ipv6.pcap", "testdata/lab-netunreach-ipv4.pcap"} {
		for _, pk := range readPcap(f, file) {
			f.Add(pk.icmp)
		}
	}
	v4 := &rawProber{fam: IPv4, dst: netip.MustParseAddr("198.51.100.2")}
	v6 := &rawProber{fam: IPv6, dst: netip.MustParseAddr("2001:db8:5::2")}
	from := netip.MustParseAddr("192.0.2.1")
	f.Fuzz(func(t *testing.T, b []byte) {
		v4.parse(b, from)
		v6.parse(b, from)
	})
}
