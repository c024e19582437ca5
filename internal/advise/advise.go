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

	"github.com/ovpnperf/ovpnperf/internal/bounds"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/rules"
)

// Schema names the JSON document of `ovpnperf advise --json`: the Advice
// with the schema and the command line (written by the command).
const Schema = "ovpnperf/advise/v1"

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
	// LossGiven: LossPercent was measured or given (0 is then a clean
	// path, not an unknown one).
	LossGiven bool
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
// (≈515 Mbit/s at 1388-byte payloads, docs/measurements.md).
const DefaultPacketsPerSecPerCore = rules.DefaultPacketsPerSecPerCore

// PacketCostAssumption is the source of DefaultPacketsPerSecPerCore, which
// advice quotes whenever it rests on it. Nothing measures OpenVPN's own
// per-packet cost on the user's machine: openssl speed gives the cipher's
// cost per packet only, a small part of what a userspace OpenVPN spends
// (tun read, socket write, copies, wakeups), and a short local tunnel test
// would measure this machine's loopback under whatever load it has, not
// the server's forwarding.
const PacketCostAssumption = "assumed, not measured on this machine: 45 000 full packets/s per core is what this project's unshaped lab measured for OpenVPN 2.6's default tunnel (515 Mbit/s median at 1388-byte payloads, docs/measurements.md, lab run table); the cost is taken as the same for every packet size (jumbo tunnel packets included), and a loaded 2-core machine gave a twentieth of it. Give --packet-rate with a figure measured on the server (e.g. ovpnperf lab run on it) to replace it"

// Line is one recommended setting: Directive as it goes into the file
// (e.g. "mssfix 1400 mtu"), Reason in one sentence, Figure the figure it
// rests on.
type Line = rules.Setting

// Undecided is a setting advise cannot decide from what it was given:
// what is missing, the measurement that decides it and what each answer
// would change.
type Undecided = rules.Undecided

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

// Ceiling is the predicted throughput of one TCP flow through the tunnel:
// the minimum of its terms. The input describes the path with one rate,
// RTT and loss for both directions, so there is one ceiling, for each
// direction alike.
type Ceiling struct {
	Direction  string  `json:"direction"` // "each direction"
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
	// Undecided are the settings that depend on something not given
	// (path MTU, rate, a measurement over TCP): never "defaults suit".
	Undecided []Undecided `json:"undecided,omitempty"`
	Notes     []string    `json:"notes,omitempty"` // client-OS notes
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
	case in.PathMTU != 0 && !rules.PathMTURange().Contains(in.PathMTU):
		return bad("pmtu %d: must be %s bytes", in.PathMTU, rules.PathMTURange())
	case in.Clients != 0 && !ClientsRange().Contains(in.Clients):
		return bad("clients %d: must be %s", in.Clients, ClientsRange())
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
		in.Clients = DefaultClients
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
	l := Line{Directive: directive, Reason: reason, Figure: figure}
	b.a.Server = append(b.a.Server, l)
	b.a.Client = append(b.a.Client, l)
	b.variant = append(b.variant, directive)
}

func (b *builder) push(directive, reason, figure string) {
	b.a.Push = append(b.a.Push, Line{Directive: fmt.Sprintf("push \"%s\"", directive), Reason: reason, Figure: figure})
	b.variant = append(b.variant, "push "+directive)
}

func (b *builder) doNot(what, reason, figure string) {
	b.a.DoNot = append(b.a.DoNot, Line{Directive: what, Reason: reason, Figure: figure})
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
	b.buffers()
	b.tcpTransport()
	b.doNots(f)
	b.clientNotes(f)
	b.a.Ceilings = b.ceilings(f)
	b.packetCostOpen()
	b.dcoNote()
	b.a.Variant = "advised=" + strings.Join(b.variant, ";")
	return b.a, nil
}

func (b *builder) chooseCipher() string {
	c, l := rules.ChooseCipher(b.in.CryptoBytesPerSec, b.in.ChaChaBytesPerSec, b.in.DCO)
	if l != nil {
		b.both(l.Directive, l.Reason, l.Figure)
	}
	return c
}

