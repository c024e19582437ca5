package cluster

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Spec is one instance as planned: what its config says.
type Spec struct {
	// Name is "i0", "i1" …; with udp,tcp the TCP twins are "t0", "t1" ….
	Name   string
	Index  int
	Proto  string // openvpn.UDP or openvpn.TCP
	Port   uint16
	Dev    string
	Subnet netip.Prefix
	// Subnet6 is the instance's IPv6 slice when the base has server-ipv6.
	Subnet6    netip.Prefix
	CPU        int // -1: not pinned
	Management string
	StatusFile string
	Config     *openvpn.Config
}

// PlanOptions are what `cluster serve` was asked for.
type PlanOptions struct {
	ID        string
	Dir       string
	Base      *openvpn.Config
	Instances int      // per protocol
	Protos    []string // udp, tcp
	PortBase  uint16
	Pool      netip.Prefix
	Pool6     netip.Prefix // zero: taken from the base's server-ipv6 if any
	CPUs      []int        // one per instance slot, cycled; empty: not pinned
	// CCD is a client-config-dir every instance reads (--site iroutes).
	CCD string
}

// unsplittable are directives whose meaning cannot be divided between
// instances, each with the reason given to the user.
var unsplittable = map[string]string{
	"server-bridge":         "a bridged (tap) server shares one layer-2 segment and one address pool; instances would hand out the same addresses",
	"ifconfig-pool-persist": "one persistence file per pool cannot be shared by several processes",
	"client":                "this is a client config; give the server's",
	"mode":                  "",
	"dev-type":              "",
	"dev":                   "",
	"duplicate-cn":          "",
	"ifconfig":              "a fixed point-to-point ifconfig cannot be split; use `server NET MASK`",
	"secret":                "static-key mode serves one peer per process",
}

// CheckBase refuses a base config that cannot be split, naming why.
func CheckBase(c *openvpn.Config) error {
	for _, d := range c.Directives {
		reason, ok := unsplittable[d.Name]
		if !ok {
			continue
		}
		switch d.Name {
		case "mode":
			if len(d.Args) > 0 && d.Args[0] != "server" {
				return usage.Errorf("base config: mode %s cannot be split into instances: use mode server", d.Args[0])
			}
			continue
		case "dev-type", "dev":
			if len(d.Args) > 0 && strings.HasPrefix(d.Args[0], "tap") {
				return usage.Errorf("base config: %s %s: tap instances would share one layer-2 segment; the cluster splits tun servers only", d.Name, d.Args[0])
			}
			continue
		case "duplicate-cn":
			continue
		}
		return usage.Errorf("base config: %s cannot be split into instances: %s", d.Name, reason)
	}
	if _, ok := c.Get("server"); !ok {
		return usage.Errorf("base config has no `server NET MASK`: the cluster splits the server's address pool and needs it (or give --pool)")
	}
	return nil
}

// SplitPool cuts pool into n equal, non-overlapping subnets: the smallest
// power of two ≥ n slices of equal size, the first n of them.
func SplitPool(pool netip.Prefix, n int) ([]netip.Prefix, error) {
	if n < 1 {
		return nil, fmt.Errorf("split into %d subnets", n)
	}
	pool = pool.Masked()
	extra := bits.Len(uint(n - 1))
	newBits := pool.Bits() + extra
	maxBits := 29 // OpenVPN's `server` needs at least a /29 (and IPv6 /124)
	if pool.Addr().Is6() {
		maxBits = 112
	}
	if newBits > maxBits {
		return nil, usage.Errorf("pool %s is too small for %d instances: each needs at least a /%d", pool, n, maxBits)
	}
	out := make([]netip.Prefix, 0, n)
	a := pool.Addr()
	for i := 0; i < n; i++ {
		out = append(out, netip.PrefixFrom(a, newBits))
		a = nextPrefixAddr(a, newBits)
	}
	return out, nil
}

// nextPrefixAddr returns the first address after the /prefixBits prefix
// at a: a plus one unit of the prefix's last bit, carried leftwards.
func nextPrefixAddr(a netip.Addr, prefixBits int) netip.Addr {
	b := a.AsSlice()
	pos := prefixBits - 1
	carry := uint(1) << (7 - uint(pos%8))
	for i := pos / 8; i >= 0 && carry > 0; i-- {
		v := uint(b[i]) + carry
		b[i] = byte(v)
		carry = v >> 8
	}
	r, _ := netip.AddrFromSlice(b)
	return r
}

