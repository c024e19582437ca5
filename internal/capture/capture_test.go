package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// ipv4 serializes an Ethernet frame with an IPv4 packet of payload, with
// the fragment fields given.
func ipv4(t testing.TB, proto layers.IPProtocol, id uint16, mf bool, offset uint16, payload []byte) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Id: id, Protocol: proto, FragOffset: offset,
		SrcIP: net.IPv4(192, 0, 2, 2), DstIP: net.IPv4(198, 51, 100, 2)}
	if mf {
		ip.Flags = layers.IPv4MoreFragments
	}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// udp is a UDP header and payload (no checksum) from port 1194 to 1194.
func udp(payload []byte) []byte {
	b := make([]byte, 8, 8+len(payload))
	b[0], b[1], b[2], b[3] = 0x04, 0xaa, 0x04, 0xaa
	n := 8 + len(payload)
	b[4], b[5] = byte(n>>8), byte(n)
	return append(b, payload...)
}

// sample writes a capture: one OpenVPN data datagram of 1492 bytes
// whole, one of 1500+ bytes in two fragments (1396 and 124 bytes), a TCP
// segment sent twice, and an ARP frame.
func sample(t testing.TB) []byte {
	var b bytes.Buffer
	w := pcapgo.NewWriter(&b)
	if err := w.WriteFileHeader(128, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	data := func(n int) []byte {
		p := make([]byte, n)
		p[0] = 9 << 3 // P_DATA_V2, key 0
		return p
	}
	write := func(frame []byte) {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: min(len(frame), 128), Length: len(frame)}
		if err := w.WritePacket(ci, frame[:ci.CaptureLength]); err != nil {
			t.Fatal(err)
		}
	}
	write(ipv4(t, layers.IPProtocolUDP, 1, false, 0, udp(data(1492-28))))
	whole := udp(data(1500 - 28))                                     // 1480 bytes of IP payload
	write(ipv4(t, layers.IPProtocolUDP, 2, true, 0, whole[:1376]))    // 1396 bytes
	write(ipv4(t, layers.IPProtocolUDP, 2, false, 172, whole[1376:])) // 124 bytes
	tcp := &layers.TCP{SrcPort: 1194, DstPort: 40000, Seq: 1000, ACK: true, Window: 100}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IPv4(198, 51, 100, 2), DstIP: net.IPv4(192, 0, 2, 2)}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv4}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(make([]byte, 60))); err != nil {
		t.Fatal(err)
	}
	write(buf.Bytes())
	write(buf.Bytes())
	write(append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06}, make([]byte, 28)...))
	return b.Bytes()
}

func TestAnalyze(t *testing.T) {
	t.Parallel()
	a, err := Analyze(bytes.NewReader(sample(t)), 1194)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]int{1492: 1, 1396: 1, 124: 1, 100: 2}
	for s, n := range want {
		if a.Sizes[s] != n {
			t.Errorf("size %d: %d packets, want %d (sizes %v)", s, a.Sizes[s], n, a.Sizes)
		}
	}
	if a.Packets != 6 || a.IPPackets != 5 || a.Fragments != 2 || a.FragmentedDatagrams != 1 || a.MaxFragmentBytes != 1396 {
		t.Errorf("%+v", a)
	}
	if a.Datagrams != 2 || a.DataPackets != 2 || a.DatagramBytes != 1492+1500 || a.MeanDatagramBytes() != 1496 {
		t.Errorf("datagrams %d, data %d, bytes %d", a.Datagrams, a.DataPackets, a.DatagramBytes)
	}
	if a.TCPSegments != 2 || a.TCPRetransmitted != 1 {
		t.Errorf("TCP %d segments, %d retransmitted", a.TCPSegments, a.TCPRetransmitted)
	}
	var text bytes.Buffer
	if err := a.WriteText(&text); err != nil || !bytes.Contains(text.Bytes(), []byte("IP fragments: 2, of 1 datagrams")) {
		t.Errorf("%v\n%s", err, text.String())
	}
}

func TestAnalyzeRefusesBadFiles(t *testing.T) {
	t.Parallel()
	good := sample(t)
	for _, c := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrNotCapture},
		{"text", []byte("this is not a capture at all\n"), ErrNotCapture},
		{"json", []byte(`{"schema": "ovpnperf/run/v2"}`), ErrNotCapture},
		{"header cut", good[:12], ErrTruncated},
		{"record cut", good[:len(good)-20], ErrTruncated},
		{"record header cut", good[:24+8], ErrTruncated},
	} {
		_, err := Analyze(bytes.NewReader(c.data), 0)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
}

