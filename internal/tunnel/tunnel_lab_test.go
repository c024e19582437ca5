package tunnel_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// OpenVPN creates its management sockets world-writable; what
// protects them is the 0700 directory chain they sit in. A running tunnel's
// sockets (and keys, configs, logs) are checked with labtest.CheckPrivate,
// which every labtest lab also runs before its teardown, so that sockets
// added later (cluster work) are held to the same rule.
func TestSocketsPrivate(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn")
	l := labtest.New(t, labpath.Path{})
	pki, err := openvpn.NewPKI(filepath.Join(l.Dir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tu, err := tunnel.Up(ctx, l, tunnel.Options{Variant: openvpn.Variant{Name: "default"}, PKI: pki})
	if err != nil {
		t.Fatal(err)
	}
	defer tu.Down()
	if n := labtest.CheckPrivate(t, l); n < 2 {
		t.Errorf("found %d sockets in the lab directory, want the server's and the client's management sockets", n)
	}
}