// Plan renders one config per instance from the base. Directives that name
// one process's resources (port, dev, server, status, management, log,
// daemon, writepid) are replaced; everything else is kept as written.
func Plan(o PlanOptions) ([]Spec, error) {
	if err := CheckBase(o.Base); err != nil {
		return nil, err
	}
	if o.Instances < 1 || o.Instances > 64 {
		return nil, usage.Errorf("--instances %d: use 1-64", o.Instances)
	}
	if len(o.Protos) == 0 {
		o.Protos = []string{openvpn.UDP}
	}
	total := o.Instances * len(o.Protos)
	if int(o.PortBase)+o.Instances > 65535 || o.PortBase == 0 {
		return nil, usage.Errorf("--port-base %d: instances need ports %d-%d", o.PortBase, o.PortBase, int(o.PortBase)+o.Instances-1)
	}
	subnets, err := SplitPool(o.Pool, total)
	if err != nil {
		return nil, err
	}
	pool6 := o.Pool6
	if !pool6.IsValid() {
		if d, ok := o.Base.Get("server-ipv6"); ok && len(d.Args) > 0 {
			if pool6, err = netip.ParsePrefix(d.Args[0]); err != nil {
				return nil, usage.Errorf("base config: server-ipv6 %q: %v", d.Args[0], err)
			}
		}
	}
	var subnets6 []netip.Prefix
	if pool6.IsValid() {
		if subnets6, err = SplitPool(pool6, total); err != nil {
			return nil, err
		}
	}
	_, c2c := o.Base.Get("client-to-client")
	var specs []Spec
	for pi, proto := range o.Protos {
		for i := 0; i < o.Instances; i++ {
			k := pi*o.Instances + i
			name := fmt.Sprintf("%c%d", proto[0], i) // u0, t0
			s := Spec{
				Name: name, Index: k, Proto: proto, Port: o.PortBase + uint16(i),
				Dev:        fmt.Sprintf("ovpnperf%s%s", o.ID, name),
				Subnet:     subnets[k],
				CPU:        -1,
				Management: filepath.Join(o.Dir, "run", name+".mgmt"),
				StatusFile: filepath.Join(o.Dir, name+".status"),
			}
			if len(s.Dev) > 15 {
				return nil, fmt.Errorf("tun name %s longer than 15 characters", s.Dev)
			}
			if len(o.CPUs) > 0 {
				s.CPU = o.CPUs[i%len(o.CPUs)]
			}
			if subnets6 != nil {
				s.Subnet6 = subnets6[k]
			}
			cfg := o.Base.Clone()
			for _, n := range []string{"port", "lport", "proto", "dev", "dev-type", "server", "server-ipv6", "status", "status-version",
				"management", "management-client-user", "management-client-group", "log", "log-append", "daemon", "writepid", "syslog"} {
				cfg.Remove(n)
			}
			cfg.Add("dev-type", "tun")
			cfg.Add("dev", s.Dev)
			p := "udp"
			if proto == openvpn.TCP {
				p = "tcp-server"
			}
			if l, ok := o.Base.Get("proto"); ok && len(l.Args) > 0 && strings.Contains(l.Args[0], "6") {
				p = strings.Replace(p, "udp", "udp6", 1)
				p = strings.Replace(p, "tcp-", "tcp6-", 1)
			}
			cfg.Add("proto", p)
			cfg.Add("port", strconv.Itoa(int(s.Port)))
			cfg.Add("server", s.Subnet.Addr().String(), netmask(s.Subnet.Bits()))
			if s.Subnet6.IsValid() {
				cfg.Add("server-ipv6", s.Subnet6.String())
			}
			cfg.Add("status", s.StatusFile, "5")
			cfg.Add("status-version", "3")
			cfg.Add("management", s.Management, "unix")
			if o.CCD != "" {
				cfg.Add("client-config-dir", o.CCD)
			}
			// Every client gets the whole pool: with client-to-client the
			// kernel forwards between the instances' tun devices; without,
			// the route is harmless and lets the server side reach them.
			if c2c {
				cfg.Add("push", fmt.Sprintf("route %s %s", o.Pool.Masked().Addr(), netmask(o.Pool.Bits())))
				if pool6.IsValid() {
					cfg.Add("push", "route-ipv6 "+pool6.Masked().String())
				}
			}
			if _, err := cfg.Render(); err != nil {
				return nil, fmt.Errorf("instance %s: %w", name, err)
			}
			s.Config = cfg
			specs = append(specs, s)
		}
	}
	return specs, nil
}

func netmask(b int) string {
	m := ^uint32(0) << (32 - b)
	return netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}).String()
}

// ParseProtos reads --proto udp|tcp|udp,tcp.
func ParseProtos(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p != openvpn.UDP && p != openvpn.TCP || seen[p] {
			return nil, usage.Errorf("--proto %q: use udp, tcp or udp,tcp", s)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

// ParseCPUs reads a CPU list such as "0-3,6" (--cpus).
func ParseCPUs(s string) ([]int, error) {
	cpus, err := parseCPUList(s)
	if err != nil {
		return nil, usage.Errorf("--cpus %q: use a list like 0-3,6", s)
	}
	return cpus, nil
}

// fileOptions are the options of a server config whose first parameter is
// a file OpenVPN reads at start (or "[[INLINE]]" for an inline block).
var fileOptions = map[string]bool{
	"ca": true, "cert": true, "key": true, "dh": true, "extra-certs": true, "pkcs12": true,
	"tls-auth": true, "tls-crypt": true, "tls-crypt-v2": true, "crl-verify": true, "secret": true,
	"auth-gen-token-secret": false,
}

// CheckBaseFiles refuses a base config whose key or certificate files
// cannot be read, before any instance starts (OpenVPN would refuse each
// instance at every restart). Relative names are taken from the config's
// cd directive, else from cwd, as OpenVPN does.
func CheckBaseFiles(c *openvpn.Config, cwd string) error {
	base := cwd
	if d, ok := c.Get("cd"); ok && len(d.Args) > 0 {
		base = d.Args[0]
		if !filepath.IsAbs(base) {
			base = filepath.Join(cwd, base)
		}
	}
	for _, d := range c.Directives {
		if d.Inline || !fileOptions[d.Name] || len(d.Args) == 0 {
			continue
		}
		name := d.Args[0]
		if name == "[[INLINE]]" || (d.Name == "dh" && name == "none") || (d.Name == "crl-verify" && len(d.Args) > 1 && d.Args[1] == "dir") {
			continue
		}
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		// Stat and access, not open: opening a FIFO would block.
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			return usage.Errorf("base config: %s %s: %v", d.Name, name, errors.Unwrap(err))
		case !fi.Mode().IsRegular():
			return usage.Errorf("base config: %s %s: not a regular file", d.Name, name)
		case unix.Access(p, unix.R_OK) != nil:
			return usage.Errorf("base config: %s %s: not readable", d.Name, name)
		}
	}
	return nil
}
