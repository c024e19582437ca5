package pmtu

// OpenVPN translation: what a measured path MTU means for an OpenVPN 2.6
// data channel. The arithmetic follows OpenVPN 2.6 src/openvpn/mtu.c
// (frame_calculate_protocol_header_size, frame_calculate_payload_overhead),
// mss.c (frame_calculate_mssfix, adjust_payload_max_cbc, mss_fixup_ipv6)
// and crypto.c (calculate_crypto_overhead), TLS mode with peer-id
// (P_DATA_V2), which every 2.6 peer negotiates.
//
//	outer IP | UDP or TCP(+2 length) | opcode+peer-id 4 | AEAD: packet-id 4, tag 16
//	                                                    | CBC:  HMAC, IV, E(packet-id 4, payload, pad 1…block)

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/overhead"
)

// Ciphers lists the data-channel ciphers the translation knows.
func Ciphers() []string { return overhead.Ciphers() }

// DataChannel is the OpenVPN data-channel configuration that decides the
// per-packet overhead.
type DataChannel struct {
	Cipher string // negotiated data cipher, e.g. AES-256-GCM; "none" for none
	Auth   string // HMAC digest for non-AEAD ciphers (OpenVPN default SHA1); ignored for AEAD
	// Compress is the compression framing: "" (none, the 2.6 default),
	// "lzo", "lz4", "stub" (1 byte each) or "lz4-v2", "stub-v2" (none).
	Compress string
	// Fragment: --fragment is on (4 bytes per packet, UDP only).
	Fragment bool
}

// Transport is the outer transport of the tunnel.
type Transport struct {
	Proto  string // "udp" or "tcp"
	Family Family // of the outer packets
}

func (t Transport) String() string { return fmt.Sprintf("%s over %s", t.Proto, t.Family) }

// frame asks the overhead model (internal/overhead) for dc over t.
func (dc DataChannel) frame(t Transport) (overhead.Frame, error) {
	return overhead.New(overhead.DataChannel{Cipher: dc.Cipher, Auth: dc.Auth, Compress: dc.Compress, Fragment: dc.Fragment},
		overhead.Transport{Proto: t.Proto, IPv6: t.Family == IPv6})
}

// Overhead returns the bytes OpenVPN adds to an inner packet of innerBytes,
// outer headers included. For AEAD ciphers it does not depend on the size;
// for CBC the padding makes it vary by up to one block.
func (dc DataChannel) Overhead(t Transport, innerBytes int) (int, error) {
	f, err := dc.frame(t)
	if err != nil {
		return 0, err
	}
	return f.Overhead(innerBytes), nil
}

// MaxTunMTU returns the largest tun-mtu whose full-size packets still fit an
// outer path MTU of pathMTU bytes without fragmentation.
func (dc DataChannel) MaxTunMTU(t Transport, pathMTU int) (int, error) {
	f, err := dc.frame(t)
	if err != nil {
		return 0, err
	}
	return f.MaxInner(pathMTU), nil
}

// MSS returns the TCP MSS that OpenVPN 2.6 writes into SYNs of inner
// IPv4 (v6=false) or IPv6 TCP connections for `mssfix value mtu`
// (encap=true: value counts outer IP and UDP/TCP headers) or `mssfix value`.
func (dc DataChannel) MSS(t Transport, value int, encap, v6 bool) (int, error) {
	f, err := dc.frame(t)
	if err != nil {
		return 0, err
	}
	return f.MSS(value, encap, v6), nil
}

// Translation is the OpenVPN meaning of a path MTU for one outer transport.
type Translation struct {
	Transport string `json:"transport"`      // "udp" or "tcp"
	Family    string `json:"outer_family"`   // "ipv4" or "ipv6"
	Measured  bool   `json:"measured"`       // false: assumes the same path MTU for this family
	PathMTU   int    `json:"path_mtu"`       // outer packets, bytes
	Overhead  int    `json:"overhead_bytes"` // added to a full-size inner packet
	// MaxTunMTU is the largest tun-mtu that avoids fragmenting the outer
	// packets; TunMTU1500Fits says whether the default tun-mtu 1500 does.
	MaxTunMTU      int  `json:"max_tun_mtu"`
	TunMTU1500Fits bool `json:"tun_mtu_1500_fits"`
	// MSSFix is the 2.6 directive ("mssfix N mtu", N counts outer IP and
	// UDP/TCP headers); MSSFix25 the 2.5 form ("mssfix N", N counts the
	// UDP/TCP payload). InnerMSS4/6 are the MSS values 2.6 then announces to
	// tunnelled IPv4/IPv6 TCP.
	MSSFix    string `json:"mssfix"`
	MSSFix25  string `json:"mssfix_2_5"`
	InnerMSS4 int    `json:"inner_mss_ipv4"`
	InnerMSS6 int    `json:"inner_mss_ipv6"`
	// DefaultMSSFixOK: the 2.6 default "mssfix 1492 mtu" already fits.
	DefaultMSSFixOK bool `json:"default_mssfix_ok"`
	// Fragment is the directive to use when FragmentNeeded, else "".
	FragmentNeeded bool   `json:"fragment_needed"`
	Fragment       string `json:"fragment,omitempty"`
	Advice         string `json:"advice"`
}

