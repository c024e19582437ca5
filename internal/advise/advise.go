// Package advise turns a path description (rate, RTT, loss, path MTU,
// black hole, transport, clients, OpenVPN version, DCO, client OS, crypto
// speed, socket-buffer limits) into OpenVPN settings, each with the reason
// and the figure it rests on, a predicted throughput ceiling per direction
// naming the term that binds, and what not to do on that path. It is pure
// arithmetic over the overhead model (internal/overhead): no I/O, so every
// rule is table-tested, and its Variant can be put to the test with
// `ovpnperf lab run --variant`.
package advise

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/overhead"
)

// Input describes the path and the machines. Zero means "not known" for
// every numeric field; Validate refuses values that cannot be true.
type Input struct {
	// RateBitsPerSec is the bottleneck rate of the path at the IP layer
	// (what a shaper or link allows), not a TCP goodput.
	RateBitsPerSec float64
	// TCPGoodputBitsPerSec is one plain TCP flow's measured goodput on
	// the path (probe's iperf3), 0 if not measured. On a lossy path it is
	// the evidence for the loss-bound window, which formulas for Reno
	// (Mathis) underestimate badly for Linux's CUBIC with SACK/RACK.
	TCPGoodputBitsPerSec float64
	RTT                  time.Duration
	Jitter               time.Duration
	LossPercent          float64
	// PathMTU is the outer path MTU for the transport's family (bytes).
	PathMTU int
	// Blackhole: ICMP "too big" errors do not come back.
	Blackhole bool
	Proto     string // "udp" (default) or "tcp"
	OuterIPv6 bool
	Clients   int    // concurrent clients (default 1)
	OpenVPN   string // "2.5" or "2.6" (default)
	DCO       bool   // the server uses data-channel offload
	ClientOS  string // linux (default), windows, macos, android
	// CryptoBytesPerSec is one core's AES-256-GCM (or the chosen cipher's)
	// speed at ~1400-byte blocks; ChaChaBytesPerSec the same for
	// CHACHA20-POLY1305. 0: not known.
	CryptoBytesPerSec float64
	ChaChaBytesPerSec float64
	// PacketsPerSecPerCore is what one OpenVPN process forwards per core
	// (userspace, full packets), as the user measured it; 0 uses
	// DefaultPacketsPerSecPerCore, an assumption that the advice says is
	// one (probe does not measure it: see PacketCostAssumption).
	PacketsPerSecPerCore float64
	// RmemMax / WmemMax are net.core.rmem_max / wmem_max (bytes), 0 unknown.
	RmemMax, WmemMax int
}

// DefaultPacketsPerSecPerCore is the userspace (non-DCO) OpenVPN 2.6
// forwarding cost assumed when the input gives none: about 45 000 full
// packets per second per core, the unshaped lab's default tunnel
// (≈515 Mbit/s at 1388-byte payloads, README "Figures measured here").
const DefaultPacketsPerSecPerCore = 45000

// PacketCostAssumption is the source of DefaultPacketsPerSecPerCore, which
// advice quotes whenever it rests on it. Nothing measures OpenVPN's own
// per-packet cost on the user's machine: openssl speed gives the cipher's
// cost per packet only, a small part of what a userspace OpenVPN spends
// (tun read, socket write, copies, wakeups), and a short local tunnel test
// would measure this machine's loopback under whatever load it has, not
// the server's forwarding.
const PacketCostAssumption = "assumed, not measured on this machine: 45 000 full packets/s per core is what this project's unshaped lab measured for OpenVPN 2.6's default tunnel (515 Mbit/s median at 1388-byte payloads, README \"Figures measured here\", lab run table); the cost is taken as the same for every packet size (jumbo tunnel packets included), and a loaded 2-core machine gave a twentieth of it. Give --packet-rate with a figure measured on the server (e.g. ovpnperf lab run on it) to replace it"

// linuxDefaultSockBuf is net.core.{r,w}mem_default on stock Linux.
const linuxDefaultSockBuf = 212992

// linuxTCPRmemMax is the third value of net.ipv4.tcp_rmem on stock Linux:
// the largest receive window autotuning reaches.
const linuxTCPRmemMax = 6291456

// aesNIFloor: AES-256-GCM at ~1400-byte buffers runs above 1 GB/s per core
// with AES-NI on any x86 of the last decade; below it the CPU lacks
// AES-NI (or the figure is too noisy to act on), and only then does a
// faster ChaCha20 count. openssl speed on a loaded machine varies by tens
// of percent, so a ChaCha lead alone is no reason to leave the default.
const aesNIFloor = 1e9

