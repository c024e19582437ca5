package hostnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Fake is an in-memory namespace for unit tests: links and their
// addresses and qdiscs, routes of the main table, nexthop objects, sysctls
// and netfilter tables. It refuses what the kernel refuses (a missing
// device, nexthop or chain; a group of a family; an IPv6 route over an
// IPv4 nexthop; a gateway no up device's subnet holds; a second root
// qdisc; deleting a chain still jumped to) and cascades as the kernel does
// (a veth's peer goes with it, a device's nexthops and routes go with it,
// a nexthop leaves its groups, a group left empty goes, routes go with
// their nexthop). A Fake is one namespace: a veth it makes has both ends
// in it. TestKernelAndFake runs one sequence on both and
// compares what they list.
type Fake struct {
	mu       sync.Mutex
	ns       string
	links    map[string]*fakeLink
	macs     byte // the last hardware address given out
	routes   map[Family][]Route
	nexthops map[uint32]*Nexthop
	sysctls  map[string]string
	tables   map[string]*fakeTable // "ipv4 nat"
	targets  map[string]bool       // "ipv4 HMARK hmark-tuple"
	root     string                // stands for / in the file methods
}

type fakeLink struct {
	up     bool
	mtu    int
	peer   string // a veth's other end
	mac    net.HardwareAddr
	addrs  []netip.Prefix
	neighs map[netip.Addr]net.HardwareAddr
	qdiscs []Qdisc
	txqlen int
	stats  LinkStats
}

type fakeTable struct {
	chains map[string][]string // chain → its rules, each the text after "-A CHAIN "
	order  []string
}

// NewFake returns a new namespace named ns: lo (down), the built-in chains of
// each table and the MASQUERADE target; sysctls exist once SetSysctlValue
// made them.
func NewFake(ns string) *Fake {
	f := &Fake{ns: ns, links: map[string]*fakeLink{}, routes: map[Family][]Route{}, nexthops: map[uint32]*Nexthop{},
		sysctls: map[string]string{}, tables: map[string]*fakeTable{}, targets: map[string]bool{}}
	for _, fam := range []Family{IPv4, IPv6} {
		f.AddTarget(fam, "MASQUERADE", "to-ports")
	}
	f.links["lo"] = &fakeLink{mtu: 65536, txqlen: defaultTxQLen}
	return f
}

// defaultTxQLen is the transmit queue Linux gives lo and a veth.
const defaultTxQLen = 1000

// AddLink makes a device (up or down) with addresses and a transmit queue
// of 1000 packets.
func (f *Fake) AddLink(name string, up bool, addrs ...netip.Prefix) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links[name] = &fakeLink{up: up, addrs: addrs, txqlen: defaultTxQLen}
}

// SetLinkStats sets a device's packet counters (the traffic a Fake has
// not carried).
func (f *Fake) SetLinkStats(name string, st LinkStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.links[name]; l != nil {
		l.stats = st
	}
}

// TxQLen is a device's transmit queue in packets; 0 for a missing device.
func (f *Fake) TxQLen(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.links[name]; l != nil {
		return l.txqlen
	}
	return 0
}

func (f *Fake) LinkSetTxQLen(ctx context.Context, name string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 0 {
		return fmt.Errorf("txqueuelen %d of %s in %s: not a queue length", n, name, f.where())
	}
	l, ok := f.links[name]
	if !ok {
		return notExist("link " + name + " in " + f.where())
	}
	l.txqlen = n
	return nil
}

func (f *Fake) LinkStats(ctx context.Context, name string) (LinkStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return LinkStats{}, fmt.Errorf("reading the counters of %s: %w", name, notExist("link "+name+" in "+f.where()))
	}
	return l.stats, nil
}

// SetLinkAddrs gives a device its addresses (a tunnel that connected).
func (f *Fake) SetLinkAddrs(name string, addrs ...netip.Prefix) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.links[name]; l != nil {
		l.addrs = addrs
	}
}

// SetSysctlValue makes a sysctl with a value.
func (f *Fake) SetSysctlValue(key, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sysctls[key] = value
}

// AddTarget makes an iptables target extension with an option available.
func (f *Fake) AddTarget(fam Family, target, option string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets[fam.String()+" "+target+" "+option] = true
}

// Rules returns a chain's rules as written (after "-A CHAIN "); nil when
// there is no such chain.
func (f *Fake) Rules(fam Family, table, chain string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.table(fam, table)
	if t == nil {
		return nil
	}
	if rs, ok := t.chains[chain]; ok {
		return append([]string{}, rs...)
	}
	return nil
}

