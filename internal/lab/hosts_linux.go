package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Hosts beyond client and server
//
//	  client ns        router ns                server ns
//	  c0 ─────────── rc          rs ─────────── s0        (the emulated path)
//	                   rh1 rh2 …
//	                    │   │
//	  NAME1 ns: h0 ─────┘   └───── h0 :NAME2 ns
//	  198.18.1.2  (router 198.18.1.1)   198.18.2.2  (router 198.18.2.1)
//
// A host is a namespace ovpnperf-LAB-NAME with one veth to the router, on
// its own /24 of HostNet, IPv4 only. Its own link is not emulated: host ↔
// host traffic crosses the router unshaped. Traffic between a host and the
// client (or the server) leaves the router through the client's (server's)
// port, so that port's rate limit applies to it, and so do delay, jitter
// and loss when the lab uses netem; the NFQUEUE emulator matches only
// client ↔ server packets. The emulated path stays client ↔ server.

// Interface names of a host's segment: the host's port, and the router's
// port towards host i.
const hostIf = "h0"

func routerHostIf(i int) string { return "rh" + strconv.Itoa(i) }

var hostNameRe = regexp.MustCompile(`^[a-z][a-z0-9]{0,11}$`)

// CheckHostName checks a host's name: 1–12 lower-case letters and digits,
// starting with a letter, and none of client, router, server, wire. Without
// dashes a namespace name ovpnperf-LAB-NAME names one lab and one node.
func CheckHostName(n Node) error { return checkHostName("host", n) }

func checkHostName(what string, n Node) error {
	if !hostNameRe.MatchString(string(n)) {
		return usage.Errorf("%s %q: want 1-12 lower-case letters or digits, starting with a letter", what, string(n))
	}
	if n == Client || n == Router || n == Server || n == Wire {
		return usage.Errorf("%s %q: client, router, server and wire are the lab's own nodes; pick another name", what, string(n))
	}
	return nil
}

// CheckHostNames checks a list of host names and that none repeats; what
// names them in the error as the user gave them ("--host").
func CheckHostNames(what string, nodes []Node) error {
	if len(nodes) > MaxHosts {
		return usage.Errorf("%s: %d hosts given, a lab has at most %d", what, len(nodes), MaxHosts)
	}
	seen := map[Node]bool{}
	for _, n := range nodes {
		if err := checkHostName(what, n); err != nil {
			return err
		}
		if seen[n] {
			return usage.Errorf("%s %q given twice: host names must be unique", what, string(n))
		}
		seen[n] = true
	}
	return nil
}

// Hosts returns the hosts added with AddHost, in the order they were added.
func (l *Lab) Hosts() []Host { return l.state.snapshot().Hosts }

// HostAddr returns the address of a host added with AddHost.
func (l *Lab) HostAddr(n Node) (netip.Addr, bool) {
	for _, h := range l.state.snapshot().Hosts {
		if h.Node == n {
			return h.Addr, true
		}
	}
	return netip.Addr{}, false
}

// HasNode reports whether n is one of the lab's nodes: client, router,
// server or a host added with AddHost.
func (l *Lab) HasNode(n Node) bool {
	if n == Client || n == Router || n == Server {
		return true
	}
	_, ok := l.HostAddr(n)
	return ok
}