// Line is one recommended setting.
type Line struct {
	Directive string `json:"directive"` // as it goes into the file, e.g. "mssfix 1400 mtu"
	Reason    string `json:"reason"`    // one sentence
	Figure    string `json:"figure"`    // the figure it rests on
}

// Term is one bound of the throughput ceiling.
type Term struct {
	Name       string  `json:"name"`
	BitsPerSec float64 `json:"bits_per_sec"` // +Inf is encoded as 0 with Unbounded
	Unbounded  bool    `json:"unbounded,omitempty"`
	Figure     string  `json:"figure"`
	// Assumed, when set, says that the term rests on an assumed figure,
	// not one measured on this path or machine, and where it comes from.
	Assumed string `json:"assumed,omitempty"`
}

// Ceiling is the predicted throughput of one TCP flow through the tunnel in
// one direction: the minimum of its terms.
type Ceiling struct {
	Direction  string  `json:"direction"` // "client→server" or "server→client"
	BitsPerSec float64 `json:"bits_per_sec"`
	Binding    string  `json:"binding"` // the name of the term that binds
	// BindingAssumed: the binding term rests on an assumed figure (its
	// Assumed says which), so the prediction is no better than it.
	BindingAssumed bool   `json:"binding_assumed,omitempty"`
	Terms          []Term `json:"terms"`
}

// Advice is the result of Advise.
type Advice struct {
	Server    []Line `json:"server"`
	Client    []Line `json:"client"`
	Push      []Line `json:"push"`
	Sysctl    []Line `json:"sysctl"`
	Interface []Line `json:"interface"`
	// Firewall: with DCO, the TCPMSS clamp rules (iptables, ip6tables and
	// nft forms of the same rule) that replace mssfix, which Linux DCO
	// does not apply.
	Firewall []Line    `json:"firewall,omitempty"`
	Ceilings []Ceiling `json:"ceilings"`
	DoNot    []Line    `json:"do_not"`
	Notes    []string  `json:"notes,omitempty"` // client-OS notes
	// DCONote, without DCO on a path where one process's CPU binds the
	// prediction, says what data channel offload would take.
	DCONote string `json:"dco_note,omitempty"`
	// Variant is a `lab run --variant` argument with exactly the OpenVPN
	// directives above (sysctl and interface lines are not variant
	// directives; the lab sets none of them).
	Variant string `json:"variant"`
	// TunMTU and Cipher are the settings the ceilings were computed for.
	TunMTU int    `json:"tun_mtu"`
	Cipher string `json:"cipher"`
}

// InputError is a user's mistake in the input.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func bad(format string, a ...any) error { return &InputError{fmt.Sprintf(format, a...)} }

// Validate checks the input and fills defaults.
func (in *Input) Validate() error {
	switch {
	case in.TCPGoodputBitsPerSec < 0 || math.IsNaN(in.TCPGoodputBitsPerSec) || math.IsInf(in.TCPGoodputBitsPerSec, 0):
		return bad("tcp goodput %v: must be a positive rate", in.TCPGoodputBitsPerSec)
	case in.RateBitsPerSec < 0 || math.IsNaN(in.RateBitsPerSec) || math.IsInf(in.RateBitsPerSec, 0):
		return bad("rate %v: must be a positive rate (e.g. 20mbit)", in.RateBitsPerSec)
	case in.RTT < 0:
		return bad("rtt %v: must not be negative", in.RTT)
	case in.RTT > time.Minute:
		return bad("rtt %v: above one minute is not a network path", in.RTT)
	case in.Jitter < 0:
		return bad("jitter %v: must not be negative", in.Jitter)
	case in.LossPercent < 0 || in.LossPercent > 100 || math.IsNaN(in.LossPercent):
		return bad("loss %v%%: must be between 0 and 100", in.LossPercent)
	case in.PathMTU != 0 && (in.PathMTU < 576 || in.PathMTU > 65535):
		return bad("pmtu %d: must be between 576 and 65535 bytes", in.PathMTU)
	case in.Clients < 0 || in.Clients > 100000:
		return bad("clients %d: must be between 1 and 100000", in.Clients)
	case in.CryptoBytesPerSec < 0 || in.ChaChaBytesPerSec < 0 || in.PacketsPerSecPerCore < 0:
		return bad("crypto and packet speeds must not be negative")
	case in.RmemMax < 0 || in.WmemMax < 0:
		return bad("rmem_max/wmem_max must not be negative")
	}
	if in.Proto == "" {
		in.Proto = "udp"
	}
	if in.Proto != "udp" && in.Proto != "tcp" {
		return bad("proto %q: udp or tcp", in.Proto)
	}
	if in.OpenVPN == "" {
		in.OpenVPN = "2.6"
	}
	if in.OpenVPN != "2.5" && in.OpenVPN != "2.6" {
		return bad("openvpn %q: 2.5 or 2.6", in.OpenVPN)
	}
	if in.ClientOS == "" {
		in.ClientOS = "linux"
	}
	switch in.ClientOS {
	case "linux", "windows", "macos", "android":
	default:
		return bad("client-os %q: linux, windows, macos or android", in.ClientOS)
	}
	if in.Clients == 0 {
		in.Clients = 1
	}
	if in.DCO && in.OpenVPN == "2.5" {
		return bad("dco: OpenVPN 2.5 has no data-channel offload (2.6 or later)")
	}
	return nil
}

