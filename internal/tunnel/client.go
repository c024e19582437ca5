package tunnel

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// MaxExtraClients is how many extra clients one tunnel takes (AddClient).
const MaxExtraClients = 9

// Client is one more OpenVPN client connected to a tunnel's server, in the
// lab's client namespace next to the tunnel's own client: for recipes that
// load one server with several clients.
//
//	client ns                                    server ns
//	ovpnperf-cS    (tunnel's client, cert "")  ─┐
//	ovpnperf-cS-N  (extra client, cert NAME)   ─┴─ udp BasePort+S ── ovpnperf-sS
//
// Both clients hold an address of the slot's subnet, so the client
// namespace has the subnet's route on both devices: traffic that must leave
// by this client's device has to say so (SO_BINDTODEVICE, iperf3
// --bind-dev Dev), or the kernel takes the first route.
type Client struct {
	// Name is the client certificate's name (PKI.IssueClient).
	Name    string
	Process *openvpn.Process
	// Dev is the client's tun device, ovpnperf-cSLOT-N.
	Dev string
	// Addr is the inner address the server pushed.
	Addr netip.Addr
	Log  *openvpn.Log
}

// AddClient starts another client against t's server with the client
// certificate issued as name (PKI.IssueClient(name) must have written it),
// the tunnel's variant and Configure applied to the client side, its own
// tun device and management socket, and waits until it is ready. The
// server's `server` directive hands out an address of the slot's /28 to
// each client; at most MaxExtraClients extra clients fit a tunnel. Stop the
// client before t.Down (Stop), or leave it to lab teardown.
//
// Equivalent to: ip netns exec CLIENT-NS openvpn --config DIR/client-NAME.conf
func (t *Tunnel) AddClient(ctx context.Context, l *lab.Lab, name string) (_ *Client, err error) {
	if t.Server == nil {
		return nil, fmt.Errorf("tunnel slot %d has no server", t.Slot)
	}
	if err := t.PKI.CheckClient(name); err != nil {
		return nil, fmt.Errorf("extra client %q: %w", name, err)
	}
	dir := filepath.Dir(t.Server.ConfigPath)
	n := 1
	for ; n <= MaxExtraClients; n++ {
		// The numbers taken are those of the configs already written.
		if m, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("client%d-*.conf", n))); len(m) == 0 {
			break
		}
	}
	if n > MaxExtraClients {
		return nil, fmt.Errorf("tunnel slot %d already has %d extra clients", t.Slot, MaxExtraClients)
	}
	role := fmt.Sprintf("client%d-%s", n, name)
	remote := lab.ServerV4()
	if t.IPv6Transport {
		remote = lab.ServerV6()
	}
	c := &Client{Name: name, Dev: fmt.Sprintf("ovpnperf-c%d-%d", t.Slot, n)}
	cfg, err := openvpn.ClientConfig(openvpn.ClientParams{
		Dev: c.Dev, Proto: t.Proto, IPv6: t.IPv6Transport,
		Remote: remote, Port: uint16(BasePort + t.Slot), Credentials: t.PKI.Client(name),
		Management: filepath.Join(dir, role+".mgmt"),
	})
	if err != nil {
		return nil, err
	}
	// The variant and Configure see a scratch server config: the server
	// runs already.
	scratch := &openvpn.Config{}
	t.Variant.Apply(scratch, cfg)
	if t.Configure != nil {
		t.Configure(scratch, cfg)
	}
	if c.Process, err = openvpn.StartWith(ctx, launcher(l, lab.Client), cfg, dir, role); err != nil {
		return nil, fmt.Errorf("variant %s, extra client %s: %w", t.Variant.Name, name, err)
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := c.Process.WaitReady(ctx, ReadyTimeout); err != nil {
		return nil, fmt.Errorf("variant %s: extra OpenVPN client %s did not come up: %w\nserver log:\n%s", t.Variant.Name, name, err, t.Server.Tail(openvpn.TailLines))
	}
	if c.Log, err = c.Process.Log(); err != nil {
		return nil, err
	}
	if c.Addr, err = pushedAddr(c.Log.PushReply); err != nil {
		return nil, fmt.Errorf("extra client %s: %w", name, err)
	}
	return c, nil
}

// pushedAddr finds the client's address in a PUSH_REPLY: the option
// "ifconfig ADDR NETMASK" (topology subnet).
func pushedAddr(reply string) (netip.Addr, error) {
	for _, opt := range strings.Split(reply, ",") {
		f := strings.Fields(opt)
		if len(f) >= 2 && f[0] == "ifconfig" {
			return netip.ParseAddr(f[1])
		}
	}
	return netip.Addr{}, fmt.Errorf("no ifconfig in the pushed options %q", reply)
}

// Stop ends the client (SIGTERM, then SIGKILL). Calling it twice is harmless.
func (c *Client) Stop() error {
	if c == nil || c.Process == nil {
		return nil
	}
	return c.Process.Stop()
}

// Pid returns the client's process id.
func (c *Client) Pid() int { return c.Process.Pid() }
