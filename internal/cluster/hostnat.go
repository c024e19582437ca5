package cluster

// Packets this host sends itself over N tunnels (`cluster connect
// --tunnels N`). A packet the client host originates gets as source the
// address of one tunnel, chosen by the kernel before or apart from the
// multipath hash that picks the tunnel it leaves by: for IPv6 over a
// nexthop group the source comes from the group's first member whatever
// the hash picks; for IPv4 the source comes from the nexthop of a lookup
// made before the socket's address and port are known. A packet that
// leaves tunnel i with tunnel j's address reaches an instance that did not
// give that address out, and OpenVPN drops it ("bad source address").
// Traffic the client routes from its site has a site address as source,
// which every instance accepts (an iroute per instance, `cluster serve
// --site`), and needs nothing.
//
// So each tunnel rewrites, on the way out, the source of the packets that
// carry another tunnel's address to its own, in the nat table of each
// family, one chain per run:
//
//	iptables  -t nat -N ovpnperf-ID-hostnat
//	iptables  -t nat -I POSTROUTING -j ovpnperf-ID-hostnat
//	iptables  -t nat -A ovpnperf-ID-hostnat -o TUN_i -s ADDR_j -j MASQUERADE   (each i, each j ≠ i)
//	ip6tables: the same with the tunnels' IPv6 addresses
//
// The rules name the tunnels' addresses exactly, so a site's packets (and
// a site address on the client itself) are never rewritten. MASQUERADE
// rather than SNAT --to: the kernel drops its translations when an
// address leaves the device (a tunnel that reconnected to another
// instance), and conntrack keeps each flow's translation, and the un-NAT
// of its replies, for the flow's life. The chain is rewritten when a
// tunnel's address changes (every TunnelsOptions.Interval).
//
// The cost: the nat table brings connection tracking into the namespace
// for every packet, the site's too (docs/cluster.md, "Flows this host
// sends"); `cluster connect --host-nat=false` leaves it out, and then only
// a site's flows work on every tunnel.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// KindNATChain is a connect run's nat chain (hostnat.go): Name the chain,
// Detail the family, "ipv4" or "ipv6".
const KindNATChain = "nat-chain"

func hostNATChain(id string) string { return "ovpnperf-" + id + "-hostnat" }

// natFamilies are the families of the host nat chains and their tools.
var natFamilies = []struct{ family, tool string }{{"ipv4", "iptables"}, {"ipv6", "ip6tables"}}

func natTool(family string) (string, bool) {
	for _, f := range natFamilies {
		if f.family == family {
			return f.tool, true
		}
	}
	return "", false
}

// hostNAT keeps a connect run's chains in line with its tunnels'
// addresses.
type hostNAT struct {
	ns    string
	chain string
	tools []string          // the families with a chain: "iptables", "ip6tables"
	cur   map[string]string // tool → the rules as last written
	run   func(ctx context.Context, ns string, argv ...string) ([]byte, error)
}