// builder collects the advice.
type builder struct {
	in      Input
	a       Advice
	variant []string
}

func (b *builder) both(directive, reason, figure string) {
	l := Line{directive, reason, figure}
	b.a.Server = append(b.a.Server, l)
	b.a.Client = append(b.a.Client, l)
	b.variant = append(b.variant, directive)
}

func (b *builder) push(directive, reason, figure string) {
	b.a.Push = append(b.a.Push, Line{fmt.Sprintf("push \"%s\"", directive), reason, figure})
	b.variant = append(b.variant, "push "+directive)
}

func (b *builder) doNot(what, reason, figure string) {
	b.a.DoNot = append(b.a.DoNot, Line{what, reason, figure})
}

// Advise computes the advice for a path.
func Advise(in Input) (Advice, error) {
	if err := in.Validate(); err != nil {
		return Advice{}, err
	}
	b := &builder{in: in}
	cipher := b.chooseCipher()
	b.a.Cipher = cipher
	f, err := overhead.New(overhead.DataChannel{Cipher: cipher}, overhead.Transport{Proto: in.Proto, IPv6: in.OuterIPv6})
	if err != nil {
		return Advice{}, err
	}
	b.a.TunMTU = b.mtu(f)
	b.buffers(f)
	b.doNots(f)
	b.clientNotes(f)
	b.a.Ceilings = b.ceilings(f)
	b.dcoNote()
	b.a.Variant = "advised=" + strings.Join(b.variant, ";")
	return b.a, nil
}

func (b *builder) chooseCipher() string {
	in := b.in
	if in.ChaChaBytesPerSec > 0 && in.CryptoBytesPerSec > 0 && in.ChaChaBytesPerSec > 1.3*in.CryptoBytesPerSec && in.CryptoBytesPerSec < aesNIFloor && !in.DCO {
		b.both("data-ciphers CHACHA20-POLY1305:AES-256-GCM:AES-128-GCM",
			"without AES-NI ChaCha20-Poly1305 is the faster AEAD on this CPU; AES-GCM stays as fallback for clients without it",
			fmt.Sprintf("CHACHA20-POLY1305 %.0f MB/s vs AES-256-GCM %.0f MB/s per core", in.ChaChaBytesPerSec/1e6, in.CryptoBytesPerSec/1e6))
		return "CHACHA20-POLY1305"
	}
	return "AES-256-GCM"
}