// path is the input as the shared rules take it.
func (b *builder) path() rules.Path {
	in := b.in
	return rules.Path{Proto: in.Proto, OuterIPv6: in.OuterIPv6, RateBitsPerSec: in.RateBitsPerSec, RTT: in.RTT,
		LossPercent: in.LossPercent, LossGiven: in.LossGiven, PathMTU: in.PathMTU, Blackhole: in.Blackhole, DCO: in.DCO,
		OpenVPN: in.OpenVPN, PacketsPerSecPerCore: in.PacketsPerSecPerCore}
}

// mtu decides tun-mtu and mssfix (the shared MTU rule) and returns the
// tun-mtu in effect.
func (b *builder) mtu(f overhead.Frame) int {
	m := rules.TunnelMTU(b.path(), f)
	for _, l := range m.Lines {
		b.both(l.Directive, l.Reason, l.Figure)
	}
	if m.Clamp {
		b.mssClamp(m.TunMTU)
	}
	b.a.Undecided = append(b.a.Undecided, m.Undecided...)
	return m.TunMTU
}

func (b *builder) ppsPerCore() float64 { return b.path().PacketsPerSec() }

// bdp is the bandwidth-delay product in bytes (0 when unknown).
func (b *builder) bdp() int { return b.path().BDPBytes() }

// buffers sizes OpenVPN's socket buffers by the shared rule
// (rules.SocketBuffers, which lint's buffer findings also follow).
func (b *builder) buffers() {
	r := rules.SocketBuffers(b.path(), b.a.TunMTU)
	if r.Size > 0 {
		b.setBuffers(r.Size, r.Why, r.Figure)
	}
	b.a.DoNot = append(b.a.DoNot, r.DoNot...)
	b.a.Undecided = append(b.a.Undecided, r.Undecided...)
}

// tcpTransport adds what advise cannot decide over a TCP transport
// without a measurement it does not have.
func (b *builder) tcpTransport() {
	if b.in.Proto != "tcp" {
		return
	}
	b.a.Undecided = append(b.a.Undecided, rules.TCPNodelay())
}

// packetCostOpen says, when an assumed figure (the packet cost, or the
// endpoints' receive window) binds the ceiling, which measurement decides
// it and what it would change.
func (b *builder) packetCostOpen() {
	if len(b.a.Ceilings) == 0 || b.in.RateBitsPerSec == 0 {
		return
	}
	c := b.a.Ceilings[0]
	if c.Binding == "window/RTT" && c.BindingAssumed {
		// The endpoints' receive window, not OpenVPN, bounds one flow.
		need := 2 * b.bdp()
		b.a.Undecided = append(b.a.Undecided, Undecided{Setting: "the endpoints' TCP receive window (net.ipv4.tcp_rmem, not an OpenVPN setting)",
			Missing: "the endpoints' net.ipv4.tcp_rmem maximum",
			Measure: "sysctl net.ipv4.tcp_rmem on the machines at both ends of the TCP flows (Windows: netsh int tcp show global)",
			Changes: fmt.Sprintf("the ceiling of %s (of a %s line) assumes stock Linux's 6 MiB maximum: if the receiving end allows about twice the bandwidth-delay product (%d bytes) one flow can reach the next bound; if it allows less, one flow stays at window/RTT (several parallel flows do not). Not tested here", mbit(c.BitsPerSec), mbit(b.in.RateBitsPerSec), need)})
		return
	}
	if c.Binding != "packet cost per core" || !c.BindingAssumed {
		return
	}
	b.a.Undecided = append(b.a.Undecided, Undecided{Setting: "the predicted ceiling (and with it a jumbo tunnel or DCO)",
		Missing: "the server's packet cost per core",
		Measure: "a measured --packet-rate (full-size packets/s one OpenVPN process forwards per core on the server, e.g. from ovpnperf lab run on it)",
		Changes: fmt.Sprintf("the ceiling of %s (of a %s line) rests on an assumed %d packets/s per core: a higher measured rate raises it in proportion, a lower one lowers it; where the packet cost binds, only fewer, larger packets (a jumbo tunnel, which needs --pmtu) or DCO lift it", mbit(c.BitsPerSec), mbit(b.in.RateBitsPerSec), DefaultPacketsPerSecPerCore)})
}

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
			b.a.Sysctl = append(b.a.Sysctl, Line{Directive: fmt.Sprintf("%s = %d", s.name, size),
				Reason: "OpenVPN sets SO_SNDBUF/SO_RCVBUF, which the kernel silently caps at this maximum: without raising it the buffer lines do nothing (see \"Socket Buffers: R=[…->…]\" in OpenVPN's log)",
				Figure: fmt.Sprintf("requested %d, %s now %s", size, s.name, cur)})
		}
	}
}

