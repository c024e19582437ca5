package hostnet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Fake is an in-memory namespace for unit tests: links, routes of the main
// table, nexthop objects, sysctls and netfilter tables. It refuses what
// the kernel refuses (a missing device, nexthop or chain; a group of a
// family; an IPv6 route over an IPv4 nexthop; deleting a chain still
// jumped to) and cascades as the kernel does (a device's nexthops go with
// it, a nexthop leaves its groups, a group left empty goes, routes go
// with their nexthop). TestKernelAndFake runs one sequence on both and
// compares what they list.
type Fake struct {
	mu       sync.Mutex
	ns       string
	links    map[string]*fakeLink
	routes   map[Family][]Route
	nexthops map[uint32]*Nexthop
	sysctls  map[string]string
	tables   map[string]*fakeTable // "ipv4 nat"
	targets  map[string]bool       // "ipv4 HMARK hmark-tuple"
}

type fakeLink struct {
	up    bool
	addrs []netip.Prefix
}

type fakeTable struct {
	chains map[string][]string // chain → its rules, each the text after "-A CHAIN "
	order  []string
}

// NewFake returns an empty namespace named ns, with the built-in chains of
// each table and the MASQUERADE target; sysctls exist once SetSysctlValue
// made them.
func NewFake(ns string) *Fake {
	f := &Fake{ns: ns, links: map[string]*fakeLink{}, routes: map[Family][]Route{}, nexthops: map[uint32]*Nexthop{},
		sysctls: map[string]string{}, tables: map[string]*fakeTable{}, targets: map[string]bool{}}
	for _, fam := range []Family{IPv4, IPv6} {
		f.AddTarget(fam, "MASQUERADE", "to-ports")
	}
	return f
}

// AddLink makes a device (up or down) with addresses.
func (f *Fake) AddLink(name string, up bool, addrs ...netip.Prefix) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links[name] = &fakeLink{up: up, addrs: addrs}
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
	delete(f.links, name)
	for _, n := range f.sortedNexthops() {
		if n.Dev == name {
			f.removeNexthop(n.ID)
		}
	}
	for fam, rs := range f.routes {
		f.routes[fam] = slices.DeleteFunc(rs, func(r Route) bool { return r.NHID == 0 && r.Dev == name })
	}
	return nil
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
		r.Dev = ""
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
