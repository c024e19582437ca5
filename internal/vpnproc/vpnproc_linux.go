package vpnproc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/measure"
)

var nativeEndian = binary.NativeEndian

// ErrNotTun says that the route to an address does not leave through a tun
// device: the address is not inside an OpenVPN tunnel on this host.
var ErrNotTun = errors.New("not routed through a tun device")

// Route is how this host reaches an address.
type Route struct {
	Dev  string
	Kind string // the link's kind: "tun" for OpenVPN's device
	MTU  int
	// PathMTU is the route's cached path MTU when the kernel learnt one
	// (ICMP "fragmentation needed"), else the device's MTU.
	PathMTU int
	// TxQueueLen is the device's txqueuelen.
	TxQueueLen int
}

// RouteTo asks the kernel (`ip route get ADDR`) which device reaches addr;
// a zone (fe80::1%eth1) names the device. No route is an error.
func RouteTo(addr netip.Addr) (Route, error) {
	// Equivalent to: ip route get ADDR [oif ZONE]
	rs, err := netlink.RouteGetWithOptions(addr.AsSlice(), &netlink.RouteGetOptions{Oif: addr.Zone()})
	if err != nil || len(rs) == 0 {
		return Route{}, fmt.Errorf("no route to %s: %v", addr, err)
	}
	r := rs[0]
	if r.Type == unix.RTN_UNREACHABLE || r.Type == unix.RTN_BLACKHOLE || r.Type == unix.RTN_PROHIBIT {
		return Route{}, fmt.Errorf("no route to %s (unreachable)", addr)
	}
	l, err := netlink.LinkByIndex(r.LinkIndex)
	if err != nil {
		return Route{}, fmt.Errorf("route to %s: device %d: %v", addr, r.LinkIndex, err)
	}
	rt := Route{Dev: l.Attrs().Name, Kind: l.Type(), MTU: l.Attrs().MTU, PathMTU: l.Attrs().MTU, TxQueueLen: l.Attrs().TxQLen}
	if r.MTU > 0 && r.MTU < rt.PathMTU {
		rt.PathMTU = r.MTU
	}
	if t, ok := l.(*netlink.Tuntap); ok && t.Mode == netlink.TUNTAP_MODE_TUN {
		rt.Kind = "tun"
	}
	return rt, nil
}

// kindName names a link kind as netlink gives it for people: "device" is
// netlink's word for a link of no particular kind (lo, a physical NIC).
func kindName(kind string) string {
	switch kind {
	case "", "device":
		return "a network device, not a tun device"
	case "tuntap":
		return "a tap device"
	}
	return "a " + kind + " device"
}

// Process is the OpenVPN process that carries a tunnel.
type Process struct {
	Pid  int
	Comm string
	// Tun is the tun device it holds.
	Tun string
	// Socket is its transport socket (UDP, or TCP connected to the peer).
	Socket Socket
	// startTicks tells the process from a later one with the same pid.
	startTicks uint64
}

// FindByTunnel finds the process that holds the tun device the route to
// tunnelAddr leaves through, in this network namespace. peer, when valid,
// picks the transport socket connected to it when there are several.
func FindByTunnel(tunnelAddr, peer netip.Addr) (*Process, error) {
	rt, err := RouteTo(tunnelAddr)
	if err != nil {
		return nil, err
	}
	if rt.Kind != "tun" {
		return nil, fmt.Errorf("%s is reached through %s (%s): %w", tunnelAddr, rt.Dev, kindName(rt.Kind), ErrNotTun)
	}
	pid, err := tunOwner(rt.Dev)
	if err != nil {
		return nil, err
	}
	return Open(pid, rt.Dev, peer)
}

