package tunnel

import (
	"os"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// The extra client's address comes from the PUSH_REPLY a real OpenVPN
// 2.6.14 client logged.
func TestPushedAddr(t *testing.T) {
	f, err := os.Open("../openvpn/testdata/logs/none-client.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lg, err := openvpn.ParseLog(f)
	if err != nil {
		t.Fatal(err)
	}
	a, err := pushedAddr(lg.PushReply)
	if err != nil || a.String() != "203.0.113.2" {
		t.Errorf("pushedAddr(%q) = %v, %v; want 203.0.113.2", lg.PushReply, a, err)
	}
	for _, bad := range []string{"", "PUSH_REPLY,route-gateway 203.0.113.1,topology subnet", "PUSH_REPLY,ifconfig nonsense 255.255.255.0"} {
		if a, err := pushedAddr(bad); err == nil {
			t.Errorf("pushedAddr(%q) = %v, want an error", bad, a)
		}
	}
}
