// Package pps measures the packet rate, loss and round-trip time of a path
// with small UDP packets, the way a forwarding benchmark does: a client sends
// numbered, time-stamped probes at a fixed rate (or as fast as it can) over
// one or more flows, a server echoes them, and the client accounts for every
// probe: echoed within the timeout, lost, late, duplicated or reordered.
//
// The client never sends load to a host that did not ask for it: it first
// runs a handshake (see control.go) with a pps server on the target, which
// accepts the test's parameters or refuses them, and the server echoes only
// packets of sessions it accepted, only from the address that asked, and
// only until the session's time is up.
//
// Socket I/O is batched (recvmmsg/sendmmsg through golang.org/x/net, up to
// 256 probes per send) so that the generator costs far less per packet than
// the path it measures; Config.GSO sends each batch as one UDP GSO write
// instead (see gso_linux.go for where that is and is not valid).
//
// A one-way test (Params.OneWay) is what sockperf throughput and iperf3 -u
// measure: the server counts the probes instead of echoing them, by the
// second of the client's clock they were sent in, and reports the series
// after the run. It costs the path half the packets of an echo test, and
// measures no RTT.
package pps

import (
	"encoding/binary"
	"errors"
)

// Data probe layout, big endian, in the first 18 bytes of the UDP payload
// (18 bytes is the payload of a 64-byte Ethernet frame: 14 Ethernet + 20 IPv4
// + 8 UDP + 18 + 4 FCS); larger probes are padded with zeros:
//
//	0      2          6      8          12                 18
//	+------+----------+------+----------+------------------+
//	| 'p' 'd' | session id | flow | seq | send time (ns, 48 bit) |
//	+------+----------+------+----------+------------------+
//
// The send time counts nanoseconds of the client's monotonic clock since its
// session started; 48 bits hold 78 hours. The echo is the probe unchanged.
const (
	// MinSize is the smallest probe: the header and nothing else.
	MinSize = 18
	// MaxSize is the largest UDP payload over IPv4.
	MaxSize = 65507

	dataMagic0 = 'p'
	dataMagic1 = 'd'
	maxStamp   = 1<<48 - 1
)

// Probe is the header of one data packet.
type Probe struct {
	Session uint32
	Flow    uint16
	Seq     uint32
	// SentNs is the client's monotonic send time, ns since its session start.
	SentNs uint64
}

var errNotProbe = errors.New("not a pps data packet")

// Encode writes p into the first MinSize bytes of b, which must be at least
// that long. It does not touch the padding.
func (p Probe) Encode(b []byte) {
	_ = b[MinSize-1]
	b[0], b[1] = dataMagic0, dataMagic1
	binary.BigEndian.PutUint32(b[2:6], p.Session)
	binary.BigEndian.PutUint16(b[6:8], p.Flow)
	binary.BigEndian.PutUint32(b[8:12], p.Seq)
	t := p.SentNs & maxStamp
	binary.BigEndian.PutUint16(b[12:14], uint16(t>>32))
	binary.BigEndian.PutUint32(b[14:18], uint32(t))
}

// IsProbe reports whether b starts like a data packet.
func IsProbe(b []byte) bool {
	return len(b) >= MinSize && b[0] == dataMagic0 && b[1] == dataMagic1
}

// probeSession returns the session id of a data packet; b must satisfy IsProbe.
func probeSession(b []byte) uint32 { return binary.BigEndian.Uint32(b[2:6]) }

// probeSentNs returns the send time of a data packet; b must satisfy IsProbe.
func probeSentNs(b []byte) uint64 {
	return uint64(binary.BigEndian.Uint16(b[12:14]))<<32 | uint64(binary.BigEndian.Uint32(b[14:18]))
}

// DecodeProbe parses the header of a data packet.
func DecodeProbe(b []byte) (Probe, error) {
	if !IsProbe(b) {
		return Probe{}, errNotProbe
	}
	return Probe{
		Session: binary.BigEndian.Uint32(b[2:6]),
		Flow:    binary.BigEndian.Uint16(b[6:8]),
		Seq:     binary.BigEndian.Uint32(b[8:12]),
		SentNs:  probeSentNs(b),
	}, nil
}
