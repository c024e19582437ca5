// Package tunnel runs one real OpenVPN server and client across a lab: the
// server in the lab's server namespace, the client in the client namespace,
// for one variant of the configuration. Several tunnels can share a lab;
// each takes its own slot (port, tun devices and a /28 of 203.0.113.0/24),
// so variants can be measured interleaved without restarting OpenVPN.
package tunnel

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// MaxSlots is how many tunnels fit in one lab (16 × /28 = 203.0.113.0/24).
const MaxSlots = 16

// BasePort is the server port of slot 0; slot i listens on BasePort+i.
const BasePort = 1194

// ReadyTimeout bounds the wait for "Initialization Sequence Completed".
const ReadyTimeout = 20 * time.Second

// Options describe one tunnel.
type Options struct {
	Variant openvpn.Variant
	// Slot picks the port, devices and subnet; 0 ≤ Slot < MaxSlots.
	Slot int
	// Proto is "udp" (default) or "tcp".
	Proto string
	// IPv6Transport carries the tunnel over the lab's IPv6 addresses.
	IPv6Transport bool
	// InnerIPv6 gives the tunnel an inner IPv6 network as well
	// (server-ipv6 Subnet6(Slot)); the server pushes the client its
	// address and route. Tunnel.ServerAddr6 is then the server's address.
	InnerIPv6 bool
	// PKI holds the certificates; Client names the client certificate
	// ("" for the default client).
	PKI    *openvpn.PKI
	Client string
	// Configure, if set, edits the rendered configs before start (after
	// the variant), for recipes that need more than a variant can say.
	Configure func(server, client *openvpn.Config)
}

// Tunnel is a running server–client pair.
type Tunnel struct {
	Options
	Server, Client *openvpn.Process
	// ServerAddr and ClientAddr are the tunnel's inner addresses.
	ServerAddr, ClientAddr netip.Addr
	// ServerAddr6 is the server's inner IPv6 address (Options.InnerIPv6),
	// the first of Subnet6(Slot); invalid without InnerIPv6.
	ServerAddr6 netip.Addr
	// ServerLog and ClientLog are what OpenVPN said when it came up.
	ServerLog, ClientLog *openvpn.Log
}

// Subnet returns the /28 of slot i.
func Subnet(slot int) netip.Prefix {
	b := lab.TunnelV4().Addr().As4()
	b[3] = byte(16 * slot)
	return netip.PrefixFrom(netip.AddrFrom4(b), 28)
}

// Subnet6 returns the inner IPv6 network of slot i: a /112 of
// lab.TunnelV6, 2001:db8:7::i:0/112 (OpenVPN 2.6.14 takes /64 to /124 for
// server-ipv6: "network must be between /64 and /124").
func Subnet6(slot int) netip.Prefix {
	b := lab.TunnelV6().Addr().As16()
	b[12], b[13] = byte(slot>>8), byte(slot)
	return netip.PrefixFrom(netip.AddrFrom16(b), 112)
}

// Up starts the server and the client of one tunnel and waits until both
// report "Initialization Sequence Completed". On failure it stops what it
// started and returns an error carrying the failing side's last log lines.
func Up(ctx context.Context, l *lab.Lab, o Options) (_ *Tunnel, err error) {
	if o.Slot < 0 || o.Slot >= MaxSlots {
		return nil, fmt.Errorf("tunnel slot %d out of range 0–%d", o.Slot, MaxSlots-1)
	}
	if o.PKI == nil {
		return nil, fmt.Errorf("tunnel needs a PKI")
	}
	if o.Proto == "" {
		o.Proto = openvpn.UDP
	}
	dir := filepath.Join(l.Dir(), fmt.Sprintf("tunnel%d-%s", o.Slot, o.Variant.Name))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	srvCfg, cliCfg, err := configs(o, dir, o.PKI.Server(), o.PKI.Client(o.Client))
	if err != nil {
		return nil, err
	}
	subnet := Subnet(o.Slot)
	t := &Tunnel{Options: o, ServerAddr: subnet.Addr().Next(), ClientAddr: subnet.Addr().Next().Next()}
	if o.InnerIPv6 {
		t.ServerAddr6 = Subnet6(o.Slot).Addr().Next()
	}
	defer func() {
		if err != nil {
			t.Down()
		}
	}()
	if t.Server, err = openvpn.StartWith(ctx, launcher(l, lab.Server), srvCfg, dir, "server"); err != nil {
		return nil, fmt.Errorf("variant %s: %w", o.Variant.Name, err)
	}
	// A client that starts before the server listens wastes a retry cycle.
	if err := t.Server.WaitReady(ctx, ReadyTimeout); err != nil {
		return nil, fmt.Errorf("variant %s: OpenVPN server did not come up: %w", o.Variant.Name, err)
	}
	if t.Client, err = openvpn.StartWith(ctx, launcher(l, lab.Client), cliCfg, dir, "client"); err != nil {
		return nil, fmt.Errorf("variant %s: %w", o.Variant.Name, err)
	}
	if err := t.Client.WaitReady(ctx, ReadyTimeout); err != nil {
		return nil, fmt.Errorf("variant %s: OpenVPN client did not come up: %w\nserver log:\n%s", o.Variant.Name, err, t.Server.Tail(openvpn.TailLines))
	}
	if err := t.Server.WaitLogged(ctx, 5*time.Second, openvpn.DataChannelLine); err != nil {
		return nil, fmt.Errorf("variant %s: OpenVPN server did not set up the data channel: %w", o.Variant.Name, err)
	}
	if t.ServerLog, err = t.Server.Log(); err != nil {
		return nil, err
	}
	if t.ClientLog, err = t.Client.Log(); err != nil {
		return nil, err
	}
	return t, nil
}

