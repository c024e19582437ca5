package rules

import "fmt"

// LinuxDefaultSockBuf is net.core.{r,w}mem_default on stock Linux: what
// OpenVPN's socket gets when the config sets no sndbuf/rcvbuf (2.4+).
// Stock net.core.{r,w}mem_max is the same number, so it is also the cap
// the kernel puts on OpenVPN's plain SO_SNDBUF/SO_RCVBUF without sysctls.
const LinuxDefaultSockBuf = 212992

// LinuxTCPRmemMax is the third value of net.ipv4.tcp_rmem on stock Linux:
// the largest buffer receive autotuning reaches.
const LinuxTCPRmemMax = 6291456

// JumboSockBuf is the socket buffer that measured faster with a jumbo
// tunnel over UDP.
const JumboSockBuf = 4 << 20

// Buffers is the socket-buffer rule's answer for one path and tunnel.
type Buffers struct {
	// Size is what sndbuf and rcvbuf should be; 0 means set neither and
	// keep the OS default (and, over TCP, the kernel's autotuning).
	Size   int
	Why    string
	Figure string
	// Floor: a fixed buffer below this many bytes caps throughput (TCP
	// transport: buffer/RTT below the bandwidth-delay product); 0 when no
	// floor is known.
	Floor     int
	FloorWhy  string
	DoNot     []Setting
	Undecided []Undecided
}

// Why the rule leaves UDP buffers alone.
const udpNoWindow = "UDP has no window: the bandwidth-delay product queues at the bottleneck, not in OpenVPN's socket; the buffers recipe measured no gain from larger buffers on UDP paths up to 200 ms"

// Why the rule leaves TCP buffers alone.
const tcpAutotune = "over TCP transport Linux autotunes the outer connection's buffers up to net.ipv4.tcp_rmem/tcp_wmem's maximum (6 MiB stock) when OpenVPN sets none; a fixed sndbuf/rcvbuf turns that off and caps throughput at buffer/RTT. Swept on three TCP lab paths (a LAN, 50 ms at 50 Mbit/s, 300 ms at 10 Mbit/s), sndbuf/rcvbuf of 512 KiB or 4 MiB were never faster than the OS default beyond ×1.05 and once slower (docs/measurements.md#tcp-transport-sweep, docs/openvpn-facts.md#socket-buffers-over-tcp-transport)"

// SocketBuffers decides sndbuf/rcvbuf. Over UDP there is no window, and
// the recipe buffers measured no gain from larger buffers on UDP paths up
// to 200 ms, so the rule sets none; the exception is a jumbo tunnel
// (tun-mtu 9000): on the unshaped lab LAN (2026-11-23, 3 samples each)
// tun-mtu 9000 with 4 MiB buffers beat the same with the OS defaults
// beyond the spread in both directions, on the quiet machine by ×1.14 up /
// ×1.08 down (1501 / 1473 against 1314 / 1368 Mbit/s) and with the CPU
// shared by ×1.28 / ×1.57. The likely cause, not measured (no socket drop
// counters were read): each 9000-byte datagram is reassembled from about
// seven fragments and charged to the receiving socket with all their
// overhead, so the stock 212992-byte buffer holds only about a dozen.
//
// Over TCP the rule sets none either: the kernel autotunes the outer
// connection's buffers when OpenVPN sets none. A fixed buffer below the
// bandwidth-delay product is the one thing known to cap a TCP transport
// (Floor); beyond what autotuning reaches, larger buffers are not tested
// here (Undecided).
func SocketBuffers(p Path, tunMTU int) Buffers {
	bdp := p.BDPBytes()
	if p.proto() == "udp" {
		if tunMTU >= 9000 {
			return Buffers{Size: JumboSockBuf,
				Why:    "with a jumbo tunnel larger socket buffers measured faster on a LAN; likely because a 9000-byte tunnel packet arrives as one reassembled datagram of about seven fragments and the stock 212992-byte buffer holds only about a dozen (the cause was not measured)",
				Figure: "unshaped lab LAN, tun-mtu 9000: 4 MiB buffers ×1.14 up / ×1.08 down over OS defaults on a quiet machine (1501/1473 vs 1314/1368 Mbit/s)"}
		}
		b := Buffers{Why: udpNoWindow, Figure: "buffers recipe, UDP transport"}
		if bdp > LinuxDefaultSockBuf {
			b.DoNot = append(b.DoNot, Setting{"sndbuf/rcvbuf raised 'for the long path' over UDP", udpNoWindow, fmt.Sprintf("BDP %d bytes", bdp)})
		}
		return b
	}
	b := Buffers{Why: tcpAutotune, Figure: "Linux tcp_moderate_rcvbuf/tcp_rmem; three TCP lab paths, buffers of 512 KiB and 4 MiB vs the OS default"}
	if bdp > 0 {
		b.Floor = bdp
		b.FloorWhy = fmt.Sprintf("a fixed buffer below the bandwidth-delay product (%s × %v = %d bytes) bounds the outer TCP window at buffer/RTT", mbit(p.RateBitsPerSec), p.RTT, bdp)
	}
	if bdp > LinuxDefaultSockBuf {
		b.DoNot = append(b.DoNot, Setting{fmt.Sprintf("fixed sndbuf/rcvbuf below %d (e.g. the folklore 524288 when smaller)", bdp), b.FloorWhy, fmt.Sprintf("BDP %d bytes", bdp)})
	}
	if bdp > LinuxTCPRmemMax/2 {
		b.Undecided = append(b.Undecided, Undecided{
			Setting: fmt.Sprintf("sndbuf/rcvbuf and net.ipv4.tcp_rmem/tcp_wmem maximum above %d", 2*bdp),
			Missing: "a measurement of larger buffers over TCP on such a path",
			Measure: SweepCommand,
			Changes: fmt.Sprintf("the bandwidth-delay product %d bytes is more than half of what autotuning reaches (%d): if the sweep shows buffers of twice the BDP faster beyond the spread, set them with the sysctl maxima raised; if not, keep the defaults. Not tested here", bdp, LinuxTCPRmemMax),
		})
	}
	return b
}

// BufferAfterDrops is the rule for a UDP socket that dropped datagrams
// (`ovpnperf measure` saw its drop counter rise) while the kernel gave it
// gotBytes of receive buffer (SO_RCVBUF, which the kernel reports doubled).
// It advises JumboSockBuf, or twice what was asked when that was already
// as much or more: a drop means OpenVPN was off the CPU longer than the
// buffer lasts, which on a shared machine is tens of milliseconds, and a
// UDP OpenVPN process has one socket for all its peers, whose buffer costs
// memory only while it holds datagrams. It returns the directive and the
// sysctl without which the kernel caps it.
func BufferAfterDrops(gotBytes int) (directive, sysctl string) {
	size := JumboSockBuf
	if asked := gotBytes / 2; asked >= JumboSockBuf {
		size = 2 * asked
	}
	return fmt.Sprintf("rcvbuf %d", size), fmt.Sprintf("net.core.rmem_max = %d", size)
}
