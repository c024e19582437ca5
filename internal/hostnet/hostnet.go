// Package hostnet is the one way ovpnperf changes a network namespace:
// links, addresses, neighbours, routes, nexthop objects, qdiscs, sysctls,
// netfilter rules and its view of /sys and /proc. A Host is one namespace. Open gives the kernel's; Fake is an in-memory
// model of one for unit tests, which fails as the kernel does when an
// object is missing or in use, so that the code above it (connect's
// multipath route, the cluster's chains, the journal's undo) is tested
// without root.
//
// How the kernel is asked, one path per kind of object:
//
//	links, addresses  netlink (vishvananda/netlink); also neighbours,
//	                  qdiscs and routes via a gateway
//	nexthops, routes  `ip nexthop …` / `ip route …`: netlink v1.3.1 has
//	                  neither nexthop objects (RTM_NEWNEXTHOP) nor a route's
//	                  nexthop id (RTA_NH_ID); lists come from `ip -json`,
//	                  read from standard output only (standard error goes
//	                  into the error)
//	sysctls           /proc/sys, read and written inside the namespace
//	/sys, /proc       read and written where /sys is the namespace's own:
//	                  a thread that mounted a sysfs of it, as `ip netns
//	                  exec` does (/sys/class/net lists only the devices of
//	                  the namespace that mounted it); /proc is the host's
//	netfilter         iptables-restore --noflush -w (ip6tables-restore), one
//	                  batch per family and table, applied whole or not at
//	                  all; read back with iptables-save
//
// Processes are not a Host's: a process runs in a namespace but is no
// object of it. It is started by internal/runner (`ip netns exec`, a
// parent-death signal, its output read and waited for) and belongs to the
// host's pid namespace, where it is named by pid, start time and command
// line; journal.Processes undoes it only while all three still match,
// with runner.Terminate. A Host method for them would open no
// namespace and change none, and a fake of it would be a fake of exec.
//
// A missing object is an error that wraps fs.ErrNotExist (IsNotExist):
// undoing something already gone is not a failure (CNI DEL semantics), but
// the caller decides that, not this package.
package hostnet

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// Family is the address family of a route, a nexthop or a netfilter table.
type Family int

// The families. A nexthop group has none (Family 0): the kernel gives
// groups AF_UNSPEC and takes members of one family.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	switch f {
	case IPv4:
		return "ipv4"
	case IPv6:
		return "ipv6"
	}
	return "unspec"
}

// FamilyOf is the family of p's address.
func FamilyOf(p netip.Prefix) Family {
	if p.Addr().Is4() {
		return IPv4
	}
	return IPv6
}

// Route is a route of the main table.
type Route struct {
	Dst netip.Prefix
	// NHID is the nexthop object (or group) the route goes by; 0 none.
	NHID uint32
	// Gw is the gateway the route goes via, on a device that is up and
	// has an address in the gateway's subnet (the kernel picks the
	// device: Dev says which one in a listing); none when invalid.
	Gw netip.Addr
	// Dev is the route's device when it has no NHID (the first one of an
	// inline multipath route).
	Dev string
}

func (r Route) String() string {
	if r.NHID != 0 {
		return r.Dst.String() + " nhid " + strconv.FormatUint(uint64(r.NHID), 10)
	}
	if r.Gw.IsValid() {
		s := r.Dst.String() + " via " + r.Gw.String()
		if r.Dev != "" {
			s += " dev " + r.Dev
		}
		return s
	}
	return r.Dst.String() + " dev " + r.Dev
}

// Qdisc is a queueing discipline of a device: netem (Delay, Jitter,
// LossPercent, Limit in packets) or tbf (Rate, Burst, Limit in bytes).
type Qdisc struct {
	Kind string // "netem" or "tbf"
	// Handle is its major number (1 is "1:").
	Handle uint16
	// Parent is the major number of the qdisc under whose class 1
	// (PARENT:1) it hangs; 0 is the device's root.
	Parent uint16

	Delay, Jitter time.Duration
	LossPercent   float64
	// Rate is in bytes per second, Burst the bucket in bytes.
	Rate  uint64
	Burst uint32
	Limit uint32
}

// The kinds of qdisc.
const (
	Netem = "netem"
	Tbf   = "tbf"
)

// LinkStats are a device's packet counters since it was made: received
// (rx) and sent (tx) packets.
type LinkStats struct {
	RxPackets, TxPackets uint64
}

// Nexthop is a nexthop object: a device (Dev, Family), or a group of
// other nexthops (Group, Family 0).
type Nexthop struct {
	ID     uint32
	Family Family
	Dev    string
	Group  []uint32
}

