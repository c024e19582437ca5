package labpath

import (
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/overhead"
)

// A lab's MTU limits are IP's, as overhead names them.
func TestLimitsAreIPs(t *testing.T) {
	if MinMTUv4 != overhead.MinIPv4MTU || MinMTUv6 != overhead.MinIPv6MTU || MaxMTU != overhead.MaxIPPacket {
		t.Errorf("lab MTU limits %d, %d, %d; IP's are %d, %d, %d", MinMTUv4, MinMTUv6, MaxMTU, overhead.MinIPv4MTU, overhead.MinIPv6MTU, overhead.MaxIPPacket)
	}
}
