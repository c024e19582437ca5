package lab

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// queueBytes returns the bottleneck buffer of a rate limiter (see
// Path.QueueBytesFor).
func queueBytes(p labpath.Path, rateBits uint64) uint32 {
	q, _ := p.QueueBytesFor(rateBits)
	return q
}

// burstBytes sizes tbf's bucket: 2 ms at the rate, at least 16 KiB (ten
// full-size frames), so that the limiter is accurate at sub-second scales
// without needing a high timer rate.
func burstBytes(rateBits uint64) uint32 {
	b := rateBits / 8 / 500
	if b < 16<<10 {
		b = 16 << 10
	}
	return uint32(b)
}

// egress maps a direction to the router port its packets leave by.
func egress(dir string) string {
	if dir == "up" {
		return routerServerIf
	}
	return routerClientIf
}

// qdiscs installs rate limiters and, with the netem backend, netem itself on
// the router's egress ports.
func (l *Lab) qdiscs(p labpath.Path, backend string) error {
	for _, d := range []struct {
		dir  string
		link labpath.Link
	}{{"up", p.Up}, {"down", p.Down}} {
		ifname := egress(d.dir)
		parent := uint32(netlink.HANDLE_ROOT)
		if backend == labpath.BackendNetem && d.link.Emulated() {
			if err := l.state.record(Resource{Kind: KindQdisc, Name: "netem " + ifname, Netns: l.Namespace(Router)}); err != nil {
				return err
			}
			err := l.withHandle(Router, func(h *netlink.Handle) error {
				link, err := h.LinkByName(ifname)
				if err != nil {
					return err
				}
				// Equivalent to: tc -n ROUTER qdisc add dev IF root handle 1: netem
				//   delay D JITTER loss L% limit N
				q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
					netlink.NetemQdiscAttrs{Latency: uint32(d.link.Delay / time.Microsecond), Jitter: uint32(d.link.Jitter / time.Microsecond),
						Loss: float32(d.link.LossPercent), Limit: 100000})
				return h.QdiscAdd(q)
			})
			if err != nil {
				return fmt.Errorf("netem on %s: %w", ifname, err)
			}
			parent = netlink.MakeHandle(1, 1)
		}
		if d.link.RateBitsPerSec == 0 {
			continue
		}
		if err := l.state.record(Resource{Kind: KindQdisc, Name: "tbf " + ifname, Netns: l.Namespace(Router)}); err != nil {
			return err
		}
		rate := d.link.RateBitsPerSec / 8
		err := l.withHandle(Router, func(h *netlink.Handle) error {
			link, err := h.LinkByName(ifname)
			if err != nil {
				return err
			}
			// Equivalent to: tc -n ROUTER qdisc add dev IF root handle 2: tbf
			//   rate RATE burst BURST limit LIMIT
			q := &netlink.Tbf{
				QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(2, 0), Parent: parent},
				Rate:       rate,
				Limit:      queueBytes(p, d.link.RateBitsPerSec),
				Buffer:     netlink.Xmittime(rate, burstBytes(d.link.RateBitsPerSec)),
			}
			return h.QdiscAdd(q)
		})
		if err != nil {
			return fmt.Errorf("rate limit (tbf) on %s: %w", ifname, err)
		}
	}
	return nil
}

// NetemAvailable reports whether the kernel has sch_netem. The answer is
// probed once per process.
func NetemAvailable() bool {
	netemOnce.Do(func() { netemOK = probeNetem() })
	return netemOK
}

var (
	netemOnce sync.Once
	netemOK   bool
)

// probeNetem adds a netem qdisc to the loopback device of a private network
// namespace that lives only as long as the tc process in it: nothing is
// mounted and nothing outlives the probe. "Specified qdisc kind is unknown"
// means no sch_netem; any other failure also means netem cannot be used.
//
// Equivalent to: unshare -n tc qdisc add dev lo root netem delay 1ms
func probeNetem() bool {
	_, err := runner.Run(context.Background(), "unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
	return err == nil
}

// rules installs the router's iptables rules: the ICMP black hole and the
// NFQUEUE hooks of the userspace emulator, each recorded before it exists.
// They live in the router namespace and go with it.
func (l *Lab) rules(ctx context.Context, p labpath.Path, backend string) error {
	var v4, v6 []string
	if p.ICMPBlackhole {
		// The router itself originates "fragmentation needed" (OUTPUT);
		// FORWARD catches any from beyond it.
		for _, chain := range []string{"OUTPUT", "FORWARD"} {
			v4 = append(v4, "-A "+chain+" -p icmp --icmp-type fragmentation-needed -m comment --comment ovpnperf-blackhole -j DROP")
			v6 = append(v6, "-A "+chain+" -p icmpv6 --icmpv6-type packet-too-big -m comment --comment ovpnperf-blackhole -j DROP")
		}
	}
	if backend == labpath.BackendNFQueue {
		// No --queue-bypass: if the emulator is not there, packets are
		// dropped, never passed on undelayed.
		q := func(match string, num int) string {
			return fmt.Sprintf("-A %s -m comment --comment ovpnperf-emulator -j NFQUEUE --queue-num %d", match, num)
		}
		if p.Up.Emulated() {
			v4 = append(v4, q("FORWARD -i "+routerClientIf, queueUp), q("OUTPUT -o "+routerServerIf, queueUp))
			v6 = append(v6, q("FORWARD -i "+routerClientIf, queueUp), q("OUTPUT -o "+routerServerIf, queueUp))
		}
		if p.Down.Emulated() {
			v4 = append(v4, q("FORWARD -i "+routerServerIf, queueDown), q("OUTPUT -o "+routerClientIf, queueDown))
			v6 = append(v6, q("FORWARD -i "+routerServerIf, queueDown), q("OUTPUT -o "+routerClientIf, queueDown))
		}
	}
	if p.NoIPv6 {
		v6 = nil
	}
	router := hostnet.Open(l.Namespace(Router))
	for _, set := range []struct {
		tool  string
		fam   hostnet.Family
		rules []string
	}{{"iptables", hostnet.IPv4, v4}, {"ip6tables", hostnet.IPv6, v6}} {
		if len(set.rules) == 0 {
			continue
		}
		for _, r := range set.rules {
			if err := l.state.record(Resource{Kind: KindIptables, Name: set.tool + " " + r, Netns: l.Namespace(Router)}); err != nil {
				return err
			}
		}
		// One iptables-restore per family keeps lab up fast.
		// Equivalent to: ip netns exec ROUTER iptables -w -A … (each rule)
		if err := router.Restore(ctx, set.fam, "filter", set.rules); err != nil {
			return err
		}
	}
	return nil
}

// errNoOwner reports an owner that exited before saying it was ready.
var errNoOwner = errors.New("lab owner process exited during start-up")