// mtu decides tun-mtu and mssfix and returns the tun-mtu in effect.
func (b *builder) mtu(f overhead.Frame) int {
	in := b.in
	p := in.PathMTU
	tun := 1500
	if p == 0 {
		return tun
	}
	fits := f.OuterSize(1500) <= p
	v26, v25 := f.MSSFixFor(p)
	mssfix := fmt.Sprintf("mssfix %d mtu", v26)
	if in.OpenVPN == "2.5" {
		mssfix = fmt.Sprintf("mssfix %d", v25)
	}
	switch {
	case b.jumboHelps(f):
		tun = 9000
		b.both("tun-mtu 9000", "on this clean path the tunnel's cost per packet, not the link, binds: 9000-byte tunnel packets carry six times the data per OpenVPN packet and the kernel fragments the outer datagrams",
			fmt.Sprintf("loss %.2f%%, path MTU %d, packet cost %s%s", in.LossPercent, p, mbit(b.ppsPerCore()*float64(f.MSS(p, true, false)-12)*8), b.ppsSource()))
		b.both("mssfix 0", "with tun-mtu 9000 inner TCP may use full 9000-byte segments; mssfix would clamp them back to the path", "tun-mtu 9000")
	case fits && !in.DCO, p >= 1492 && !in.DCO && in.OpenVPN == "2.6" && !in.Blackhole:
		// The 2.6 default mssfix 1492 mtu already fits TCP; bigger
		// non-TCP packets are fragmented by the kernel, which works
		// while ICMP and fragments pass.
	case in.DCO:
		tun = f.MaxInner(p)
		b.both(fmt.Sprintf("tun-mtu %d", tun), "Linux DCO does not apply mssfix (docs/openvpn-facts.md#data-channel-offload-dco), so the tunnel's own MTU must keep outer packets within the path MTU, and a TCPMSS rule (firewall) clamps TCP to it",
			fmt.Sprintf("path MTU %d − %d bytes overhead = %d", p, f.Overhead(tun), tun))
		b.mssClamp(tun)
	case in.Proto == "tcp":
		b.both(mssfix, "tunnelled TCP segments then fit whole outer TCP segments instead of being split across two", fmt.Sprintf("path MTU %d, inner MSS %d", p, f.MSS(v26, true, false)))
	default:
		b.both(mssfix, "full-size tunnelled TCP segments then fit the path without fragmentation"+
			map[bool]string{true: "; with the ICMP black hole neither the kernel nor OpenVPN would learn the path MTU, and TCP through the tunnel stalls", false: ""}[in.Blackhole],
			fmt.Sprintf("path MTU %d, inner MSS %d (IPv4) / %d (IPv6)", p, f.MSS(v26, true, false), f.MSS(v26, true, true)))
		if in.Blackhole {
			tun = f.MaxInner(p)
			b.both(fmt.Sprintf("tun-mtu %d", tun), "non-TCP packets larger than this would vanish in the black hole; a smaller tun-mtu keeps them whole (fragment would do it too but costs 4 bytes a packet and disables DCO)",
				fmt.Sprintf("path MTU %d − overhead %d", p, f.Overhead(tun)))
		}
	}
	return tun
}

// JumboMaxLossPercent is the most loss at which a 9000-byte tun-mtu is
// worth having: each 9000-byte tunnel packet leaves as about seven outer
// fragments, one lost fragment loses the whole packet, so the loss a
// tunnelled TCP flow sees is about seven times the path's.
const JumboMaxLossPercent = 0.01

// FragmentsPass reports whether a path with this loss (percent, the
// lossier direction's) passes a jumbo tunnel's outer fragments well enough
// to be worth trying. It is the one rule advise (jumboHelps) and tune's
// search space share. An ICMP black hole does not stop fragments: the
// client and server fragment their own oversized datagrams without DF, and
// a router fragments such fragments again.
func FragmentsPass(lossPercent float64) bool { return lossPercent <= JumboMaxLossPercent }

// jumboHelps: the path is a clean, fast LAN where the per-packet cost of
// userspace OpenVPN binds before the link does.
func (b *builder) jumboHelps(f overhead.Frame) bool {
	in := b.in
	if in.Proto != "udp" || in.Blackhole || !FragmentsPass(in.LossPercent) || in.DCO || in.PathMTU == 0 {
		return false
	}
	pkt := b.ppsPerCore() * float64(f.MSS(in.PathMTU, true, false)-12) * 8
	return in.RateBitsPerSec == 0 || in.RateBitsPerSec*f.HeaderEfficiency(1500) > pkt
}

func (b *builder) ppsPerCore() float64 {
	if b.in.PacketsPerSecPerCore > 0 {
		return b.in.PacketsPerSecPerCore
	}
	return DefaultPacketsPerSecPerCore
}

// ppsSource says where the packet rate per core comes from, for figures.
func (b *builder) ppsSource() string {
	if b.in.PacketsPerSecPerCore > 0 {
		return fmt.Sprintf(" (%.0f packets/s per core, given)", b.in.PacketsPerSecPerCore)
	}
	return fmt.Sprintf(" (%d packets/s per core, assumed: not measured)", DefaultPacketsPerSecPerCore)
}

// bdp is the bandwidth-delay product in bytes (0 when unknown).
func (b *builder) bdp() int {
	return int(b.in.RateBitsPerSec / 8 * b.in.RTT.Seconds())
}

