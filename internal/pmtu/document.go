package pmtu

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/rules"
)

// Schema names the JSON document of `ovpnperf pmtu` (Document); `report`
// reads it under that name.
const Schema = "ovpnperf/pmtu/v1"

// Document is the JSON contract of `ovpnperf pmtu`.
type Document struct {
	Schema string `json:"schema"` // Schema
	// Argv and Machine are the command line and the machine it ran on.
	Argv           []string       `json:"argv"`
	Machine        *hostinfo.Host `json:"machine,omitempty"`
	Host           string         `json:"host"`
	Address        string         `json:"address"`
	Family         string         `json:"family"`
	PathMTU        int            `json:"path_mtu"`
	Blackhole      bool           `json:"blackhole"`
	Hop            *string        `json:"hop"`     // null when no router answered
	HopMTU         int            `json:"hop_mtu"` // the MTU the hop named
	Interface      string         `json:"interface"`
	LocalMTU       int            `json:"local_mtu"`
	LocalLimit     bool           `json:"local_limit"`
	ElapsedSeconds float64        `json:"elapsed_seconds"`
	RTTMillis      float64        `json:"rtt_ms"`
	Rounds         int            `json:"rounds"`
	Probes         int            `json:"probes"`
	LostSmall      int            `json:"lost_small_probes"`
	LargestPassed  int            `json:"largest_passed,omitempty"` // above path_mtu: a band of sizes vanishes but larger ones pass
	ThroughTunnel  bool           `json:"through_tunnel"`
	// ImpliedOuterMTU (through a tunnel over a black hole): the outer path
	// MTU that the inner result and the cipher's overhead imply for a
	// tunnel over UDP/IPv4.
	ImpliedOuterMTU int             `json:"implied_outer_path_mtu,omitempty"`
	Explanation     string          `json:"explanation"`
	OpenVPN         *OpenVPNSection `json:"openvpn,omitempty"`
	// ProbesTried is every probe of the search and its answer, round by
	// round (for the report's chart of the search).
	ProbesTried []ProbeTried `json:"probes_tried"`
}

// ProbeTried is one probe of the search.
type ProbeTried struct {
	Round   int    `json:"round"`
	Size    int    `json:"size_bytes"`
	Outcome string `json:"outcome"`       // Outcome's name: reply, too-big, lost …
	MTU     int    `json:"mtu,omitempty"` // the MTU a too-big answer named
}

// Tried lists the answers of one round as the document records them
// (Options.Trace).
func Tried(round int, as []Answer) []ProbeTried {
	var out []ProbeTried
	for _, a := range as {
		out = append(out, ProbeTried{Round: round, Size: a.Size, Outcome: a.Outcome.String(), MTU: a.MTU})
	}
	return out
}

// OpenVPNSection is what a path MTU means for OpenVPN's settings.
type OpenVPNSection struct {
	Cipher string        `json:"cipher"`
	Auth   string        `json:"auth,omitempty"`
	Rows   []Translation `json:"translations"`
}

// Target is what was probed and how: the name the user gave, the route's
// interface, and the data channel to translate for.
type Target struct {
	Host, Address, Interface string
	// ThroughTunnel: the search ran inside an OpenVPN tunnel.
	ThroughTunnel bool
	Cipher, Auth  string
}

// NewDocument describes a search's result for people and for OpenVPN:
// the explanation, the outer path MTU a tunnel measurement implies, and
// (outside a tunnel) the OpenVPN settings. Argv and Machine are the
// caller's to fill.
func NewDocument(res Result, t Target, tried []ProbeTried) (*Document, error) {
	d := &Document{
		Schema: Schema, Host: t.Host, Address: t.Address, Family: res.Family.String(),
		PathMTU: res.PathMTU, Blackhole: res.Blackhole, HopMTU: res.HopMTU,
		Interface: t.Interface, LocalMTU: res.LocalMTU, LocalLimit: res.LocalLimit,
		ElapsedSeconds: res.Elapsed.Seconds(), RTTMillis: float64(res.RTT.Microseconds()) / 1000,
		Rounds: res.Rounds, Probes: res.Probes, LostSmall: res.Lost,
		ThroughTunnel: t.ThroughTunnel, ProbesTried: tried,
	}
	if res.Hop.IsValid() {
		h := res.Hop.String()
		d.Hop = &h
	}
	if res.LargestPassed > res.PathMTU {
		d.LargestPassed = res.LargestPassed
	}
	if d.ThroughTunnel && res.Blackhole {
		// The inner packet that vanished first made an outer packet one
		// byte too big for the outer path.
		dc := DataChannel{Cipher: t.Cipher, Auth: t.Auth}
		if ov, err := dc.Overhead(Transport{Proto: "udp", Family: IPv4}, res.PathMTU); err == nil {
			d.ImpliedOuterMTU = res.PathMTU + ov
		}
	}
	d.Explanation = Explain(res, d.ThroughTunnel, t.Interface, d.ImpliedOuterMTU)
	if d.ImpliedOuterMTU > 0 {
		bound := "" // CBC padding blurs the figure by up to a block
		if !rules.AEAD(t.Cipher) {
			bound = "at least "
		}
		d.Explanation += fmt.Sprintf(" With %s over UDP/IPv4 that means an outer path MTU of %s%d bytes (over UDP/IPv6: %s%d).", strings.ToUpper(t.Cipher), bound, d.ImpliedOuterMTU, bound, d.ImpliedOuterMTU+20)
	}
	if !d.ThroughTunnel {
		sec, err := TranslateResult(t.Cipher, t.Auth, res)
		if err != nil {
			return nil, err
		}
		d.OpenVPN = sec
	}
	return d, nil
}

