package overhead

// Plain TCP over Ethernet with a 1500-byte MTU, the packet sizes that turn
// an iperf3 goodput into the rate on the wire and a count of bytes into
// segments: 1500 − 20 (IPv4) − 20 (TCP) − 12 (timestamps, on by default on
// Linux) = 1448 bytes of payload in a frame of 1500 + 14 (Ethernet header)
// = 1514 bytes.
const (
	// TCPSegmentBytes is a full TCP segment's payload.
	TCPSegmentBytes = 1448
	// TCPFrameBytes is the Ethernet frame that carries it.
	TCPFrameBytes = 1514
)

// TCPGoodputShare is the share of the wire a plain TCP flow's payload
// takes, segment over frame (0.956).
const TCPGoodputShare = float64(TCPSegmentBytes) / TCPFrameBytes
