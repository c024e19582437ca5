package openvpn

import "strings"

// optionNames26 lists every option name OpenVPN 2.6.14's add_option
// (src/openvpn/options.c) compares p[0] with: the names 2.6 reads from a
// config file on some platform or build. Extracted from the source with
// grep 'streq(p[0], "…")'. Some of them 2.6 reads only to refuse or ignore
// them; removedOptions says which.
var optionNames26 = strings.Fields(`
allow-compression allow-nonadmin allow-pull-fqdn allow-recursive-routing askpass auth 
auth-gen-token auth-gen-token-secret auth-nocache auth-retry auth-token auth-token-user 
auth-user-pass auth-user-pass-optional auth-user-pass-verify bcast-buffers bind bind-dev 
block-ipv6 block-outside-dns ca capath ccd-exclusive cd cert chroot cipher client 
client-cert-not-required client-config-dir client-connect client-crresponse 
client-disconnect client-nat client-to-client comp-lzo comp-noadapt compat-mode 
compat-names compress config connect-freq connect-freq-initial connect-retry 
connect-retry-max connect-timeout connection crl-verify cryptoapicert daemon data-ciphers 
data-ciphers-fallback dev dev-node dev-type dh dhcp-internal dhcp-option dhcp-pre-release 
dhcp-release dhcp-renew disable disable-dco disable-occ dns down down-pre duplicate-cn 
ecdh-curve echo engine errors-to-stderr explicit-exit-notify extra-certs fast-io float 
force-tls-key-material-export fragment genkey gremlin group hand-window hash-size help 
http-proxy http-proxy-option http-proxy-override http-proxy-retry http-proxy-timeout 
http-proxy-user-pass ifconfig ifconfig-ipv6 ifconfig-ipv6-pool ifconfig-ipv6-push 
ifconfig-noexec ifconfig-nowarn ifconfig-pool ifconfig-pool-persist ifconfig-push 
ifconfig-push-constraint ignore-unknown-option inactive ip-remote-hint ip-win32 ipchange 
iproute iroute iroute-ipv6 keepalive key key-derivation key-direction 
keying-material-exporter learn-address link-mtu lladdr local log log-append lport 
machine-readable-output management management-client management-client-auth 
management-client-group management-client-user management-external-cert 
management-external-key management-forget-disconnect management-hold management-log-cache 
management-query-passwords management-query-proxy management-query-remote 
management-signal management-up-down mark max-clients max-packet-size max-routes 
max-routes-per-client memstats mktun mlock mode msg-channel mssfix mtu-disc mtu-dynamic 
mtu-test multihome mute mute-replay-warnings ncp-ciphers nice no-name-remapping no-replay 
nobind ns-cert-type opt-verify parameter passtos pause-exit peer-fingerprint peer-id 
persist-key persist-local-ip persist-remote-ip persist-tun ping ping-exit ping-restart 
ping-timer-rem pkcs11-cert-private pkcs11-id pkcs11-id-management pkcs11-pin-cache 
pkcs11-private-mode pkcs11-protected-authentication pkcs11-providers pkcs12 plugin port 
port-share preresolve prng proto proto-force protocol-flags providers pull pull-filter 
push push-continuation push-peer-info push-remove push-reset rcvbuf rdns-internal 
redirect-gateway redirect-private register-dns remap-usr1 remote remote-cert-eku 
remote-cert-ku remote-cert-tls remote-random remote-random-hostname reneg-bytes 
reneg-pkts reneg-sec replay-persist replay-window resolv-retry rmtun route route-delay 
route-gateway route-ipv6 route-ipv6-gateway route-method route-metric route-noexec 
route-nopull route-pre-down route-up rport script-security secret server server-bridge 
server-ipv6 server-poll-timeout service session-timeout setcon setenv setenv-safe shaper 
show-adapters show-ciphers show-curves show-digests show-engines show-gateway show-groups 
show-net show-net-up show-pkcs11-ids show-tls show-valid-subnets single-session sndbuf 
socket-flags socks-proxy socks-proxy-retry stale-routes-check static-challenge status 
status-version suppress-timestamps syslog tap-sleep tcp-nodelay tcp-queue-limit 
test-crypto tls-auth tls-cert-profile tls-cipher tls-ciphersuites tls-client tls-crypt 
tls-crypt-v2 tls-crypt-v2-verify tls-exit tls-export-cert tls-groups tls-server 
tls-timeout tls-verify tls-version-max tls-version-min tmp-dir topology tran-window 
tun-ipv6 tun-mtu tun-mtu-extra tun-mtu-max txqueuelen udp-mtu up up-delay up-restart 
use-prediction-resistance user username-as-common-name verb verify-client-cert 
verify-hash verify-x509-name version vlan-accept vlan-pvid vlan-tagging win-sys 
windows-driver writepid x509-track x509-username-field `)