// buffers sizes OpenVPN's socket buffers. Over TCP transport the buffer is
// the outer connection's window, so it must hold the BDP. Over UDP there is
// no window: the recipe buffers measured no gain from larger buffers on
// UDP paths up to 200 ms, so advise recommends none there (the packets
// queue at the bottleneck, not in OpenVPN's socket).
//
// The one UDP exception is a jumbo tunnel (tun-mtu 9000 on a clean, fast
// path). On the unshaped lab LAN (2026-11-23, 3 samples each) tun-mtu 9000
// with 4 MiB buffers beat the same with the OS defaults beyond the spread
// in both directions, on the quiet machine by ×1.14 up / ×1.08 down
// (1501 / 1473 against 1314 / 1368 Mbit/s) and with the CPU shared by
// ×1.28 / ×1.57. The likely cause, not measured here (no socket drop
// counters were read): each 9000-byte datagram is reassembled from about
// seven fragments and charged to the receiving socket with all their
// overhead, so the stock 212992-byte buffer holds only about a dozen.
func (b *builder) buffers(f overhead.Frame) {
	in := b.in
	if in.Proto == "udp" && b.a.TunMTU == 9000 {
		b.setBuffers(jumboSockBuf,
			"with a jumbo tunnel larger socket buffers measured faster on a LAN; likely because a 9000-byte tunnel packet arrives as one reassembled datagram of about seven fragments and the stock 212992-byte buffer holds only about a dozen (the cause was not measured)",
			"unshaped lab LAN, tun-mtu 9000: 4 MiB buffers ×1.14 up / ×1.08 down over OS defaults on a quiet machine (1501/1473 vs 1314/1368 Mbit/s)")
		return
	}
	bdp := b.bdp()
	need := 2 * bdp
	if need <= linuxDefaultSockBuf || in.Proto != "tcp" {
		return
	}
	size := 1 << int(math.Ceil(math.Log2(float64(need))))
	if size > 64<<20 {
		size = 64 << 20
	}
	why := "over TCP transport the socket buffer is the outer connection's window: below the bandwidth-delay product it caps throughput at buffer/RTT"
	fig := fmt.Sprintf("BDP %s × %v = %d bytes", mbit(in.RateBitsPerSec), in.RTT, bdp)
	b.setBuffers(size, why, fig)
	if bdp > linuxTCPRmemMax/2 {
		// The endpoints' autotuning, not OpenVPN, bounds the window.
		b.a.Sysctl = append(b.a.Sysctl, Line{fmt.Sprintf("net.ipv4.tcp_rmem = 4096 131072 %d", 4*bdp),
			"the endpoints' TCP receive window must hold the BDP; stock Linux autotunes up to 6 MiB", fig})
	}
}

// jumboSockBuf is the socket buffer advised with a jumbo tunnel.
const jumboSockBuf = 4 << 20

// setBuffers advises sndbuf/rcvbuf of size on both ends (and pushes them),
// with the sysctl lines without which the kernel caps them.
func (b *builder) setBuffers(size int, why, fig string) {
	in := b.in
	b.both(fmt.Sprintf("sndbuf %d", size), why, fig)
	b.both(fmt.Sprintf("rcvbuf %d", size), why, fig)
	b.push(fmt.Sprintf("sndbuf %d", size), "clients that take pushed buffers need not be edited", fig)
	b.push(fmt.Sprintf("rcvbuf %d", size), "clients that take pushed buffers need not be edited", fig)
	for _, s := range []struct {
		name string
		max  int
	}{{"net.core.rmem_max", in.RmemMax}, {"net.core.wmem_max", in.WmemMax}} {
		if s.max == 0 || s.max < size {
			cur := "not known"
			if s.max > 0 {
				cur = fmt.Sprint(s.max)
			}
			b.a.Sysctl = append(b.a.Sysctl, Line{fmt.Sprintf("%s = %d", s.name, size),
				"OpenVPN sets SO_SNDBUF/SO_RCVBUF, which the kernel silently caps at this maximum: without raising it the buffer lines do nothing (see \"Socket Buffers: R=[…->…]\" in OpenVPN's log)",
				fmt.Sprintf("requested %d, %s now %s", size, s.name, cur)})
		}
	}
}