func (f *Fake) Netns() string { return f.ns }

func (f *Fake) where() string {
	if f.ns == "" {
		return "this namespace"
	}
	return "namespace " + f.ns
}

func (f *Fake) LinkExists(ctx context.Context, name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.links[name]
	return ok, nil
}

func (f *Fake) LinkDel(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[name]; !ok {
		return notExist("link " + name + " in " + f.where())
	}
	gone := []string{name}
	if p := f.links[name].peer; p != "" {
		gone = append(gone, p)
	}
	for _, name := range gone {
		delete(f.links, name)
		for _, n := range f.sortedNexthops() {
			if n.Dev == name {
				f.removeNexthop(n.ID)
			}
		}
		for fam, rs := range f.routes {
			f.routes[fam] = slices.DeleteFunc(rs, func(r Route) bool { return r.NHID == 0 && r.Dev == name })
		}
	}
	return nil
}

func (f *Fake) VethAdd(ctx context.Context, name string, mtu int, peer, peerNetns string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	what := fmt.Sprintf("creating veth %s in %s – %s in %s", name, f.where(), peer, peerNetns)
	if peerNetns != f.ns {
		return fmt.Errorf("%s: a Fake is one namespace, %s", what, f.ns)
	}
	if name == peer {
		return fmt.Errorf("%s: file exists", what)
	}
	for _, n := range []string{name, peer} {
		if _, ok := f.links[n]; ok {
			return fmt.Errorf("%s: file exists", what)
		}
	}
	f.links[name] = &fakeLink{mtu: mtu, peer: peer, mac: f.newMAC(), txqlen: defaultTxQLen}
	f.links[peer] = &fakeLink{mtu: mtu, peer: name, mac: f.newMAC(), txqlen: defaultTxQLen}
	return nil
}

// newMAC is a locally administered hardware address, a new one each time.
func (f *Fake) newMAC() net.HardwareAddr {
	f.macs++
	return net.HardwareAddr{0x02, 0, 0, 0, 0, f.macs}
}

func (f *Fake) LinkMAC(ctx context.Context, name string) (net.HardwareAddr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return nil, notExist("link " + name + " in " + f.where())
	}
	return slices.Clone(l.mac), nil
}

func (f *Fake) NeighAdd(ctx context.Context, name string, a netip.Addr, mac net.HardwareAddr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return notExist("link " + name + " in " + f.where())
	}
	if _, ok := l.neighs[a]; ok {
		return fmt.Errorf("ip neigh add %s lladdr %s dev %s in %s: file exists", a, mac, name, f.where())
	}
	if l.neighs == nil {
		l.neighs = map[netip.Addr]net.HardwareAddr{}
	}
	l.neighs[a] = slices.Clone(mac)
	return nil
}

// Neighbours lists a device's neighbour entries, address → hardware
// address; nil for a missing device.
func (f *Fake) Neighbours(name string) map[netip.Addr]net.HardwareAddr {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.links[name]
	if l == nil {
		return nil
	}
	m := map[netip.Addr]net.HardwareAddr{}
	for a, hw := range l.neighs {
		m[a] = slices.Clone(hw)
	}
	return m
}

func (f *Fake) Links(ctx context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.links {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

func (f *Fake) LinkSetUp(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return notExist("link " + name + " in " + f.where())
	}
	l.up = true
	return nil
}

func (f *Fake) AddrAdd(ctx context.Context, name string, p netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return notExist("link " + name + " in " + f.where())
	}
	if slices.Contains(l.addrs, p) {
		return fmt.Errorf("ip addr add %s dev %s in %s: file exists", p, name, f.where())
	}
	l.addrs = append(l.addrs, p)
	return nil
}

func (f *Fake) QdiscAdd(ctx context.Context, name string, q Qdisc) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return notExist("link " + name + " in " + f.where())
	}
	what := fmt.Sprintf("tc qdisc add dev %s handle %d: %s in %s", name, q.Handle, q.Kind, f.where())
	if q.Kind != Netem && q.Kind != Tbf {
		return fmt.Errorf("qdisc %q on %s in %s: not a kind ovpnperf uses", q.Kind, name, f.where())
	}
	if q.Parent != 0 && !slices.ContainsFunc(l.qdiscs, func(x Qdisc) bool { return x.Handle == q.Parent }) {
		return notExist(what + ": the parent qdisc")
	}
	for _, x := range l.qdiscs {
		if x.Parent == q.Parent || x.Handle == q.Handle {
			return fmt.Errorf("%s: NLM_F_REPLACE needed to override", what)
		}
	}
	l.qdiscs = append(l.qdiscs, q)
	return nil
}