// OptionStatus says what OpenVPN 2.6 does with an option name that older
// releases accepted.
type OptionStatus struct {
	// Removed: 2.6 refuses the config ("Unrecognized option", or an
	// explicit error); otherwise 2.6 reads it and ignores it or warns.
	Removed bool
	// Since is the release that removed or deprecated it.
	Since string
	// Replacement is the directive to use instead ("" = delete the line).
	Replacement string
	// Note is OpenVPN's own explanation (Changes.rst or options.c).
	Note string
}

// RemovedOption reports whether OpenVPN 2.6 refuses or deprecates an
// option name that earlier versions accepted, and how.
func RemovedOption(name string) (OptionStatus, bool) {
	st, ok := removedOptions[name]
	return st, ok
}

// removedOptions are options OpenVPN 2.3–2.5 accepted that 2.6 refuses
// or only accepts with a deprecation warning. Sources: the option names
// in options.c of v2.3.18, v2.4.12, v2.5.11 missing from v2.6.14, the
// explicit "removed"/"DEPRECATED" messages in v2.6.14's options.c, and
// Changes.rst "Deprecated features" of 2.5 and 2.6.
var removedOptions = map[string]OptionStatus{
	"ncp-disable":              {true, "2.6", "", "Changes.rst 2.6: ncp-disable has been removed (a debug option for the first cipher negotiation)"},
	"keysize":                  {true, "2.6", "", "Changes.rst 2.6: --keysize only applied to variable-key ciphers (BF, CAST, RC2), which 2.6 no longer supports"},
	"inetd":                    {true, "2.6", "", "Changes.rst 2.6: inetd has been removed"},
	"management-client-pf":     {true, "2.6", "", "Changes.rst 2.6: packet filtering (PF) support has been removed"},
	"no-iv":                    {true, "2.5", "", "no longer in options.c since 2.5"},
	"key-method":               {true, "2.5", "", "no longer in options.c since 2.5 (key-method 2 is the only method)"},
	"ifconfig-pool-linear":     {true, "2.5", "topology subnet", "no longer in options.c since 2.5; topology subnet gives one address per client"},
	"tls-remote":               {true, "2.4", "verify-x509-name NAME name", "no longer in options.c since 2.4; verify-x509-name replaces it"},
	"remote-ip-hint":           {true, "2.4", "", "no longer in options.c since 2.4"},
	"compat-names":             {true, "2.5", "", "options.c 2.6: --compat-names was removed in OpenVPN 2.5"},
	"no-name-remapping":        {true, "2.5", "", "options.c 2.6: --no-name-remapping was removed in OpenVPN 2.5"},
	"mtu-dynamic":              {true, "2.1", "fragment 1400", "options.c 2.6: --mtu-dynamic has been replaced by --fragment"},
	"client-cert-not-required": {true, "2.5", "verify-client-cert none", "options.c 2.6: REMOVED OPTION: --client-cert-not-required, use '--verify-client-cert none' instead"},
	"prng":                     {false, "2.6", "", "Changes.rst 2.6: --prng has been removed; options.c 2.6 ignores it (SSL library PRNG is used)"},
	"max-routes":               {false, "2.4", "", "options.c 2.6: DEPRECATED OPTION: --max-routes option ignored, the number of routes is unlimited as of 2.4"},
	"tun-ipv6":                 {false, "2.5", "", "options.c 2.6: tun-ipv6 is ignored because modern operating systems do not need special IPv6 tun handling"},
	"ncp-ciphers":              {false, "2.5", "data-ciphers", "options.c 2.6: treated as --data-ciphers (renamed in OpenVPN 2.5)"},
	"opt-verify":               {false, "2.6", "", "Changes.rst 2.6: --opt-verify is deprecated"},
	"ns-cert-type":             {false, "2.4", "remote-cert-tls server", "man page 2.6: ns-cert-type is deprecated, use remote-cert-tls (checks the X.509 key usage instead of a Netscape extension)"},
	"link-mtu":                 {false, "2.6", "", "link-mtu is deprecated and unreliable in 2.6 (docs/openvpn-facts.md#tun-mtu-and-link-mtu); set tun-mtu/mssfix instead"},
	"secret":                   {false, "2.6", "", "options.c 2.6: DEPRECATED OPTION: The option --secret is deprecated (static-key mode has no forward secrecy and uses BF-CBC by default)"},
}

var options26 = func() map[string]bool {
	m := make(map[string]bool, len(optionNames26))
	for _, n := range optionNames26 {
		m[n] = true
	}
	return m
}()

// KnownOption26 reports whether OpenVPN 2.6 knows the option name at all
// (it may still refuse it: see RemovedOption).
func KnownOption26(name string) bool { return options26[name] }