// TranslateResult fills the OpenVPN rows: UDP and TCP over the probed
// family (measured), then over the other family (assuming the same path
// MTU).
func TranslateResult(cipher, auth string, res Result) (*OpenVPNSection, error) {
	dc := DataChannel{Cipher: cipher, Auth: auth}
	sec := &OpenVPNSection{Cipher: strings.ToUpper(cipher)}
	if !rules.AEAD(cipher) {
		sec.Auth = strings.ToUpper(auth)
	}
	other := IPv6
	if res.Family == IPv6 {
		other = IPv4
	}
	for _, fam := range []Family{res.Family, other} {
		for _, proto := range []string{"udp", "tcp"} {
			tr, err := dc.Translate(Transport{Proto: proto, Family: fam}, res.PathMTU, res.Blackhole, fam == res.Family)
			if err != nil {
				return nil, err
			}
			sec.Rows = append(sec.Rows, tr)
		}
	}
	return sec, nil
}

// Explain says in plain words what the result means. impliedOuter is the
// outer path MTU a tunnel measurement implies (0 if none).
func Explain(res Result, tunnel bool, dev string, impliedOuter int) string {
	var b strings.Builder
	n := res.PathMTU
	switch {
	case res.Blackhole && tunnel:
		fmt.Fprintf(&b, "Inside the tunnel, packets larger than %d bytes vanished without any ICMP error while smaller ones arrived: OpenVPN's bigger outer packets die on the path and nobody tells the sender (an ICMP black hole under the tunnel). "+
			"TCP inside the tunnel stalls on full-size segments unless its MSS is clamped to %d (IPv4) / %d (IPv6)",
			n, n-40, n-60)
		if impliedOuter > 0 {
			fmt.Fprintf(&b, " (OpenVPN 2.6: mssfix %d mtu)", impliedOuter)
		}
		fmt.Fprintf(&b, "; larger UDP packets inside are lost unless tun-mtu is lowered to %d on both peers or OpenVPN fragments (fragment, UDP transport only).", n)
	case res.Blackhole:
		fmt.Fprintf(&b, "ICMP black hole: probes larger than %d bytes vanished without any \"fragmentation needed\"/\"packet too big\" reply, while smaller probes were echoed. "+
			"Path-MTU discovery is broken on this path: TCP connections that send full-size segments stall after the handshake, and larger UDP packets are silently lost. "+
			"Clamp the TCP MSS to %d (IPv4) / %d (IPv6) or fragment before this path (OpenVPN: mssfix %d mtu, or fragment %d mtu over UDP).",
			n, n-40, n-60, n, n)
	case res.Hop.IsValid() && res.HopMTU > 0:
		fmt.Fprintf(&b, "Router %s answered \"fragmentation needed\"/\"packet too big\" for larger probes and named MTU %d; path-MTU discovery works on this path.", res.Hop, res.HopMTU)
		if res.HopMTU != n {
			fmt.Fprintf(&b, " (The largest probe echoed was %d bytes.)", n)
		}
	case res.LocalLimit:
		fmt.Fprintf(&b, "The local interface %s (MTU %d) is the limit; the path beyond it may carry more.", dev, res.LocalMTU)
	default:
		fmt.Fprintf(&b, "Packets up to %d bytes (the largest probed) pass.", n)
	}
	if res.LargestPassed > n {
		fmt.Fprintf(&b, " Sizes from %d bytes up vanished again when re-sent, yet larger probes up to %d bytes passed: the path drops a band of sizes just above %d and fragments bigger packets (typical of a tunnel whose outer packets carry Don't-Fragment into a black hole).",
			res.HoleFrom, res.LargestPassed, n)
	}
	if tunnel {
		fmt.Fprintf(&b, " Measured inside the tunnel (via %s): %d bytes is the largest inner packet that reaches the far end unfragmented.", dev, n)
		if res.LocalLimit {
			fmt.Fprintf(&b, " That is the tunnel device's own MTU: the tunnel carries all it accepts (OpenVPN or the kernel fragments the outer packets where needed).")
		}
		if !strings.HasPrefix(dev, "tun") && !strings.HasPrefix(dev, "ovpn") && !strings.Contains(dev, "tun") {
			fmt.Fprintf(&b, " Note: the route to this address leaves by %s, which does not look like a tunnel device.", dev)
		}
	}
	if res.Lost > 0 {
		fmt.Fprintf(&b, " %d probe(s) below the path MTU went unanswered at first: the path also loses packets.", res.Lost)
	}
	return b.String()
}
