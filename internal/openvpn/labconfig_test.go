package openvpn

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/golden"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name+".golden"), []byte(got))
}

var testCred = Credentials{CA: "/run/ovpnperf/LAB/pki/ca.crt", Cert: "/run/ovpnperf/LAB/pki/server.crt",
	Key: "/run/ovpnperf/LAB/pki/server.key", TLSCrypt: "/run/ovpnperf/LAB/pki/tls-crypt.key"}

func TestLabConfigsGolden(t *testing.T) {
	t.Parallel()
	pki := &PKI{Dir: "/run/ovpnperf/LAB/pki"}
	tests := []struct {
		name    string
		proto   string
		ipv6    bool
		variant string
	}{
		{"udp-default", UDP, false, "default"},
		{"tcp-default", TCP, false, "default"},
		{"udp6-default", UDP, true, "default"},
		{"tcp6-default", TCP, true, "default"},
		{"udp-aes256cbc", UDP, false, "aes256cbc"},
		{"udp-none", UDP, false, "none"},
		{"udp-jumbo", UDP, false, "jumbo"},
		{"udp-custom", UDP, false, "buf=sndbuf 1048576;rcvbuf 1048576;push sndbuf 1048576;push rcvbuf 1048576;shaper 1000000;fast-io"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local, remote := netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("198.51.100.2")
			if tt.ipv6 {
				local, remote = netip.MustParseAddr("2001:db8:5::2"), netip.MustParseAddr("2001:db8:5::2")
			}
			srv, err := ServerConfig(ServerParams{Proto: tt.proto, IPv6: tt.ipv6, Local: local,
				Tunnel: netip.MustParsePrefix("203.0.113.0/24"), Credentials: pki.Server(),
				Management: "/run/ovpnperf/LAB/server.sock"})
			if err != nil {
				t.Fatal(err)
			}
			cli, err := ClientConfig(ClientParams{Proto: tt.proto, IPv6: tt.ipv6, Remote: remote,
				Credentials: pki.Client(""), Management: "/run/ovpnperf/LAB/client.sock"})
			if err != nil {
				t.Fatal(err)
			}
			v, err := ParseVariant(tt.variant)
			if err != nil {
				t.Fatal(err)
			}
			v.Apply(srv, cli)
			for _, c := range []struct {
				side string
				cfg  *Config
			}{{"server", srv}, {"client", cli}} {
				out, err := c.cfg.Render()
				if err != nil {
					t.Fatal(err)
				}
				checkGolden(t, "config-"+tt.name+"-"+c.side, out)
			}
		})
	}
}

func TestLabConfigParams(t *testing.T) {
	t.Parallel()
	ok := ServerParams{Tunnel: netip.MustParsePrefix("203.0.113.0/24"), Credentials: testCred}
	if _, err := ServerConfig(ok); err != nil {
		t.Fatal(err)
	}
	srv, _ := ServerConfig(ServerParams{Tunnel: netip.MustParsePrefix("203.0.113.77/24"), Credentials: testCred, DCO: true, Verb: 4, Port: 443, Dev: "ovpnx"})
	out, _ := srv.Render()
	for _, want := range []string{"server 203.0.113.0 255.255.255.0\n", "port 443\n", "verb 4\n", "dev ovpnx\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "disable-dco") || strings.Contains(out, "management") || strings.Contains(out, "local ") {
		t.Errorf("config has unasked-for directives:\n%s", out)
	}
	bad := []struct {
		mod  func(*ServerParams)
		want string
	}{
		{func(p *ServerParams) { p.Dev = "tun0" }, `tun device name "tun0"`},
		{func(p *ServerParams) { p.Dev = "ovpnperf-0123456" }, `tun device name`}, // 16 > IFNAMSIZ-1
		{func(p *ServerParams) { p.Dev = "ovpn\nup" }, `tun device name`},
		{func(p *ServerParams) { p.Proto = "sctp" }, `protocol "sctp"`},
		{func(p *ServerParams) { p.Tunnel = netip.MustParsePrefix("2001:db8:7::/64") }, "tunnel subnet"},
		{func(p *ServerParams) { p.Tunnel = netip.MustParsePrefix("203.0.113.0/30") }, "tunnel subnet"},
		{func(p *ServerParams) { p.Tunnel = netip.Prefix{} }, "tunnel subnet"},
		{func(p *ServerParams) { p.Local = netip.MustParseAddr("2001:db8::1") }, "does not match the IPv4 transport"},
		{func(p *ServerParams) { p.Credentials.Key = "server.key" }, "must be absolute"},
		{func(p *ServerParams) { p.Credentials.CA = "/x/ca.crt\nup /bin/sh" }, "control character"},
		{func(p *ServerParams) { p.Management = "/" + strings.Repeat("s", 107) }, "at most 107"},
		{func(p *ServerParams) { p.Management = "/tmp/a b\"" }, "quote"},
		{func(p *ServerParams) { p.Verb = 12 }, "verbosity"},
	}
	for _, b := range bad {
		p := ok
		b.mod(&p)
		_, err := ServerConfig(p)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ServerConfig(%+v) error %v, want %q", p, err, b.want)
		}
	}
	if _, err := ServerConfig(ServerParams{Dev: "tun0", Tunnel: ok.Tunnel, Credentials: testCred}); !usage.Is(err) {
		t.Errorf("bad device name is not a usage error: %v", err)
	}
	if _, err := ClientConfig(ClientParams{Credentials: testCred}); err == nil {
		t.Error("client without remote accepted")
	}
	if _, err := ClientConfig(ClientParams{Credentials: testCred, Remote: netip.MustParseAddr("2001:db8:5::2")}); err == nil {
		t.Error("IPv6 remote with IPv4 transport accepted")
	}
}