func (f *Fake) QdiscReplace(ctx context.Context, name string, q Qdisc) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return notExist("link " + name + " in " + f.where())
	}
	what := fmt.Sprintf("tc qdisc replace dev %s handle %d: %s in %s", name, q.Handle, q.Kind, f.where())
	if q.Kind != Netem && q.Kind != Tbf {
		return fmt.Errorf("qdisc %q on %s in %s: not a kind ovpnperf uses", q.Kind, name, f.where())
	}
	if q.Parent != 0 && !slices.ContainsFunc(l.qdiscs, func(x Qdisc) bool { return x.Handle == q.Parent }) {
		return notExist(what + ": the parent qdisc")
	}
	i := slices.IndexFunc(l.qdiscs, func(x Qdisc) bool { return x.Parent == q.Parent })
	if i >= 0 && l.qdiscs[i].Handle == q.Handle {
		if l.qdiscs[i].Kind != q.Kind {
			return fmt.Errorf("%s: invalid argument (the qdisc of this handle is a %s)", what, l.qdiscs[i].Kind)
		}
		l.qdiscs[i] = q
		return nil
	}
	if slices.ContainsFunc(l.qdiscs, func(x Qdisc) bool { return x.Handle == q.Handle }) {
		// The kernel would move that qdisc here; ovpnperf never asks it to.
		return fmt.Errorf("%s: the handle is another place's (a Fake does not move qdiscs)", what)
	}
	if i >= 0 {
		l.qdiscs = removeQdisc(l.qdiscs, l.qdiscs[i].Handle)
	}
	l.qdiscs = append(l.qdiscs, q)
	return nil
}

