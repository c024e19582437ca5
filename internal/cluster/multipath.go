package cluster

// One client over N tunnels: a multipath route whose nexthops are the N
// tun devices, on the client (towards the server's networks) and on the
// server (towards the client's site networks, `cluster serve --site`).
//
// The route is built from nexthop objects (Linux ≥ 5.3), not from an
// inline `nexthop dev A nexthop dev B` route: when a tun device goes away
// (an instance killed), the kernel deletes an inline multipath route
// entirely, cutting the flows on the other tunnels too; a nexthop object
// goes away alone and its group, and the route, stay on the others.
//
//	ip nexthop replace id G+1+i dev TUN_i        one per member
//	ip nexthop replace id G group G+1/G+2/…      the members up now
//	ip route replace PREFIX nhid G
//
// With fib_multipath_hash_policy=1 the kernel picks the nexthop by a hash
// of addresses, protocol and ports: one flow stays on one tunnel, many
// flows spread.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
)

// KindMultipath is a nexthop group and its routes: Name is the group id,
// Detail "PREFIX[,PREFIX…] MEMBERS" (member ids are Name+1…Name+MEMBERS).
const KindMultipath = "multipath"

// MultipathHashSysctls select L4 (5-tuple) hashing of multipath routes
// (IPv4, then IPv6); the slice is the caller's own.
func MultipathHashSysctls() []string {
	return []string{"net.ipv4.fib_multipath_hash_policy", "net.ipv6.fib_multipath_hash_policy"}
}

// Multipath keeps prefixes routed over the member devices that are up.
type Multipath struct {
	// Host is the namespace of the route and its devices.
	Host     hostnet.Host
	Prefixes []netip.Prefix
	Group    uint32
	Devs     []string // member i has nexthop id Group+1+i
	// V6 makes the nexthops IPv6 ones, for IPv6 prefixes (a route takes
	// nexthops of its own family).
	V6 bool

	mu  sync.Mutex
	cur string // the group as last written ("" none)
}

// Set routes the prefixes over the devices whose index is in up (none:
// the routes are removed). It returns whether the route changed.
func (m *Multipath) Set(ctx context.Context, up []int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	var members []uint32
	for _, i := range up {
		members = append(members, m.Group+1+uint32(i))
		ids = append(ids, strconv.Itoa(int(m.Group)+1+i))
	}
	want := strings.Join(ids, "/")
	if want == m.cur {
		return false, nil
	}
	if len(up) == 0 {
		_ = m.removeLocked(ctx)
		m.cur = ""
		return true, nil
	}
	fam := hostnet.IPv4
	if m.V6 {
		fam = hostnet.IPv6
	}
	for _, i := range up {
		// Equivalent to: ip nexthop replace id ID dev TUN (a tun
		// recreated by a restarted instance gets a new nexthop).
		if err := m.Host.NexthopReplace(ctx, hostnet.Nexthop{ID: m.Group + 1 + uint32(i), Family: fam, Dev: m.Devs[i]}); err != nil {
			return false, err
		}
	}
	// Equivalent to: ip nexthop replace id G group G+1/G+2/…
	if err := m.Host.NexthopReplace(ctx, hostnet.Nexthop{ID: m.Group, Group: members}); err != nil {
		return false, err
	}
	for _, p := range m.Prefixes {
		// Equivalent to: ip route replace PREFIX nhid G
		if err := m.Host.RouteReplace(ctx, hostnet.Route{Dst: p, NHID: m.Group}); err != nil {
			return false, err
		}
	}
	for i := range m.Devs {
		if !containsInt(up, i) {
			// Equivalent to: ip nexthop del id ID (out of the group now)
			_ = m.Host.NexthopDel(ctx, m.Group+1+uint32(i))
		}
	}
	m.cur = want
	return true, nil
}

// Members returns the device indexes in the route now.
func (m *Multipath) Members() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// Remove deletes the routes, the group and the members.
func (m *Multipath) Remove(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur = ""
	return m.removeLocked(ctx)
}

func (m *Multipath) removeLocked(ctx context.Context) error {
	return removeMultipath(ctx, m.Host, m.Group, m.Prefixes, len(m.Devs))
}

// removeMultipath deletes what a Multipath made, ignoring what is gone. A
// route to one of the prefixes by another nexthop is another's, and stays.
// Equivalent to: ip route del PREFIX nhid G; ip nexthop del id G; ip nexthop del id G+i
func removeMultipath(ctx context.Context, h hostnet.Host, group uint32, prefixes []netip.Prefix, members int) error {
	var errs []error
	keep := func(err error) {
		if err != nil && !hostnet.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	for _, p := range prefixes {
		keep(h.RouteDel(ctx, hostnet.Route{Dst: p, NHID: group}))
	}
	keep(h.NexthopDel(ctx, group))
	for i := 1; i <= members; i++ {
		keep(h.NexthopDel(ctx, group+uint32(i)))
	}
	return errors.Join(errs...)
}

// Resource is the state-file record of m (made before m.Set).
func (m *Multipath) Resource() Resource {
	var ps []string
	for _, p := range m.Prefixes {
		ps = append(ps, p.String())
	}
	return Resource{Kind: KindMultipath, Name: strconv.Itoa(int(m.Group)), Netns: m.Host.Netns(), Detail: fmt.Sprintf("%s %d", strings.Join(ps, ","), len(m.Devs))}
}

func removeMultipathResource(ctx context.Context, h hostnet.Host, r Resource) error {
	g, err := strconv.ParseUint(r.Name, 10, 32)
	f := strings.Fields(r.Detail)
	if err != nil || len(f) != 2 {
		return fmt.Errorf("state file: multipath %q %q: malformed; left alone", r.Name, r.Detail)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 1 || n > 256 {
		return fmt.Errorf("state file: multipath %q %q: malformed; left alone", r.Name, r.Detail)
	}
	var ps []netip.Prefix
	for _, s := range strings.Split(f[0], ",") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("state file: multipath %q %q: malformed; left alone", r.Name, r.Detail)
		}
		ps = append(ps, p)
	}
	return removeMultipath(ctx, h, uint32(g), ps, n)
}

// ProbeNexthops reports whether the kernel has nexthop objects.
// Equivalent to: ip nexthop show
func ProbeNexthops(ctx context.Context, h hostnet.Host) error {
	if _, err := h.Nexthops(ctx); err != nil {
		return fmt.Errorf("multipath over tunnels needs nexthop objects (Linux 5.3 or later, iproute2 with `ip nexthop`): %w", err)
	}
	return nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
