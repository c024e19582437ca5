package rules

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/overhead"
)

// DefaultDataCiphers is OpenVPN 2.6's data-ciphers default.
const DefaultDataCiphers = overhead.DefaultCipher + ":AES-128-GCM:CHACHA20-POLY1305"

// AESNIFloor: AES-256-GCM at ~1400-byte buffers runs above 1 GB/s per
// core with AES-NI on any x86 of the last decade; below it the CPU lacks
// AES-NI (or the figure is too noisy to act on), and only then does a
// faster ChaCha20 count. openssl speed on a loaded machine varies by tens
// of percent, so a ChaCha lead alone is no reason to leave the default.
const AESNIFloor = 1e9

// ChooseCipher picks the data cipher from one core's AES-256-GCM and
// CHACHA20-POLY1305 speeds (bytes/s, 0 unknown) and returns it with the
// data-ciphers line that selects it (nil for the default).
func ChooseCipher(aesBps, chachaBps float64, dco bool) (string, *Setting) {
	if chachaBps > 0 && aesBps > 0 && chachaBps > 1.3*aesBps && aesBps < AESNIFloor && !dco {
		return "CHACHA20-POLY1305", &Setting{"data-ciphers CHACHA20-POLY1305:AES-256-GCM:AES-128-GCM",
			"without AES-NI ChaCha20-Poly1305 is the faster AEAD on this CPU; AES-GCM stays as fallback for clients without it",
			fmt.Sprintf("CHACHA20-POLY1305 %.0f MB/s vs AES-256-GCM %.0f MB/s per core", chachaBps/1e6, aesBps/1e6)}
	}
	return overhead.DefaultCipher, nil
}

