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
)

// Node is one of the three hosts of a lab.
type Node string

// The lab's nodes.
const (
	Client Node = "client"
	Router Node = "router"
	Server Node = "server"
)

// Nodes lists the nodes in creation order; the slice is the caller's own.
func Nodes() []Node { return []Node{Client, Router, Server} }

// Wire is the namespace of a lab whose emulator is a bump in the wire
// (WireBackend): it has no addresses, is not one of Nodes and runs
// nothing but the emulator's sockets, which the owner opens in it.
const Wire Node = "wire"

// Addresses of the lab. Every lab uses the same ones: each lives in its own
// namespaces, so labs never collide. Documentation ranges only. They are
// functions, so that no caller can move a lab's address for the others.

// ClientV4 is the client's IPv4 address.
func ClientV4() netip.Addr { return netip.MustParseAddr("192.0.2.2") }

// RouterClientV4 is the router's IPv4 address on the client's segment.
func RouterClientV4() netip.Addr { return netip.MustParseAddr("192.0.2.1") }

// RouterServerV4 is the router's IPv4 address on the server's segment.
func RouterServerV4() netip.Addr { return netip.MustParseAddr("198.51.100.1") }

// ServerV4 is the server's IPv4 address.
func ServerV4() netip.Addr { return netip.MustParseAddr("198.51.100.2") }

// ClientV6 is the client's IPv6 address.
func ClientV6() netip.Addr { return netip.MustParseAddr("2001:db8:c::2") }

// RouterClientV6 is the router's IPv6 address on the client's segment.
func RouterClientV6() netip.Addr { return netip.MustParseAddr("2001:db8:c::1") }

// RouterServerV6 is the router's IPv6 address on the server's segment.
func RouterServerV6() netip.Addr { return netip.MustParseAddr("2001:db8:5::1") }

// ServerV6 is the server's IPv6 address.
func ServerV6() netip.Addr { return netip.MustParseAddr("2001:db8:5::2") }

// TunnelV4 is free for tunnels built across the lab (OpenVPN's server
// subnet), sliced as callers need.
func TunnelV4() netip.Prefix { return netip.MustParsePrefix("203.0.113.0/24") }

// TunnelV6 is TunnelV4's IPv6 counterpart.
func TunnelV6() netip.Prefix { return netip.MustParsePrefix("2001:db8:7::/64") }

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
func HostNet() netip.Prefix { return netip.MustParsePrefix("198.18.0.0/15") }

// MaxHosts is how many hosts one lab can have: one /24 of 198.18.0.0/16 each.
const MaxHosts = 254

// hostAddrs returns the addresses of host i and of the router on its segment.
func hostAddrs(i int) (host, router netip.Addr) {
	return netip.AddrFrom4([4]byte{198, 18, byte(i), 2}), netip.AddrFrom4([4]byte{198, 18, byte(i), 1})
}
