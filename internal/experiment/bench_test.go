package experiment

import (
	"context"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestBenchClose builds a bench with a tunnel and an extra client, as the
// instances recipe does, and checks that Close stops the extra client
// before its server, ends every OpenVPN process and leaves nothing of the
// lab.
func TestBenchClose(t *testing.T) {
	labtest.Require(t)
	testenv.RequirePrograms(t, "openvpn")
	ctx := context.Background()
	name := "t" + lab.NewName()
	b, err := UpBench(ctx, Spec{LabName: name, Lab: labtest.Env()}, Network{Name: "lan"})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = b.Close()
		}
	}()
	v, err := openvpn.ParseVariant("default")
	if err != nil {
		t.Fatal(err)
	}
	tun, err := b.AddTunnel(ctx, tunnel.Options{Variant: v, Slot: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.PKI.IssueClient("second"); err != nil {
		t.Fatal(err)
	}
	c, err := b.AddClient(ctx, tun, "second")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Tunnels) != 1 || len(b.Variants) != 1 || b.Variants[0] != v.Name || len(b.Clients) != 1 {
		t.Fatalf("bench records tunnels %d, variants %v, clients %d; want 1, [%s], 1", len(b.Tunnels), b.Variants, len(b.Clients), v.Name)
	}
	// The extra client must end before its server: left to lab teardown
	// it would outlive the server and retry meanwhile.
	clientFirst := make(chan bool, 1)
	go func() {
		<-tun.Server.Done()
		select {
		case <-c.Process.Done():
			clientFirst <- true
		default:
			clientFirst <- false
		}
	}()
	closed = true
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for what, p := range map[string]*openvpn.Process{"server": tun.Server, "client": tun.Client, "extra client": c.Process} {
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("OpenVPN %s (pid %d) still runs after Close", what, p.Pid())
		}
	}
	if !<-clientFirst {
		t.Error("the extra client still ran when Close stopped its server")
	}
	labtest.CheckGone(t, name)
}
