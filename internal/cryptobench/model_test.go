package cryptobench

import (
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/overhead"
)

// The constant is the overhead model's full inner packet under 2.6's
// default mssfix 1492 mtu, not a second computation.
func TestDefaultPacketBytesMatchesModel(t *testing.T) {
	t.Parallel()
	f, err := overhead.New(overhead.DataChannel{}, overhead.Transport{Proto: "udp"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.MSS(1492, true, false) + 40; got != DefaultPacketBytes {
		t.Fatalf("model says %d, DefaultPacketBytes is %d", got, DefaultPacketBytes)
	}
}
