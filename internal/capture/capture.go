// Package capture reads packet captures (pcap or pcapng, as tcpdump -w
// writes them) of a tunnel's outer packets and says what they show: the
// sizes of the packets on the wire, the IP fragments among them, the
// OpenVPN data packets of one port, and, for a TCP transport, the
// retransmitted segments. It also runs tcpdump for a few seconds (Run).
//
// A capture is untrusted input: every length is checked before use, and a
// file that is not a capture or ends inside a packet is an error that says
// so (ErrNotCapture, ErrTruncated).
package capture

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"sort"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Schema names the JSON document of `ovpnperf analyze --json`.
const Schema = "ovpnperf/capture/v1"

// ErrNotCapture: the file is neither pcap nor pcapng.
var ErrNotCapture = errors.New("not a pcap or pcapng capture")

// ErrTruncated: the file ends inside a packet record.
var ErrTruncated = errors.New("the capture is truncated (it ends inside a packet)")

// Bucket is one bar of the size histogram: IP packets of LoBytes to
// HiBytes (inclusive).
type Bucket struct {
	LoBytes int `json:"lo_bytes"`
	HiBytes int `json:"hi_bytes"`
	Packets int `json:"packets"`
}

// bucketEdges are the histogram's upper bounds: 100-byte steps up to the
// usual MTU, then jumbo frames, the largest IP packet, and IPv6
// jumbograms (RFC 2675: up to 2^32-1 bytes of payload after the header).
var bucketEdges = []int{99, 199, 299, 399, 499, 599, 699, 799, 899, 999, 1099, 1199, 1299, 1399, 1499, 1500, 9000, 65535, 40 + 1<<32 - 1}

// Analysis is what a capture shows.
type Analysis struct {
	Schema string `json:"schema"`
	// LinkType is the capture's link layer, e.g. "Ethernet"; a pcapng
	// capture of interfaces with different link layers names each,
	// separated by ", " (every packet is read with its interface's).
	LinkType string `json:"link_type"`
	// Packets is every record; IPPackets those with IPv4 or IPv6.
	Packets   int `json:"packets"`
	IPPackets int `json:"ip_packets"`
	// IPBytes sums the IP packets' lengths (their headers' total length).
	IPBytes uint64 `json:"ip_bytes"`
	// Sizes counts IP packets by their length on the wire, in bytes.
	Sizes     map[int]int `json:"sizes"`
	Histogram []Bucket    `json:"histogram"`
	// Fragments are IP fragments (IPv4 MF/offset, IPv6 fragment header);
	// FragmentedDatagrams the datagrams they belong to.
	Fragments           int `json:"fragments"`
	FragmentedDatagrams int `json:"fragmented_datagrams"`
	// MaxFragmentBytes is the largest fragment that has more after it:
	// the sender cut it as large as its path MTU allowed.
	MaxFragmentBytes int `json:"max_fragment_bytes,omitempty"`
	// Port, when not 0, is the OpenVPN port the following figures are for.
	Port uint16 `json:"port,omitempty"`
	// Datagrams are the UDP datagrams from or to Port (fragments counted
	// once); DataPackets those that carry OpenVPN data (opcodes P_DATA_V1
	// and P_DATA_V2); DatagramBytes their IP length once reassembled.
	Datagrams     int    `json:"datagrams"`
	DataPackets   int    `json:"data_packets"`
	DatagramBytes uint64 `json:"datagram_bytes"`
	// DatagramsToPort and DatagramsFromPort split Datagrams by direction:
	// to Port (towards the OpenVPN server) and from it.
	DatagramsToPort   int `json:"datagrams_to_port"`
	DatagramsFromPort int `json:"datagrams_from_port"`
	// MaxIPBytes is the largest IP packet.
	MaxIPBytes int `json:"max_ip_bytes"`
	// ICMPFragNeeded counts ICMP "fragmentation needed" errors (IPv4) and
	// ICMPv6 "packet too big": a router telling a sender its path MTU.
	ICMPFragNeeded int `json:"icmp_frag_needed"`
	// TCPSegments with payload from or to Port, and the retransmitted ones
	// (a payload sequence range seen before on the same connection).
	TCPSegments      int    `json:"tcp_segments"`
	TCPRetransmitted int    `json:"tcp_retransmitted"`
	TCPPayloadBytes  uint64 `json:"tcp_payload_bytes"`
	// The tables, bounded by limit: the fragmented datagrams
	// seen and the TCP segments seen (by connection and sequence number),
	// each kept as a 64-bit hash of its key (seeded per analysis: two keys
	// share one with a chance of about n²/2⁶⁵, 5·10⁻⁷ at the bound) so that
	// an entry takes a few bytes, not the addresses' 40.
	seed      maphash.Seed
	fragments map[uint64]struct{}
	segments  map[uint64]struct{}
	// limit bounds each table (MaxTableEntries; smaller in tests).
	limit int
	// tooLarge names the table that passed its bound.
	tooLarge string
}

