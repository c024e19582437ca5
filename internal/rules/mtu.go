package rules

import (
	"fmt"

	"github.com/ovpnperf/ovpnperf/internal/bounds"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
)

// JumboMaxLossPercent is the most loss at which a 9000-byte tun-mtu is
// worth having: each 9000-byte tunnel packet leaves as about seven outer
// fragments, one lost fragment loses the whole packet, so the loss a
// tunnelled TCP flow sees is about seven times the path's.
const JumboMaxLossPercent = 0.01

// FragmentsPass reports whether a path with this loss (percent, the
// lossier direction's) passes a jumbo tunnel's outer fragments well enough
// to be worth trying. It is the one rule advise, lint and tune's search
// space share. An ICMP black hole does not stop fragments: the client and
// server fragment their own oversized datagrams without DF, and a router
// fragments such fragments again.
func FragmentsPass(lossPercent float64) bool { return lossPercent <= JumboMaxLossPercent }

// Jumbo is the jumbo-tunnel rule's answer: tun-mtu 9000 with mssfix 0.
type Jumbo struct {
	Advise    bool
	Why       string
	Figure    string
	Undecided *Undecided
}

// JumboTunnel decides tun-mtu 9000 + mssfix 0: on a clean UDP path whose
// rate, and one flow's window over the RTT (stock Linux's 6 MiB), exceed
// what one userspace OpenVPN forwards in 1500-byte packets, the per-packet
// cost binds first, and six times the data per packet lifts it. It needs the path MTU and the rate; without either it
// recommends nothing and says what decides it.
func JumboTunnel(p Path, f overhead.Frame) Jumbo {
	const setting = "tun-mtu 9000 + mssfix 0 (jumbo tunnel)"
	if p.DCO || p.Blackhole {
		return Jumbo{}
	}
	if p.proto() == "tcp" {
		return jumboOverTCP(p, setting)
	}
	if !FragmentsPass(p.LossPercent) {
		return Jumbo{}
	}
	pm := p.PathMTU
	if pm == 0 {
		pm = 1500
	}
	pkt := p.PacketsPerSec() * float64(f.MSS(pm, true, false)-12) * 8
	var missing []string
	if p.PathMTU == 0 {
		missing = append(missing, "the path MTU")
	}
	if p.RateBitsPerSec == 0 {
		missing = append(missing, "the path rate")
	}
	if len(missing) > 0 {
		m := missing[0]
		if len(missing) == 2 {
			m += " and " + missing[1]
		}
		return Jumbo{Undecided: &Undecided{Setting: setting, Missing: m,
			Measure: "ovpnperf pmtu HOST and ovpnperf probe HOST (or --pmtu and --rate, or --probe FILE)",
			Changes: fmt.Sprintf("if the path rate × header efficiency is above what one OpenVPN process forwards in 1500-byte packets, %s%s, the tunnel's per-packet cost binds and a 9000-byte tun-mtu (with mssfix 0, on a clean path) lifts it; below that the link binds and tun-mtu stays 1500. A measured --packet-rate replaces the assumed packet cost", mbit(pkt), p.PacketRateSource())}}
	}
	if p.RateBitsPerSec*f.HeaderEfficiency(1500) <= pkt {
		return Jumbo{}
	}
	if p.RTT > 0 && float64(LinuxTCPRmemMax)*8/p.RTT.Seconds() <= pkt {
		// One flow's window (stock Linux's 6 MiB over this RTT) binds
		// before the packet cost: fewer packets would not lift it.
		return Jumbo{}
	}
	loss := fmt.Sprintf("loss %.2f%%", p.LossPercent)
	if !p.LossGiven {
		loss = "loss not given, taken as none (ovpnperf probe measures it; above 0.01 % do not use a jumbo tunnel)"
	}
	return Jumbo{Advise: true,
		Why:    "on this clean path the tunnel's cost per packet, not the link, binds: 9000-byte tunnel packets carry six times the data per OpenVPN packet and the kernel fragments the outer datagrams",
		Figure: fmt.Sprintf("%s, path MTU %d, rate %s, packet cost %s%s", loss, p.PathMTU, mbit(p.RateBitsPerSec), mbit(pkt), p.PacketRateSource())}
}

