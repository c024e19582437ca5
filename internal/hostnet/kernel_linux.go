package hostnet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/vishvananda/netlink"
)

// kernel is a Host that asks the kernel.
type kernel struct{ ns string }

// Open returns the Host of the named namespace ("" the caller's own). It
// opens nothing: each call asks the kernel afresh.
func Open(ns string) Host { return kernel{ns: ns} }

func (k kernel) Netns() string { return k.ns }

func (k kernel) handle() (*netlink.Handle, error) {
	if k.ns == "" {
		return netlink.NewHandle()
	}
	return netns.Handle(k.ns)
}

func (k kernel) where() string {
	if k.ns == "" {
		return "this namespace"
	}
	return "namespace " + k.ns
}

func notExist(what string) error { return fmt.Errorf("%s: %w", what, fs.ErrNotExist) }

// env is the caller's environment with the C locale, so that what a
// program prints is what this package parses.
func env() []string {
	var e []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LC_ALL=") && !strings.HasPrefix(kv, "LANG=") {
			e = append(e, kv)
		}
	}
	return append(e, "LC_ALL=C")
}

// run runs argv with stdin as its input and returns its standard output;
// standard error only goes into the error, with the command.
func run(ctx context.Context, stdin string, argv ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		in := ""
		if stdin != "" {
			in = fmt.Sprintf(" with input %q", stdin)
		}
		return out.Bytes(), fmt.Errorf("running %q%s: %w\n%s", strings.Join(argv, " "), in, err, bytes.TrimSpace(errb.Bytes()))
	}
	return out.Bytes(), nil
}

// ip runs `ip [-n NS] ARGS…`.
func (k kernel) ip(ctx context.Context, args ...string) ([]byte, error) {
	argv := []string{"ip"}
	if k.ns != "" {
		argv = append(argv, "-n", k.ns)
	}
	return run(ctx, "", append(argv, args...)...)
}

// inNs runs a program in the namespace (`ip netns exec NS …`).
func (k kernel) inNs(ctx context.Context, stdin string, argv ...string) ([]byte, error) {
	if k.ns != "" {
		argv = append([]string{"ip", "netns", "exec", k.ns}, argv...)
	}
	return run(ctx, stdin, argv...)
}

func (k kernel) LinkExists(ctx context.Context, name string) (bool, error) {
	h, err := k.handle()
	if err != nil {
		return false, err
	}
	defer h.Close()
	// Equivalent to: ip link show dev NAME
	_, err = h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	return err == nil, err
}

func (k kernel) LinkDel(ctx context.Context, name string) error {
	h, err := k.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return notExist("link " + name + " in " + k.where())
	}
	if err != nil {
		return err
	}
	// Equivalent to: ip link del dev NAME
	if err := h.LinkDel(l); err != nil {
		if _, lerr := h.LinkByName(name); errors.As(lerr, &nf) {
			return notExist("link " + name + " in " + k.where()) // gone meanwhile
		}
		return fmt.Errorf("ip link del dev %s in %s: %w", name, k.where(), err)
	}
	return nil
}

func (k kernel) LinkAddrs(ctx context.Context, name string) ([]netip.Prefix, error) {
	h, err := k.handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil, notExist("link " + name + " in " + k.where())
	}
	if err != nil {
		return nil, err
	}
	// Equivalent to: ip addr show dev NAME
	as, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("ip addr show dev %s in %s: %w", name, k.where(), err)
	}
	var out []netip.Prefix
	for _, a := range as {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || a.IPNet == nil {
			continue
		}
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out, nil
}

func familyFlag(f Family) string {
	if f == IPv6 {
		return "-6"
	}
	return "-4"
}

// unmarshalList reads a list ip printed with -json; nothing at all (an
// older ip with nothing to list) is the empty list.
func unmarshalList(out []byte, v any) error {
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	return json.Unmarshal(out, v)
}

// jsonRoute is a route as `ip -json route show` prints it.
type jsonRoute struct {
	Dst      string `json:"dst"`
	NHID     uint32 `json:"nhid"`
	Gateway  string `json:"gateway"`
	Dev      string `json:"dev"`
	Nexthops []struct {
		Dev string `json:"dev"`
	} `json:"nexthops"`
}