type fragKey struct {
	src, dst [16]byte
	id       uint32
}

type flowKey struct {
	src, dst [16]byte
	sport    uint16
	dport    uint16
}

type segKey struct {
	flow flowKey
	seq  uint32
}

// MaxTableEntries bounds each table Analyze keeps while it reads (the
// distinct fragmented datagrams, the distinct TCP segments of the port's
// connections, the distinct packet sizes): a capture that needs more is
// refused with ErrTooLarge instead of taking memory in proportion to it.
const MaxTableEntries = 1 << 22

// ErrTooLarge: the capture holds more distinct datagrams, segments or
// sizes than Analyze keeps track of (MaxTableEntries).
var ErrTooLarge = errors.New("the capture is too large to analyse")

// Analyze reads a pcap or pcapng capture. port, when not 0, selects the
// OpenVPN traffic for the datagram, data-packet and TCP figures.
// A capture that ends inside a packet returns what was read before it
// with an error wrapping ErrTruncated; a damaged one (ErrCorrupt), one
// that is not a capture (ErrNotCapture) or one past the tables' bounds
// (ErrTooLarge) returns no analysis.
func Analyze(r io.Reader, port uint16) (*Analysis, error) {
	return analyze(r, port, MaxTableEntries)
}

// analyze is Analyze with each table bounded by limit entries.
func analyze(r io.Reader, port uint16, limit int) (*Analysis, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("%w: %d bytes", ErrNotCapture, len(magic))
	}
	var rr recordReader
	switch m := binary.BigEndian.Uint32(magic); m {
	case ngSHB:
		ng, err := newNgReader(br)
		if err != nil {
			return nil, err
		}
		rr = ng
	case 0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1: // µs and ns pcap, either byte order
		p, err := newPcapReader(br)
		if err != nil {
			return nil, err
		}
		rr = p
	default:
		return nil, fmt.Errorf("%w: it starts with %x", ErrNotCapture, magic)
	}
	a := &Analysis{Schema: Schema, Sizes: map[int]int{}, Port: port, limit: limit,
		seed: maphash.MakeSeed(), fragments: map[uint64]struct{}{}, segments: map[uint64]struct{}{}}
	for {
		rec, err := rr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, ErrTruncated) {
				// What was read so far comes back too: a capture stopped
				// while writing keeps what it has for callers that want it.
				a.finish(rr.linkTypes())
				return a, err
			}
			return nil, err
		}
		a.Packets++
		a.add(gopacket.NewPacket(rec.data, rec.linkType, gopacket.DecodeOptions{Lazy: true, NoCopy: true}), rec)
		if a.tooLarge != "" {
			return nil, fmt.Errorf("%w: after %d packets, more than %d %s; analyze keeps at most that many: split the capture", ErrTooLarge, a.Packets, a.limit, a.tooLarge)
		}
	}
	a.finish(rr.linkTypes())
	return a, nil
}

func (a *Analysis) finish(lts []layers.LinkType) {
	var names []string
	for _, lt := range lts {
		names = append(names, lt.String())
	}
	a.LinkType = strings.Join(names, ", ")
	a.FragmentedDatagrams = len(a.fragments)
	a.Histogram = histogram(a.Sizes)
	for s := range a.Sizes {
		a.MaxIPBytes = max(a.MaxIPBytes, s)
	}
}

