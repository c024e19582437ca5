package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/vishvananda/netlink"
)

// What a lab builds in its namespaces: veth pairs, addresses, routes via a
// gateway, qdiscs. Each through netlink.

// link is the device name in h; missing is an error IsNotExist knows.
func (k kernel) link(h *netlink.Handle, name string) (netlink.Link, error) {
	l, err := h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil, notExist("link " + name + " in " + k.where())
	}
	return l, err
}

// withHandle runs fn with a netlink handle in the namespace.
func (k kernel) withHandle(fn func(h *netlink.Handle) error) error {
	h, err := k.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(h)
}

func (k kernel) VethAdd(ctx context.Context, name string, mtu int, peer, peerNetns string) error {
	peerNs, err := netns.Fd(peerNetns)
	if err != nil {
		return err
	}
	defer peerNs.Close()
	return k.withHandle(func(h *netlink.Handle) error {
		la := netlink.NewLinkAttrs()
		la.Name = name
		la.MTU = mtu
		v := &netlink.Veth{LinkAttrs: la, PeerName: peer, PeerMTU: uint32(mtu), PeerNamespace: netlink.NsFd(int(peerNs))}
		// Equivalent to: ip -n NS link add NAME mtu M type veth peer name PEER netns PEERNS mtu M
		if err := h.LinkAdd(v); err != nil {
			return fmt.Errorf("creating veth %s in %s – %s in %s: %w", name, k.where(), peer, peerNetns, err)
		}
		return nil
	})
}

func (k kernel) Links(ctx context.Context) ([]string, error) {
	var names []string
	err := k.withHandle(func(h *netlink.Handle) error {
		// Equivalent to: ip -n NS link show
		ls, err := h.LinkList()
		if err != nil {
			return fmt.Errorf("ip link show in %s: %w", k.where(), err)
		}
		for _, l := range ls {
			names = append(names, l.Attrs().Name)
		}
		return nil
	})
	slices.Sort(names)
	return names, err
}

func (k kernel) LinkSetUp(ctx context.Context, name string) error {
	return k.withHandle(func(h *netlink.Handle) error {
		l, err := k.link(h, name)
		if err != nil {
			return err
		}
		// Equivalent to: ip -n NS link set IF up
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("ip link set %s up in %s: %w", name, k.where(), err)
		}
		return nil
	})
}

func (k kernel) LinkMAC(ctx context.Context, name string) (net.HardwareAddr, error) {
	var hw net.HardwareAddr
	err := k.withHandle(func(h *netlink.Handle) error {
		// Equivalent to: ip -n NS link show dev IF (its link/ether)
		l, err := k.link(h, name)
		if err == nil {
			hw = l.Attrs().HardwareAddr
		}
		return err
	})
	return hw, err
}

func (k kernel) NeighAdd(ctx context.Context, name string, a netip.Addr, mac net.HardwareAddr) error {
	return k.withHandle(func(h *netlink.Handle) error {
		l, err := k.link(h, name)
		if err != nil {
			return err
		}
		// Equivalent to: ip -n NS neigh add ADDR lladdr MAC dev IF nud permanent
		if err := h.NeighAdd(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: nlFamily(a), State: netlink.NUD_PERMANENT,
			IP: net.IP(a.AsSlice()), HardwareAddr: mac}); err != nil {
			return fmt.Errorf("ip neigh add %s lladdr %s dev %s in %s: %w", a, mac, name, k.where(), err)
		}
		return nil
	})
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func (k kernel) AddrAdd(ctx context.Context, name string, p netip.Prefix) error {
	return k.withHandle(func(h *netlink.Handle) error {
		l, err := k.link(h, name)
		if err != nil {
			return err
		}
		flags := 0
		if p.Addr().Is6() {
			// Nothing else is on ovpnperf's links: no duplicate
			// address detection, so the address is usable at once.
			flags = 0x02 // IFA_F_NODAD
		}
		// Equivalent to: ip -n NS addr add A/BITS dev IF nodad
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: prefixNet(p), Flags: flags}); err != nil {
			return fmt.Errorf("ip addr add %s dev %s in %s: %w", p, name, k.where(), err)
		}
		return nil
	})
}