// removeQdisc is qs without the qdisc of handle and those under it.
func removeQdisc(qs []Qdisc, handle uint16) []Qdisc {
	gone := map[uint16]bool{handle: true}
	for grew := true; grew; {
		grew = false
		for _, x := range qs {
			if x.Parent != 0 && gone[x.Parent] && !gone[x.Handle] {
				gone[x.Handle], grew = true, true
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(qs), func(x Qdisc) bool { return gone[x.Handle] })
}

// Qdiscs lists a device's qdiscs in the order they were added; nil for a
// missing device.
func (f *Fake) Qdiscs(name string) []Qdisc {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.links[name]; l != nil {
		return slices.Clone(l.qdiscs)
	}
	return nil
}

// gatewayDev is the up device that has an address in gw's subnet.
func (f *Fake) gatewayDev(gw netip.Addr) string {
	var names []string
	for n := range f.links {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if !f.links[n].up {
			continue
		}
		for _, a := range f.links[n].addrs {
			if a.Masked().Contains(gw) {
				return n
			}
		}
	}
	return ""
}

func (f *Fake) LinkAddrs(ctx context.Context, name string) ([]netip.Prefix, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if !ok {
		return nil, notExist("link " + name + " in " + f.where())
	}
	return append([]netip.Prefix{}, l.addrs...), nil
}

func (f *Fake) Routes(ctx context.Context, fam Family) ([]Route, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs := append([]Route{}, f.routes[fam]...)
	sortRoutes(rs)
	return rs, nil
}

func (f *Fake) RouteReplace(ctx context.Context, r Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Dst = r.Dst.Masked()
	fam := FamilyOf(r.Dst)
	if r.NHID != 0 {
		n, ok := f.nexthops[r.NHID]
		if !ok {
			return fmt.Errorf("route replace %s in %s: nexthop id does not exist", r, f.where())
		}
		if fam == IPv6 && f.hasV4(n) {
			return fmt.Errorf("route replace %s in %s: IPv6 routes can not use an IPv4 nexthop", r, f.where())
		}
		r.Dev, r.Gw = "", netip.Addr{}
	} else if r.Gw.IsValid() {
		dev := f.gatewayDev(r.Gw)
		if dev == "" || r.Dev != "" && r.Dev != dev {
			return fmt.Errorf("route replace %s in %s: nexthop has invalid gateway", r, f.where())
		}
		r.Dev = dev
	} else {
		l, ok := f.links[r.Dev]
		if !ok {
			return fmt.Errorf("route replace %s in %s: cannot find device %q", r, f.where(), r.Dev)
		}
		if !l.up {
			return fmt.Errorf("route replace %s in %s: nexthop device is not up", r, f.where())
		}
	}
	rs := slices.DeleteFunc(f.routes[fam], func(x Route) bool { return x.Dst == r.Dst })
	f.routes[fam] = append(rs, r)
	return nil
}

func (f *Fake) hasV4(n *Nexthop) bool {
	if n.Group == nil {
		return n.Family == IPv4
	}
	for _, m := range n.Group {
		if x := f.nexthops[m]; x != nil && x.Family == IPv4 {
			return true
		}
	}
	return false
}

func (f *Fake) RouteDel(ctx context.Context, r Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fam := FamilyOf(r.Dst)
	rs := f.routes[fam]
	i := slices.IndexFunc(rs, func(x Route) bool { return sameRoute(x, r) })
	if i < 0 {
		return notExist("route " + r.String() + " in " + f.where())
	}
	f.routes[fam] = slices.Delete(rs, i, i+1)
	return nil
}

func (f *Fake) sortedNexthops() []Nexthop {
	var ns []Nexthop
	for _, n := range f.nexthops {
		c := *n
		c.Group = slices.Clone(n.Group)
		ns = append(ns, c)
	}
	slices.SortFunc(ns, func(a, b Nexthop) int { return int(int64(a.ID) - int64(b.ID)) })
	return ns
}

func (f *Fake) Nexthops(ctx context.Context) ([]Nexthop, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sortedNexthops(), nil
}

func (f *Fake) NexthopReplace(ctx context.Context, n Nexthop) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	what := fmt.Sprintf("nexthop replace id %d in %s", n.ID, f.where())
	if n.ID == 0 {
		return fmt.Errorf("%s: invalid nexthop id", what)
	}
	old, exists := f.nexthops[n.ID]
	if n.Group != nil {
		if n.Family != 0 {
			return fmt.Errorf("%s: invalid family for group", what)
		}
		if len(n.Group) == 0 {
			return fmt.Errorf("%s: empty group", what)
		}
		var fam Family
		for i, m := range n.Group {
			x, ok := f.nexthops[m]
			if !ok || x.Group != nil || slices.Contains(n.Group[:i], m) || m == n.ID {
				return fmt.Errorf("%s: invalid nexthop id %d in group", what, m)
			}
			if fam != 0 && x.Family != fam {
				return fmt.Errorf("%s: nexthop group can not have mixed families", what)
			}
			fam = x.Family
		}
		if exists && old.Group == nil {
			return fmt.Errorf("%s: can not replace a nexthop with a nexthop group", what)
		}
		f.nexthops[n.ID] = &Nexthop{ID: n.ID, Group: slices.Clone(n.Group)}
		return nil
	}
	if n.Family != IPv4 && n.Family != IPv6 {
		return fmt.Errorf("%s: a nexthop needs a family", what)
	}
	l, ok := f.links[n.Dev]
	if !ok {
		return fmt.Errorf("%s: cannot find device %q", what, n.Dev)
	}
	if !l.up {
		return fmt.Errorf("%s: nexthop device is not up", what)
	}
	if exists && old.Group != nil {
		return fmt.Errorf("%s: can not replace a nexthop group with a nexthop", what)
	}
	f.nexthops[n.ID] = &Nexthop{ID: n.ID, Family: n.Family, Dev: n.Dev}
	return nil
}

func (f *Fake) NexthopDel(ctx context.Context, id uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.nexthops[id]; !ok {
		return notExist(fmt.Sprintf("nexthop %d in %s", id, f.where()))
	}
	f.removeNexthop(id)
	return nil
}

// removeNexthop deletes id and what goes with it: the routes over it, its
// place in groups, and a group that has no member left.
func (f *Fake) removeNexthop(id uint32) {
	if _, ok := f.nexthops[id]; !ok {
		return
	}
	delete(f.nexthops, id)
	for fam, rs := range f.routes {
		f.routes[fam] = slices.DeleteFunc(rs, func(r Route) bool { return r.NHID == id })
	}
	for _, g := range f.sortedNexthops() {
		if !slices.Contains(g.Group, id) {
			continue
		}
		if len(g.Group) == 1 {
			f.removeNexthop(g.ID)
			continue
		}
		f.nexthops[g.ID].Group = slices.DeleteFunc(g.Group, func(m uint32) bool { return m == id })
	}
}

func (f *Fake) Sysctl(ctx context.Context, key string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := sysctlPath(key); err != nil {
		return "", err
	}
	v, ok := f.sysctls[key]
	if !ok {
		return "", notExist("sysctl " + key + " in " + f.where())
	}
	return v, nil
}

func (f *Fake) SetSysctl(ctx context.Context, key, value string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := sysctlPath(key); err != nil {
		return "", err
	}
	old, ok := f.sysctls[key]
	if !ok {
		return "", notExist("sysctl " + key + " in " + f.where())
	}
	f.sysctls[key] = value
	return old, nil
}

// table returns a table, made with its built-in chains on first use; nil
// for a table ovpnperf does not use.
func (f *Fake) table(fam Family, name string) *fakeTable {
	bs, ok := builtinChains[name]
	if !ok {
		return nil
	}
	k := fam.String() + " " + name
	if t := f.tables[k]; t != nil {
		return t
	}
	t := &fakeTable{chains: map[string][]string{}}
	for _, b := range bs {
		t.chains[b] = []string{}
		t.order = append(t.order, b)
	}
	f.tables[k] = t
	return t
}

func (t *fakeTable) clone() *fakeTable {
	c := &fakeTable{chains: map[string][]string{}, order: slices.Clone(t.order)}
	for k, v := range t.chains {
		c.chains[k] = slices.Clone(v)
	}
	return c
}

// knownTargets are the targets that are not chains.
var knownTargets = []string{"ACCEPT", "DROP", "RETURN", "REJECT", "LOG", "MASQUERADE", "SNAT", "DNAT", "REDIRECT", "MARK", "HMARK", "CONNMARK", "NFQUEUE"}

func (f *Fake) Restore(ctx context.Context, fam Family, table string, rules []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.table(fam, table)
	if t == nil {
		return checkTable(table)
	}
	if err := checkRuleLines(rules); err != nil {
		return err
	}
	c := t.clone()
	for n, line := range rules {
		if err := c.apply(line); err != nil {
			return fmt.Errorf("%s-restore in %s: line %d %q: %w", iptablesTool(fam, ""), f.where(), n+2, line, err)
		}
	}
	f.tables[fam.String()+" "+table] = c
	return nil
}

// apply runs one iptables-restore line (--noflush) on t.
func (t *fakeTable) apply(line string) error {
	fs := strings.Fields(line)
	if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
		return nil
	}
	if strings.HasPrefix(fs[0], ":") {
		ch := strings.TrimPrefix(fs[0], ":")
		if _, ok := t.chains[ch]; ok {
			if !slices.Contains(t.builtins(), ch) {
				t.chains[ch] = []string{} // --noflush: a chain declared again is emptied
			}
			return nil
		}
		t.chains[ch] = []string{}
		t.order = append(t.order, ch)
		return nil
	}
	if len(fs) < 2 {
		return fmt.Errorf("bad line")
	}
	op, ch := fs[0], fs[1]
	rules, ok := t.chains[ch]
	if op == "-N" {
		if ok {
			return fmt.Errorf("chain already exists")
		}
		t.chains[ch] = []string{}
		t.order = append(t.order, ch)
		return nil
	}
	if !ok {
		return fmt.Errorf("chain %s does not exist", ch)
	}
	rule := strings.Join(fs[2:], " ")
	switch op {
	case "-A", "-I":
		if target := ruleTarget(fs[2:]); target != "" {
			if _, isChain := t.chains[target]; !isChain && !slices.Contains(knownTargets, target) {
				return fmt.Errorf("couldn't load target %q", target)
			}
		}
		if op == "-A" {
			t.chains[ch] = append(rules, rule)
		} else {
			t.chains[ch] = append([]string{rule}, rules...)
		}
	case "-D":
		i := slices.Index(rules, rule)
		if i < 0 {
			return fmt.Errorf("bad rule (does a matching rule exist in that chain?)")
		}
		t.chains[ch] = slices.Delete(rules, i, i+1)
	case "-F":
		t.chains[ch] = []string{}
	case "-X":
		if slices.Contains(t.builtins(), ch) {
			return fmt.Errorf("cannot delete built-in chain %s", ch)
		}
		if len(rules) > 0 {
			return fmt.Errorf("directory not empty")
		}
		for _, o := range t.order {
			for _, r := range t.chains[o] {
				if ruleTarget(strings.Fields(r)) == ch {
					return fmt.Errorf("too many links")
				}
			}
		}
		delete(t.chains, ch)
		t.order = slices.DeleteFunc(t.order, func(o string) bool { return o == ch })
	default:
		return fmt.Errorf("unknown command %s", op)
	}
	return nil
}

