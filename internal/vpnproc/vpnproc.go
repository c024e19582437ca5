// Package vpnproc finds the OpenVPN process that carries a tunnel on this
// host and reads, without changing anything, the counters that say what
// limits it: its CPU time and busiest thread, its transport socket's drops,
// retransmissions and the buffers the kernel really gave it, the host's IP
// fragmentation counters and its tun device's drops and queue length.
//
// The way there asks the kernel only, so it works on any host, not just in
// a lab:
//
//	route to TUNNEL_ADDR → tun device (netlink, kind "tun")
//	→ process holding /dev/net/tun with "iff: DEV" in /proc/PID/fdinfo,
//	  in this network namespace (/proc/PID/ns/net)
//	→ its socket fds (/proc/PID/fd → socket:[INODE])
//	→ /proc/net/udp{,6} or tcp{,6} lines with that inode
//	→ sock_diag (NETLINK_SOCK_DIAG, what `ss -m` asks) for the buffers
//
// Everything that cannot be read is named in Counters.Unread instead of
// being reported as zero.
package vpnproc

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Socket is the transport socket of the OpenVPN process.
type Socket struct {
	// Inode identifies the socket in /proc/net/* and sock_diag.
	Inode uint64
	// Proto is "udp" or "tcp"; IPv6 tells the family.
	Proto string
	IPv6  bool
	Local netip.AddrPort
	// Remote is the peer (zero for an unconnected UDP socket).
	Remote netip.AddrPort
	// Drops is the drops column of /proc/net/udp{,6} (UDP only).
	Drops uint64
}

// ParseFdinfoIff returns the interface name a /dev/net/tun file descriptor
// is attached to: the "iff:" line the tun driver adds to
// /proc/PID/fdinfo/FD; "" when there is none.
func ParseFdinfoIff(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "iff" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ParseSocketInode returns INODE of a /proc/PID/fd link "socket:[INODE]".
func ParseSocketInode(link string) (uint64, bool) {
	s, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// ParseNetTable parses /proc/net/udp, udp6, tcp or tcp6 (proto "udp" or
// "tcp", v6 for the 6 files) into sockets by inode. The drops column
// exists in the udp files only.
func ParseNetTable(b []byte, proto string, v6 bool) (map[uint64]Socket, error) {
	out := map[uint64]Socket{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	first := true
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if first {
			first = false
			if len(f) == 0 || f[0] != "sl" {
				return nil, fmt.Errorf("not a /proc/net/%s table: header %q", proto, sc.Text())
			}
			continue
		}
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer [drops]
		if len(f) < 10 {
			continue
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/net/%s: inode %q: %v", proto, f[9], err)
		}
		local, err1 := parseHexAddrPort(f[1])
		remote, err2 := parseHexAddrPort(f[2])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("/proc/net/%s: addresses %q %q", proto, f[1], f[2])
		}
		s := Socket{Inode: inode, Proto: proto, IPv6: v6, Local: local, Remote: remote}
		if proto == "udp" && len(f) >= 13 {
			if s.Drops, err = strconv.ParseUint(f[12], 10, 64); err != nil {
				return nil, fmt.Errorf("/proc/net/%s: drops %q: %v", proto, f[12], err)
			}
		}
		out[inode] = s
	}
	return out, sc.Err()
}

// parseHexAddrPort parses "0100007F:04AA" (IPv4) or 32 hex digits of IPv6
// and a port: the kernel prints each 32-bit word in host byte order
// (little-endian on every machine this runs on).
func parseHexAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("no port in %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if len(a) != 8 && len(a) != 32 {
		return netip.AddrPort{}, fmt.Errorf("address %q", a)
	}
	var raw []byte
	for i := 0; i < len(a); i += 8 {
		w, err := strconv.ParseUint(a[i:i+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, err
		}
		raw = append(raw, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// SNMP holds the counters of /proc/net/snmp that judge fragmentation and
// TCP retransmission.
type SNMP struct {
	// FragCreates: fragments this host made (outgoing datagrams larger
	// than the route's MTU); FragFails: datagrams it had to drop instead
	// (DF set).
	FragCreates, FragOKs, FragFails uint64
	// ReasmReqds: fragments received for reassembly; ReasmFails: datagrams
	// that could not be reassembled (a fragment lost or timed out).
	ReasmReqds, ReasmOKs, ReasmFails uint64
	// RetransSegs is the host's TCP retransmissions, all sockets.
	RetransSegs uint64
	// UDPRcvbufErrors: datagrams dropped because a receive buffer was
	// full, all UDP sockets.
	UDPRcvbufErrors uint64
}

// ParseSNMP parses /proc/net/snmp (pairs of header and value lines).
func ParseSNMP(b []byte) (SNMP, error) {
	var s SNMP
	vals := map[string]uint64{}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		h, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(h) != len(v) || len(h) == 0 || h[0] != v[0] {
			return s, fmt.Errorf("/proc/net/snmp: lines %d and %d do not pair", i+1, i+2)
		}
		for j := 1; j < len(h); j++ {
			n, err := strconv.ParseInt(v[j], 10, 64)
			if err != nil {
				return s, fmt.Errorf("/proc/net/snmp: %s%s %q: %v", h[0], h[j], v[j], err)
			}
			vals[h[0]+h[j]] = uint64(n)
		}
	}
	need := map[string]*uint64{
		"Ip:FragCreates": &s.FragCreates, "Ip:FragOKs": &s.FragOKs, "Ip:FragFails": &s.FragFails,
		"Ip:ReasmReqds": &s.ReasmReqds, "Ip:ReasmOKs": &s.ReasmOKs, "Ip:ReasmFails": &s.ReasmFails,
		"Tcp:RetransSegs": &s.RetransSegs, "Udp:RcvbufErrors": &s.UDPRcvbufErrors,
	}
	for k, p := range need {
		v, ok := vals[k]
		if !ok {
			return s, fmt.Errorf("/proc/net/snmp has no %s", k)
		}
		*p = v
	}
	return s, nil
}

// Sub returns the counters' increase from a to s.
func (s SNMP) Sub(a SNMP) SNMP {
	return SNMP{
		FragCreates: s.FragCreates - a.FragCreates, FragOKs: s.FragOKs - a.FragOKs, FragFails: s.FragFails - a.FragFails,
		ReasmReqds: s.ReasmReqds - a.ReasmReqds, ReasmOKs: s.ReasmOKs - a.ReasmOKs, ReasmFails: s.ReasmFails - a.ReasmFails,
		RetransSegs: s.RetransSegs - a.RetransSegs, UDPRcvbufErrors: s.UDPRcvbufErrors - a.UDPRcvbufErrors,
	}
}

// ParseSKMemInfo reads the INET_DIAG_SKMEMINFO attribute of sock_diag:
// u32 values in the order of SK_MEMINFO_* (linux/sock_diag.h):
// rmem_alloc, rcvbuf, wmem_alloc, sndbuf, fwd_alloc, wmem_queued, optmem,
// backlog, drops. It returns the buffers and the drops (drops is absent
// before Linux 4.7: ok false).
func ParseSKMemInfo(b []byte) (rcvbuf, sndbuf, drops uint32, dropsOK bool, err error) {
	if len(b) < 4*4 {
		return 0, 0, 0, false, fmt.Errorf("sock_diag meminfo of %d bytes", len(b))
	}
	u := func(i int) uint32 { return nativeEndian.Uint32(b[4*i:]) }
	rcvbuf, sndbuf = u(1), u(3)
	if len(b) >= 9*4 {
		return rcvbuf, sndbuf, u(8), true, nil
	}
	return rcvbuf, sndbuf, 0, false, nil
}
