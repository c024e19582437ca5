package openvpn

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Transport protocols of the tunnel (OpenVPN's --proto family).
const (
	UDP = "udp"
	TCP = "tcp"
)

// DefaultPort is OpenVPN's registered port.
const DefaultPort = 1194

// Default tun device names. Each side of a lab lives in its own network
// namespace, so fixed names never collide; they carry the ovpnperf prefix
// so that a leak check can find them.
const (
	DefaultServerDev = "ovpnperf-s0"
	DefaultClientDev = "ovpnperf-c0"
)

// Credentials are the files one side of a tunnel needs.
type Credentials struct {
	CA, Cert, Key, TLSCrypt string
}

// Server returns the server's credentials.
func (p *PKI) Server() Credentials {
	return Credentials{CA: p.CACert(), Cert: p.ServerCert(), Key: p.ServerKey(), TLSCrypt: p.TLSCrypt()}
}

// Client returns the credentials of the client issued as name ("" for the
// default client).
func (p *PKI) Client(name string) Credentials {
	cert, key := p.ClientFiles(name)
	return Credentials{CA: p.CACert(), Cert: cert, Key: key, TLSCrypt: p.TLSCrypt()}
}

// ServerParams describe the lab's OpenVPN server.
type ServerParams struct {
	// Dev is the tun device's name: 1–15 characters (the kernel's
	// IFNAMSIZ-1) starting with "ovpn". Empty means DefaultServerDev.
	Dev string
	// Proto is UDP or TCP; empty means UDP.
	Proto string
	// IPv6 selects an IPv6 transport (udp6, tcp6-server) instead of IPv4.
	IPv6 bool
	// Local is the address the server binds; the zero Addr binds all.
	Local netip.Addr
	// Port is the port to listen on; 0 means DefaultPort.
	Port uint16
	// Tunnel is the IPv4 subnet handed to `server` (e.g. 203.0.113.0/24);
	// the server takes its first address.
	Tunnel netip.Prefix
	Credentials
	// Management is the path of the management interface's unix socket;
	// empty leaves the interface off.
	Management string
	// DCO allows data channel offload. Without it the config says
	// disable-dco, which is what happens anyway on a kernel without the
	// ovpn-dco module (see DCOAvailable) but keeps the log free of the
	// fallback notice and makes the choice visible in the config.
	DCO bool
	// Verb is OpenVPN's log verbosity; 0 means 3, the level ParseLog
	// expects.
	Verb int
}

// ClientParams describe one lab client.
type ClientParams struct {
	// Dev is the tun device's name, as in ServerParams; empty means
	// DefaultClientDev.
	Dev    string
	Proto  string
	IPv6   bool
	Remote netip.Addr // the server's address (required)
	Port   uint16
	Credentials
	Management string
	DCO        bool
	Verb       int
}

var devRE = regexp.MustCompile(`^ovpn[a-zA-Z0-9_.-]{0,11}$`)

func checkCommon(dev, proto string, port uint16, cred Credentials, mgmt string, verb int) error {
	if !devRE.MatchString(dev) {
		return usage.Errorf("tun device name %q: use 4-15 characters starting with \"ovpn\" (letters, digits, '_', '.', '-')", dev)
	}
	if proto != UDP && proto != TCP {
		return usage.Errorf("OpenVPN protocol %q: use udp or tcp", proto)
	}
	if port == 0 {
		return usage.Errorf("port 0: use 1-65535")
	}
	for _, f := range []struct{ what, path string }{{"CA", cred.CA}, {"certificate", cred.Cert}, {"key", cred.Key}, {"tls-crypt key", cred.TLSCrypt}} {
		if f.path == "" || !filepath.IsAbs(f.path) {
			return fmt.Errorf("%s path %q must be absolute", f.what, f.path)
		}
		if err := ValidateToken(f.path); err != nil {
			return fmt.Errorf("%s path: %w", f.what, err)
		}
	}
	if mgmt != "" {
		// sun_path holds 108 bytes including the terminating NUL.
		if !filepath.IsAbs(mgmt) || len(mgmt) > 107 {
			return fmt.Errorf("management socket path %q must be absolute and at most 107 characters", mgmt)
		}
		if err := ValidateToken(mgmt); err != nil {
			return fmt.Errorf("management socket path: %w", err)
		}
	}
	if verb < 0 || verb > 11 {
		return usage.Errorf("OpenVPN verbosity %d: use 0-11", verb)
	}
	return nil
}

func protoFor(proto string, ipv6 bool, suffix string) string {
	fam := "4"
	if ipv6 {
		fam = "6"
	}
	if proto == UDP {
		return "udp" + fam
	}
	return "tcp" + fam + suffix
}

// ServerConfig renders the lab server's base config:
//
//	dev-type tun / dev DEV        tun device, named per run
//	proto udp4|udp6|tcp4-server|tcp6-server, local ADDR, port N
//	topology subnet, server NET MASK
//	ca, cert, key, tls-crypt, dh none (ECDHE only), remote-cert-tls client
//	keepalive 10 60, verb 3, management SOCK unix, disable-dco
//
// No user/group drop and no persist-tun: the lab's processes are
// short-lived and are stopped, not restarted. Apply variants on top.
func ServerConfig(p ServerParams) (*Config, error) {
	if p.Dev == "" {
		p.Dev = DefaultServerDev
	}
	if p.Proto == "" {
		p.Proto = UDP
	}
	if p.Port == 0 {
		p.Port = DefaultPort
	}
	if p.Verb == 0 {
		p.Verb = 3
	}
	if err := checkCommon(p.Dev, p.Proto, p.Port, p.Credentials, p.Management, p.Verb); err != nil {
		return nil, err
	}
	if !p.Tunnel.IsValid() || !p.Tunnel.Addr().Is4() || p.Tunnel.Bits() < 8 || p.Tunnel.Bits() > 29 {
		return nil, usage.Errorf("tunnel subnet %s: use an IPv4 prefix between /8 and /29", p.Tunnel)
	}
	if p.Local.IsValid() && p.Local.Is6() != p.IPv6 {
		return nil, usage.Errorf("server address %s does not match the %s transport", p.Local, map[bool]string{false: "IPv4", true: "IPv6"}[p.IPv6])
	}
	c := &Config{}
	c.Add("dev-type", "tun")
	c.Add("dev", p.Dev)
	c.Add("proto", protoFor(p.Proto, p.IPv6, "-server"))
	if p.Local.IsValid() {
		c.Add("local", p.Local.String())
	}
	c.Add("port", strconv.Itoa(int(p.Port)))
	c.Add("topology", "subnet")
	net := p.Tunnel.Masked()
	c.Add("server", net.Addr().String(), netmask(net.Bits()))
	addCredentials(c, p.Credentials)
	c.Add("dh", "none")
	c.Add("remote-cert-tls", "client")
	c.Add("keepalive", "10", "60")
	c.Add("verb", strconv.Itoa(p.Verb))
	if p.Management != "" {
		c.Add("management", p.Management, "unix")
	}
	if !p.DCO {
		c.Add("disable-dco")
	}
	return c, nil
}

// ClientConfig renders a lab client's base config: `client` (pull and
// tls-client), the same tun and transport choices as the server, remote
// ADDR PORT, nobind, the credentials, remote-cert-tls server, verb,
// management and disable-dco.
func ClientConfig(p ClientParams) (*Config, error) {
	if p.Dev == "" {
		p.Dev = DefaultClientDev
	}
	if p.Proto == "" {
		p.Proto = UDP
	}
	if p.Port == 0 {
		p.Port = DefaultPort
	}
	if p.Verb == 0 {
		p.Verb = 3
	}
	if err := checkCommon(p.Dev, p.Proto, p.Port, p.Credentials, p.Management, p.Verb); err != nil {
		return nil, err
	}
	if !p.Remote.IsValid() {
		return nil, fmt.Errorf("client config needs the server's address")
	}
	if p.Remote.Is6() != p.IPv6 {
		return nil, usage.Errorf("server address %s does not match the %s transport", p.Remote, map[bool]string{false: "IPv4", true: "IPv6"}[p.IPv6])
	}
	c := &Config{}
	c.Add("client")
	c.Add("dev-type", "tun")
	c.Add("dev", p.Dev)
	c.Add("proto", protoFor(p.Proto, p.IPv6, "-client"))
	c.Add("remote", p.Remote.String(), strconv.Itoa(int(p.Port)))
	c.Add("nobind")
	addCredentials(c, p.Credentials)
	c.Add("remote-cert-tls", "server")
	c.Add("verb", strconv.Itoa(p.Verb))
	if p.Management != "" {
		c.Add("management", p.Management, "unix")
	}
	if !p.DCO {
		c.Add("disable-dco")
	}
	return c, nil
}

func addCredentials(c *Config, cr Credentials) {
	c.Add("ca", cr.CA)
	c.Add("cert", cr.Cert)
	c.Add("key", cr.Key)
	c.Add("tls-crypt", cr.TLSCrypt)
}

func netmask(bits int) string {
	m := ^uint32(0) << (32 - bits)
	return netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}).String()
}