func parseDst(s string, f Family) (netip.Prefix, error) {
	if s == "default" {
		if f == IPv6 {
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0), nil
		}
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0), nil
	}
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (k kernel) Routes(ctx context.Context, f Family) ([]Route, error) {
	// Equivalent to: ip -json -4 route show
	out, err := k.ip(ctx, "-json", familyFlag(f), "route", "show")
	if err != nil {
		return nil, err
	}
	var js []jsonRoute
	if err := unmarshalList(out, &js); err != nil {
		return nil, fmt.Errorf("ip -json %s route show in %s: %w", familyFlag(f), k.where(), err)
	}
	var rs []Route
	for _, j := range js {
		dst, err := parseDst(j.Dst, f)
		if err != nil {
			continue // a route type this package does not model
		}
		r := Route{Dst: dst, NHID: j.NHID}
		if j.Gateway != "" {
			if r.Gw, err = netip.ParseAddr(j.Gateway); err != nil {
				continue
			}
		}
		if r.NHID == 0 {
			r.Dev = j.Dev
			if r.Dev == "" && len(j.Nexthops) > 0 {
				r.Dev = j.Nexthops[0].Dev
			}
		}
		rs = append(rs, r)
	}
	sortRoutes(rs)
	return rs, nil
}

func sortRoutes(rs []Route) {
	slices.SortFunc(rs, func(a, b Route) int {
		if c := strings.Compare(a.Dst.String(), b.Dst.String()); c != 0 {
			return c
		}
		return strings.Compare(a.Dev, b.Dev)
	})
}

func routeArgs(r Route) []string {
	if r.NHID != 0 {
		return []string{r.Dst.String(), "nhid", strconv.FormatUint(uint64(r.NHID), 10)}
	}
	if r.Gw.IsValid() && r.Dev == "" {
		return []string{r.Dst.String(), "via", r.Gw.String()}
	}
	if r.Gw.IsValid() {
		return []string{r.Dst.String(), "via", r.Gw.String(), "dev", r.Dev}
	}
	return []string{r.Dst.String(), "dev", r.Dev}
}

func (k kernel) RouteReplace(ctx context.Context, r Route) error {
	if r.Gw.IsValid() && r.NHID == 0 {
		return k.routeViaReplace(r)
	}
	// Equivalent to: ip route replace PREFIX nhid ID
	_, err := k.ip(ctx, append([]string{"route", "replace"}, routeArgs(r)...)...)
	return err
}

func (k kernel) RouteDel(ctx context.Context, r Route) error {
	// Equivalent to: ip route del PREFIX nhid ID (the kernel deletes the
	// route only while it goes by that nexthop)
	_, err := k.ip(ctx, append([]string{"route", "del"}, routeArgs(r)...)...)
	if err == nil {
		return nil
	}
	rs, lerr := RoutesTo(ctx, k, r.Dst)
	if lerr == nil && !slices.ContainsFunc(rs, func(x Route) bool { return sameRoute(x, r) }) {
		return notExist("route " + r.String() + " in " + k.where())
	}
	return err
}

// sameRoute reports whether x is the route r names (by nexthop, or by
// device when r names one).
func sameRoute(x, r Route) bool {
	if x.Dst != r.Dst.Masked() {
		return false
	}
	if r.NHID != 0 {
		return x.NHID == r.NHID
	}
	if r.Gw.IsValid() && x.Gw != r.Gw {
		return false
	}
	return r.Dev == "" || x.Dev == r.Dev
}

// jsonNexthop is a nexthop as `ip -json nexthop show` prints it.
type jsonNexthop struct {
	ID    uint32 `json:"id"`
	Dev   string `json:"dev"`
	Group []struct {
		ID uint32 `json:"id"`
	} `json:"group"`
}