func (b *builder) doNots(f overhead.Frame) {
	in := b.in
	b.doNot("compress / comp-lzo / allow-compression yes", "compression leaks plaintext through packet sizes (VORACLE) and gains nothing on traffic that is already encrypted or compressed (HTTPS, SSH, video)", "recipe compression: ×1.0 on random data")
	b.doNot("BF-CBC, DES-EDE3-CBC or other 64-bit-block ciphers", "SWEET32: a 64-bit block collides after a few GB; OpenVPN 2.6 drops them from data-ciphers and they are slower than AES-GCM with AES-NI", "block 8 bytes")
	if in.DCO {
		b.doNot("fragment", "fragment disables DCO: the data channel falls back to userspace and its per-packet cost", "DCO requested; dco.c \"Note: --fragment disables data channel offload.\"")
		b.doNot("mssfix", "Linux DCO never applies it (dco_linux.c passes the value to no kernel call): the TCPMSS rule under firewall does its job", "DCO requested")
		b.doNot("CBC ciphers, data-ciphers-fallback with a CBC cipher", "Linux DCO runs only AEAD ciphers (AES-128/192/256-GCM, CHACHA20-POLY1305); any other cipher in data-ciphers turns DCO off (docs/openvpn-facts.md#data-channel-offload-dco)", "DCO requested")
	} else if in.Blackhole {
		b.doNot("fragment as the first fix", "mssfix + a lower tun-mtu keep packets whole without 4 bytes per packet and keep DCO possible", "black hole measured")
	}
	if in.LossPercent > 0.01 {
		b.doNot("tun-mtu 9000 (jumbo)", "a jumbo tunnel packet becomes 6–7 outer fragments; losing any one loses all of it, multiplying the loss rate", fmt.Sprintf("loss %.2f%% → ≈%.1f%% per 9000-byte packet", in.LossPercent, 100*(1-math.Pow(1-in.LossPercent/100, 7))))
		b.doNot("proto tcp", "TCP over TCP: the outer connection retransmits and backs off on each loss, and the inner one does it again (meltdown)", fmt.Sprintf("loss %.2f%%", in.LossPercent))
	}
	if in.Proto == "udp" && b.bdp() > linuxDefaultSockBuf && b.a.TunMTU != 9000 {
		b.doNot("sndbuf/rcvbuf raised 'for the long path' over UDP", "UDP has no window: the bandwidth-delay product queues at the bottleneck, not in OpenVPN's socket; the buffers recipe measured no gain", fmt.Sprintf("BDP %d bytes", b.bdp()))
	}
	if bdp := b.bdp(); bdp > linuxDefaultSockBuf && in.Proto == "tcp" {
		b.doNot(fmt.Sprintf("fixed sndbuf/rcvbuf below %d (e.g. the folklore 524288 when smaller)", bdp), "a fixed buffer below the bandwidth-delay product bounds the window at buffer/RTT", fmt.Sprintf("BDP %d bytes", bdp))
	}
}

func (b *builder) clientNotes(f overhead.Frame) {
	in := b.in
	if in.ClientOS != "windows" {
		return
	}
	udp4, _ := overhead.New(overhead.DataChannel{}, overhead.Transport{Proto: "udp"})
	udp6, _ := overhead.New(overhead.DataChannel{}, overhead.Transport{Proto: "udp", IPv6: true})
	n := []string{
		fmt.Sprintf("Windows receive window: one TCP flow reaches at most window/RTT; Windows autotuning (netsh int tcp show global: autotuninglevel normal) grows it to 16 MiB; at RTT %v a 64 KiB window gives %s", in.RTT, mbit(65536*8/math.Max(in.RTT.Seconds(), 1e-3))),
		"On Windows the sndbuf/rcvbuf that matter are the client's own (pushed values are taken by 2.6 clients); the folklore 'sndbuf 0 / rcvbuf 0' means OS default in 2.6",
		fmt.Sprintf("The Windows tuning write-up's 2.5 forms mssfix 1472 (UDP/IPv4) and mssfix 1432 (UDP/IPv6) count the UDP payload; in 2.6 syntax they are mssfix %d mtu and mssfix %d mtu (value + outer IP + UDP)", 1472+udp4.Encap, 1432+udp6.Encap),
		"Push routes (push \"route …\" / redirect-gateway def1) instead of setting them by hand on the client: they follow the server and are removed on disconnect",
		"Since that write-up: TAP-Windows6 gave way to wintun (2.5) and ovpn-dco-win (2.6 default on Windows, AEAD ciphers only, no fragment, no compression)",
	}
	b.a.Notes = append(b.a.Notes, n...)
}