func (b *builder) doNots(f overhead.Frame) {
	in := b.in
	b.doNot("compress / comp-lzo / allow-compression yes", "compression leaks plaintext through packet sizes (VORACLE) and gains nothing on traffic that is already encrypted or compressed (HTTPS, SSH, video)", "recipe compression: ×1.0 on random data")
	b.doNot("BF-CBC, DES-EDE3-CBC or other 64-bit-block ciphers", rules.WeakCipherReason, "block 8 bytes")
	b.doNot("cipher none / auth none (or none in data-ciphers)", "the data channel is then not encrypted or not authenticated. "+rules.OuterLayer, "OpenVPN 2.6 crypto.c: \"NO encryption will be performed\"")
	if in.DCO {
		b.doNot("fragment", "fragment disables DCO: the data channel falls back to userspace and its per-packet cost", "DCO requested; dco.c \"Note: --fragment disables data channel offload.\"")
		b.doNot("mssfix", "Linux DCO never applies it (dco_linux.c passes the value to no kernel call): the TCPMSS rule under firewall does its job", "DCO requested")
		b.doNot("CBC ciphers, data-ciphers-fallback with a CBC cipher", "Linux DCO runs only AEAD ciphers (AES-128/192/256-GCM, CHACHA20-POLY1305); any other cipher in data-ciphers turns DCO off (docs/openvpn-facts.md#data-channel-offload-dco)", "DCO requested")
	} else if in.Blackhole {
		b.doNot("fragment as the first fix", "mssfix + a lower tun-mtu keep packets whole without 4 bytes per packet and keep DCO possible", "black hole measured")
	}
	if !rules.FragmentsPass(in.LossPercent) {
		b.doNot("tun-mtu 9000 (jumbo)", "a jumbo tunnel packet becomes 6–7 outer fragments; losing any one loses all of it, multiplying the loss rate", fmt.Sprintf("loss %.2f%% → ≈%.1f%% per 9000-byte packet", in.LossPercent, 100*(1-math.Pow(1-in.LossPercent/100, 7))))
		b.doNot("proto tcp", "TCP over TCP: the outer connection retransmits and backs off on each loss, and the inner one does it again (meltdown)", fmt.Sprintf("loss %.2f%%", in.LossPercent))
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
		win := float64(rules.LinuxTCPRmemMax)
		name := "window/RTT"
		fig := fmt.Sprintf("window %.0f bytes / %v", win, in.RTT)
		bps := win * 8 / in.RTT.Seconds()
		switch {
		case in.LossPercent >= 100:
			// Nothing gets through: no model of TCP gives a rate here.
			bps, name, fig = 0, "loss (every packet is lost)", "loss 100%: no packet reaches the far end"
		case in.LossPercent > 0 && in.TCPGoodputBitsPerSec > 0:
			// A plain TCP flow measured on this lossy path, scaled by
			// the tunnel's payload per wire byte against plain TCP's
			// (overhead.TCPGoodputShare).
			tunEff := payload / float64(f.OuterSize(innerPkt)+14)
			if v := in.TCPGoodputBitsPerSec * tunEff / overhead.TCPGoodputShare; v < bps {
				bps, name = v, "loss (window/RTT, measured TCP flow)"
				fig = fmt.Sprintf("plain TCP %s measured at %.2f%% loss × tunnel/plain header efficiency %.3f", mbit(in.TCPGoodputBitsPerSec), in.LossPercent, tunEff/overhead.TCPGoodputShare)
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
		switch {
		case name == "window/RTT":
			t.Assumed = "assumed, not read from the endpoints: stock Linux autotunes the TCP receive window up to 6 MiB (net.ipv4.tcp_rmem maximum)"
		case name == "loss (window/RTT, Mathis)" && in.LossPercent > MathisMaxLossPercent:
			t.Assumed = fmt.Sprintf("an upper bound: Mathis's formula holds for loss up to about %g%%; at %.3g%% retransmission timeouts dominate and TCP gets less", MathisMaxLossPercent, in.LossPercent)
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
	// One rate, RTT and loss describe both directions: computing two
	// would print the same figures twice.
	return []Ceiling{{Direction: "each direction", BitsPerSec: terms[0].BitsPerSec, Binding: terms[0].Name, BindingAssumed: terms[0].Assumed != "", Terms: terms}}
}

func mbit(bps float64) string { return fmt.Sprintf("%.1f Mbit/s", bps/1e6) }

// MathisMaxLossPercent is the loss up to which Mathis et al.'s
// MSS/RTT × 1.22/√p describes a TCP flow (their paper: below a few
// percent; above, retransmission timeouts, which it leaves out, dominate):
// a ceiling it gives above that is printed as an upper bound.
const MathisMaxLossPercent = 5.0

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
			line(fmt.Sprintf("iptables -t mangle -A FORWARD %s tun+ -p tcp --tcp-flags SYN,RST SYN -m tcpmss --mss %d:65535 -j TCPMSS --set-mss %d", dir, m4+1, m4), why, fmt.Sprintf("tun-mtu %d − 40 (IPv4 + TCP headers) = %d", tun, m4)),
			line(fmt.Sprintf("ip6tables -t mangle -A FORWARD %s tun+ -p tcp --tcp-flags SYN,RST SYN -m tcpmss --mss %d:65535 -j TCPMSS --set-mss %d", dir, m6+1, m6), why, fmt.Sprintf("tun-mtu %d − 60 (IPv6 + TCP headers) = %d", tun, m6)))
	}
	b.a.Firewall = append(b.a.Firewall,
		line("nft add table inet ovpnperf_mss", "or the same clamp with nftables: a table of its own", "-"),
		line("nft 'add chain inet ovpnperf_mss forward { type filter hook forward priority mangle; policy accept; }'", "the forward hook, where routed packets pass", "-"))
	for _, dir := range []string{"oifname", "iifname"} {
		b.a.Firewall = append(b.a.Firewall,
			line(fmt.Sprintf("nft 'add rule inet ovpnperf_mss forward %s \"tun*\" meta nfproto ipv4 tcp flags syn / syn,rst tcp option maxseg size %d-65535 tcp option maxseg size set %d'", dir, m4+1, m4), why, fmt.Sprintf("tun-mtu %d − 40 = %d", tun, m4)),
			line(fmt.Sprintf("nft 'add rule inet ovpnperf_mss forward %s \"tun*\" meta nfproto ipv6 tcp flags syn / syn,rst tcp option maxseg size %d-65535 tcp option maxseg size set %d'", dir, m6+1, m6), why, fmt.Sprintf("tun-mtu %d − 60 = %d", tun, m6)))
	}
}

// line is a Line from its three parts.
func line(directive, reason, figure string) Line {
	return Line{Directive: directive, Reason: reason, Figure: figure}
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

// DefaultClients is Input.Clients' default: one client.
const DefaultClients = 1

// ClientsRange is the concurrent clients advise takes.
func ClientsRange() bounds.Int { return bounds.Int{Min: 1, Max: 100000} }
