// Package overhead is ovpnperf's one model of the bytes OpenVPN 2.5/2.6 adds
// to each tunnelled packet, and of what tun-mtu, `mssfix … [mtu]` and
// `fragment` make of them. pmtu, the recipes and advise all ask it; nothing
// else computes overhead.
//
// The arithmetic follows OpenVPN 2.6 src/openvpn/mtu.c
// (frame_calculate_protocol_header_size, frame_calculate_payload_overhead),
// mss.c (frame_calculate_mssfix, adjust_payload_max_cbc, mss_fixup_ipv6),
// crypto.c (calculate_crypto_overhead: opcode/peer-id, packet-id, tag or
// HMAC+IV, CBC padding), fragment.h (4-byte fragment header) and comp.h
// (1-byte compression framing; the v2 framings add nothing unless the
// first payload byte needs escaping). It is checked byte for byte against
// tcpdump captures of real tunnels (TestCapturedOuterSizes).
//
//	outer IP | UDP, or TCP + 2-byte length | opcode (+peer-id) | AEAD: packet-id 4, tag 16, E(comp, frag, payload)
//	                                                           | CBC:  HMAC, IV, E(packet-id 4, comp, frag, payload, pad 1…block)
//	                                                           | none: HMAC?, packet-id 4, comp, frag, payload
package overhead

import (
	"fmt"
	"sort"
	"strings"
)

// cipherSpec is what a data-channel cipher adds to a packet.
type cipherSpec struct {
	aead  bool
	cbc   bool
	block int // CBC block size = IV size
	tag   int
}

// DefaultCipher is the data cipher two OpenVPN 2.6 peers negotiate
// without a data-ciphers line: the first of its default data-ciphers
// (AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305). DataChannel's zero Cipher
// is this one, and so is every command's --cipher left out.
const DefaultCipher = "AES-256-GCM"

var ciphers = map[string]cipherSpec{
	"AES-128-GCM":       {aead: true, tag: 16},
	"AES-192-GCM":       {aead: true, tag: 16},
	"AES-256-GCM":       {aead: true, tag: 16},
	"CHACHA20-POLY1305": {aead: true, tag: 16},
	"AES-128-CBC":       {cbc: true, block: 16},
	"AES-192-CBC":       {cbc: true, block: 16},
	"AES-256-CBC":       {cbc: true, block: 16},
	"CAMELLIA-128-CBC":  {cbc: true, block: 16},
	"CAMELLIA-256-CBC":  {cbc: true, block: 16},
	"ARIA-128-CBC":      {cbc: true, block: 16},
	"ARIA-256-CBC":      {cbc: true, block: 16},
	"BF-CBC":            {cbc: true, block: 8},
	"DES-EDE3-CBC":      {cbc: true, block: 8},
	"NONE":              {},
}

var hmacs = map[string]int{
	"NONE": 0, "SHA1": 20, "SHA224": 28, "SHA256": 32, "SHA384": 48, "SHA512": 64,
	"SHA512-224": 28, "SHA512-256": 32, "SHA3-256": 32, "SHA3-512": 64, "BLAKE2S256": 32,
}