func (a *Analysis) add(pkt gopacket.Packet, rec record) {
	var (
		proto   layers.IPProtocol
		payload []byte
		length  int
		first   = true
		frag    bool
		src     [16]byte
		dst     [16]byte
		extra   int // bytes a reassembly would not keep (a later fragment's IP header)
		id      uint32
	)
	switch {
	case pkt.Layer(layers.LayerTypeIPv4) != nil:
		ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		length, proto, payload = int(ip.Length), ip.Protocol, ip.Payload
		if len(ip.Contents) >= 4 && ip.Contents[2] == 0 && ip.Contents[3] == 0 {
			// Total length 0: a segmentation-offload super-packet
			// captured on its sender (up to 64 KiB and more). Its length
			// is the record's packet length after the link header, not
			// the bytes captured of it.
			length = rec.origLen - (len(rec.data) - len(ip.Contents) - len(ip.Payload))
		}
		copy(src[:], ip.SrcIP.To16())
		copy(dst[:], ip.DstIP.To16())
		id = uint32(ip.Id)
		frag = ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset > 0
		if ip.Flags&layers.IPv4MoreFragments != 0 {
			a.MaxFragmentBytes = max(a.MaxFragmentBytes, length)
		}
		first = ip.FragOffset == 0
		extra = int(ip.IHL) * 4
	case pkt.Layer(layers.LayerTypeIPv6) != nil:
		ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		length, proto, payload = 40+int(ip.Length), ip.NextHeader, ip.Payload
		if ip.Length == 0 {
			// A jumbogram (RFC 2675): its length is in the hop-by-hop
			// header's jumbo payload option.
			length = 40 + jumboLength(ip)
		}
		copy(src[:], ip.SrcIP.To16())
		copy(dst[:], ip.DstIP.To16())
		if ip.HopByHop != nil {
			proto = ip.HopByHop.NextHeader
		}
		extra = 40
		if f, ok := pkt.Layer(layers.LayerTypeIPv6Fragment).(*layers.IPv6Fragment); ok {
			frag, first, id = true, f.FragmentOffset == 0, f.Identification
			if f.MoreFragments {
				a.MaxFragmentBytes = max(a.MaxFragmentBytes, length)
			}
			proto, payload = f.NextHeader, f.Payload
			extra += 8
		}
	default:
		return
	}
	a.IPPackets++
	a.IPBytes += uint64(length)
	if first && len(payload) >= 2 && (proto == layers.IPProtocolICMPv4 && payload[0] == layers.ICMPv4TypeDestinationUnreachable && payload[1] == layers.ICMPv4CodeFragmentationNeeded ||
		proto == layers.IPProtocolICMPv6 && payload[0] == layers.ICMPv6TypePacketTooBig) {
		a.ICMPFragNeeded++
	}
	if _, ok := a.Sizes[length]; !ok && len(a.Sizes) >= a.limit {
		a.tooLarge = "distinct packet sizes"
		return
	}
	a.Sizes[length]++
	if frag {
		a.Fragments++
		k := maphash.Comparable(a.seed, fragKey{src, dst, id})
		if _, ok := a.fragments[k]; !ok && len(a.fragments) >= a.limit {
			a.tooLarge = "fragmented datagrams"
			return
		}
		a.fragments[k] = struct{}{}
	}
	if a.Port == 0 && !first {
		return
	}
	switch proto {
	case layers.IPProtocolUDP:
		if !first {
			// A later fragment of a datagram counted with its first one.
			if a.Port != 0 {
				a.DatagramBytes += uint64(length - extra)
			}
			return
		}
		if len(payload) < 8 {
			return
		}
		sport, dport := binary.BigEndian.Uint16(payload), binary.BigEndian.Uint16(payload[2:])
		if a.Port != 0 && sport != a.Port && dport != a.Port {
			return
		}
		a.Datagrams++
		a.DatagramBytes += uint64(length)
		if a.Port != 0 && dport == a.Port {
			a.DatagramsToPort++
		} else if a.Port != 0 {
			a.DatagramsFromPort++
		}
		if len(payload) > 8 {
			if op := payload[8] >> 3; op == 6 || op == 9 {
				a.DataPackets++
			}
		}
	case layers.IPProtocolTCP:
		tcp, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok || len(tcp.Payload) == 0 {
			return
		}
		if a.Port != 0 && uint16(tcp.SrcPort) != a.Port && uint16(tcp.DstPort) != a.Port {
			return
		}
		a.TCPSegments++
		a.TCPPayloadBytes += uint64(len(tcp.Payload))
		seg := maphash.Comparable(a.seed, segKey{flowKey{src, dst, uint16(tcp.SrcPort), uint16(tcp.DstPort)}, tcp.Seq})
		if _, seen := a.segments[seg]; seen {
			a.TCPRetransmitted++
			return
		}
		if len(a.segments) >= a.limit {
			a.tooLarge = "distinct TCP segments"
			return
		}
		a.segments[seg] = struct{}{}
	}
}