// MTU is the MTU rule's answer: the tun-mtu in effect and the lines that
// set it (none when OpenVPN 2.6's defaults fit).
type MTU struct {
	TunMTU    int
	Lines     []Setting
	Undecided []Undecided
	// Jumbo is the tunnel advised as a jumbo tunnel (tun-mtu 9000,
	// mssfix 0): outer datagrams larger than the path are meant.
	Jumbo bool
	// Clamp: with DCO, which does not apply mssfix, TCP through the
	// tunnel needs a TCPMSS firewall rule clamping it to TunMTU.
	Clamp bool
}

// TCPJumboEvidence is the measurement behind a jumbo tunnel over TCP
// transport, quoted by advise and lint alike.
const TCPJumboEvidence = "swept on three TCP lab paths, tun-mtu 9000 with mssfix 0 was faster than OpenVPN's defaults beyond the spread in five of six path-directions and never slower: ×5.1 / ×4.4 on a CPU-bound LAN, ×1.05 / ×1.09 at 50 ms and 50 Mbit/s, ×1.28 / ×1.20 at 300 ms and 10 Mbit/s (docs/measurements.md#tcp-transport-sweep)"

// jumboOverTCP decides a jumbo tunnel over TCP transport. The outer
// connection carries tunnel packets as a byte stream in full-size
// segments, so a 9000-byte tunnel packet makes no IP fragments: the loss
// argument of the UDP rule does not apply, and the sweep found it faster
// on CPU-bound and link-bound paths alike. Lossy TCP paths were not swept.
func jumboOverTCP(p Path, setting string) Jumbo {
	if p.LossGiven && !FragmentsPass(p.LossPercent) {
		return Jumbo{Undecided: &Undecided{Setting: setting + " over TCP transport",
			Missing: "a measurement over a lossy TCP path",
			Measure: SweepCommand,
			Changes: fmt.Sprintf("%s; the sweep had no loss, and this path loses %.2f %%: not tested here. If the sweep shows it faster beyond the spread on your path, set tun-mtu 9000 and mssfix 0 on both ends; if not, keep 1500", TCPJumboEvidence, p.LossPercent)}}
	}
	loss := "a clean path"
	if !p.LossGiven {
		loss = "loss not given, taken as none (ovpnperf probe measures it; the sweep had no loss)"
	}
	return Jumbo{Advise: true,
		Why:    "over TCP transport a 9000-byte tunnel packet travels as full-size outer TCP segments, not IP fragments: six times the data per OpenVPN packet at no cost in fragments",
		Figure: loss + "; " + TCPJumboEvidence}
}