// tunOwner returns the process in this network namespace that has
// /dev/net/tun open attached to dev.
func tunOwner(dev string) (int, error) {
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return 0, fmt.Errorf("reading this process's network namespace: %v", err)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var found []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err != nil || ns != self {
			continue
		}
		if holdsTun(pid, dev) {
			found = append(found, pid)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("no process of this host holds tun device %s (is it OpenVPN's? give --pid; reading other processes' file descriptors needs root)", dev)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("several processes hold tun device %s (pids %v): give --pid", dev, found)
}

// holdsTun reports whether pid has a /dev/net/tun descriptor attached to dev.
func holdsTun(pid int, dev string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil || link != "/dev/net/tun" {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err == nil && ParseFdinfoIff(b) == dev {
			return true
		}
	}
	return false
}

// Open describes process pid as the OpenVPN process of tun device dev ("":
// whichever tun device it holds), with its transport socket.
func Open(pid int, dev string, peer netip.Addr) (*Process, error) {
	t, err := cpuacct.Read(pid)
	if err != nil {
		return nil, fmt.Errorf("pid %d: no such process", pid)
	}
	p := &Process{Pid: pid, Comm: t.Comm, Tun: dev, startTicks: t.StartTicks}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the file descriptors of pid %d (needs root): %v", pid, err)
	}
	inodes := map[uint64]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil {
			continue
		}
		if in, ok := ParseSocketInode(link); ok {
			inodes[in] = true
		}
		if link == "/dev/net/tun" && p.Tun == "" {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name())); err == nil {
				p.Tun = ParseFdinfoIff(b)
			}
		}
	}
	if p.Tun == "" {
		return nil, fmt.Errorf("pid %d (%s) holds no tun device in this network namespace", pid, p.Comm)
	}
	socks, err := readSockets()
	if err != nil {
		return nil, err
	}
	var cands []Socket
	for in := range inodes {
		if s, ok := socks[in]; ok {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("pid %d (%s) has no UDP or TCP socket in this network namespace", pid, p.Comm)
	}
	// The socket that talks to the peer first, then UDP before TCP (a TCP
	// listener of a management interface is no transport).
	sort.Slice(cands, func(i, j int) bool {
		pi, pj := cands[i].Remote.Addr() == peer, cands[j].Remote.Addr() == peer
		if pi != pj {
			return pi
		}
		if cands[i].Proto != cands[j].Proto {
			return cands[i].Proto == "udp"
		}
		return cands[i].Inode < cands[j].Inode
	})
	p.Socket = cands[0]
	return p, nil
}

// readSockets reads /proc/net/{udp,udp6,tcp,tcp6} of this network namespace.
func readSockets() (map[uint64]Socket, error) {
	all := map[uint64]Socket{}
	for _, f := range []struct {
		name, proto string
		v6          bool
	}{{"udp", "udp", false}, {"udp6", "udp", true}, {"tcp", "tcp", false}, {"tcp6", "tcp", true}} {
		b, err := os.ReadFile("/proc/net/" + f.name)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) { // no IPv6 in this kernel
				continue
			}
			return nil, err
		}
		m, err := ParseNetTable(b, f.proto, f.v6)
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			all[k] = v
		}
	}
	return all, nil
}

// Counters are the process's and host's counters at one moment.
type Counters struct {
	Taken time.Time
	// CPU is the process's CPU time (all threads, user+system).
	CPU time.Duration
	// Threads is each thread's CPU time, by thread id.
	Threads map[int]time.Duration
	// SocketDrops is the transport socket's drop counter (UDP: the drops
	// column of /proc/net/udp; sock_diag's for TCP where it has one).
	SocketDrops uint64
	// TCPRetrans is the transport socket's retransmitted segments (TCP).
	TCPRetrans uint64
	// RcvbufBytes and SndbufBytes are the buffers the kernel gave the
	// socket (sk_rcvbuf, sk_sndbuf: what SO_RCVBUF/SO_SNDBUF return).
	RcvbufBytes, SndbufBytes uint32
	SNMP                     SNMP
	// TunTxDropped is the tun device's tx_dropped: packets for the
	// tunnel dropped because OpenVPN did not read them fast enough.
	TunTxDropped, TunTxPackets, TunTxBytes, TunRxPackets, TunRxBytes uint64
	TunTxQueueLen                                                    int
	// Unread names what could not be read, with the reason.
	Unread []string
}

// ErrGone says the OpenVPN process exited or was replaced.
var ErrGone = errors.New("the OpenVPN process is gone")

