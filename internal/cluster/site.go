package cluster

// Site networks behind a client that connects over several instances
// (`cluster serve --site CIDR=CN`, the server side of `cluster connect
// --tunnels N`).
//
// Inside each instance, OpenVPN needs `iroute` for the client's common name
// to accept packets from the site and to know which client gets packets for
// it; that is per process, so every instance gets the same client-config-dir
// file. What cannot be repeated is the kernel route: one `route` directive
// per instance would install the prefix N times (the second fails, and a
// single route sends everything through one instance). Instead the cluster
// keeps one multipath route for the prefix over the tun devices of the
// instances where that common name is connected now (multipath.go), checked
// every Timing.SiteInterval and whenever the supervisors' status changes.

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Site is one client network: Prefix is routed to the client whose
// certificate has common name CN, over every instance it is connected to.
type Site struct {
	Prefix netip.Prefix
	CN     string
}

var cnRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,63}$`)

// ParseSite reads CIDR=CN.
func ParseSite(s string) (Site, error) {
	p, cn, ok := strings.Cut(s, "=")
	pfx, err := netip.ParsePrefix(p)
	if !ok || err != nil || !pfx.Addr().Is4() || pfx != pfx.Masked() {
		return Site{}, usage.Errorf("--site %q: use IPV4-NETWORK/BITS=COMMON-NAME, e.g. 10.50.0.0/24=branch1", s)
	}
	if !cnRE.MatchString(cn) {
		return Site{}, usage.Errorf("--site %q: common name %q: use letters, digits, blanks and . _ @ - (it names a client-config-dir file)", s, cn)
	}
	return Site{Prefix: pfx, CN: cn}, nil
}

// writeCCD writes one client-config-dir file per common name with its
// iroutes. Equivalent to: echo "iroute NET MASK" > DIR/ccd/CN
func writeCCD(dir string, sites []Site) (string, error) {
	ccd := filepath.Join(dir, "ccd")
	if err := os.Mkdir(ccd, 0o700); err != nil {
		return "", err
	}
	files := map[string][]string{}
	for _, s := range sites {
		files[s.CN] = append(files[s.CN], fmt.Sprintf("iroute %s %s\n", s.Prefix.Addr(), netmask(s.Prefix.Bits())))
	}
	for cn, lines := range files {
		if err := os.WriteFile(filepath.Join(ccd, cn), []byte(strings.Join(lines, "")), 0o600); err != nil {
			return "", err
		}
	}
	return ccd, nil
}

// siteGroup is the nexthop group id of site k: in a range of its own per
// cluster id, so that clusters (and connect, connectGroup) never collide.
func siteGroup(id string, k int) uint32 {
	var h uint32
	fmt.Sscanf(id, "%x", &h)
	return 0x40000000 | h<<12 | uint32(k)<<7
}

// startSites sets L4 multipath hashing (recorded), records and starts one
// route keeper per site.
func (c *Cluster) startSites(ctx, sctx context.Context) error {
	if err := ProbeNexthops(ctx, c.opts.Paths.host(c.opts.Netns)); err != nil {
		return err
	}
	if err := c.setSysctls(ctx, append(MultipathHashSysctls(), "net.ipv4.ip_forward"), "1"); err != nil {
		return err
	}
	var devs []string
	for _, s := range c.specs {
		devs = append(devs, s.Dev)
	}
	for k, site := range c.opts.Sites {
		mp := &Multipath{Host: c.opts.Paths.host(c.opts.Netns), Prefixes: []netip.Prefix{site.Prefix}, Group: siteGroup(c.id, k), Devs: devs}
		if err := c.state.record(mp.Resource()); err != nil {
			return err
		}
		c.sites = append(c.sites, mp)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(c.opts.Timing.SiteInterval)
		defer t.Stop()
		for {
			c.keepSites(sctx)
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// setSysctls sets keys to value in the cluster's namespace, recording each
// old value that differs.
func (c *Cluster) setSysctls(ctx context.Context, keys []string, value string) error {
	for _, key := range keys {
		old, err := c.opts.Paths.host(c.opts.Netns).Sysctl(ctx, key)
		if err != nil {
			return err
		}
		if old == value {
			continue
		}
		if err := c.state.record(Resource{Kind: KindSysctl, Name: key, Netns: c.opts.Netns, Detail: old, Set: value}); err != nil {
			return err
		}
		if _, err := c.opts.Paths.host(c.opts.Netns).SetSysctl(ctx, key, value); err != nil {
			return err
		}
	}
	return nil
}

// keepSites points each site's route at the instances where its common
// name is connected now.
func (c *Cluster) keepSites(ctx context.Context) {
	st := c.Status()
	for k, site := range c.opts.Sites {
		var up []int
		for i, s := range st {
			if s.State != StateUp && s.State != StateDraining {
				continue
			}
			if slices.ContainsFunc(s.PerClient, func(p ClientBytes) bool { return p.CommonName == site.CN }) {
				up = append(up, i)
			}
		}
		if changed, err := c.sites[k].Set(ctx, up); err != nil {
			c.log.Warn("site route", "prefix", site.Prefix, "err", err)
		} else if changed {
			c.log.Info("site route", "prefix", site.Prefix, "cn", site.CN, "via", c.siteVia(k))
		}
	}
}

func (c *Cluster) siteVia(k int) []string {
	var via []string
	cur := c.sites[k].Members()
	if cur == "" {
		return nil
	}
	for _, id := range strings.Split(cur, "/") {
		var n uint32
		fmt.Sscanf(id, "%d", &n)
		if i := int(n - c.sites[k].Group - 1); i >= 0 && i < len(c.specs) {
			via = append(via, c.specs[i].Name)
		}
	}
	return via
}

// SiteStatus returns each site and the instances its route uses.
func (c *Cluster) SiteStatus() []SiteStatus {
	var out []SiteStatus
	for k, s := range c.opts.Sites {
		if k < len(c.sites) {
			out = append(out, SiteStatus{Prefix: s.Prefix.String(), CN: s.CN, Via: c.siteVia(k)})
		}
	}
	return out
}