// TunnelMTU decides tun-mtu and mssfix for a path.
func TunnelMTU(p Path, f overhead.Frame) MTU {
	m := MTU{TunMTU: 1500}
	j := JumboTunnel(p, f)
	if j.Undecided != nil {
		m.Undecided = append(m.Undecided, *j.Undecided)
	}
	add := func(d, why, fig string) { m.Lines = append(m.Lines, Setting{d, why, fig}) }
	if j.Advise {
		m.TunMTU, m.Jumbo = 9000, true
		add("tun-mtu 9000", j.Why, j.Figure)
		add("mssfix 0", "with tun-mtu 9000 inner TCP may use full 9000-byte segments; mssfix would clamp them back to the path", "tun-mtu 9000")
		return m
	}
	pm := p.PathMTU
	if pm == 0 {
		v26, _ := f.MSSFixFor(1500)
		m.Undecided = append(m.Undecided, Undecided{Setting: "mssfix / tun-mtu", Missing: "the path MTU",
			Measure: "ovpnperf pmtu HOST (then --pmtu N)",
			Changes: fmt.Sprintf("a path MTU of 1492 or more: OpenVPN 2.6's default mssfix 1492 mtu already keeps tunnelled TCP within it, no line to add (a full 1500-byte path allows mssfix %d mtu); smaller: mssfix PMTU mtu, and with an ICMP black hole (--blackhole) also a tun-mtu that fits, since nothing else would learn the path MTU", v26)})
		return m
	}
	fits := f.OuterSize(1500) <= pm
	v26, v25 := f.MSSFixFor(pm)
	mssfix := fmt.Sprintf("mssfix %d mtu", v26)
	if p.OpenVPN == "2.5" {
		mssfix = fmt.Sprintf("mssfix %d", v25)
	}
	switch {
	case fits && !p.DCO, pm >= 1492 && !p.DCO && p.OpenVPN != "2.5" && !p.Blackhole:
		// The 2.6 default mssfix 1492 mtu already fits TCP; bigger
		// non-TCP packets are fragmented by the kernel, which works
		// while ICMP and fragments pass.
	case p.DCO:
		m.TunMTU, m.Clamp = f.MaxInner(pm), true
		add(fmt.Sprintf("tun-mtu %d", m.TunMTU), "Linux DCO does not apply mssfix (docs/openvpn-facts.md#data-channel-offload-dco), so the tunnel's own MTU must keep outer packets within the path MTU, and a TCPMSS rule (firewall) clamps TCP to it",
			fmt.Sprintf("path MTU %d − %d bytes overhead = %d", pm, f.Overhead(m.TunMTU), m.TunMTU))
	case p.proto() == "tcp":
		add(mssfix, "tunnelled TCP segments then fit whole outer TCP segments instead of being split across two", fmt.Sprintf("path MTU %d, inner MSS %d", pm, f.MSS(v26, true, false)))
	default:
		why := "full-size tunnelled TCP segments then fit the path without fragmentation"
		if p.Blackhole {
			why += "; with the ICMP black hole neither the kernel nor OpenVPN would learn the path MTU, and TCP through the tunnel stalls"
		}
		add(mssfix, why, fmt.Sprintf("path MTU %d, inner MSS %d (IPv4) / %d (IPv6)", pm, f.MSS(v26, true, false), f.MSS(v26, true, true)))
		if p.Blackhole {
			m.TunMTU = f.MaxInner(pm)
			add(fmt.Sprintf("tun-mtu %d", m.TunMTU), "non-TCP packets larger than this would vanish in the black hole; a smaller tun-mtu keeps them whole (fragment would do it too but costs 4 bytes a packet and disables DCO)",
				fmt.Sprintf("path MTU %d − overhead %d", pm, f.Overhead(m.TunMTU)))
		}
	}
	return m
}

// TCPNodelay is what is known about tcp-nodelay on a TCP transport: it
// helped on one kind of path and hurt on another, so it is the user's
// path that decides.
func TCPNodelay() Undecided {
	return Undecided{Setting: "tcp-nodelay (over TCP transport)", Missing: "a measurement on your kind of path",
		Measure: SweepCommand,
		Changes: TCPNodelayEvidence + ". If the sweep shows it faster beyond the spread on your path, add tcp-nodelay on the server (it is pushed to clients); if not, leave it out"}
}

// TCPNodelayEvidence is the measurement behind tcp-nodelay, quoted by
// advise and lint alike.
const TCPNodelayEvidence = "it depends on the path: swept on three TCP lab paths with tun-mtu 1500, tcp-nodelay was ×1.38–1.64 faster on a CPU-bound LAN, ×0.93–0.96 slower at 50 ms and 50 Mbit/s, ×1.33 faster up and no different down at 300 ms and 10 Mbit/s; with tun-mtu 9000 it made no difference beyond the spread in five of six path-directions (docs/measurements.md#tcp-transport-sweep). The OpenVPN cookbook measured 115 Mbit/s without and 146 Mbit/s with it on one LAN"

// PathMTURange is the path MTU advise and lint take: from the datagram
// every IPv4 host accepts to the largest IP packet.
func PathMTURange() bounds.Int {
	return bounds.Int{Min: overhead.MinIPv4MTU, Max: overhead.MaxIPPacket}
}