func nlFamily(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// routeViaReplace adds or replaces a route via a gateway.
func (k kernel) routeViaReplace(r Route) error {
	return k.withHandle(func(h *netlink.Handle) error {
		nr := &netlink.Route{Gw: net.IP(r.Gw.AsSlice()), Family: nlFamily(r.Gw)}
		if r.Dst.Bits() != 0 {
			nr.Dst = prefixNet(r.Dst.Masked())
		}
		if r.Dev != "" {
			l, err := k.link(h, r.Dev)
			if err != nil {
				return err
			}
			nr.LinkIndex = l.Attrs().Index
		}
		// Equivalent to: ip -n NS route replace PREFIX via GW (default via GW)
		if err := h.RouteReplace(nr); err != nil {
			return fmt.Errorf("ip route replace %s in %s: %w", r, k.where(), err)
		}
		return nil
	})
}

func (k kernel) QdiscAdd(ctx context.Context, name string, q Qdisc) error {
	return k.qdisc(name, q, false)
}

func (k kernel) QdiscReplace(ctx context.Context, name string, q Qdisc) error {
	return k.qdisc(name, q, true)
}

// qdisc adds q to the device, or with replace puts it in its place.
func (k kernel) qdisc(name string, q Qdisc, replace bool) error {
	verb := "add"
	if replace {
		verb = "replace"
	}
	return k.withHandle(func(h *netlink.Handle) error {
		l, err := k.link(h, name)
		if err != nil {
			return err
		}
		attrs := netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(q.Handle, 0), Parent: netlink.HANDLE_ROOT}
		if q.Parent != 0 {
			attrs.Parent = netlink.MakeHandle(q.Parent, 1)
		}
		var nq netlink.Qdisc
		switch q.Kind {
		case Netem:
			// Equivalent to: tc -n NS qdisc (add|replace) dev IF (root|parent P:1) handle H: netem
			//   delay D JITTER loss L% limit N
			nq = netlink.NewNetem(attrs, netlink.NetemQdiscAttrs{Latency: uint32(q.Delay / time.Microsecond),
				Jitter: uint32(q.Jitter / time.Microsecond), Loss: float32(q.LossPercent), Limit: q.Limit})
		case Tbf:
			// Equivalent to: tc -n NS qdisc (add|replace) dev IF (root|parent P:1) handle H: tbf
			//   rate RATE burst BURST limit LIMIT
			nq = &netlink.Tbf{QdiscAttrs: attrs, Rate: q.Rate, Limit: q.Limit, Buffer: netlink.Xmittime(q.Rate, q.Burst)}
		default:
			return fmt.Errorf("qdisc %q on %s in %s: not a kind ovpnperf uses", q.Kind, name, k.where())
		}
		if replace {
			err = h.QdiscReplace(nq)
		} else {
			err = h.QdiscAdd(nq)
		}
		if err != nil {
			return fmt.Errorf("tc qdisc %s dev %s handle %d: %s in %s: %w", verb, name, q.Handle, q.Kind, k.where(), err)
		}
		return nil
	})
}

func (k kernel) LinkSetTxQLen(ctx context.Context, name string, n int) error {
	if n < 0 {
		return fmt.Errorf("txqueuelen %d of %s in %s: not a queue length", n, name, k.where())
	}
	return k.withHandle(func(h *netlink.Handle) error {
		l, err := k.link(h, name)
		if err != nil {
			return err
		}
		// Equivalent to: ip -n NS link set dev IF txqueuelen N
		if err := h.LinkSetTxQLen(l, n); err != nil {
			return fmt.Errorf("ip link set dev %s txqueuelen %d in %s: %w", name, n, k.where(), err)
		}
		return nil
	})
}

func (k kernel) LinkStats(ctx context.Context, name string) (LinkStats, error) {
	var st LinkStats
	err := k.withHandle(func(h *netlink.Handle) error {
		// Equivalent to: ip -n NS -s link show dev IF
		l, err := k.link(h, name)
		if err != nil {
			return fmt.Errorf("reading the counters of %s: %w", name, err)
		}
		s := l.Attrs().Statistics
		if s == nil {
			return fmt.Errorf("%s in %s has no packet counters", name, k.where())
		}
		st = LinkStats{RxPackets: s.RxPackets, TxPackets: s.TxPackets}
		return nil
	})
	return st, err
}