func (t *fakeTable) builtins() []string {
	var bs []string
	for _, n := range t.order {
		for _, tb := range builtinChains {
			if slices.Contains(tb, n) && !slices.Contains(bs, n) {
				bs = append(bs, n)
			}
		}
	}
	return bs
}

// ruleTarget is the chain or target a rule's -j (or -g) names.
func ruleTarget(fs []string) string {
	for i := 0; i+1 < len(fs); i++ {
		if fs[i] == "-j" || fs[i] == "-g" || fs[i] == "--jump" || fs[i] == "--goto" {
			return fs[i+1]
		}
	}
	return ""
}

func (f *Fake) Chains(ctx context.Context, fam Family, table string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.table(fam, table)
	if t == nil {
		return nil, checkTable(table)
	}
	return slices.Clone(t.order), nil
}

func (f *Fake) RemoveChain(ctx context.Context, fam Family, table, chain string) error {
	f.mu.Lock()
	t := f.table(fam, table)
	if t == nil {
		f.mu.Unlock()
		return checkTable(table)
	}
	var rules []string
	for _, ch := range t.order {
		for _, r := range t.chains[ch] {
			rules = append(rules, "-A "+ch+" "+r)
		}
	}
	batch := removeChainBatch(t.order, rules, chain)
	f.mu.Unlock()
	if batch == nil {
		return notExist(fmt.Sprintf("%s chain %s in table %s of %s", fam, chain, table, f.where()))
	}
	return f.Restore(context.Background(), fam, table, batch)
}

