package cluster

import (
	"path/filepath"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// LabBase makes a throw-away PKI in dir/pki and returns the lab's server
// config as a cluster base (`cluster serve` without --config): the lab's
// ciphers and keepalive, pool lab.TunnelV4, with client-to-client if c2c.
func LabBase(dir string, c2c bool) (*openvpn.Config, *openvpn.PKI, error) {
	pki, err := openvpn.NewPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, nil, err
	}
	cfg, err := openvpn.ServerConfig(openvpn.ServerParams{Tunnel: lab.TunnelV4(), Credentials: pki.Server()})
	if err != nil {
		return nil, nil, err
	}
	if c2c {
		cfg.Add("client-to-client")
	}
	return cfg, pki, nil
}
