package recipe

import (
	"context"
	"reflect"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
)

// TestRecipeHostChanges runs the shaper's tbf, the shaper's tun queue and
// pps's tun counters on a Fake: what each changes or reads on the Host it
// is given, and that a missing device is an error.
func TestRecipeHostChanges(t *testing.T) {
	ctx := context.Background()
	tun := &tunnel.Tunnel{Options: tunnel.Options{Slot: 3}}
	sdev, cdev := tun.Devs()
	srv, cli := hostnet.NewFake("srv"), hostnet.NewFake("cli")
	srv.AddLink(sdev, true)
	cli.AddLink(cdev, true)

	want := []hostnet.Qdisc{{Kind: hostnet.Tbf, Handle: 1, Rate: shaperBytesPerSec, Burst: 5000, Limit: 20000}}
	for i := 0; i < 2; i++ { // a second time replaces the first
		if err := shaperTbf(ctx, srv, sdev); err != nil {
			t.Fatalf("shaperTbf, time %d: %v", i+1, err)
		}
		if got := srv.Qdiscs(sdev); !reflect.DeepEqual(got, want) {
			t.Fatalf("qdiscs of %s: %+v; want %+v", sdev, got, want)
		}
	}
	if err := shaperTbf(ctx, cli, sdev); !hostnet.IsNotExist(err) {
		t.Errorf("shaperTbf on a missing device: %v; want a missing device", err)
	}

	for _, n := range []int{shaperDefaultTxQueueLen, shaperTxQueueLen} {
		if err := setTxQueueLen(ctx, cli, cdev, n); err != nil {
			t.Fatal(err)
		}
		if got := cli.TxQLen(cdev); got != n {
			t.Errorf("txqueuelen of %s: %d; want %d", cdev, got, n)
		}
	}
	if err := setTxQueueLen(ctx, srv, cdev, 50); !hostnet.IsNotExist(err) {
		t.Errorf("setTxQueueLen on a missing device: %v; want a missing device", err)
	}

	srv.SetLinkStats(sdev, hostnet.LinkStats{RxPackets: 7, TxPackets: 11})
	cli.SetLinkStats(cdev, hostnet.LinkStats{RxPackets: 13, TxPackets: 17})
	got, err := ppsTunPackets(ctx, srv, cli, tun)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]uint64{"server": 18, "client": 30}; !reflect.DeepEqual(got, want) {
		t.Errorf("ppsTunPackets: %v; want %v", got, want)
	}
	if _, err := ppsTunPackets(ctx, cli, srv, tun); !hostnet.IsNotExist(err) {
		t.Errorf("ppsTunPackets with the devices missing: %v; want a missing device", err)
	}
	if got, err := ppsTunPackets(ctx, srv, cli, nil); got != nil || err != nil {
		t.Errorf("ppsTunPackets of the routed path: %v, %v; want nothing", got, err)
	}
}
