package pmtu

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// tunnel runs real OpenVPN 2.6 across a lab, server in the server
// namespace, client in the client namespace, at verb 4 so that the log
// shows OpenVPN's own frame arithmetic ("Data Channel MTU parms").
type tunnel struct {
	lab            *lab.Lab
	server, client *openvpn.Process
}

func newTunnel(t *testing.T, c pathCase, variant string, directives ...openvpn.Directive) *tunnel {
	t.Helper()
	testenv.RequirePrograms(t, "openvpn")
	l := newLab(t, c)
	dir := t.TempDir()
	pki, err := openvpn.NewPKI(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := openvpn.ServerConfig(openvpn.ServerParams{Local: lab.ServerV4(), Tunnel: lab.TunnelV4(), Credentials: pki.Server(), Verb: 4})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := openvpn.ClientConfig(openvpn.ClientParams{Remote: lab.ServerV4(), Credentials: pki.Client(""), Verb: 4})
	if err != nil {
		t.Fatal(err)
	}
	if variant != "" {
		for _, v := range openvpn.BuiltinVariants() {
			if v.Name == variant {
				v.Apply(srv, cli)
			}
		}
	}
	for _, d := range directives {
		srv.Set(d)
		cli.Set(d)
	}
	ctx := context.Background()
	tu := &tunnel{lab: l}
	tu.server, err = openvpn.Start(ctx, l.Namespace(lab.Server), srv, dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tu.server.Stop() })
	if err := tu.server.WaitReady(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	tu.client, err = openvpn.Start(ctx, l.Namespace(lab.Client), cli, dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tu.client.Stop() })
	if err := tu.client.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return tu
}

// serverTunnelAddr is the server's address inside the tunnel: the first of
// lab.TunnelV4, as openvpn.ServerConfig's `server` directive assigns it.
var serverTunnelAddr = lab.TunnelV4().Addr().Next()

// OpenVPN's own mss_fix for `mssfix 1492 mtu` (the 2.6 default) and for an
// explicit `mssfix 1400 mtu` equals DataChannel.MSS, for AEAD and CBC.
func TestMSSMatchesOpenVPN(t *testing.T) {
	for _, c := range []struct {
		variant string
		mssfix  []string
		dc      DataChannel
	}{
		{"", nil, DataChannel{Cipher: "AES-256-GCM"}},
		{"", []string{"1400", "mtu"}, DataChannel{Cipher: "AES-256-GCM"}},
		{"aes256cbc", nil, DataChannel{Cipher: "AES-256-CBC", Auth: "SHA256"}},
		{"aes256cbc", []string{"1400", "mtu"}, DataChannel{Cipher: "AES-256-CBC", Auth: "SHA256"}},
		{"chacha20", []string{"1450"}, DataChannel{Cipher: "CHACHA20-POLY1305"}},
	} {
		name := fmt.Sprintf("%s-mssfix-%s", c.dc.Cipher, strings.Join(c.mssfix, "-"))
		t.Run(name, func(t *testing.T) {
			// A black hole keeps OpenVPN from adjusting mssfix to a path
			// MTU it learned, so the logged value is the configured one.
			var ds []openvpn.Directive
			value, encap := 1492, true
			if c.mssfix != nil {
				ds = append(ds, openvpn.D("mssfix", c.mssfix...))
				fmt.Sscan(c.mssfix[0], &value)
				encap = len(c.mssfix) > 1
			}
			tu := newTunnel(t, pathCase{mtu: 1500}, c.variant, ds...)
			log, err := tu.client.Log()
			if err != nil {
				t.Fatal(err)
			}
			got, ok := log.MTUParms["mss_fix"]
			if !ok {
				t.Fatalf("no MTU parms in the client log:\n%s", tu.client.Tail(30))
			}
			want, err := c.dc.MSS(udp4, value, encap, false)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("OpenVPN mss_fix %d, DataChannel.MSS %d (cipher %s/%s, mssfix %d encap %v)", got, want, log.DataCipher, log.DataAuth, value, encap)
			}
			t.Logf("cipher %s auth %q mssfix %d (mtu %v): OpenVPN mss_fix %d", log.DataCipher, log.DataAuth, value, encap, got)
		})
	}
}

// --through-tunnel: the search across a running tunnel. Over a black hole
// with path MTU 1400, inner packets up to MaxTunMTU (1348 for AES-256-GCM
// over IPv4 UDP) pass; a band above vanishes (outer packets of 1401–1500
// bytes leave with Don't-Fragment and die at the router) while inner packets
// whose outer packets exceed 1500 are fragmented by the client's kernel and
// pass. With working ICMP the kernel learns the path MTU and fragments
// everything, so the tunnel carries its full tun-mtu.
func TestSearchThroughTunnel(t *testing.T) {
	for _, c := range []struct {
		name      string
		blackhole bool
	}{{"blackhole", true}, {"icmp-ok", false}} {
		t.Run(c.name, func(t *testing.T) {
			tu := newTunnel(t, pathCase{mtu: 1400, blackhole: c.blackhole, rtt: 20 * time.Millisecond}, "")
			p := newRealProber(t, tu.lab.Namespace(lab.Client), serverTunnelAddr)
			start := time.Now()
			res, err := Search(context.Background(), p, Options{Trace: func(r int, as []Answer) {
				var b strings.Builder
				fmt.Fprintf(&b, " at %v", time.Since(start).Round(time.Millisecond))
				for _, a := range as {
					fmt.Fprintf(&b, " %d:%v", a.Size, a.Outcome)
					if a.Outcome == Reply {
						fmt.Fprintf(&b, "(%v)", a.RTT.Round(time.Millisecond))
					}
				}
				t.Logf("round %d:%s", r, b.String())
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("through the tunnel: %+v", res)
			want, _ := DataChannel{Cipher: "AES-256-GCM"}.MaxTunMTU(udp4, 1400)
			if !c.blackhole {
				want = 1500 // the tun device's MTU
			}
			if res.PathMTU != want || res.Blackhole != c.blackhole {
				t.Errorf("inner path MTU %d black hole %v, want %d, %v", res.PathMTU, res.Blackhole, want, c.blackhole)
			}
			if c.blackhole && (res.LargestPassed != 1500 || res.HoleFrom != want+1) {
				t.Errorf("band: largest passed %d, hole from %d; want 1500, %d", res.LargestPassed, res.HoleFrom, want+1)
			}
		})
	}
}