// Read takes the counters now. Only a vanished process is an error;
// anything else unreadable goes to Counters.Unread.
func (p *Process) Read() (Counters, error) {
	c := Counters{Taken: time.Now(), Threads: map[int]time.Duration{}}
	t, err := cpuacct.Read(p.Pid)
	if err != nil || t.StartTicks != p.startTicks {
		return c, fmt.Errorf("pid %d: %w", p.Pid, ErrGone)
	}
	c.CPU = t.Total()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.Pid))
	if err != nil {
		c.Unread = append(c.Unread, "per-thread CPU: "+err.Error())
	}
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", p.Pid, tid))
		if err != nil {
			continue // the thread ended
		}
		if tt, err := cpuacct.ParseStat(b); err == nil {
			c.Threads[tid] = tt.Total()
		}
	}
	if p.Socket.Proto == "udp" {
		socks, err := readSockets()
		if s, ok := socks[p.Socket.Inode]; err == nil && ok {
			c.SocketDrops = s.Drops
		} else {
			c.Unread = append(c.Unread, fmt.Sprintf("socket drops: socket %d not in /proc/net/udp (%v)", p.Socket.Inode, err))
		}
	}
	if err := p.readDiag(&c); err != nil {
		c.Unread = append(c.Unread, "socket buffers (sock_diag): "+err.Error())
	}
	if b, err := os.ReadFile("/proc/net/snmp"); err != nil {
		c.Unread = append(c.Unread, "IP fragment counters: "+err.Error())
	} else if c.SNMP, err = ParseSNMP(b); err != nil {
		c.Unread = append(c.Unread, "IP fragment counters: "+err.Error())
	}
	// Equivalent to: ip -s link show DEV
	if l, err := netlink.LinkByName(p.Tun); err != nil {
		c.Unread = append(c.Unread, fmt.Sprintf("tun device %s: %v", p.Tun, err))
	} else {
		c.TunTxQueueLen = l.Attrs().TxQLen
		if st := l.Attrs().Statistics; st != nil {
			c.TunTxDropped, c.TunTxPackets, c.TunTxBytes = st.TxDropped, st.TxPackets, st.TxBytes
			c.TunRxPackets, c.TunRxBytes = st.RxPackets, st.RxBytes
		} else {
			c.Unread = append(c.Unread, fmt.Sprintf("tun device %s: no statistics", p.Tun))
		}
	}
	return c, nil
}

// sock_diag constants (linux/inet_diag.h).
const (
	inetDiagInfo      = 2
	inetDiagSKMemInfo = 7
	sizeofDiagReq     = 56
	sizeofDiagMsg     = 72
	// offset of tcpi_total_retrans in struct tcp_info.
	tcpInfoTotalRetrans = 100
)

// readDiag asks sock_diag for the socket's buffers (and, for TCP, its
// tcp_info). sock_diag is read-only and needs no access to the process;
// duplicating its descriptor (pidfd_getfd) to call getsockopt would need
// ptrace rights over OpenVPN and briefly hold its socket.
func (p *Process) readDiag(c *Counters) error {
	fam := uint8(unix.AF_INET)
	if p.Socket.IPv6 {
		fam = unix.AF_INET6
	}
	proto := uint8(unix.IPPROTO_UDP)
	if p.Socket.Proto == "tcp" {
		proto = unix.IPPROTO_TCP
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	req := make([]byte, unix.SizeofNlMsghdr+sizeofDiagReq)
	nativeEndian.PutUint32(req[0:], uint32(len(req)))
	nativeEndian.PutUint16(req[4:], 20) // SOCK_DIAG_BY_FAMILY
	nativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	nativeEndian.PutUint32(req[8:], 1)
	r := req[unix.SizeofNlMsghdr:]
	r[0], r[1] = fam, proto
	r[2] = 1<<(inetDiagSKMemInfo-1) | 1<<(inetDiagInfo-1)
	nativeEndian.PutUint32(r[4:], 0xffffffff) // all states
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := parseNetlink(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			switch m.typ {
			case unix.NLMSG_DONE:
				return fmt.Errorf("socket %d not found", p.Socket.Inode)
			case unix.NLMSG_ERROR:
				if len(m.data) >= 4 {
					return fmt.Errorf("sock_diag: %v", unix.Errno(-int32(nativeEndian.Uint32(m.data))))
				}
				return errors.New("sock_diag: error")
			}
			if len(m.data) < sizeofDiagMsg || uint64(nativeEndian.Uint32(m.data[68:])) != p.Socket.Inode {
				continue
			}
			got := false
			for _, a := range parseAttrs(m.data[sizeofDiagMsg:]) {
				switch a.typ {
				case inetDiagSKMemInfo:
					rcv, snd, drops, ok, err := ParseSKMemInfo(a.val)
					if err != nil {
						return err
					}
					c.RcvbufBytes, c.SndbufBytes, got = rcv, snd, true
					if ok && p.Socket.Proto == "tcp" {
						c.SocketDrops = uint64(drops)
					}
				case inetDiagInfo:
					if p.Socket.Proto == "tcp" && len(a.val) >= tcpInfoTotalRetrans+4 {
						c.TCPRetrans = uint64(nativeEndian.Uint32(a.val[tcpInfoTotalRetrans:]))
					}
				}
			}
			if !got {
				return errors.New("the kernel sent no memory figures")
			}
			return nil
		}
	}
}