// ceilings predicts one TCP flow's throughput per direction.
func (b *builder) ceilings(f overhead.Frame) []Ceiling {
	in := b.in
	tun := b.a.TunMTU
	// Full inner packets: the segment size inner TCP uses.
	innerPkt := tun
	if in.PathMTU != 0 && f.OuterSize(tun) > in.PathMTU && tun != 9000 {
		innerPkt = f.MSS(in.PathMTU, true, false) + 40
	}
	payload := float64(innerPkt - 40 - 12) // IP+TCP headers, timestamps
	var terms []Term
	if in.RateBitsPerSec > 0 {
		// Outer bytes on the bottleneck: the outer packets (fragmented
		// when bigger than the path MTU) plus a 14-byte link header each.
		outer := f.OuterSize(innerPkt)
		pm := in.PathMTU
		if pm == 0 {
			pm = 1500
		}
		frags := int(math.Ceil(float64(outer-f.Encap+8) / float64(pm-f.Encap+8)))
		if frags < 1 {
			frags = 1
		}
		wire := float64(outer + (frags-1)*(f.Encap-8) + 14*frags)
		eff := payload / wire
		terms = append(terms, Term{Name: "path rate × header efficiency", BitsPerSec: in.RateBitsPerSec * eff,
			Figure: fmt.Sprintf("%s × %.0f/%.0f bytes", mbit(in.RateBitsPerSec), payload, wire)})
	}
	if in.RTT > 0 {
		win := float64(linuxTCPRmemMax)
		name := "window/RTT"
		fig := fmt.Sprintf("window %.0f bytes / %v", win, in.RTT)
		bps := win * 8 / in.RTT.Seconds()
		switch {
		case in.LossPercent > 0 && in.TCPGoodputBitsPerSec > 0:
			// A plain TCP flow measured on this lossy path, scaled by
			// the tunnel's payload per wire byte against plain TCP's
			// (1448 of 1514 with timestamps).
			tunEff := payload / float64(f.OuterSize(innerPkt)+14)
			if v := in.TCPGoodputBitsPerSec * tunEff / (1448.0 / 1514); v < bps {
				bps, name = v, "loss (window/RTT, measured TCP flow)"
				fig = fmt.Sprintf("plain TCP %s measured at %.2f%% loss × tunnel/plain header efficiency %.3f", mbit(in.TCPGoodputBitsPerSec), in.LossPercent, tunEff/(1448.0/1514))
			}
		case in.LossPercent > 0:
			// Mathis et al.: MSS/RTT × 1.22/√p (Reno; a lower bound
			// for CUBIC).
			if lossW := payload * 1.22 / math.Sqrt(in.LossPercent/100); lossW < win {
				bps, name = lossW*8/in.RTT.Seconds(), "loss (window/RTT, Mathis)"
				fig = fmt.Sprintf("window %.0f bytes / %v", lossW, in.RTT)
			}
		}
		t := Term{Name: name, BitsPerSec: bps, Figure: fig}
		if name == "window/RTT" {
			t.Assumed = "assumed, not read from the endpoints: stock Linux autotunes the TCP receive window up to 6 MiB (net.ipv4.tcp_rmem maximum)"
		}
		terms = append(terms, t)
	}
	if in.CryptoBytesPerSec > 0 && !in.DCO {
		c := in.CryptoBytesPerSec
		if b.a.Cipher == "CHACHA20-POLY1305" {
			c = in.ChaChaBytesPerSec
		}
		terms = append(terms, Term{Name: "crypto per core", BitsPerSec: c * 8 * payload / float64(innerPkt),
			Figure: fmt.Sprintf("%s %.0f MB/s per core", b.a.Cipher, c/1e6)})
	}
	pps := b.ppsPerCore()
	pt := Term{Name: "packet cost per core"}
	if in.PacketsPerSecPerCore == 0 {
		pt.Assumed = PacketCostAssumption
	}
	if in.DCO {
		pps *= 3 // kernel data channel: 1.2–2.3 Gbit/s public figures vs 0.4–0.7
		pt.Assumed = strings.TrimPrefix(pt.Assumed+"; ", "; ") + DCOCostAssumption
	}
	pt.BitsPerSec = pps * payload * 8
	pt.Figure = fmt.Sprintf("%.0f packets/s × %.0f bytes", pps, payload)
	terms = append(terms, pt)
	sort.SliceStable(terms, func(i, j int) bool { return terms[i].BitsPerSec < terms[j].BitsPerSec })
	var out []Ceiling
	for _, dir := range []string{"client→server", "server→client"} {
		out = append(out, Ceiling{Direction: dir, BitsPerSec: terms[0].BitsPerSec, Binding: terms[0].Name, BindingAssumed: terms[0].Assumed != "", Terms: terms})
	}
	return out
}