// ngBlock is a little-endian pcapng block of typ around body (padded).
func ngBlock(typ uint32, body []byte) []byte {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	n := uint32(12 + len(body))
	b := binary.LittleEndian.AppendUint32(nil, typ)
	b = binary.LittleEndian.AppendUint32(b, n)
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, n)
}

// sampleNg is sample's packets in pcapng: a section, an Ethernet
// interface of snap length 128 and a raw-IP one, each packet in an
// enhanced packet block of the Ethernet interface, and a name
// resolution block between them.
func sampleNg(t testing.TB) []byte {
	shb := binary.LittleEndian.AppendUint32(nil, 0x1a2b3c4d)
	shb = binary.LittleEndian.AppendUint32(shb, 1) // version 1.0
	shb = binary.LittleEndian.AppendUint64(shb, ^uint64(0))
	out := ngBlock(0x0a0d0d0a, shb)
	out = append(out, ngBlock(1, []byte{1, 0, 0, 0, 128, 0, 0, 0})...)
	out = append(out, ngBlock(1, []byte{101, 0, 0, 0, 0, 0, 0, 0})...)
	r := bytes.NewReader(sample(t)[24:])
	for i := 0; ; i++ {
		var h [16]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			break
		}
		data := make([]byte, binary.LittleEndian.Uint32(h[8:]))
		io.ReadFull(r, data)
		body := binary.LittleEndian.AppendUint32(nil, 0)
		body = append(body, h[:8]...)
		body = append(body, h[8:16]...)
		out = append(out, ngBlock(6, append(body, data...))...)
		if i == 1 {
			out = append(out, ngBlock(4, make([]byte, 4))...)
		}
	}
	return out
}

// Every error Analyze returns is one of its kinds (what analyze exits 2
// for): a damaged file is never an unexplained failure.
func classified(err error) bool {
	for _, k := range []error{ErrNotCapture, ErrTruncated, ErrCorrupt, ErrTooLarge} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

func TestAnalyzePcapng(t *testing.T) {
	t.Parallel()
	want, err := Analyze(bytes.NewReader(sample(t)), 1194)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(bytes.NewReader(sampleNg(t)), 1194)
	if err != nil {
		t.Fatal(err)
	}
	if a.Packets != want.Packets || a.IPPackets != want.IPPackets || a.Fragments != want.Fragments || a.Datagrams != want.Datagrams ||
		a.TCPRetransmitted != want.TCPRetransmitted || a.LinkType != "Ethernet, Raw" {
		t.Errorf("pcapng: %+v\npcap: %+v", a, want)
	}
}

// The tables are bounded: past the bound (MaxTableEntries) of distinct
// sizes, fragmented datagrams or TCP segments the capture is refused, not
// held in memory.
func TestAnalyzeTablesBounded(t *testing.T) {
	t.Parallel()
	_, err := analyze(bytes.NewReader(sample(t)), 1194, 3) // 4 sizes
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "distinct packet sizes") {
		t.Errorf("error %v, want ErrTooLarge for the sizes", err)
	}
	if _, err := analyze(bytes.NewReader(sample(t)), 1194, 4); err != nil {
		t.Errorf("at the bound: %v", err)
	}
}

func FuzzAnalyze(f *testing.F) {
	f.Add(sample(f))
	f.Add([]byte{0xd4, 0xc3, 0xb2, 0xa1})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Analyze(bytes.NewReader(b), 1194)
		if err != nil && !classified(err) {
			t.Errorf("unclassified error %v", err)
		}
		if err == nil && (a.Fragments > a.IPPackets || a.IPPackets > a.Packets) {
			t.Errorf("%d fragments of %d IP packets of %d", a.Fragments, a.IPPackets, a.Packets)
		}
	})
}

// FuzzAnalyzePcapng fuzzes the pcapng reader: the seeds are pcapng files,
// and an input that lost its section header gets one back, so that the
// fuzzer spends its time in the blocks.
func FuzzAnalyzePcapng(f *testing.F) {
	ng := sampleNg(f)
	f.Add(ng)
	f.Add(ng[:len(ng)-7])
	f.Add(ng[28:])
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 || binary.BigEndian.Uint32(b) != 0x0a0d0d0a {
			b = append(append([]byte(nil), ng[:28]...), b...)
		}
		a, err := Analyze(bytes.NewReader(b), 1194)
		if err != nil && !classified(err) {
			t.Errorf("unclassified error %v", err)
		}
		if err == nil && (a.Fragments > a.IPPackets || a.IPPackets > a.Packets) {
			t.Errorf("%d fragments of %d IP packets of %d", a.Fragments, a.IPPackets, a.Packets)
		}
	})
}