type nlMsg struct {
	typ  uint16
	data []byte
}

func parseNetlink(b []byte) ([]nlMsg, error) {
	var out []nlMsg
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(nativeEndian.Uint32(b))
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return nil, fmt.Errorf("netlink message of length %d in %d bytes", l, len(b))
		}
		out = append(out, nlMsg{typ: nativeEndian.Uint16(b[4:]), data: b[unix.SizeofNlMsghdr:l]})
		b = b[(l+3)&^3:]
		if len(b) > 0 && len(b) < unix.SizeofNlMsghdr {
			break
		}
	}
	return out, nil
}

type rtAttr struct {
	typ uint16
	val []byte
}

func parseAttrs(b []byte) []rtAttr {
	var out []rtAttr
	for len(b) >= 4 {
		l := int(nativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			break
		}
		out = append(out, rtAttr{typ: nativeEndian.Uint16(b[2:]) & 0x3fff, val: b[4:l]})
		al := (l + 3) &^ 3
		if al > len(b) {
			break
		}
		b = b[al:]
	}
	return out
}

// Sub returns what happened from a to b.
func Sub(a, b Counters) measure.OpenVPNCounters {
	d := measure.OpenVPNCounters{
		Seconds:     b.Taken.Sub(a.Taken).Seconds(),
		CPUSeconds:  (b.CPU - a.CPU).Seconds(),
		SocketDrops: b.SocketDrops - a.SocketDrops, TCPRetrans: b.TCPRetrans - a.TCPRetrans,
		RcvbufBytes: b.RcvbufBytes, SndbufBytes: b.SndbufBytes,
		TunTxDropped: b.TunTxDropped - a.TunTxDropped,
		TunPackets:   (b.TunTxPackets - a.TunTxPackets) + (b.TunRxPackets - a.TunRxPackets),
		TunBytes:     (b.TunTxBytes - a.TunTxBytes) + (b.TunRxBytes - a.TunRxBytes),
		TxQueueLen:   b.TunTxQueueLen,
	}
	s := b.SNMP.Sub(a.SNMP)
	d.FragCreates, d.FragFails, d.ReasmReqds, d.ReasmFails = s.FragCreates, s.FragFails, s.ReasmReqds, s.ReasmFails
	if d.Seconds > 0 {
		d.CoreShare = d.CPUSeconds / d.Seconds
		for tid, tb := range b.Threads {
			if sh := (tb - a.Threads[tid]).Seconds() / d.Seconds; sh > d.BusiestThreadShare {
				d.BusiestThreadShare = sh
			}
		}
	}
	seen := map[string]bool{}
	for _, u := range append(append([]string(nil), a.Unread...), b.Unread...) {
		k, _, _ := strings.Cut(u, ":")
		if !seen[k] {
			seen[k] = true
			d.Unread = append(d.Unread, u)
		}
	}
	return d
}