func (f *Fake) HasTarget(ctx context.Context, fam Family, target, option string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.targets[fam.String()+" "+target+" "+option]
}

// SetRoot makes dir the fake's / for ReadFile, ReadDir, EvalSymlinks and
// WriteFile: its /sys is dir/sys. A symbolic link in it must be relative.
// Without a root every file is missing.
func (f *Fake) SetRoot(dir string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.root = dir
}

// rooted is p under the fake's root.
func (f *Fake) rooted(p string) (string, error) {
	_, r, err := f.rootAnd(p)
	return r, err
}

// rootAnd is the fake's root and p under it.
func (f *Fake) rootAnd(p string) (root, rooted string, err error) {
	if err := checkFilePath(p); err != nil {
		return "", "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.root == "" {
		return "", "", notExist(p + " in " + f.where())
	}
	return f.root, filepath.Join(f.root, p), nil
}

func (f *Fake) ReadFile(ctx context.Context, p string) ([]byte, error) {
	r, err := f.rooted(p)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(r)
}

func (f *Fake) ReadDir(ctx context.Context, dir string) ([]string, error) {
	r, err := f.rooted(dir)
	if err != nil {
		return nil, err
	}
	es, err := os.ReadDir(r)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names, err
}

func (f *Fake) EvalSymlinks(ctx context.Context, p string) (string, error) {
	root, r, err := f.rootAnd(p)
	if err != nil {
		return "", err
	}
	e, err := filepath.EvalSymlinks(r)
	if err != nil {
		return "", err
	}
	root, err = filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	rel, ok := strings.CutPrefix(e, root+"/")
	if !ok {
		return "", fmt.Errorf("%s in %s: a link out of the fake's root", p, f.where())
	}
	return "/" + rel, nil
}

// WriteFile writes an existing file, as sysfs and procfs make none.
func (f *Fake) WriteFile(ctx context.Context, p string, data []byte) error {
	r, err := f.rooted(p)
	if err != nil {
		return err
	}
	fh, err := os.OpenFile(r, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

var _ Host = (*Fake)(nil)

// String describes the namespace for a test's failure message.
func (f *Fake) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, n := range f.sortedNexthops() {
		fmt.Fprintf(&b, "nexthop %d %s dev=%s group=%v\n", n.ID, n.Family, n.Dev, n.Group)
	}
	for _, fam := range []Family{IPv4, IPv6} {
		for _, r := range f.routes[fam] {
			fmt.Fprintf(&b, "route %s\n", r)
		}
	}
	var ks []string
	for k := range f.tables {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		for _, ch := range f.tables[k].order {
			fmt.Fprintf(&b, "%s chain %s: %s\n", k, ch, strconv.Quote(strings.Join(f.tables[k].chains[ch], "; ")))
		}
	}
	return b.String()
}