// Ciphers lists the data-channel ciphers the model knows ("none" last).
func Ciphers() []string {
	var out []string
	for c := range ciphers {
		if c != "NONE" {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return append(out, "none")
}

// Opcode is the data-packet opcode form.
type Opcode int

// The opcode forms. Every 2.4+ peer in TLS mode negotiates P_DATA_V2.
const (
	PDataV2   Opcode = iota // 1 byte opcode/key-id + 3 bytes peer-id
	PDataV1                 // 1 byte opcode/key-id (peers before 2.3.7, or p2p without peer-id)
	StaticKey               // --secret: no opcode, packet-id 8 (id + timestamp)
)

// DataChannel is the data-channel configuration that decides the
// per-packet overhead.
type DataChannel struct {
	Cipher string // negotiated data cipher, e.g. AES-256-GCM; "none"; "" means AES-256-GCM
	Auth   string // HMAC digest for CBC and none (OpenVPN default SHA1); ignored for AEAD
	// Compress is the compression framing: "" (none, the 2.6 default),
	// "lzo", "lz4", "stub", "comp-lzo" (1 byte each) or "lz4-v2",
	// "stub-v2" (none; 2 bytes only when escaping a leading 0x50, which an
	// IP packet never starts with). Real compression changes the payload
	// itself: the model gives the framing, the compressor the rest.
	Compress string
	// Fragment: --fragment is on (4 bytes per packet, UDP only).
	Fragment bool
	Opcode   Opcode
}

// Transport is the outer transport of the tunnel.
type Transport struct {
	Proto string // "udp" or "tcp"
	IPv6  bool   // outer packets are IPv6
}

func (t Transport) String() string {
	fam := "IPv4"
	if t.IPv6 {
		fam = "IPv6"
	}
	return t.Proto + " over " + fam
}

// IPHeaderBytes is the outer IP header without options or extension headers.
func (t Transport) IPHeaderBytes() int {
	if t.IPv6 {
		return 40
	}
	return 20
}

// Frame is a data channel over one transport: the parts of every packet.
type Frame struct {
	spec cipherSpec
	// Header is the protocol header outside the encrypted payload:
	// length prefix (TCP), opcode/peer-id, and packet-id+tag (AEAD), IV+HMAC
	// (CBC) or packet-id+HMAC (none). frame_calculate_protocol_header_size.
	Header int
	// Payload is what goes in front of the inner packet inside the
	// encryption: packet-id (CBC), compression framing, fragment header.
	// frame_calculate_payload_overhead.
	Payload int
	// Encap is the outer IP + UDP/TCP header (datagram_overhead); TCP
	// options are not counted (the capture test disables none: see there).
	Encap int
	// Block is the CBC block size (0: no padding).
	Block int
}

// New builds the frame of dc over t.
func New(dc DataChannel, t Transport) (Frame, error) {
	name := strings.ToUpper(dc.Cipher)
	if name == "" {
		name = DefaultCipher
	}
	spec, ok := ciphers[name]
	if !ok {
		return Frame{}, fmt.Errorf("unknown data cipher %q: known are %s", dc.Cipher, strings.Join(Ciphers(), ", "))
	}
	f := Frame{spec: spec, Block: spec.block}
	hmac := 0
	if !spec.aead {
		auth := strings.ToUpper(dc.Auth)
		if auth == "" {
			auth = "SHA1"
		}
		h, ok := hmacs[auth]
		if !ok {
			return Frame{}, fmt.Errorf("unknown --auth digest %q", dc.Auth)
		}
		hmac = h
	}
	switch t.Proto {
	case "udp":
		f.Encap = 8
	case "tcp":
		f.Encap = 20
		f.Header += 2 // 16-bit length prefix of each packet in the TCP stream
	default:
		return Frame{}, fmt.Errorf("unknown transport %q (udp or tcp)", t.Proto)
	}
	f.Encap += t.IPHeaderBytes()
	packetID := 4
	switch dc.Opcode {
	case PDataV2:
		f.Header += 4
	case PDataV1:
		f.Header++
	case StaticKey:
		packetID = 8
	default:
		return Frame{}, fmt.Errorf("unknown opcode form %d", dc.Opcode)
	}
	switch {
	case spec.aead:
		f.Header += packetID + spec.tag // the IV is implicit (packet-id + key material)
	case spec.cbc:
		f.Header += spec.block + hmac // explicit IV and HMAC
		f.Payload += packetID         // encrypted with the payload
	default: // cipher none: packet-id in clear, HMAC if auth is set
		f.Header += packetID + hmac
	}
	switch strings.ToLower(dc.Compress) {
	case "", "no", "lz4-v2", "stub-v2":
	case "lzo", "lz4", "stub", "comp-lzo":
		f.Payload++
	default:
		return Frame{}, fmt.Errorf("unknown compression %q (lzo, lz4, stub, comp-lzo, lz4-v2, stub-v2)", dc.Compress)
	}
	if dc.Fragment {
		if t.Proto != "udp" {
			return Frame{}, fmt.Errorf("--fragment works only with UDP transport")
		}
		f.Payload += 4
	}
	return f, nil
}

// CBC reports whether the frame pads to a block size.
func (f Frame) CBC() bool { return f.spec.cbc }

// Wire is the bytes the data channel adds outside the outer headers for an
// inner packet of n bytes, i.e. the UDP payload (or TCP segment share,
// length prefix included) minus n.
func (f Frame) Wire(n int) int {
	body := f.Payload + n
	if f.spec.cbc {
		body = (body/f.Block + 1) * f.Block // PKCS#7 adds 1 … block bytes
	}
	return f.Header + body - n
}

// OuterSize is the size of the outer IP packet that carries an inner
// packet of n bytes (for TCP: one inner packet per segment).
func (f Frame) OuterSize(n int) int { return f.Encap + n + f.Wire(n) }

// Overhead is OuterSize(n) − n.
func (f Frame) Overhead(n int) int { return f.OuterSize(n) - n }

// MaxInner is the largest inner packet whose outer packet fits pathMTU.
func (f Frame) MaxInner(pathMTU int) int {
	for n := pathMTU; n > 0; n-- {
		if f.OuterSize(n) <= pathMTU {
			return n
		}
	}
	return 0
}

// MSS is the TCP MSS OpenVPN 2.6 writes into SYNs of inner IPv4 (v6=false)
// or IPv6 TCP for `mssfix value mtu` (encap=true: value counts outer IP and
// UDP/TCP headers) or `mssfix value` (2.5 meaning: value counts the
// UDP/TCP payload). frame_calculate_mssfix.
func (f Frame) MSS(value int, encap, v6 bool) int {
	target := value - f.Header
	if encap {
		target -= f.Encap
	}
	if f.spec.cbc {
		target = target/f.Block*f.Block - 1 // adjust_payload_max_cbc
	}
	mss := target - f.Payload - 40 // inner IPv4 + TCP headers without options
	if v6 {
		mss -= 20 // mss_fixup_ipv6
	}
	return mss
}

// MSSFixFor returns the `mssfix N mtu` value (2.6) and the `mssfix N` value
// (2.5) for outer packets of at most pathMTU bytes.
func (f Frame) MSSFixFor(pathMTU int) (v26, v25 int) {
	return pathMTU, pathMTU - f.Encap
}

// HeaderEfficiency is the share of the outer bytes that is inner packet
// for full packets of tunMTU bytes: a path rate × this is the most the
// tunnel can carry.
func (f Frame) HeaderEfficiency(tunMTU int) float64 {
	return float64(tunMTU) / float64(f.OuterSize(tunMTU))
}