// jumboLength is the payload length a jumbogram's hop-by-hop header
// gives (0 without a jumbo payload option).
func jumboLength(ip *layers.IPv6) int {
	if ip.HopByHop == nil {
		return 0
	}
	for _, o := range ip.HopByHop.Options {
		if o.OptionType == layers.IPv6HopByHopOptionJumbogram && len(o.OptionData) == 4 {
			return int(binary.BigEndian.Uint32(o.OptionData))
		}
	}
	return 0
}

func histogram(sizes map[int]int) []Bucket {
	var out []Bucket
	lo := 0
	for _, hi := range bucketEdges {
		n := 0
		for s, c := range sizes {
			if s >= lo && s <= hi {
				n += c
			}
		}
		if n > 0 {
			out = append(out, Bucket{LoBytes: lo, HiBytes: hi, Packets: n})
		}
		lo = hi + 1
	}
	return out
}

// MeanDatagramBytes is the mean IP length of the port's UDP datagrams once
// reassembled (0 without any).
func (a *Analysis) MeanDatagramBytes() float64 {
	if a.Datagrams == 0 {
		return 0
	}
	return float64(a.DatagramBytes) / float64(a.Datagrams)
}

// WriteText writes the analysis for people.
func (a *Analysis) WriteText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d packets (%d IP, %d bytes), link type %s\n", a.Packets, a.IPPackets, a.IPBytes, a.LinkType)
	fmt.Fprintf(&b, "IP fragments: %d, of %d datagrams\n", a.Fragments, a.FragmentedDatagrams)
	if a.Port != 0 {
		fmt.Fprintf(&b, "port %d: %d UDP datagrams (%d OpenVPN data packets, mean %.0f bytes reassembled), %d TCP segments with data, %d retransmitted\n",
			a.Port, a.Datagrams, a.DataPackets, a.MeanDatagramBytes(), a.TCPSegments, a.TCPRetransmitted)
	} else {
		fmt.Fprintf(&b, "TCP segments with data: %d, retransmitted: %d\n", a.TCPSegments, a.TCPRetransmitted)
	}
	fmt.Fprintln(&b, "IP packet sizes:")
	for _, k := range a.Histogram {
		fmt.Fprintf(&b, "  %5d–%-5d bytes %8d\n", k.LoBytes, k.HiBytes, k.Packets)
	}
	var top []int
	for s := range a.Sizes {
		top = append(top, s)
	}
	sort.Slice(top, func(i, j int) bool {
		if a.Sizes[top[i]] != a.Sizes[top[j]] {
			return a.Sizes[top[i]] > a.Sizes[top[j]]
		}
		return top[i] < top[j]
	})
	if len(top) > 5 {
		top = top[:5]
	}
	if len(top) > 0 {
		fmt.Fprint(&b, "most frequent sizes:")
		for _, s := range top {
			fmt.Fprintf(&b, " %d B ×%d", s, a.Sizes[s])
		}
		fmt.Fprintln(&b)
	}
	_, err := w.Write(b.Bytes())
	return err
}
