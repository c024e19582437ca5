package recipe

import (
	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/pps"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func init() {
	register(Recipe{
		Name:    "pps",
		Summary: "the forwarding benchmark: packets per second, loss and RTT routed and through OpenVPN (cipher none, AES-128-CBC, AES-256-GCM) at 18, 512 and 1400 bytes of UDP payload",
		Source: "forwarding test on a Pentium III 1 GHz with 64-byte frames: routed 47 000 pps; OpenVPN AES-128-CBC 12 000 pps; " +
			"cipher none 13–14 000 pps (only 10–15 % more: the per-packet cost dominates, not the crypto)",
		Run:     runPPS,
		Judge:   ppsJudge,
		Columns: ppsColumns,
	})
}

// The recipe in short:
//
//	client ns                      router ns                 server ns
//	pps client ──────────────────── kernel forwarding ─────── pps server (echo)
//	   │  routed: to 198.51.100.2                                  ▲
//	   └─ tun ─ openvpn client ═══ UDP ═══ openvpn server ─ tun ───┘
//	          tunnels: to the server's inner address (one tunnel per variant)
//
// Each (subject × size) sample is one `pps client --rate 0` run: one flow
// sending as fast as its socket takes probes for the sample's duration;
// the server echoes what reaches it. The echo rate is what the path (and
// the cores everything shares) forwarded both ways. Samples are interleaved:
// every repeat runs every size and subject once.

// ppsSizes are the UDP payloads measured: 18 bytes makes the benchmark's
// 64-byte Ethernet frames (14 + 20 IPv4 + 8 UDP + 18 + 4 FCS), 512 a middle
// size, 1400 a full-sized packet that still fits a 1500-byte tun-mtu.
var ppsSizes = []int{pps.MinSize, 512, 1400}

// ppsSmall is the benchmark's own size.
const ppsSmall = pps.MinSize

// ppsLarge is the size the packet-rate verdict sets against ppsSmall.
const ppsLarge = 1400

// The tunnels: the builtin none (no cipher, no HMAC) and aes256gcm, and
// AES-128-CBC with OpenVPN's default HMAC-SHA1, the benchmark's cipher.
const (
	ppsNone   = "none"
	ppsCBC    = "aes128cbc"
	ppsGCM    = "aes256gcm"
	ppsCBCDef = ppsCBC + "=data-ciphers AES-128-CBC;auth SHA1"
)

// publishedPPS are the benchmark's packet rates at 64-byte frames; cipher
// none was published as 13–14 000, kept here as its middle.
var publishedPPS = map[string]float64{experiment.Routed: 47000, ppsCBC: 12000, ppsNone: 13500}

// Thresholds of the verdicts, from the claims, not from any run:
const (
	// ppsRoutedRatio is the published routed/AES-128-CBC ratio (47 000 /
	// 12 000); a measured ratio within a factor ppsRatioTolerance of it
	// confirms "about 4×".
	ppsRoutedRatio    = 47000.0 / 12000.0
	ppsRatioTolerance = 1.5
	// ppsCryptoShare: cipher none at most 30 % faster than AES-128-CBC
	// means the cipher is a minor part of OpenVPN's per-packet cost
	// (published: 10–15 %); none faster than that beyond the spread means
	// the crypto matters.
	ppsCryptoShare = 1.30
	// ppsNoneSlower: none may measure up to 5 % below AES-128-CBC (the
	// same per-packet cost, a sample's timing) and still be "barely
	// faster"; more is a contradiction.
	ppsNoneSlower = 0.95
	// The size verdict sets two models against each other: a packet
	// limit keeps the 18-byte and 1400-byte packet rates equal (ratio 1),
	// a byte limit makes their ratio that of the packets' sizes (1428/46,
	// about 31). The ratio decides for the model it is nearer to on a log
	// scale (beyond √31 ≈ 5.6, bytes); within ppsFlatRatio it is "roughly
	// constant", beyond it the size costs something too.
	ppsFlatRatio = 1.5
)

// ppsNoneWindow is where "only 10–15 % faster" puts none/AES-128-CBC.
var ppsNoneWindow = verdict.Window{Lo: ppsNoneSlower, Hi: ppsCryptoShare}
