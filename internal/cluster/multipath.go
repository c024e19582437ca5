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
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
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
	Netns    string
	Prefixes []netip.Prefix
	Group    uint32
	Devs     []string // member i has nexthop id Group+1+i
	// V6 makes the nexthops IPv6 ones, for IPv6 prefixes (a route takes
	// nexthops of its own family).
	V6 bool

	mu  sync.Mutex
	cur string // the group as last written ("" none)
}

func (m *Multipath) ip(ctx context.Context, argv ...string) error {
	out, err := inNs(ctx, m.Netns, append([]string{"ip"}, argv...)...)
	if err != nil {
		return fmt.Errorf("ip %s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	return nil
}

// Set routes the prefixes over the devices whose index is in up (none:
// the routes are removed). It returns whether the route changed.
func (m *Multipath) Set(ctx context.Context, up []int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for _, i := range up {
		ids = append(ids, strconv.Itoa(int(m.Group)+1+i))
	}
	want := strings.Join(ids, "/")
	if want == m.cur {
		return false, nil
	}
	if len(up) == 0 {
		m.removeLocked(ctx)
		m.cur = ""
		return true, nil
	}
	for _, i := range up {
		// Equivalent to: ip nexthop replace id ID dev TUN (a tun
		// recreated by a restarted instance gets a new nexthop).
		if err := m.ip(ctx, m.family("nexthop", "replace", "id", strconv.Itoa(int(m.Group)+1+i), "dev", m.Devs[i])...); err != nil {
			return false, err
		}
	}
	if err := m.ip(ctx, "nexthop", "replace", "id", strconv.Itoa(int(m.Group)), "group", want); err != nil {
		return false, err
	}
	for _, p := range m.Prefixes {
		if err := m.ip(ctx, "route", "replace", p.String(), "nhid", strconv.Itoa(int(m.Group))); err != nil {
			return false, err
		}
	}
	for i := range m.Devs {
		if !containsInt(up, i) {
			_ = m.ip(ctx, "nexthop", "del", "id", strconv.Itoa(int(m.Group)+1+i))
		}
	}
	m.cur = want
	return true, nil
}

func (m *Multipath) family(argv ...string) []string {
	if m.V6 {
		return append([]string{"-6"}, argv...)
	}
	return argv
}

// Members returns the device indexes in the route now.
func (m *Multipath) Members() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// Remove deletes the routes, the group and the members.
func (m *Multipath) Remove(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(ctx)
	m.cur = ""
}

func (m *Multipath) removeLocked(ctx context.Context) {
	removeMultipath(ctx, m.Netns, m.Group, m.Prefixes, len(m.Devs))
}

// removeMultipath deletes what a Multipath made, ignoring what is gone.
// Equivalent to: ip route del PREFIX nhid G; ip nexthop del id G; ip nexthop del id G+i
func removeMultipath(ctx context.Context, ns string, group uint32, prefixes []netip.Prefix, members int) {
	g := strconv.Itoa(int(group))
	for _, p := range prefixes {
		_, _ = inNs(ctx, ns, "ip", "route", "del", p.String(), "nhid", g)
	}
	_, _ = inNs(ctx, ns, "ip", "nexthop", "del", "id", g)
	for i := 1; i <= members; i++ {
		_, _ = inNs(ctx, ns, "ip", "nexthop", "del", "id", strconv.Itoa(int(group)+i))
	}
}

// Resource is the state-file record of m (made before m.Set).
func (m *Multipath) Resource() Resource {
	var ps []string
	for _, p := range m.Prefixes {
		ps = append(ps, p.String())
	}
	return Resource{Kind: KindMultipath, Name: strconv.Itoa(int(m.Group)), Netns: m.Netns, Detail: fmt.Sprintf("%s %d", strings.Join(ps, ","), len(m.Devs))}
}

func removeMultipathResource(ctx context.Context, r Resource) error {
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
	removeMultipath(ctx, r.Netns, uint32(g), ps, n)
	return nil
}

// ProbeNexthops reports whether the kernel has nexthop objects.
// Equivalent to: ip nexthop show
func ProbeNexthops(ctx context.Context, ns string) error {
	out, err := inNs(ctx, ns, "ip", "nexthop", "show")
	if err != nil {
		return fmt.Errorf("multipath over tunnels needs nexthop objects (Linux 5.3 or later, iproute2 with `ip nexthop`): %w\n%s", err, out)
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
