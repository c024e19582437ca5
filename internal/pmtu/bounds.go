package pmtu

import (
	"time"

	"github.com/ovpnperf/ovpnperf/internal/bounds"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
)

// DefaultTimeout is Options.Timeout's default: a round's answers on a
// path of up to about 1.5 s round trip.
const DefaultTimeout = 2 * time.Second

// TimeoutRange is the round's wait pmtu's --timeout accepts.
func TimeoutRange() bounds.Duration {
	return bounds.Duration{Min: 50 * time.Millisecond, Max: time.Minute}
}

// MaxRange is the largest probe pmtu's --max accepts: a whole IP packet,
// from the smallest IPv4 link MTU to the largest packet.
func MaxRange() bounds.Int {
	return bounds.Int{Min: overhead.MinIPv4LinkMTU, Max: overhead.MaxIPPacket}
}
