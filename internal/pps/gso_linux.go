package pps

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// UDP generic segmentation offload (Linux 4.18+): with UDP_SEGMENT set on a
// socket, one write of n × size bytes leaves as n datagrams of size bytes,
// segmented by the kernel (or the NIC) after the whole stack ran once for
// all of them. Every segment is a complete probe with its own sequence
// number; the segments of one write share one send time, as the probes of
// one sendmmsg batch do.
//
// The segmentation happens as late as the outgoing device allows. A
// physical NIC without USO and a tun device (OpenVPN) get single datagrams,
// so the path sees what it sees without GSO. A veth pair, as in an
// ovpnperf lab, takes the unsegmented packet: a router namespace then
// forwards one packet per write, and the path looks up to gsoSegments
// times faster than it is for single datagrams. That is why GSO is asked
// for (Config.GSO, --gso) and not the default.

// gsoSegments is the most segments per write (the kernel's
// UDP_MAX_SEGMENTS is 64 before Linux 6.10 and 128 since).
const gsoSegments = 64

// gsoMaxBytes bounds one write: a UDP datagram of at most 65535 bytes with
// its 8-byte header, and room for an IPv6 header.
const gsoMaxBytes = 65535 - 8 - 40

// gsoBatch is the number of probes of size bytes one GSO write carries.
func gsoBatch(size int) int {
	return max(min(gsoSegments, gsoMaxBytes/size), 1)
}

// enableGSO sets UDP_SEGMENT to size on c, so that writes larger than size
// are segmented; 0 turns it off. It fails where the kernel lacks UDP GSO.
// Equivalent to: setsockopt(fd, SOL_UDP, UDP_SEGMENT, &size, sizeof(int)).
func enableGSO(c *net.UDPConn, size int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, size)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("UDP GSO (setsockopt UDP_SEGMENT, Linux 4.18+): %w", serr)
	}
	return nil
}

// gsoFits checks that a probe of size bytes fits the connected socket's
// path MTU unfragmented: a GSO segment must, and the kernel was seen to
// accept a first such write and lose it.
// Equivalent to: getsockopt(fd, IPPROTO_IP, IP_MTU) (IPV6_MTU for IPv6).
func gsoFits(c *net.UDPConn, size int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	v6 := false
	if la, ok := c.LocalAddr().(*net.UDPAddr); ok && la.IP.To4() == nil {
		v6 = true
	}
	var mtu int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if v6 {
			mtu, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU)
		} else {
			mtu, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU)
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("reading the path MTU: %w", serr)
	}
	hdr := 20 + 8
	if v6 {
		hdr = 40 + 8
	}
	if size+hdr > mtu {
		return fmt.Errorf("%d-byte probes exceed the path MTU of %d bytes (%d with headers), and a GSO segment cannot be fragmented", size, mtu, size+hdr)
	}
	return nil
}

// isGSOUnsupported reports errors of a GSO write that mean the path or the
// device cannot take it (a segment larger than the MTU, no checksum offload
// on the device): the sender falls back to sendmmsg.
func isGSOUnsupported(err error) bool {
	return errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EMSGSIZE) ||
		errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EOPNOTSUPP)
}

// fillGSO writes the probes first..first+n-1 into buf back to back, each
// size bytes (the padding of buf must be zero), and returns the bytes to
// write.
func fillGSO(buf []byte, size, n int, p Probe) []byte {
	for i := range n {
		p.Encode(buf[i*size:])
		p.Seq++
	}
	return buf[:n*size]
}
