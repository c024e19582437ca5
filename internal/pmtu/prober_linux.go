package pmtu

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrPermission means the raw ICMP socket could not be opened because the
// process lacks root or CAP_NET_RAW.
var ErrPermission = errors.New("probing the path MTU needs a raw ICMP socket: run as root or with CAP_NET_RAW (sudo ovpnperf pmtu …)")

// Route is where packets to a destination leave this host.
type Route struct {
	Dev string // outgoing interface
	MTU int    // its MTU (not the cached path MTU of the route)
	// Src is the source address the kernel picks.
	Src netip.Addr
}

// RouteTo asks the kernel (in the caller's network namespace) how it would
// send to dst; a zone (fe80::1%eth1) names the interface.
//
// Equivalent to: ip route get DST [oif ZONE]; ip link show DEV
func RouteTo(dst netip.Addr) (Route, error) {
	routes, err := netlink.RouteGetWithOptions(dst.AsSlice(), &netlink.RouteGetOptions{Oif: dst.Zone()})
	if err != nil {
		if errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) {
			return Route{}, fmt.Errorf("no route to %s: network unreachable (check `ip route get %s`)", dst, dst)
		}
		return Route{}, fmt.Errorf("ip route get %s: %w", dst, err)
	}
	if len(routes) == 0 {
		return Route{}, fmt.Errorf("no route to %s", dst)
	}
	r := Route{}
	if src, ok := netip.AddrFromSlice(routes[0].Src); ok {
		r.Src = src.Unmap()
	}
	link, err := netlink.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return r, fmt.Errorf("ip link show (index %d, route to %s): %w", routes[0].LinkIndex, dst, err)
	}
	r.Dev = link.Attrs().Name
	r.MTU = link.Attrs().MTU
	return r, nil
}

// rawProber sends ICMP echo requests with Don't-Fragment through a raw
// socket and reads echo replies and ICMP errors from the same socket.
type rawProber struct {
	fam    Family
	dst    netip.Addr
	route  Route
	conn   *net.IPConn
	id     uint16
	cookie [8]byte

	mu      sync.Mutex
	seq     uint16
	waiting map[uint16]chan<- received // seq → the round collecting it

	done chan struct{}
}

// NewProber opens a raw ICMP socket toward dst in the caller's network
// namespace (it stays there even if used from other threads later). It sets
// IP_PMTUDISC_PROBE / IPV6_PMTUDISC_PROBE: probes carry Don't-Fragment (IPv6
// routers never fragment) and are sized freely up to the interface MTU,
// ignoring any path MTU the kernel has cached for dst.
func NewProber(dst netip.Addr) (Prober, error) {
	dst = dst.Unmap()
	route, err := RouteTo(dst)
	if err != nil {
		return nil, err
	}
	fam := IPv4
	network, laddr := "ip4:icmp", "0.0.0.0"
	if dst.Is6() {
		fam = IPv6
		network, laddr = "ip6:ipv6-icmp", "::"
	}
	pc, err := net.ListenPacket(network, laddr)
	if err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			return nil, ErrPermission
		}
		return nil, fmt.Errorf("opening raw ICMP socket: %w", err)
	}
	conn := pc.(*net.IPConn)
	sc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, err
	}
	var serr error
	cerr := sc.Control(func(fd uintptr) {
		if fam == IPv6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_PROBE)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_PROBE)
		}
	})
	if err := errors.Join(cerr, serr); err != nil {
		conn.Close()
		return nil, fmt.Errorf("setting path-MTU discovery to probe mode on the ICMP socket: %w", err)
	}
	// Room for a whole round of jumbo replies.
	_ = conn.SetReadBuffer(4 << 20)

	p := &rawProber{fam: fam, dst: dst, route: route, conn: conn, waiting: map[uint16]chan<- received{}, done: make(chan struct{})}
	var idb [2]byte
	if _, err := rand.Read(idb[:]); err != nil {
		conn.Close()
		return nil, err
	}
	if _, err := rand.Read(p.cookie[:]); err != nil {
		conn.Close()
		return nil, err
	}
	p.id = binary.BigEndian.Uint16(idb[:])
	go p.readLoop()
	return p, nil
}

