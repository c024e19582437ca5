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
	"net/netip"
	"slices"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
)

// KindNATChain is a connect run's nat chain (hostnat.go): Name the chain,
// Detail the family, "ipv4" or "ipv6".
const KindNATChain = "nat-chain"

func hostNATChain(id string) string { return "ovpnperf-" + id + "-hostnat" }

// natFamilies are the families of the host nat chains.
var natFamilies = []hostnet.Family{hostnet.IPv4, hostnet.IPv6}

// natFamily is the family a nat-chain entry's Detail names.
func natFamily(detail string) (hostnet.Family, bool) {
	for _, f := range natFamilies {
		if f.String() == detail {
			return f, true
		}
	}
	return 0, false
}

// hostNAT keeps a connect run's chains in line with its tunnels'
// addresses.
type hostNAT struct {
	h     hostnet.Host
	chain string
	fams  []hostnet.Family          // the families with a chain
	cur   map[hostnet.Family]string // the rules as last written
}

// ProbeNAT reports whether the family's nat table works in h: the
// kernel's nat for that family (nf_nat, with iptables-nft nft_chain_nat)
// and the MASQUERADE target.
// Equivalent to: ip6tables-save -t nat; ip6tables -j MASQUERADE --help
func ProbeNAT(ctx context.Context, h hostnet.Host, f hostnet.Family) error {
	ok, err := hostnet.HasChain(ctx, h, f, "nat", "POSTROUTING")
	if err != nil {
		return fmt.Errorf("%s nat table: %w", f, err)
	}
	if !ok {
		return fmt.Errorf("%s nat table: no POSTROUTING chain", f)
	}
	if !h.HasTarget(ctx, f, "MASQUERADE", "to-ports") {
		return fmt.Errorf("%s nat table: no MASQUERADE target", f)
	}
	return nil
}

// create makes the family's chain (empty) and the jump to it; the chain
// is recorded by the caller before. -N refuses a chain that exists (it
// is not this run's), and the batch then changes nothing.
// Equivalent to: iptables -t nat -N CH; iptables -t nat -I POSTROUTING -j CH
func (h *hostNAT) create(ctx context.Context, f hostnet.Family) error {
	if err := h.h.Restore(ctx, f, "nat", []string{"-N " + h.chain, "-I POSTROUTING -j " + h.chain}); err != nil {
		return err
	}
	h.fams = append(h.fams, f)
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
// tunnels' addresses now (addrs4, addrs6 indexed like devs), in one batch
// per family: the chain is never seen half-written.
// Equivalent to: iptables -t nat -F CH; iptables -t nat -A CH -o TUN_i -s ADDR_j -j MASQUERADE …
func (h *hostNAT) sync(ctx context.Context, devs []string, addrs4, addrs6 []netip.Addr) (bool, error) {
	changed := false
	for _, f := range h.fams {
		addrs := addrs4
		if f == hostnet.IPv6 {
			addrs = addrs6
		}
		var text []string
		for _, r := range hostNATRules(h.chain, devs, addrs) {
			text = append(text, strings.Join(r, " "))
		}
		want := strings.Join(text, "\n")
		if h.cur[f] == want {
			continue
		}
		h.cur[f] = "?" // written again next time if this fails
		// ":CH" empties the chain (iptables-restore --noflush).
		if err := h.h.Restore(ctx, f, "nat", append([]string{":" + h.chain + " - [0:0]"}, text...)); err != nil {
			return changed, err
		}
		h.cur[f] = want
		changed = true
	}
	return changed, nil
}

// describe is the chains' rules for the log: "t1 rewrites 10.8.0.6, …".
func (h *hostNAT) describe() string {
	var s []string
	for _, f := range h.fams {
		if h.cur[f] != "" {
			s = append(s, strings.ReplaceAll(h.cur[f], "\n", "; "))
		}
	}
	return strings.Join(s, "; ")
}

// deleteNATChain removes a host nat chain a connect run listed and every
// jump to it, ignoring what is gone.
// Equivalent to: iptables -t nat -D POSTROUTING -j CH; iptables -t nat -F CH; iptables -t nat -X CH
func deleteNATChain(ctx context.Context, h hostnet.Host, r Resource) error {
	f, ok := natFamily(r.Detail)
	if !ok || !strings.HasPrefix(r.Name, "ovpnperf-") {
		return fmt.Errorf("state: bad nat chain record %+v", r)
	}
	if err := h.RemoveChain(ctx, f, "nat", r.Name); err != nil && !hostnet.IsNotExist(err) {
		return err
	}
	return nil
}

// tunAddrs returns each device's IPv4 address and global IPv6 address in
// h (invalid where it has none).
// Equivalent to: ip -o addr show dev TUN
func tunAddrs(ctx context.Context, h hostnet.Host, devs []string) (v4, v6 []netip.Addr) {
	v4 = make([]netip.Addr, len(devs))
	v6 = make([]netip.Addr, len(devs))
	for i, dev := range devs {
		as, err := h.LinkAddrs(ctx, dev)
		if err != nil {
			continue
		}
		var six []netip.Addr
		for _, a := range as {
			ip := a.Addr()
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