func (k kernel) Nexthops(ctx context.Context) ([]Nexthop, error) {
	// Equivalent to: ip -json nexthop show; ip -json -6 nexthop show
	// (the listing names no family: the second tells the IPv6 ones)
	var all, six []jsonNexthop
	for _, l := range []struct {
		args []string
		into *[]jsonNexthop
	}{{[]string{"-json", "nexthop", "show"}, &all}, {[]string{"-json", "-6", "nexthop", "show"}, &six}} {
		out, err := k.ip(ctx, l.args...)
		if err != nil {
			return nil, err
		}
		if err := unmarshalList(out, l.into); err != nil {
			return nil, fmt.Errorf("ip %s in %s: %w", strings.Join(l.args, " "), k.where(), err)
		}
	}
	v6 := map[uint32]bool{}
	for _, j := range six {
		v6[j.ID] = true
	}
	var ns []Nexthop
	for _, j := range all {
		n := Nexthop{ID: j.ID, Dev: j.Dev}
		switch {
		case len(j.Group) > 0:
			for _, g := range j.Group {
				n.Group = append(n.Group, g.ID)
			}
		case v6[j.ID]:
			n.Family = IPv6
		default:
			n.Family = IPv4
		}
		ns = append(ns, n)
	}
	slices.SortFunc(ns, func(a, b Nexthop) int { return int(int64(a.ID) - int64(b.ID)) })
	return ns, nil
}

func (k kernel) NexthopReplace(ctx context.Context, n Nexthop) error {
	id := strconv.FormatUint(uint64(n.ID), 10)
	if n.Group != nil {
		var ms []string
		for _, m := range n.Group {
			ms = append(ms, strconv.FormatUint(uint64(m), 10))
		}
		args := []string{"nexthop", "replace", "id", id, "group", strings.Join(ms, "/")}
		if n.Family != 0 {
			// The kernel refuses it ("Invalid family for group"), as Fake does.
			args = append([]string{familyFlag(n.Family)}, args...)
		}
		// Equivalent to: ip nexthop replace id ID group A/B/…
		_, err := k.ip(ctx, args...)
		return err
	}
	// Equivalent to: ip [-6] nexthop replace id ID dev DEV
	_, err := k.ip(ctx, familyFlag(n.Family), "nexthop", "replace", "id", id, "dev", n.Dev)
	return err
}

func (k kernel) NexthopDel(ctx context.Context, id uint32) error {
	// Equivalent to: ip nexthop del id ID
	_, err := k.ip(ctx, "nexthop", "del", "id", strconv.FormatUint(uint64(id), 10))
	if err == nil {
		return nil
	}
	ns, lerr := k.Nexthops(ctx)
	if lerr == nil && !slices.ContainsFunc(ns, func(n Nexthop) bool { return n.ID == id }) {
		return notExist(fmt.Sprintf("nexthop %d in %s", id, k.where()))
	}
	return err
}

// sysctlPath is key's file under /proc/sys; keys are dotted names only.
func sysctlPath(key string) (string, error) {
	if key == "" || strings.ContainsAny(key, "/\x00 ") || strings.Contains(key, "..") || strings.HasPrefix(key, ".") {
		return "", fmt.Errorf("sysctl %q: not a sysctl name", key)
	}
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/")), nil
}

// inside runs fn in the namespace (at once for the caller's own).
func (k kernel) inside(fn func() error) error {
	if k.ns == "" {
		return fn()
	}
	return netns.Do(k.ns, fn)
}