func (p *rawProber) Family() Family { return p.fam }
func (p *rawProber) LocalMTU() int  { return p.route.MTU }

// Close closes the socket and waits for the reader to finish.
func (p *rawProber) Close() error {
	err := p.conn.Close()
	<-p.done
	return err
}

// received is an answer matched to one outstanding probe.
type received struct {
	seq uint16
	at  time.Time
	a   Answer
}

func (p *rawProber) Round(ctx context.Context, sizes []int, w Wait) ([]Answer, error) {
	answers := make([]Answer, len(sizes))
	recvc := make(chan received, 2*len(sizes)+8)
	bySeq := map[uint16]int{} // seq → index in sizes
	sentAt := make([]time.Time, len(sizes))

	p.mu.Lock()
	seqs := make([]uint16, len(sizes))
	for i := range sizes {
		p.seq++
		seqs[i] = p.seq
		bySeq[p.seq] = i
		p.waiting[p.seq] = recvc
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		for _, s := range seqs {
			delete(p.waiting, s)
		}
		p.mu.Unlock()
	}()

	pending := 0
	dst := &net.IPAddr{IP: p.dst.AsSlice(), Zone: p.dst.Zone()}
	for i, size := range sizes {
		answers[i] = Answer{Size: size, Outcome: Lost}
		msg := p.echo(seqs[i], size)
		sentAt[i] = time.Now()
		if _, err := p.conn.WriteTo(msg, dst); err != nil {
			switch {
			case errors.Is(err, syscall.EMSGSIZE):
				answers[i].Outcome = LocalTooBig
				answers[i].MTU = p.route.MTU
				continue
			case errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH):
				return nil, fmt.Errorf("sending to %s: %w", p.dst, err)
			case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES):
				return nil, fmt.Errorf("sending to %s: %w (does a firewall rule on this host reject ICMP echo?)", p.dst, err)
			}
			return nil, fmt.Errorf("sending a %d-byte probe to %s: %w", size, p.dst, err)
		}
		pending++
	}
	start := time.Now()
	var slowest time.Duration
	timer := time.NewTimer(w.Deadline(0))
	defer timer.Stop()
	for pending > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return answers, nil
		case r := <-recvc:
			i, ok := bySeq[r.seq]
			if !ok || answers[i].Outcome != Lost {
				continue
			}
			a := r.a
			a.Size = sizes[i]
			a.RTT = r.at.Sub(sentAt[i])
			answers[i] = a
			pending--
			if a.Outcome == Reply && a.RTT > slowest {
				slowest = a.RTT
				timer.Reset(time.Until(start.Add(w.Deadline(slowest))))
			}
		}
	}
	return answers, nil
}

// echo builds an ICMP echo request whose IP packet is size bytes long.
// The payload starts with the prober's cookie, so that replies to other
// programs' pings (a raw socket sees them all) are not mistaken for ours.
func (p *rawProber) echo(seq uint16, size int) []byte {
	n := size - p.fam.HeaderBytes()
	if n < 8+len(p.cookie) {
		n = 8 + len(p.cookie)
	}
	b := make([]byte, n)
	if p.fam == IPv6 {
		b[0] = 128 // echo request; the kernel fills in the ICMPv6 checksum
	} else {
		b[0] = 8
	}
	binary.BigEndian.PutUint16(b[4:], p.id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], p.cookie[:])
	if p.fam == IPv4 {
		binary.BigEndian.PutUint16(b[2:], checksum(b))
	}
	return b
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// readLoop reads every ICMP message the socket sees until it is closed and
// hands those that answer one of our probes to the round waiting for it.
func (p *rawProber) readLoop() {
	defer close(p.done)
	buf := make([]byte, 65536)
	for {
		n, from, err := p.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		at := time.Now()
		src, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP)
		seq, a, ok := p.parse(buf[:n], src.Unmap())
		if !ok {
			continue
		}
		p.mu.Lock()
		c := p.waiting[seq]
		p.mu.Unlock()
		if c != nil {
			select {
			case c <- received{seq: seq, at: at, a: a}:
			default:
			}
		}
	}
}