// ProbeNAT reports whether tool's (iptables or ip6tables) nat table works
// in ns: the kernel's nat for that family (nf_nat, with iptables-nft
// nft_chain_nat) and the MASQUERADE target.
// Equivalent to: ip6tables -w -t nat -n -L POSTROUTING; ip6tables -j MASQUERADE --help
func ProbeNAT(ctx context.Context, ns, tool string) error {
	if out, err := inNs(ctx, ns, tool, "-w", "-t", "nat", "-n", "-L", "POSTROUTING"); err != nil {
		return fmt.Errorf("%s nat table: %w\n%s", tool, err, strings.TrimSpace(string(out)))
	}
	if out, err := inNs(ctx, ns, tool, "-j", "MASQUERADE", "--help"); err != nil || !strings.Contains(string(out), "to-ports") {
		return fmt.Errorf("%s MASQUERADE target: %v\n%s", tool, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ipt runs tool -w -t nat ARGS in the chain's namespace.
func (h *hostNAT) ipt(ctx context.Context, tool string, args ...string) error {
	argv := append([]string{tool, "-w", "-t", "nat"}, args...)
	out, err := h.run(ctx, h.ns, argv...)
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// create makes tool's chain (empty) and the jump to it; the chain is
// recorded by the caller before.
// Equivalent to: iptables -t nat -N CH; iptables -t nat -I POSTROUTING -j CH
func (h *hostNAT) create(ctx context.Context, tool string) error {
	if err := h.ipt(ctx, tool, "-N", h.chain); err != nil {
		return err
	}
	if err := h.ipt(ctx, tool, "-I", "POSTROUTING", "-j", h.chain); err != nil {
		return err
	}
	h.tools = append(h.tools, tool)
	return nil
}

// hostNATRules are the rules of one family's chain for the tunnels'
// addresses (addrs[i]: tunnel i's, invalid when it has none): each
// argv after `iptables -t nat`.
func hostNATRules(chain string, devs []string, addrs []netip.Addr) [][]string {
	var rules [][]string
	for i, dev := range devs {
		if !addrs[i].IsValid() {
			continue
		}
		for j, a := range addrs {
			if j == i || !a.IsValid() || a == addrs[i] {
				continue
			}
			rules = append(rules, []string{"-A", chain, "-o", dev, "-s", netip.PrefixFrom(a, a.BitLen()).String(), "-j", "MASQUERADE"})
		}
	}
	return rules
}

// sync rewrites each chain whose rules differ from those for the
// tunnels' addresses now (addrs4, addrs6 indexed like devs).
// Equivalent to: iptables -t nat -F CH; iptables -t nat -A CH -o TUN_i -s ADDR_j -j MASQUERADE …
func (h *hostNAT) sync(ctx context.Context, devs []string, addrs4, addrs6 []netip.Addr) (bool, error) {
	changed := false
	for _, tool := range h.tools {
		addrs := addrs4
		if tool == "ip6tables" {
			addrs = addrs6
		}
		rules := hostNATRules(h.chain, devs, addrs)
		var text []string
		for _, r := range rules {
			text = append(text, strings.Join(r, " "))
		}
		want := strings.Join(text, "\n")
		if h.cur[tool] == want {
			continue
		}
		h.cur[tool] = "?" // written again next time if this fails half-way
		if err := h.ipt(ctx, tool, "-F", h.chain); err != nil {
			return changed, err
		}
		for _, r := range rules {
			if err := h.ipt(ctx, tool, r...); err != nil {
				return changed, err
			}
		}
		h.cur[tool] = want
		changed = true
	}
	return changed, nil
}

// describe is the chains' rules for the log: "t1 rewrites 10.8.0.6, …".
func (h *hostNAT) describe() string {
	var s []string
	for _, tool := range h.tools {
		if h.cur[tool] != "" {
			s = append(s, strings.ReplaceAll(h.cur[tool], "\n", "; "))
		}
	}
	return strings.Join(s, "; ")
}

// deleteNATChain removes a host nat chain a connect run listed and every
// jump to it, ignoring what is gone.
// Equivalent to: iptables -t nat -D POSTROUTING -j CH; iptables -t nat -F CH; iptables -t nat -X CH
func deleteNATChain(ctx context.Context, r Resource) error {
	tool, ok := natTool(r.Detail)
	if !ok || !strings.HasPrefix(r.Name, "ovpnperf-") {
		return fmt.Errorf("state: bad nat chain record %+v", r)
	}
	for i := 0; i < 8; i++ {
		if _, err := inNs(ctx, r.Netns, tool, "-w", "-t", "nat", "-D", "POSTROUTING", "-j", r.Name); err != nil {
			break
		}
	}
	_, _ = inNs(ctx, r.Netns, tool, "-w", "-t", "nat", "-F", r.Name)
	_, _ = inNs(ctx, r.Netns, tool, "-w", "-t", "nat", "-X", r.Name)
	return nil
}

// tunAddrs returns each device's IPv4 address and global IPv6 address in
// this process's namespace (invalid where it has none).
// Equivalent to: ip -o addr show dev TUN
func tunAddrs(devs []string) (v4, v6 []netip.Addr) {
	v4 = make([]netip.Addr, len(devs))
	v6 = make([]netip.Addr, len(devs))
	for i, dev := range devs {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			continue
		}
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		var six []netip.Addr
		for _, a := range as {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			switch {
			case ip.Is4() && !v4[i].IsValid():
				v4[i] = ip
			case ip.Is6() && ip.IsGlobalUnicast():
				six = append(six, ip)
			}
		}
		if len(six) > 0 {
			// One address per tunnel and family is what OpenVPN gives;
			// with more, the lowest, so that the choice is stable.
			slices.SortFunc(six, func(a, b netip.Addr) int { return a.Compare(b) })
			v6[i] = six[0]
		}
	}
	return v4, v6
}
