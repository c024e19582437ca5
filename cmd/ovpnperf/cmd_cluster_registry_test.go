package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

type staticRegistry []cluster.Endpoint

func (s staticRegistry) Instances() []cluster.Endpoint { return s }

// connect asks its dispatchers in order and takes the next when one cannot
// be reached or refuses; with none answering it says so and falls back.
func TestConnectNextDispatcher(t *testing.T) {
	pki, err := openvpn.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	serve := func(reg cluster.Registry) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		d := &cluster.Dispatcher{Registry: reg, Strategy: cluster.LeastLoaded}
		go func() { _ = d.Serve(l, pki.ServerCert(), pki.ServerKey(), pki.CACert()) }()
		return l.Addr().String()
	}
	live := serve(staticRegistry{{Name: "h2/u0", Host: "198.51.100.7", Port: 1195, Proto: "udp", State: cluster.StateUp}})
	refusing := serve(staticRegistry{{Name: "h1/u0", Host: "198.51.100.6", Port: 1195, Proto: "udp", State: cluster.StateDraining}})
	x, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := x.Addr().String()
	x.Close()
	cfg, err := cluster.ClientTLS(pki.ClientCert(), pki.ClientKey(), pki.CACert())
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r := askDispatchers(context.Background(), &log, []string{dead, refusing, live}, cfg, "udp")
	if r == nil || r.Instance != "h2/u0" || r.Remote != "198.51.100.7" {
		t.Fatalf("reply %+v, want h2/u0 from the third dispatcher\n%s", r, log.String())
	}
	for _, want := range []string{"dispatcher " + dead + ": ", "dispatcher " + refusing + ": dispatcher: no instance is up", "dispatcher assigned h2/u0 (198.51.100.7 1195 udp) via " + live} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("connect's log lacks %q:\n%s", want, log.String())
		}
	}
	log.Reset()
	if r := askDispatchers(context.Background(), &log, []string{dead, refusing}, cfg, "udp"); r != nil {
		t.Errorf("no dispatcher assigns, got %+v", r)
	}
	if !strings.Contains(log.String(), "no dispatcher answered; using the config's remotes") {
		t.Errorf("connect does not say it falls back:\n%s", log.String())
	}
}