// WeakCipher reports 64-bit-block and single-DES ciphers.
func WeakCipher(c string) bool {
	u := strings.ToUpper(c)
	for _, p := range []string{"BF-", "DES", "CAST5", "IDEA", "RC2", "RC5", "DESX", "SEED"} {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// WeakCipherReason is why a 64-bit-block cipher is refused.
const WeakCipherReason = "64-bit block ciphers (BF, DES, 3DES, CAST5, IDEA, RC2) are open to SWEET32 birthday attacks after a few GB on one key; OpenVPN 2.6 with OpenSSL 3 only loads BF-CBC with `providers legacy default` (verified on 2.6.14 here); 2.6's default data-ciphers is " + DefaultDataCiphers

// AEAD reports whether the data channel authenticates with the cipher
// itself (GCM, ChaCha20-Poly1305), so that --auth does not apply to it.
func AEAD(c string) bool {
	u := strings.ToUpper(strings.TrimPrefix(c, "?"))
	return strings.HasSuffix(u, "-GCM") || u == "CHACHA20-POLY1305"
}

// OuterLayer is the one context in which a data channel without
// encryption or authentication can be intended.
const OuterLayer = "The one setup where it can be intended: the tunnel runs inside another layer that encrypts and authenticates every packet (IPsec, WireGuard, an SSH or TLS tunnel), e.g. to spare the CPU the second encryption; say so in a comment beside the line"

// Mode is how the data channel gets its cipher.
type Mode int

const (
	// ClientServer: server / client (pull) mode; the cipher is negotiated
	// from data-ciphers.
	ClientServer Mode = iota
	// PeerToPeerTLS: TLS without client/server; 2.6 peers negotiate,
	// --cipher is the fallback for a peer older than 2.6.
	PeerToPeerTLS
	// StaticKey: --secret mode, --cipher as it is.
	StaticKey
)

// Crypto is what a config says about the data channel's crypto; an empty
// string means the line is absent.
type Crypto struct {
	Mode        Mode
	Cipher      string // --cipher
	DataCiphers string // --data-ciphers ("" = the default)
	Fallback    string // --data-ciphers-fallback
	Auth        string // --auth
	// OldPeerSigns are options of configs written for OpenVPN before 2.4
	// (no cipher negotiation) found in the config.
	OldPeerSigns []string
}

// Problem is one finding about the data channel's protection, about the
// line named by Directive.
type Problem struct {
	Directive string // cipher, auth, data-ciphers, data-ciphers-fallback, or "" (a missing line)
	Severity  string // "error", "warning" or "info"
	Rule      string
	Problem   string
	Reason    string
}

func none(s string) bool { return strings.EqualFold(s, "none") }

func listHasNone(list string) bool {
	for _, c := range strings.Split(list, ":") {
		if none(strings.TrimPrefix(c, "?")) {
			return true
		}
	}
	return false
}

func firstNonAEAD(list string) string {
	for _, c := range strings.Split(list, ":") {
		c = strings.TrimPrefix(c, "?")
		if c != "" && !AEAD(c) {
			return c
		}
	}
	return ""
}

// Protection finds data channels that may run without encryption or
// without authentication, and configs that OpenVPN 2.6 will refuse to
// old peers. Facts from OpenVPN 2.6.14: crypto.c init_key_type warns
// "'--cipher none' was specified. This means NO encryption …" and
// "'--auth none' … no authentication will be performed on received
// packets"; ssl_ncp.c warns when data-ciphers holds none; options.c
// options_postprocess_cipher makes --cipher the fallback of a p2p TLS
// peer and ignores it for negotiation in client/server mode; multi.c
// multi_client_set_protocol_options refuses a client with no common
// cipher unless data-ciphers-fallback is set.
func Protection(c Crypto) []Problem {
	var out []Problem
	dc := c.DataCiphers
	if dc == "" {
		dc = DefaultDataCiphers
	}
	noEnc := func(dir, problem, when string) {
		out = append(out, Problem{dir, "error", "no-encryption", problem,
			"the data channel then carries every tunnelled packet in clear text" + when + ", and OpenVPN 2.6 itself warns \"NO encryption will be performed\" (docs/openvpn-facts.md#data-channel-without-encryption-or-authentication). " + OuterLayer + "."})
	}
	switch c.Mode {
	case StaticKey:
		if none(c.Cipher) {
			noEnc("cipher", "cipher none: this static-key tunnel is not encrypted.", "")
		}
	case PeerToPeerTLS:
		if none(c.Cipher) {
			noEnc("cipher", "cipher none: with a peer older than 2.6 this tunnel is not encrypted.", " whenever the peer is older than 2.6: in peer-to-peer TLS mode --cipher is the fallback for a peer that does not negotiate (docs/openvpn-facts.md#data-channel-without-encryption-or-authentication)")
		}
	case ClientServer:
		if none(c.Cipher) && !listHasNone(dc) && !none(c.Fallback) {
			out = append(out, Problem{"cipher", "warning", "no-encryption",
				"cipher none has no effect here: OpenVPN 2.6 negotiates the data cipher from data-ciphers (" + dc + ").",
				"from 2.6 --cipher is always ignored in TLS mode when it comes to configuring the data cipher (docs/openvpn-facts.md#data-channel-without-encryption-or-authentication); a 2.6 peer encrypts, and a peer that cannot negotiate and uses cipher none is refused (multi.c: no common cipher). If no encryption was meant: " + OuterLayer + ", and then it takes none in data-ciphers on both sides."})
		}
	}
	if c.Mode != StaticKey {
		if listHasNone(c.DataCiphers) {
			noEnc("data-ciphers", "data-ciphers allows none: negotiation may choose no encryption.", " whenever none is the first cipher both peers share")
		}
		if none(c.Fallback) {
			noEnc("data-ciphers-fallback", "data-ciphers-fallback none: a peer that cannot negotiate gets no encryption.", " with every peer that does not negotiate (older than 2.4, or p2p older than 2.6)")
		}
	}
	if none(c.Auth) {
		// --auth applies to CBC (non-AEAD) data channels only.
		cbc := ""
		switch c.Mode {
		case StaticKey:
			cbc = c.Cipher
			if cbc == "" {
				cbc = "BF-CBC"
			}
		case PeerToPeerTLS:
			cbc = firstNonAEAD(strings.Join([]string{c.Cipher, dc}, ":"))
			if c.Cipher == "" {
				cbc = "BF-CBC"
			}
		case ClientServer:
			cbc = firstNonAEAD(strings.Join([]string{dc, c.Fallback}, ":"))
		}
		if cbc != "" && !AEAD(cbc) {
			problem := fmt.Sprintf("auth none with the non-AEAD cipher %s: its packets are not authenticated.", cbc)
			if none(cbc) {
				problem = "auth none with cipher none: packets are neither encrypted nor authenticated."
			}
			out = append(out, Problem{"auth", "error", "no-authentication", problem,
				"a CBC data channel is authenticated only by the --auth HMAC; without it anyone on the path can alter or inject tunnelled packets unnoticed, and OpenVPN 2.6 warns \"no authentication will be performed on received packets\" (docs/openvpn-facts.md#data-channel-without-encryption-or-authentication). AEAD ciphers (AES-GCM, ChaCha20-Poly1305) authenticate themselves and ignore --auth (man page --auth). " + OuterLayer + "."})
		}
	}
	if c.Mode == ClientServer && c.Cipher == "" && c.Fallback == "" && len(c.OldPeerSigns) > 0 && !inList("BF-CBC", dc) {
		out = append(out, Problem{"", "info", "old-peer-cipher",
			"no cipher line, and options of configs for OpenVPN before 2.4 (" + strings.Join(c.OldPeerSigns, ", ") + "): a peer that old will be refused by OpenVPN 2.6.",
			"peers before 2.4 do not negotiate the data cipher and, without a cipher line of their own, use BF-CBC; OpenVPN 2.6 refuses them (multi.c: \"PUSH: No common cipher\", the client gets AUTH_FAILED; a 2.6 client logs \"failed to negotiate cipher with server\", ssl_ncp.c) unless BF-CBC is in data-ciphers (when the peer reports its cipher) or data-ciphers-fallback BF-CBC is set (when it does not), and BF-CBC also needs OpenSSL 3's legacy provider (docs/openvpn-facts.md#peers-without-cipher-negotiation). Upgrading the old peer is better than allowing BF-CBC (SWEET32)."})
	}
	return out
}

func inList(c, list string) bool {
	for _, x := range strings.Split(list, ":") {
		if strings.EqualFold(strings.TrimPrefix(x, "?"), c) {
			return true
		}
	}
	return false
}

// OldPeerOptions are options found in configs written for OpenVPN before
// 2.4, the versions without cipher negotiation; the slice is the caller's
// own.
func OldPeerOptions() []string {
	return []string{"ns-cert-type", "tls-remote", "key-method", "keysize", "no-iv", "comp-lzo"}
}