func mbit(bps float64) string { return fmt.Sprintf("%.1f Mbit/s", bps/1e6) }

// DCOCostAssumption is how advise prices DCO's per-packet cost: nothing
// measured it here (this project's kernels lack the ovpn driver).
const DCOCostAssumption = "×3 for DCO is assumed from public figures (1.2–2.3 Gbit/s in the kernel against 0.4–0.7 in userspace, docs/openvpn-facts.md#throughput-with-and-without-dco), not measured by ovpnperf (the kernels it was developed on lack the ovpn driver)"

// mssClamp adds the TCPMSS rules that clamp TCP through the tunnel to
// tun-mtu (what mssfix does without DCO): on the forward path in both
// directions through any tun device, lowering only larger MSS values.
func (b *builder) mssClamp(tun int) {
	m4, m6 := tun-40, tun-60
	why := "Linux DCO does not apply mssfix: clamp the MSS of forwarded TCP SYNs through the tunnel so inner TCP segments fit tun-mtu (run on the server, and on a client that routes a LAN)"
	for _, dir := range []string{"-o", "-i"} {
		b.a.Firewall = append(b.a.Firewall,
			Line{fmt.Sprintf("iptables -t mangle -A FORWARD %s tun+ -p tcp --tcp-flags SYN,RST SYN -m tcpmss --mss %d:65535 -j TCPMSS --set-mss %d", dir, m4+1, m4), why, fmt.Sprintf("tun-mtu %d − 40 (IPv4 + TCP headers) = %d", tun, m4)},
			Line{fmt.Sprintf("ip6tables -t mangle -A FORWARD %s tun+ -p tcp --tcp-flags SYN,RST SYN -m tcpmss --mss %d:65535 -j TCPMSS --set-mss %d", dir, m6+1, m6), why, fmt.Sprintf("tun-mtu %d − 60 (IPv6 + TCP headers) = %d", tun, m6)})
	}
	b.a.Firewall = append(b.a.Firewall,
		Line{"nft add table inet ovpnperf_mss", "or the same clamp with nftables: a table of its own", "-"},
		Line{"nft 'add chain inet ovpnperf_mss forward { type filter hook forward priority mangle; policy accept; }'", "the forward hook, where routed packets pass", "-"})
	for _, dir := range []string{"oifname", "iifname"} {
		b.a.Firewall = append(b.a.Firewall,
			Line{fmt.Sprintf("nft 'add rule inet ovpnperf_mss forward %s \"tun*\" meta nfproto ipv4 tcp flags syn / syn,rst tcp option maxseg size %d-65535 tcp option maxseg size set %d'", dir, m4+1, m4), why, fmt.Sprintf("tun-mtu %d − 40 = %d", tun, m4)},
			Line{fmt.Sprintf("nft 'add rule inet ovpnperf_mss forward %s \"tun*\" meta nfproto ipv6 tcp flags syn / syn,rst tcp option maxseg size %d-65535 tcp option maxseg size set %d'", dir, m6+1, m6), why, fmt.Sprintf("tun-mtu %d − 60 = %d", tun, m6)})
	}
}

// dcoNote says what DCO would take when the prediction is CPU-bound in
// userspace and DCO is not in use.
func (b *builder) dcoNote() {
	if b.in.DCO || b.in.OpenVPN == "2.5" || len(b.a.Ceilings) == 0 || b.in.RateBitsPerSec == 0 {
		return
	}
	switch b.a.Ceilings[0].Binding {
	case "packet cost per core", "crypto per core":
	default:
		return
	}
	b.a.DCONote = ("the prediction is bound by one OpenVPN process's CPU (" + b.a.Ceilings[0].Binding + "): data channel offload (DCO) would move the data channel into the kernel. It takes OpenVPN 2.7 with Linux 6.16 or newer built with CONFIG_OVPN (or the ovpn-backports module), or OpenVPN 2.6 with the out-of-tree ovpn-dco module (Debian package openvpn-dco-dkms), and a config without the options that turn it off (fragment, compression framing, non-AEAD ciphers, proxies, tap, a server without topology subnet: `ovpnperf lint --target 2.7 CONFIG` names each; `ovpnperf probe HOST --config CONFIG` checks the host). Then run advise with --dco yes (docs/openvpn-facts.md#data-channel-offload-dco)")
}
