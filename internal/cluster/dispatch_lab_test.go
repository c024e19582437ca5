package cluster_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// TestDispatcherOverCluster is must-show 2 on a real cluster: 4 real
// clients on u0 (seen through the management interface), then 4 requests
// to the least-loaded dispatcher all go to u1; round-robin alternates.
func TestDispatcherOverCluster(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn")
	l := labtest.New(t, labpath.Path{})
	c, pki := startCluster(t, l, cluster.Options{Instances: 2, Protos: []string{"udp"}, PortBase: 1195})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	startClients(t, ctx, l, pki, t.TempDir(), 4, 1195, "udp")
	for stateOf(c, "u0").Clients != 4 {
		if ctx.Err() != nil {
			t.Fatalf("u0 does not show 4 clients: %+v", stateOf(c, "u0"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	tlsCfg, err := cluster.ClientTLS(pki.ClientCert(), pki.ClientKey(), pki.CACert())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		strategy string
		want     []string
	}{
		{cluster.LeastLoaded, []string{"u1", "u1", "u1", "u1"}},
		{cluster.RoundRobin, []string{"u0", "u1", "u0", "u1"}},
	} {
		d := &cluster.Dispatcher{Registry: cluster.LocalRegistry{C: c, Host: lab.ServerV4().String()}, Strategy: tc.strategy, RatePerSec: 20, Burst: 40}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = d.Serve(ln, pki.ServerCert(), pki.ServerKey(), pki.CACert()) }()
		for i, want := range tc.want {
			r, err := cluster.Ask(ctx, ln.Addr().String(), tlsCfg, cluster.NewRequest("udp"))
			if err != nil {
				t.Fatalf("%s request %d: %v", tc.strategy, i, err)
			}
			if r.Instance != want || r.Remote != lab.ServerV4().String() || r.Port == 0 {
				t.Errorf("%s request %d: %+v, want %s", tc.strategy, i, r, want)
			}
		}
		ln.Close()
	}
	t.Run("ClientPaths", func(t *testing.T) { testClientPaths(t, ctx, l, c, pki) })
}
