package cluster

// The networks the server pushes, for `cluster connect --tunnels N`
// without --route.
//
// Each tunnel's openvpn runs with --route-noexec (connect, not openvpn,
// routes over the tunnels) and
//
//	--script-security 2 --route-up "OVPNPERF cluster route-hook DIR/t<i>.routes"
//
// OpenVPN 2.6 puts every route it would install (its own `route`
// options and the pushed ones) into the environment of its scripts:
// route_network_N / route_netmask_N and route_ipv6_network_N (ADDR/BITS).
// It does so whether or not --route-noexec is given (init.c
// do_init_route_list, setenv_routes), and runs --route-up after each
// connection, a reconnection too (init.c do_route). The hook, ovpnperf
// itself, writes the prefixes it finds to the file; connect reads them.
//
// Other ways were weighed: the management interface of 2.6 has no command
// that lists pushed options; the "PUSH: Received control message" log line
// appears only at verb 3 or more and would mean parsing OpenVPN's options
// a second time. The cost of the hook: script-security 2, which also
// lets scripts of the user's config run, and connect's --route-up takes
// the place of one in the config.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// routeFileRE is what the hook may write: a tunnel's routes file in a
// connect run's directory.
var routeFileRE = regexp.MustCompile(`^t[0-9]{1,2}\.routes$`)

// RouteHookFile checks that path is a tunnel's routes file of a connect
// run (the hook runs as root and writes nothing else).
func (p Paths) RouteHookFile(path string) error {
	dir, file := filepath.Split(path)
	dir = filepath.Clean(dir)
	if filepath.Dir(dir) != filepath.Clean(p.ConnectDir()) || !idRE.MatchString(filepath.Base(dir)) || !routeFileRE.MatchString(file) {
		return fmt.Errorf("route hook: %q is not a tunnel's routes file under %s", path, p.ConnectDir())
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("route hook: %w", err)
	}
	return nil
}

// RoutesFromEnv reads the routes OpenVPN put into a script's environment
// (KEY=VALUE strings, as os.Environ). A value that is not an address, a
// mask or a prefix is an error: OpenVPN wrote it, and it is not what it
// writes.
func RoutesFromEnv(env []string) ([]netip.Prefix, error) {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	var out []netip.Prefix
	for i := 1; ; i++ {
		n, ok := vars["route_network_"+strconv.Itoa(i)]
		if !ok {
			break
		}
		m := vars["route_netmask_"+strconv.Itoa(i)]
		a, err1 := netip.ParseAddr(n)
		mask, err2 := netip.ParseAddr(m)
		if err1 != nil || err2 != nil || !a.Is4() || !mask.Is4() {
			return nil, fmt.Errorf("route_network_%d=%q route_netmask_%d=%q: not an IPv4 network and mask", i, n, i, m)
		}
		ones, bits := net.IPMask(mask.AsSlice()).Size()
		if bits == 0 {
			return nil, fmt.Errorf("route_netmask_%d=%q: not a contiguous mask", i, m)
		}
		out = append(out, netip.PrefixFrom(a, ones).Masked())
	}
	for i := 1; ; i++ {
		v, ok := vars["route_ipv6_network_"+strconv.Itoa(i)]
		if !ok {
			break
		}
		p, err := netip.ParsePrefix(v)
		if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() {
			return nil, fmt.Errorf("route_ipv6_network_%d=%q: not an IPv6 prefix", i, v)
		}
		out = append(out, p.Masked())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return dedupPrefixes(out), nil
}

func dedupPrefixes(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

// WriteRouteFile writes the prefixes (0600, through a rename).
func WriteRouteFile(path string, ps []netip.Prefix) error {
	s := []string{}
	for _, p := range ps {
		s = append(s, p.String())
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readRouteFile reads a routes file; a missing one is (nil, nil).
func readRouteFile(path string) ([]netip.Prefix, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s []string
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := []netip.Prefix{}
	for _, v := range s {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, p)
	}
	return out, nil
}
