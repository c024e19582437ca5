package overhead

// The MTUs IP itself bounds, which every option naming a path MTU or a
// probe size checks against.
const (
	// MinIPv4LinkMTU is the smallest MTU an IPv4 link may have (RFC 791:
	// a 60-byte header and an 8-byte fragment).
	MinIPv4LinkMTU = 68
	// MinIPv4MTU is the datagram every IPv4 host must accept (RFC 791),
	// the smallest path MTU ovpnperf takes.
	MinIPv4MTU = 576
	// MinIPv6MTU is IPv6's minimum link MTU (RFC 8200).
	MinIPv6MTU = 1280
	// MaxIPPacket is the largest IP packet: a 16-bit total length.
	MaxIPPacket = 65535
)