// AddHost adds a host named node behind the router and returns its
// address. The host's namespace, ovpnperf-LAB-NODE, is recorded in the
// lab's state before it is made, so lab down, lab clean and an ephemeral
// lab's owner remove it (and stop what runs in it) like the others;
// l.Command and l.Start run programs in it. Host i (counting from 1 in
// this lab) is 198.18.i.2 behind the router's 198.18.i.1, with a default
// route via the router and permanent neighbour entries on both ends.
func (l *Lab) AddHost(ctx context.Context, node Node) (_ netip.Addr, err error) {
	if err := CheckHostName(node); err != nil {
		return netip.Addr{}, err
	}
	l.hostMu.Lock()
	defer l.hostMu.Unlock()
	st := l.state.snapshot()
	for _, h := range st.Hosts {
		if h.Node == node {
			return netip.Addr{}, usage.Errorf("host %q: lab %s already has a host of that name", string(node), l.name)
		}
	}
	if st.HostsAdded >= MaxHosts {
		return netip.Addr{}, usage.Errorf("host %q: lab %s already had %d hosts, the most a lab can have", string(node), l.name, MaxHosts)
	}
	ns := l.Namespace(node)
	if netns.Exists(ns) {
		return netip.Addr{}, usage.Errorf("host %q: namespace %s exists already; pick another name", string(node), ns)
	}
	if err := ctx.Err(); err != nil {
		return netip.Addr{}, err
	}
	i := st.HostsAdded + 1
	addr, gw := hostAddrs(i)
	h := Host{Node: node, Index: i, Addr: addr, RouterAddr: gw}
	if err := l.state.update(func(s *State) {
		s.HostsAdded = i
		s.Hosts = append(s.Hosts, h)
	}); err != nil {
		return netip.Addr{}, err
	}
	if err := l.state.record(Resource{Kind: KindNetns, Name: ns, Detail: "host " + string(node)}); err != nil {
		return netip.Addr{}, err
	}
	defer func() {
		if err != nil {
			// Take the half-made host out again; the namespace stays
			// listed, and deleting a missing one later is no error.
			_ = netns.Delete(ns)
			_ = l.state.update(func(s *State) {
				for j := range s.Hosts {
					if s.Hosts[j].Node == node {
						s.Hosts = append(s.Hosts[:j], s.Hosts[j+1:]...)
						break
					}
				}
			})
		}
	}()
	// Equivalent to: ip netns add ovpnperf-LAB-NODE
	if err := netns.Create(ns); err != nil {
		return netip.Addr{}, err
	}
	// IPv4 only: no IPv6 addresses, so no autoconfiguration to quiet.
	// Equivalent to: ip netns exec NS sysctl -w net.ipv6.conf.all.disable_ipv6=1
	for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
		if _, err := hostnet.Open(ns).SetSysctl(ctx, k, "1"); err != nil {
			return netip.Addr{}, fmt.Errorf("host %s: %w", node, err)
		}
	}
	rif := routerHostIf(i)
	if err := l.veth(node, hostIf, Router, rif, 1500); err != nil {
		return netip.Addr{}, err
	}
	for _, a := range []struct {
		node   Node
		ifname string
		addr   netip.Addr
	}{{node, hostIf, addr}, {Router, rif, gw}} {
		if err := l.withHandle(a.node, func(h *netlink.Handle) error {
			link, err := h.LinkByName(a.ifname)
			if err != nil {
				return err
			}
			// Equivalent to: ip -n NS addr add A/24 dev IF
			if err := h.AddrAdd(link, &netlink.Addr{IPNet: prefixNet(a.addr, 24)}); err != nil {
				return err
			}
			// Equivalent to: ip -n NS link set IF up (and lo in the host)
			if err := h.LinkSetUp(link); err != nil {
				return err
			}
			if a.node != Router {
				lo, err := h.LinkByName("lo")
				if err != nil {
					return err
				}
				return h.LinkSetUp(lo)
			}
			return nil
		}); err != nil {
			return netip.Addr{}, fmt.Errorf("host %s: address %s on %s in %s: %w", node, a.addr, a.ifname, a.node, err)
		}
	}
	if err := l.permanentNeighbour(node, hostIf, gw, Router, rif); err != nil {
		return netip.Addr{}, err
	}
	if err := l.permanentNeighbour(Router, rif, addr, node, hostIf); err != nil {
		return netip.Addr{}, err
	}
	if err := l.withHandle(node, func(h *netlink.Handle) error {
		// Equivalent to: ip -n NS route add default via 198.18.i.1
		return h.RouteAdd(&netlink.Route{Gw: net.IP(gw.AsSlice()), Family: netlink.FAMILY_V4})
	}); err != nil {
		return netip.Addr{}, fmt.Errorf("host %s: default route via %s: %w", node, gw, err)
	}
	return addr, nil
}

// permanentNeighbour tells node that a (the peer's address on ifname) is
// at the MAC address of peerIf in peerNode, as neighbours does for the
// lab's own segments.
//
// Equivalent to: ip -n NS neigh add A lladdr MAC dev IF nud permanent
func (l *Lab) permanentNeighbour(node Node, ifname string, a netip.Addr, peerNode Node, peerIf string) error {
	var hw net.HardwareAddr
	if err := l.withHandle(peerNode, func(h *netlink.Handle) error {
		link, err := h.LinkByName(peerIf)
		if err != nil {
			return err
		}
		hw = link.Attrs().HardwareAddr
		return nil
	}); err != nil {
		return fmt.Errorf("%s: %w", peerNode, err)
	}
	return l.withHandle(node, func(h *netlink.Handle) error {
		link, err := h.LinkByName(ifname)
		if err != nil {
			return err
		}
		if err := h.NeighAdd(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: family(a), State: netlink.NUD_PERMANENT,
			IP: net.IP(a.AsSlice()), HardwareAddr: hw}); err != nil {
			return fmt.Errorf("%s: neighbour %s on %s: %w", node, a, ifname, err)
		}
		return nil
	})
}

// NamespacesOf lists the namespaces on this machine that belong to lab
// name by their names: its client, router and server, its wire (with a
// wire backend), and its hosts
// (ovpnperf-NAME-HOST, where a host's name has no dash, so a namespace
// of a lab NAME-X is never taken for one of lab NAME's). It is how a lab
// whose state file is lost is found, and how tests check that nothing
// of a lab is left.
func NamespacesOf(name string) []string {
	var out []string
	for _, n := range append(Nodes(), Wire) {
		if ns := NamespaceName(name, n); netns.Exists(ns) {
			out = append(out, ns)
		}
	}
	entries, _ := os.ReadDir(netns.Dir)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "ovpnperf-"+name+"-")
		if !ok || CheckHostName(Node(rest)) != nil {
			continue
		}
		out = append(out, e.Name())
	}
	return out
}

// ownNamespace reports whether ns is a name lab name gives its namespaces:
// ovpnperf-NAME-NODE, NODE one of its nodes or a host. A host name has no
// dash, so a name is one lab's only (ovpnperf-a-b-router is lab a-b's).
func ownNamespace(name, ns string) bool {
	rest, ok := strings.CutPrefix(ns, "ovpnperf-"+name+"-")
	if !ok {
		return false
	}
	n := Node(rest)
	return n == Client || n == Router || n == Server || n == Wire || CheckHostName(n) == nil
}