// parse recognises an echo reply to one of our probes, or an ICMP error
// quoting one, and returns its sequence number. b starts at the ICMP header
// (the kernel strips the IPv4 header for Go's ip4 sockets; IPv6 raw sockets
// never deliver it).
func (p *rawProber) parse(b []byte, from netip.Addr) (uint16, Answer, bool) {
	if len(b) < 8 {
		return 0, Answer{}, false
	}
	typ, code := b[0], b[1]
	a := Answer{From: from}
	var quoted []byte // the ICMP header of our probe inside an error
	if p.fam == IPv4 {
		switch typ {
		case 0: // echo reply
			if from != p.dst {
				return 0, a, false
			}
			return p.matchEcho(b, Reply, a)
		case 3: // destination unreachable
			if code == 4 {
				a.Outcome = TooBig
				a.MTU = int(binary.BigEndian.Uint16(b[6:8]))
			} else {
				a.Outcome = Unreachable
				a.Detail = unreachV4(code)
			}
		case 11:
			a.Outcome = Unreachable
			a.Detail = "time to live exceeded in transit (routing loop?)"
		default:
			return 0, a, false
		}
		ip := b[8:]
		if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != 1 {
			return 0, a, false
		}
		ihl := int(ip[0]&0x0f) * 4
		if dst, _ := netip.AddrFromSlice(ip[16:20]); dst != p.dst || len(ip) < ihl+8 {
			return 0, a, false
		}
		quoted = ip[ihl:]
		if quoted[0] != 8 {
			return 0, a, false
		}
	} else {
		switch typ {
		case 129: // echo reply
			if from != p.dst {
				return 0, a, false
			}
			return p.matchEcho(b, Reply, a)
		case 2: // packet too big
			a.Outcome = TooBig
			a.MTU = int(binary.BigEndian.Uint32(b[4:8]))
		case 1:
			a.Outcome = Unreachable
			a.Detail = unreachV6(code)
		case 3:
			a.Outcome = Unreachable
			a.Detail = "hop limit exceeded in transit (routing loop?)"
		default:
			return 0, a, false
		}
		ip := b[8:]
		if len(ip) < 48 || ip[0]>>4 != 6 || ip[6] != 58 {
			return 0, a, false
		}
		if dst, _ := netip.AddrFromSlice(ip[24:40]); dst != p.dst {
			return 0, a, false
		}
		quoted = ip[40:]
		if quoted[0] != 128 {
			return 0, a, false
		}
	}
	if binary.BigEndian.Uint16(quoted[4:6]) != p.id {
		return 0, a, false
	}
	// Routers quote at least 8 bytes; Linux quotes more, then the cookie
	// must match too (another prober may have drawn the same id).
	if len(quoted) >= 8+len(p.cookie) && string(quoted[8:8+len(p.cookie)]) != string(p.cookie[:]) {
		return 0, a, false
	}
	return binary.BigEndian.Uint16(quoted[6:8]), a, true
}

func (p *rawProber) matchEcho(b []byte, o Outcome, a Answer) (uint16, Answer, bool) {
	if len(b) < 8+len(p.cookie) || binary.BigEndian.Uint16(b[4:6]) != p.id || string(b[8:16]) != string(p.cookie[:]) {
		return 0, a, false
	}
	a.Outcome = o
	return binary.BigEndian.Uint16(b[6:8]), a, true
}

func unreachV4(code byte) string {
	switch code {
	case 0:
		return "network unreachable"
	case 1:
		return "host unreachable"
	case 2:
		return "protocol unreachable"
	case 3:
		return "port unreachable"
	case 9, 10, 13:
		return "communication administratively prohibited (a firewall rejects ICMP)"
	}
	return fmt.Sprintf("ICMP destination unreachable, code %d", code)
}

func unreachV6(code byte) string {
	switch code {
	case 0:
		return "no route to destination"
	case 1:
		return "communication administratively prohibited (a firewall rejects ICMPv6)"
	case 3:
		return "address unreachable"
	case 4:
		return "port unreachable"
	case 5, 6:
		return "source address failed ingress/egress policy"
	}
	return fmt.Sprintf("ICMPv6 destination unreachable, code %d", code)
}
