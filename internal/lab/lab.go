// Package lab builds an emulated network path on one Linux host out of three
// network namespaces and tears down exactly what it built.
//
//	  client ns                 router ns                     server ns
//	+-----------+  veth   +---------------------+  veth   +-----------+
//	| c0        |---------| rc              rs  |---------|        s0 |
//	| 192.0.2.2 |         | 192.0.2.1  198.51.100.1       | 198.51.100.2
//	| 2001:db8:c::2       | 2001:db8:c::1  2001:db8:5::1  | 2001:db8:5::2
//	+-----------+         +---------------------+         +-----------+
//	                        up   (client→server): leaves rs
//	                        down (server→client): leaves rc
//
// Rate limits are tbf qdiscs on the router's egress ports. Delay, jitter and
// loss use netem where the kernel has it, or else the userspace emulator of
// package emulate fed by iptables NFQUEUE rules in the router. The MTU
// bottleneck is the router–server segment.
//
// Path.Emulator "afpacket" or "afxdp" puts the userspace emulator on the
// client segment instead, as a layer-2 bump in the wire in a fourth
// namespace (no addresses, IPv6 and forwarding off) between c0 and rc:
//
//	client ns          wire ns                        router ns
//	c0 ─────── wc [emulator: wc ⇄ wr] wr ─────── rc      rs ─── s0
//	           up: frames from the client (wc → wr); down: wr → wc
//
// c0 and rc keep their names, addresses, neighbour entries and routes: the
// wire is transparent, they see each other's hardware addresses.
package lab

import (
	"net/netip"
	"time"
)

// Node is one of the three hosts of a lab.
type Node string

// The lab's nodes.
const (
	Client Node = "client"
	Router Node = "router"
	Server Node = "server"
)

// Nodes lists the nodes in creation order.
var Nodes = []Node{Client, Router, Server}

// Wire is the namespace of a lab whose emulator is a bump in the wire
// (WireBackend): it has no addresses, is not one of Nodes and runs
// nothing but the emulator's sockets, which the owner opens in it.
const Wire Node = "wire"

// Addresses of the lab. Every lab uses the same ones: each lives in its own
// namespaces, so labs never collide. Documentation ranges only.
var (
	ClientV4       = netip.MustParseAddr("192.0.2.2")
	RouterClientV4 = netip.MustParseAddr("192.0.2.1")
	RouterServerV4 = netip.MustParseAddr("198.51.100.1")
	ServerV4       = netip.MustParseAddr("198.51.100.2")
	ClientV6       = netip.MustParseAddr("2001:db8:c::2")
	RouterClientV6 = netip.MustParseAddr("2001:db8:c::1")
	RouterServerV6 = netip.MustParseAddr("2001:db8:5::1")
	ServerV6       = netip.MustParseAddr("2001:db8:5::2")

	// TunnelV4 and TunnelV6 are free for tunnels built across the lab
	// (OpenVPN's server subnet), sliced as callers need.
	TunnelV4 = netip.MustParsePrefix("203.0.113.0/24")
	TunnelV6 = netip.MustParsePrefix("2001:db8:7::/64")
)

// Link is the emulation applied to one direction of the path.
type Link struct {
	// RateBitsPerSec limits the direction's rate; 0 leaves it unshaped.
	RateBitsPerSec uint64 `json:"rate_bps"`
	// Delay is the one-way delay added to every packet.
	Delay time.Duration `json:"delay_ns"`
	// Jitter spreads the delay uniformly by ± Jitter (packets keep their order).
	Jitter time.Duration `json:"jitter_ns"`
	// LossPercent drops this share of packets at random (0–100).
	LossPercent float64 `json:"loss_percent"`
}

// Emulated reports whether the direction needs delay, jitter or loss.
func (l Link) Emulated() bool { return l.Delay > 0 || l.Jitter > 0 || l.LossPercent > 0 }

// Path is the emulated path between client and server.
type Path struct {
	Up   Link `json:"up"`   // client → server
	Down Link `json:"down"` // server → client
	// MTU of the router–server segment; 0 means 1500.
	MTU int `json:"mtu"`
	// ICMPBlackhole drops ICMP "fragmentation needed" and ICMPv6 "packet too
	// big" at the router, breaking path-MTU discovery.
	ICMPBlackhole bool `json:"icmp_blackhole"`
	// QueueBytes is the bottleneck buffer of each rate limiter; 0 picks one
	// bandwidth-delay product (at least 64 KiB).
	QueueBytes int `json:"queue_bytes"`
	// NoIPv6 builds an IPv4-only lab (needed for an MTU below 1280).
	NoIPv6 bool `json:"no_ipv6"`
	// LateTolerance is how late the userspace emulator may release a
	// packet before it counts it as late; 0 leaves its default, the larger
	// of 1 ms and a tenth of the delay. `lab calibrate` sets 1 ms.
	LateTolerance time.Duration `json:"late_tolerance_ns,omitempty"`
	// Emulator chooses the mechanism of delay, jitter and loss: "" or
	// EmulatorAuto for this host's default (netem where the kernel has it,
	// else nfqueue), or one of BackendNFQueue, BackendNetem,
	// BackendAFPacket, BackendAFXDP. A path with nothing to emulate uses
	// none whatever it says. See docs/lab.md.
	Emulator string `json:"emulator,omitempty"`
}

// EffectiveMTU returns the MTU of the bottleneck segment.
func (p Path) EffectiveMTU() int {
	if p.MTU == 0 {
		return 1500
	}
	return p.MTU
}

// Host is a host that AddHost put behind the router, beside client and
// server, with its own segment of HostNet: host i is 198.18.i.2 and the
// router 198.18.i.1 on it. Its link is not emulated: see AddHost.
type Host struct {
	Node       Node       `json:"node"`
	Index      int        `json:"index"`
	Addr       netip.Addr `json:"addr"`
	RouterAddr netip.Addr `json:"router_addr"`
}

// HostNet holds the segments of hosts added with AddHost: the RFC 2544
// benchmarking range, which no real network routes, like the documentation
// ranges of client and server.
var HostNet = netip.MustParsePrefix("198.18.0.0/15")

// MaxHosts is how many hosts one lab can have: one /24 of 198.18.0.0/16 each.
const MaxHosts = 254

// hostAddrs returns the addresses of host i and of the router on its segment.
func hostAddrs(i int) (host, router netip.Addr) {
	return netip.AddrFrom4([4]byte{198, 18, byte(i), 2}), netip.AddrFrom4([4]byte{198, 18, byte(i), 1})
}
