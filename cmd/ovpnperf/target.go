package main

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/outputfile"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// checkTarget refuses an address no probe can be aimed at: the
// unspecified address, limited broadcast and multicast (they would reach
// no single host, or many), a zone on an address that is not link-local
// or naming no interface here, and returns it unmapped (a numeric zone
// as its interface's name).
func checkTarget(what string, a netip.Addr) (netip.Addr, error) {
	if z := a.Zone(); z != "" {
		// A zone picks the interface of a link-local address; the route
		// lookups and the probes use it (ip route get ADDR oif ZONE).
		// Checked before Unmap, which drops it from ::ffff:192.0.2.1%lo.
		if !a.IsLinkLocalUnicast() || a.Is4In6() {
			return a, usage.Errorf("%s %s: a zone (%%%s) only names the interface of a link-local address (fe80::/10); give the address without it", what, a, z)
		}
		ifi, err := net.InterfaceByName(z)
		if n, nerr := strconv.Atoi(z); err != nil && nerr == nil {
			ifi, err = net.InterfaceByIndex(n)
		}
		if err != nil {
			return a, usage.Errorf("%s %s: no interface %q on this host (ip link show)", what, a, z)
		}
		a = a.WithZone(ifi.Name)
	}
	a = a.Unmap()
	switch {
	case a.IsUnspecified():
		return a, usage.Errorf("%s %s: the unspecified address is no host; want the address of the host to probe", what, a)
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return a, usage.Errorf("%s %s: the broadcast address is no single host; want the address of the host to probe", what, a)
	case a.IsMulticast():
		return a, usage.Errorf("%s %s: a multicast group is no single host; want the address of the host to probe", what, a)
	}
	return a, nil
}

// looksNumeric reports whether s is made of digits and dots only, like an
// IPv4 address: such a string is never looked up as a name ("999.1.1.1",
// the inet_aton shorthand "1.2.3").
func looksNumeric(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.") == ""
}

// parseTarget checks HOST before any lookup: an IP literal must be a
// probe target, a digits-and-dots string must be a full dotted-quad IPv4
// address, and anything else must look like a host name.
func parseTarget(what, host string) (netip.Addr, bool, error) {
	h := strings.Trim(host, "[]")
	if a, err := netip.ParseAddr(h); err == nil {
		a, err = checkTarget(what, a)
		return a, true, err
	}
	if looksNumeric(h) {
		return netip.Addr{}, false, usage.Errorf("%s %q: not an IPv4 address (four numbers 0–255 separated by dots) nor a host name", what, host)
	}
	if h == "" || len(h) > 253 || strings.ContainsAny(h, " /\\\x00\t\n\r") {
		return netip.Addr{}, false, usage.Errorf("%s %q: want a host name or IP address", what, host)
	}
	return netip.Addr{}, false, nil
}

// resolveTarget resolves HOST to its addresses; a name that does not
// resolve is the user's mistake (exit 2), like a malformed address.
func resolveTarget(ctx context.Context, what, host string) ([]netip.Addr, error) {
	a, literal, err := parseTarget(what, host)
	if err != nil {
		return nil, err
	}
	if literal {
		return []netip.Addr{a}, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, usage.Errorf("%s %q: cannot resolve: %v", what, host, err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if a, err := checkTarget(what, a); err == nil {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, usage.Errorf("%s %q: resolves to no address a probe can reach (%v)", what, host, addrs)
	}
	return out, nil
}

// checkOutPath checks, before a run, that an output flag's file can be
// written (outputfile.Check); an empty path is a flag not given.
func checkOutPath(flag, path string) error {
	if path == "" {
		return nil
	}
	return outputfile.Check(flag, path)
}

// writeOut writes a run's results to path with write (outputfile.Write:
// never through a link, never half-written); if that fails after the run
// (disk full, directory removed meanwhile), it writes them to a temporary
// file instead and names it, so that minutes of measurement are not lost.
// The error says where the results went.
func writeOut(path string, write func(w io.Writer) error) error {
	err := outputfile.Write(path, 0o644, write)
	if err == nil {
		return nil
	}
	tmp, terr := os.CreateTemp("", "ovpnperf-results-*.json")
	if terr != nil {
		return usage.Errorf("writing --out %s: %v; and no temporary file either: %v", path, err, terr)
	}
	werr := write(tmp)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return usage.Errorf("writing --out %s: %v; and to %s: %v", path, err, tmp.Name(), werr)
	}
	return &savedElsewhereError{path: path, tmp: tmp.Name(), err: err}
}

// savedElsewhereError reports results written to a temporary file instead.
type savedElsewhereError struct {
	path, tmp string
	err       error
}

func (e *savedElsewhereError) Error() string {
	return "writing --out " + e.path + ": " + e.err.Error() + "; the results are in " + e.tmp
}

// tunnelEnds reads the two addresses of a tunnel's far end that measure
// and watch take: HOST outside the tunnel (a name or an address; of a
// name's addresses the one of the tunnel address's family) and --tunnel
// inside it (an address), which must differ; and checks --cipher, the
// data cipher the overhead model predicts with, when given.
func tunnelEnds(ctx context.Context, hostArg, tunnelFlag, cipher string) (host, tun netip.Addr, err error) {
	hosts, err := resolveTarget(ctx, "HOST", hostArg)
	if err != nil {
		return host, tun, err
	}
	tun, literal, err := parseTarget("--tunnel", tunnelFlag)
	if err != nil {
		return host, tun, err
	}
	if !literal {
		return host, tun, usage.Errorf("--tunnel %q: want an IP address", tunnelFlag)
	}
	host = hosts[0]
	for _, h := range hosts {
		if h.Is4() == tun.Is4() {
			host = h
			break
		}
	}
	if host == tun {
		return host, tun, usage.Errorf("HOST and --tunnel are both %s: HOST is the address outside the tunnel, --tunnel the one inside", host)
	}
	if cipher != "" {
		if _, err := overhead.New(overhead.DataChannel{Cipher: cipher}, overhead.Transport{Proto: "udp"}); err != nil {
			return host, tun, usage.Errorf("--cipher: %v", err)
		}
	}
	return host, tun, nil
}