func (k kernel) Sysctl(ctx context.Context, key string) (string, error) {
	p, err := sysctlPath(key)
	if err != nil {
		return "", err
	}
	var v string
	// Equivalent to: ip netns exec NS sysctl -n KEY
	err = k.inside(func() error {
		b, err := os.ReadFile(p)
		v = strings.TrimSpace(string(b))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("sysctl %s in %s: %w", key, k.where(), err)
	}
	return v, nil
}

func (k kernel) SetSysctl(ctx context.Context, key, value string) (string, error) {
	p, err := sysctlPath(key)
	if err != nil {
		return "", err
	}
	var old string
	// Equivalent to: ip netns exec NS sysctl -w KEY=VALUE
	err = k.inside(func() error {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		old = strings.TrimSpace(string(b))
		return os.WriteFile(p, []byte(value), 0o644)
	})
	if err != nil {
		return old, fmt.Errorf("sysctl -w %s=%s in %s: %w", key, value, k.where(), err)
	}
	return old, nil
}

func iptablesTool(f Family, suffix string) string {
	if f == IPv6 {
		return "ip6tables" + suffix
	}
	return "iptables" + suffix
}

// checkRuleLines refuses a rule line that would be more than one line of
// the batch: a newline or carriage return in it, or a line that opens or
// commits a table. Restore's callers build rules from their own names and
// typed addresses; this keeps it so for whatever a caller passes.
func checkRuleLines(rules []string) error {
	for _, r := range rules {
		t := strings.TrimSpace(r)
		if strings.ContainsAny(r, "\n\r\x00") || strings.HasPrefix(t, "*") || strings.HasPrefix(t, "COMMIT") {
			return fmt.Errorf("netfilter rule %q: not one line of a table's rules", r)
		}
	}
	return nil
}

func checkTable(table string) error {
	if _, ok := builtinChains[table]; !ok {
		return fmt.Errorf("netfilter table %q: not one ovpnperf uses", table)
	}
	return nil
}

func (k kernel) Restore(ctx context.Context, f Family, table string, rules []string) error {
	if err := checkTable(table); err != nil {
		return err
	}
	if err := checkRuleLines(rules); err != nil {
		return err
	}
	in := "*" + table + "\n" + strings.Join(rules, "\n") + "\nCOMMIT\n"
	// Equivalent to: ip netns exec NS iptables-restore --noflush -w <<< '*TABLE …COMMIT'
	_, err := k.inNs(ctx, in, iptablesTool(f, "-restore"), "--noflush", "-w")
	return err
}

// save returns a table as iptables-save prints it.
func (k kernel) save(ctx context.Context, f Family, table string) (chains []string, rules []string, err error) {
	if err := checkTable(table); err != nil {
		return nil, nil, err
	}
	// Equivalent to: ip netns exec NS iptables-save -t TABLE
	out, err := k.inNs(ctx, "", iptablesTool(f, "-save"), "-t", table)
	if err != nil {
		return nil, nil, err
	}
	return parseSave(string(out))
}

// parseSave reads iptables-save's output of one table: its chains and
// its rules ("-A CHAIN …").
func parseSave(s string) (chains []string, rules []string, err error) {
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(l, ":"):
			f := strings.Fields(l[1:])
			if len(f) > 0 {
				chains = append(chains, f[0])
			}
		case strings.HasPrefix(l, "-A "):
			rules = append(rules, l)
		}
	}
	return chains, rules, nil
}

func (k kernel) Chains(ctx context.Context, f Family, table string) ([]string, error) {
	cs, _, err := k.save(ctx, f, table)
	return cs, err
}

func (k kernel) RemoveChain(ctx context.Context, f Family, table, chain string) error {
	cs, rules, err := k.save(ctx, f, table)
	if err != nil {
		return err
	}
	batch := removeChainBatch(cs, rules, chain)
	if batch == nil {
		return notExist(fmt.Sprintf("%s chain %s in table %s of %s", f, chain, table, k.where()))
	}
	// Equivalent to: iptables -t TABLE -D CHAIN … -j CH (each jump);
	// iptables -t TABLE -F CH; iptables -t TABLE -X CH
	return k.Restore(ctx, f, table, batch)
}

// removeChainBatch is the batch that deletes every rule jumping to chain
// and then chain; nil when there is neither.
func removeChainBatch(chains, rules []string, chain string) []string {
	var batch []string
	for _, r := range rules {
		if jumpsTo(r, chain) {
			batch = append(batch, "-D"+strings.TrimPrefix(r, "-A"))
		}
	}
	if slices.Contains(chains, chain) {
		batch = append(batch, "-F "+chain, "-X "+chain)
	}
	return batch
}

// jumpsTo reports whether a rule's target (-j, or -g) is chain.
func jumpsTo(rule, chain string) bool {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if (f[i] == "-j" || f[i] == "-g" || f[i] == "--jump" || f[i] == "--goto") && f[i+1] == chain {
			return true
		}
	}
	return false
}

func (k kernel) HasTarget(ctx context.Context, f Family, target, option string) bool {
	// Equivalent to: iptables -j TARGET --help (the extension's help
	// names its options)
	out, err := k.inNs(ctx, "", iptablesTool(f, ""), "-j", target, "--help")
	return err == nil && strings.Contains(string(out), "--"+option)
}

// builtinChains are the chains of the tables ovpnperf uses.
var builtinChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
}
