package emulate

import "github.com/ovpnperf/ovpnperf/internal/usage"

// BackendAFPacket names the AF_PACKET backend in Stats.
const BackendAFPacket = "afpacket"

// AFPacketConfig makes the emulator a layer-2 bump in the wire between two
// ports of its network namespace on AF_PACKET sockets (afpacket_linux.go):
// queue 0 of Config.Queues is up (frames arriving on PortA leave by
// PortB), queue 1 down. The namespace must have no addresses on the ports,
// no bridge and forwarding off; Open checks.
type AFPacketConfig struct {
	PortA string `json:"port_a"`
	PortB string `json:"port_b"`
	// TX is how released frames are sent: TXSendmmsg (empty, the
	// default) or TXRing.
	TX string `json:"tx,omitempty"`
	// HoldBytes is each direction's hold buffer; 0 sizes it from the
	// delay (at least 32 MiB).
	HoldBytes int `json:"hold_bytes,omitempty"`
}

// The ways of sending released frames.
const (
	// TXSendmmsg sends each release batch with one sendmmsg call; the
	// kernel copies every frame into a new socket buffer.
	TXSendmmsg = "sendmmsg"
	// TXRing copies released frames into a PACKET_TX_RING (TPACKET_V2)
	// and kicks it with one send call; the kernel attaches the ring's
	// pages to the socket buffers instead of copying (but a veth copies
	// them when it forwards to its peer's namespace). Frames that do not
	// fit a ring frame (GSO aggregates), or that find the ring full, go
	// by sendmmsg, in order.
	TXRing = "ring"
)

func (c *AFPacketConfig) validate() error {
	switch {
	case c.PortA == "" || c.PortB == "" || c.PortA == c.PortB:
		return usage.Errorf("link emulator: the wire needs two different ports, got %q and %q", c.PortA, c.PortB)
	case c.TX != "" && c.TX != TXSendmmsg && c.TX != TXRing:
		return usage.Errorf("link emulator: AF_PACKET tx %q is neither %s nor %s", c.TX, TXSendmmsg, TXRing)
	case c.HoldBytes < 0:
		return usage.Errorf("link emulator: hold buffer of %d bytes is negative", c.HoldBytes)
	}
	return nil
}