// Host changes one network namespace. Every method acts in that namespace
// only; none moves the caller's thread.
type Host interface {
	// Netns is the namespace's name under /run/netns; "" is the caller's
	// own namespace.
	Netns() string

	// VethAdd makes a veth pair, down, both ends with the MTU: name in
	// this namespace, peer in the namespace peerNetns (its name under
	// /run/netns; this one's own name keeps both ends here).
	VethAdd(ctx context.Context, name string, mtu int, peer, peerNetns string) error
	// Links lists the devices' names, sorted.
	Links(ctx context.Context) ([]string, error)
	// LinkExists reports whether a device of this name exists.
	LinkExists(ctx context.Context, name string) (bool, error)
	// LinkSetUp sets a device up.
	LinkSetUp(ctx context.Context, name string) error
	// LinkMAC is a device's hardware address.
	LinkMAC(ctx context.Context, name string) (net.HardwareAddr, error)
	// LinkSetTxQLen sets a device's transmit queue, in packets.
	LinkSetTxQLen(ctx context.Context, name string, n int) error
	// LinkStats reads a device's packet counters.
	LinkStats(ctx context.Context, name string) (LinkStats, error)
	// LinkDel deletes a device (and with it its nexthops, the groups left
	// empty and the routes over them).
	LinkDel(ctx context.Context, name string) error
	// LinkAddrs lists a device's addresses.
	LinkAddrs(ctx context.Context, name string) ([]netip.Prefix, error)
	// AddrAdd adds an address to a device; an IPv6 one is usable at
	// once (no duplicate address detection).
	AddrAdd(ctx context.Context, name string, p netip.Prefix) error

	// NeighAdd adds a permanent neighbour entry: a is at mac on the
	// device.
	NeighAdd(ctx context.Context, name string, a netip.Addr, mac net.HardwareAddr) error

	// QdiscAdd adds a qdisc to a device; a root or a class that has one
	// already is refused.
	QdiscAdd(ctx context.Context, name string, q Qdisc) error
	// QdiscReplace adds q, or replaces the qdisc in q's place (the root,
	// or PARENT:1): one of q's handle and kind takes q's parameters, one
	// of another handle goes with the qdiscs under it; one of q's handle
	// and another kind is refused.
	QdiscReplace(ctx context.Context, name string, q Qdisc) error

	// Routes lists the main table's routes of a family, sorted.
	Routes(ctx context.Context, f Family) ([]Route, error)
	// RouteReplace adds r, or replaces the route to r.Dst: by r.NHID,
	// via r.Gw, or on r.Dev.
	RouteReplace(ctx context.Context, r Route) error
	// RouteDel deletes the route to r.Dst, only while it still goes by
	// r.NHID (or r.Dev): another's route to the same prefix stays.
	RouteDel(ctx context.Context, r Route) error

	// Nexthops lists the nexthop objects, sorted by id.
	Nexthops(ctx context.Context) ([]Nexthop, error)
	// NexthopReplace adds n, or replaces the nexthop of n.ID.
	NexthopReplace(ctx context.Context, n Nexthop) error
	// NexthopDel deletes a nexthop: it leaves the groups it is in (a
	// group left empty goes too), and the routes over it go.
	NexthopDel(ctx context.Context, id uint32) error

	// Sysctl reads a sysctl (net.ipv4.ip_forward).
	Sysctl(ctx context.Context, key string) (string, error)
	// SetSysctl writes a sysctl and returns the value it had.
	SetSysctl(ctx context.Context, key, value string) (old string, err error)

	// Restore applies rules (iptables-restore lines without the table
	// and COMMIT lines: ":CHAIN - [0:0]" makes a chain or empties it,
	// "-A CHAIN …", "-I CHAIN …", "-D CHAIN …", "-F CHAIN", "-X CHAIN")
	// to one table, all of them or none.
	Restore(ctx context.Context, f Family, table string, rules []string) error
	// Chains lists a table's chains, the built-in ones included.
	Chains(ctx context.Context, f Family, table string) ([]string, error)
	// RemoveChain deletes every rule of the table that jumps to chain,
	// then the chain, in one batch.
	RemoveChain(ctx context.Context, f Family, table, chain string) error
	// ReadFile reads a file of /sys or /proc as the namespace sees them:
	// its own devices under /sys/class/net.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// ReadDir lists the names in a directory of /sys or /proc.
	ReadDir(ctx context.Context, dir string) ([]string, error)
	// EvalSymlinks is a /sys or /proc path with its symbolic links
	// resolved (a device's bus device, its driver).
	EvalSymlinks(ctx context.Context, path string) (string, error)
	// WriteFile writes a file of /sys or /proc.
	WriteFile(ctx context.Context, path string, data []byte) error

	// HasTarget reports whether the family's iptables has the target
	// extension (HMARK, MASQUERADE) with an option of this name.
	HasTarget(ctx context.Context, f Family, target, option string) bool
}

// IsNotExist reports whether err says the object is not there.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// HasChain reports whether table has chain.
func HasChain(ctx context.Context, h Host, f Family, table, chain string) (bool, error) {
	cs, err := h.Chains(ctx, f, table)
	if err != nil {
		return false, err
	}
	for _, c := range cs {
		if c == chain {
			return true, nil
		}
	}
	return false, nil
}

// RoutesTo lists the routes to exactly p.
func RoutesTo(ctx context.Context, h Host, p netip.Prefix) ([]Route, error) {
	rs, err := h.Routes(ctx, FamilyOf(p))
	if err != nil {
		return nil, err
	}
	var out []Route
	for _, r := range rs {
		if r.Dst == p.Masked() {
			out = append(out, r)
		}
	}
	return out, nil
}