// Translate computes the OpenVPN settings for a path MTU measured (or, with
// measured false, assumed) for t.Family. blackhole says that routers' ICMP
// errors do not come back, so neither the kernel nor OpenVPN will learn the
// path MTU by themselves.
func (dc DataChannel) Translate(t Transport, pathMTU int, blackhole, measured bool) (Translation, error) {
	f, err := dc.frame(t)
	if err != nil {
		return Translation{}, err
	}
	tr := Translation{Transport: t.Proto, Family: t.Family.String(), Measured: measured, PathMTU: pathMTU}
	tr.MaxTunMTU, _ = dc.MaxTunMTU(t, pathMTU)
	tr.Overhead = f.OuterSize(tr.MaxTunMTU) - tr.MaxTunMTU
	tr.TunMTU1500Fits = f.OuterSize(1500) <= pathMTU
	tr.MSSFix = fmt.Sprintf("mssfix %d mtu", pathMTU)
	tr.MSSFix25 = fmt.Sprintf("mssfix %d", pathMTU-f.Encap)
	tr.InnerMSS4, _ = dc.MSS(t, pathMTU, true, false)
	tr.InnerMSS6, _ = dc.MSS(t, pathMTU, true, true)
	tr.DefaultMSSFixOK = pathMTU >= 1492

	var advice []string
	switch {
	case tr.TunMTU1500Fits:
		advice = append(advice, fmt.Sprintf("the defaults fit: tun-mtu 1500 makes %d-byte outer packets, no fragmentation", f.OuterSize(1500)))
	case t.Proto == "tcp":
		advice = append(advice, "TCP transport never fragments the outer packets (the stream is re-segmented)",
			fmt.Sprintf("%s keeps tunnelled TCP segments from being split across outer segments", tr.MSSFix))
		if blackhole {
			advice = append(advice, fmt.Sprintf("but the outer TCP connection itself stalls on this black hole unless its MSS is clamped to %d (or net.ipv4.tcp_mtu_probing=1 on both peers)", pathMTU-t.Family.HeaderBytes()-20))
		}
	case blackhole:
		tr.FragmentNeeded = true
		tr.Fragment = fmt.Sprintf("fragment %d mtu", pathMTU)
		advice = append(advice,
			fmt.Sprintf("set %s on both peers (2.5: %s): OpenVPN cannot learn this path MTU because the ICMP errors are lost, and the default mssfix 1492 lets TCP inside the tunnel stall", tr.MSSFix, tr.MSSFix25),
			fmt.Sprintf("non-TCP packets larger than %d bytes vanish: either lower tun-mtu to %d on both peers, or use %s (2.5: fragment %d; disables DCO)", tr.MaxTunMTU, tr.MaxTunMTU, tr.Fragment, pathMTU-f.Encap))
	default:
		if tr.DefaultMSSFixOK {
			advice = append(advice, fmt.Sprintf("the default mssfix 1492 mtu is fine for TCP; %s would be exact", tr.MSSFix))
		} else {
			advice = append(advice, fmt.Sprintf("set %s (2.5: %s); OpenVPN 2.6 also lowers mssfix by itself once the kernel learns the path MTU from the router's ICMP error", tr.MSSFix, tr.MSSFix25))
		}
		advice = append(advice, fmt.Sprintf("non-TCP packets above %d bytes are fragmented outside the tunnel (works while the path passes IP fragments; otherwise lower tun-mtu to %d, or %s)", tr.MaxTunMTU, tr.MaxTunMTU, fmt.Sprintf("fragment %d mtu", pathMTU)),
			"with DCO on Linux mssfix is not applied: lower tun-mtu instead")
	}
	tr.Advice = strings.Join(advice, "; ")
	return tr, nil
}