// launcher starts OpenVPN through the lab, which records the process so that
// lab teardown stops it even after a crash.
func launcher(l *lab.Lab, n lab.Node) openvpn.Launcher {
	return func(ctx context.Context, logPath string, argv ...string) (openvpn.Proc, error) {
		p, err := l.Start(ctx, n, logPath, argv...)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

func serverDev(slot int) string { return fmt.Sprintf("ovpnperf-s%d", slot) }
func clientDev(slot int) string { return fmt.Sprintf("ovpnperf-c%d", slot) }

// Devs returns the tun devices of the server (in the lab's server namespace)
// and of the tunnel's client (client namespace), for reading their packet
// counters.
func (t *Tunnel) Devs() (server, client string) {
	return serverDev(t.Slot), clientDev(t.Slot)
}

// Pids returns the OpenVPN processes' pids by side.
func (t *Tunnel) Pids() map[string]int {
	m := map[string]int{}
	if t.Server != nil {
		m["server"] = t.Server.Pid()
	}
	if t.Client != nil {
		m["client"] = t.Client.Pid()
	}
	return m
}

// Cipher returns the negotiated data-channel cipher (and digest for CBC).
func (t *Tunnel) Cipher() string {
	if t.ClientLog == nil {
		return ""
	}
	c := t.ClientLog.DataCipher
	if t.ClientLog.DataAuth != "" {
		c += "/" + t.ClientLog.DataAuth
	}
	return c
}

// SocketBuffers describes the socket buffers in force on each side, as
// OpenVPN logged them ("Socket Buffers: R=[…] S=[…]").
func (t *Tunnel) SocketBuffers() string {
	side := func(lg *openvpn.Log) string {
		if lg == nil || len(lg.SocketBuffers) == 0 {
			return "?"
		}
		b := lg.SocketBuffers[len(lg.SocketBuffers)-1]
		return fmt.Sprintf("R=[%d->%d] S=[%d->%d]", b.RecvBefore, b.RecvAfter, b.SendBefore, b.SendAfter)
	}
	return "server " + side(t.ServerLog) + "; client " + side(t.ClientLog)
}

// Down stops the client, then the server.
func (t *Tunnel) Down() {
	if t.Client != nil {
		_ = t.Client.Stop()
	}
	if t.Server != nil {
		_ = t.Server.Stop()
	}
}

// configs renders the server and client configs of one tunnel: the lab's
// base configs, then the variant, then Options.Configure.
func configs(o Options, dir string, srvCreds, cliCreds openvpn.Credentials) (srvCfg, cliCfg *openvpn.Config, err error) {
	if o.Proto == "" {
		o.Proto = openvpn.UDP
	}
	subnet := Subnet(o.Slot)
	port := uint16(BasePort + o.Slot)
	remote := lab.ServerV4()
	if o.IPv6Transport {
		remote = lab.ServerV6()
	}
	srvCfg, err = openvpn.ServerConfig(openvpn.ServerParams{
		Dev: serverDev(o.Slot), Proto: o.Proto, IPv6: o.IPv6Transport,
		Port: port, Tunnel: subnet, Credentials: srvCreds,
		Management: filepath.Join(dir, "server.mgmt"),
	})
	if err != nil {
		return nil, nil, err
	}
	cliCfg, err = openvpn.ClientConfig(openvpn.ClientParams{
		Dev: clientDev(o.Slot), Proto: o.Proto, IPv6: o.IPv6Transport,
		Remote: remote, Port: port, Credentials: cliCreds,
		Management: filepath.Join(dir, "client.mgmt"),
	})
	if err != nil {
		return nil, nil, err
	}
	if o.InnerIPv6 {
		srvCfg.Add("server-ipv6", Subnet6(o.Slot).String())
	}
	o.Variant.Apply(srvCfg, cliCfg)
	if o.Configure != nil {
		o.Configure(srvCfg, cliCfg)
	}
	return srvCfg, cliCfg, nil
}

// RenderConfigs renders the configs a tunnel with these options would
// run, with the credentials as file names in DIR (ca.crt, server.crt …),
// for showing what was not run (a DCO variant on a kernel without the
// driver).
func RenderConfigs(o Options, dir string) (server, client string, err error) {
	cr := func(cert, key string) openvpn.Credentials {
		return openvpn.Credentials{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, cert), Key: filepath.Join(dir, key), TLSCrypt: filepath.Join(dir, "tls-crypt.key")}
	}
	s, c, err := configs(o, dir, cr("server.crt", "server.key"), cr("client.crt", "client.key"))
	if err != nil {
		return "", "", err
	}
	if server, err = s.Render(); err != nil {
		return "", "", err
	}
	client, err = c.Render()
	return server, client, err
}
