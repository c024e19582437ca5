// Package openvpn runs real OpenVPN 2.6 tunnels across an ovpnperf lab: it
// makes the keys, writes the configs, starts and stops the processes, reads
// their logs and talks to their management interfaces.
//
//	NewPKI / LoadPKI       throw-away CA, server and client certificates
//	                       (ECDSA P-256, 7 days) and a tls-crypt key, 0600
//	ServerConfig,          the lab's base configs as a typed Config
//	ClientConfig           (ordered Directives), Render → OpenVPN syntax
//	ParseVariant, Apply    named sets of directives (gcm128=data-ciphers
//	                       AES-128-GCM) checked against a directive table
//	Start / StartWith      ip netns exec NS openvpn --config DIR/ROLE.conf,
//	                       WaitReady, Stop; StartWith takes a Launcher so
//	                       that the lab records the process
//	ParseLog               version, DCO, cipher, socket buffers, MTU, errors
//	DialManagement         state, status 3, load-stats, signal
//
// A typical run:
//
//	pki, _ := openvpn.NewPKI(filepath.Join(l.Dir(), "pki"))
//	srv, _ := openvpn.ServerConfig(openvpn.ServerParams{Local: lab.ServerV4,
//		Tunnel: lab.TunnelV4, Credentials: pki.Server(), Management: sock})
//	cli, _ := openvpn.ClientConfig(openvpn.ClientParams{Remote: lab.ServerV4,
//		Credentials: pki.Client("")})
//	v, err := openvpn.ParseVariant(flagValue) // usage error if bad
//	v.Apply(srv, cli)
//	s, _ := openvpn.StartWith(ctx, serverLauncher, srv, l.Dir(), "server")
//	s.WaitReady(ctx, 20*time.Second)
//
// Nothing reaches a config file unchecked: Render refuses parameters with
// control characters, quotes or backslashes, over-long tokens and lines
// (OpenVPN reads at most 255 characters per token and 254 per line), and
// inline blocks that contain their own end tag; variants accept only the
// directives in their table, never scripts, plugins, files or the
// management interface. Parse reads existing config files with OpenVPN's
// own tokenizer rules (options.c parse_line) so that user configs can be
// inspected.
//
// What OpenVPN 2.6.14 needs, found by running it (TestTunnelVariants):
// `cipher` no longer picks the data-channel cipher in TLS mode, only
// data-ciphers does; `data-ciphers none` keeps HMAC-SHA1 unless `auth none`
// is added; BF-CBC needs `providers legacy default` with OpenSSL 3; a
// tun-mtu set on both sides needs no tun-mtu-max. A server logs its "Data
// Channel: cipher" line shortly after the client is ready; wait for
// DataChannelLine before reading it.
package openvpn
