// Package dco knows when OpenVPN's data channel offload (DCO) is used on
// Linux: which options of a config turn it off in OpenVPN 2.6 and 2.7
// (read from OpenVPN's dco.c, init.c and options.c at the release tags
// Tag26 and Tag27), and whether this host could offload at all (kernel
// module, OpenVPN build). lint, probe, advise and lab run ask this one
// package, so they never disagree about DCO.
package dco

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// The release tags of OpenVPN/openvpn whose sources the rules were read
// from (docs/openvpn-facts.md#data-channel-offload-dco).
const (
	Tag26 = "v2.6.14"
	Tag27 = "v2.7.6"
)

// Targets are the OpenVPN versions the rules know.
const (
	V26 = "2.6"
	V27 = "2.7"
)

// SupportedCiphers is what Linux DCO encrypts with: dco_linux.c
// dco_get_supported_ciphers, the same at both tags.
const SupportedCiphers = "AES-128-GCM:AES-256-GCM:AES-192-GCM:CHACHA20-POLY1305"

// Source is a line of OpenVPN's source at a release tag.
type Source struct {
	Tag  string `json:"tag"`
	File string `json:"file"`
	Line int    `json:"line"`
}

func (s Source) String() string { return fmt.Sprintf("%s:%d at %s", s.File, s.Line, s.Tag) }

// Rule is one reason OpenVPN turns DCO off (or refuses a pushed option
// because DCO is on).
type Rule struct {
	ID string
	// Sources by target; a rule missing for a target does not apply to it.
	Sources map[string]Source
	// Note is the line OpenVPN logs (at the newest tag).
	Note string
	// Replacement is what to write instead.
	Replacement string
}

// Rules returns the rules by ID, in a map of the caller's own. Line
// numbers were read with `git -C openvpn grep -n 'disables data channel offload' v2.6.14 v2.7.6`.
func Rules() map[string]Rule {
	return map[string]Rule{
		"fragment": {ID: "fragment", Sources: src("dco.c", 241, 257),
			Note:        "Note: --fragment disables data channel offload.",
			Replacement: "delete fragment; make whole packets fit the path with tun-mtu (path MTU minus OpenVPN's overhead) and clamp TCP with an iptables/nft TCPMSS rule: Linux DCO never applies mssfix (dco_linux.c dco_set_peer only logs it; README.dco.md: packet manipulation, use nftables/iptables instead; docs/openvpn-facts.md#data-channel-offload-dco)"},
		"http-proxy": {ID: "http-proxy", Sources: src("dco.c", 247, 263),
			Note:        "Note: --http-proxy disables data channel offload.",
			Replacement: "connect without the proxy (UDP, or TCP straight to the server) where the network allows it; through a proxy the data channel stays in userspace"},
		"socks-proxy": {ID: "socks-proxy", Sources: src("dco.c", 253, 269),
			Note:        "Note: --socks-proxy disables data channel offload.",
			Replacement: "connect without the proxy where the network allows it"},
		"no-tls": {ID: "no-tls", Sources: src("dco.c", 290, 326),
			Note:        "No tls-client or tls-server option in configuration detected. Disabling data channel offload.",
			Replacement: "use TLS mode (tls-server / tls-client; peer-fingerprint makes it about as simple as a static key)"},
		"dev-type": {ID: "dev-type", Sources: src("dco.c", 297, 333),
			Note:        "Note: dev-type not tun, disabling data channel offload.",
			Replacement: "dev tun (DCO is layer 3 only: README.dco.md, Limitations by design); bridging needs tap and stays in userspace"},
		"dev-node-unix": {ID: "dev-node-unix", Sources: map[string]Source{V27: {Tag27, "src/openvpn/dco.c", 339}},
			Note:        "Note: afunix tun type selected, disabling data channel offload",
			Replacement: "a real tun device (drop dev-node unix:…)"},
		"dev-null": {ID: "dev-null", Sources: src("dco.c", 297, 345),
			Note:        "Note: null tun type selected, disabling data channel offload",
			Replacement: "dev tun"},
		"user": {ID: "user", Sources: src("dco.c", 371, 419),
			Note:        "--user specified but lacking CAP_SETPCAP. Cannot retain CAP_NET_ADMIN. Disabling data channel offload",
			Replacement: "start OpenVPN with CAP_SETPCAP and CAP_NET_ADMIN in its permitted set (systemd: CapabilityBoundingSet includes both), or drop user/group and confine it with systemd instead"},
		"topology": {ID: "topology", Sources: src("dco.c", 386, 434),
			Note:        "Note: NOT using '--topology subnet' disables data channel offload.",
			Replacement: "topology subnet (the server pushes it to its clients; README.dco.md: the only topology DCO servers support)"},
		"management-query-proxy": {ID: "management-query-proxy", Sources: src("dco.c", 392, 440),
			Note:        "Note: --management-query-proxy disables data channel offload.",
			Replacement: "set the proxy (if any) in the config instead of asking the management interface"},
		"data-ciphers-fallback": {ID: "data-ciphers-fallback", Sources: src("dco.c", 409, 458),
			Note:        "Note: --data-ciphers-fallback with cipher '%s' disables data channel offload.",
			Replacement: "upgrade the peers that cannot negotiate (before 2.4) and delete data-ciphers-fallback, or make it an AEAD cipher DCO supports (" + SupportedCiphers + ")"},
		"compression": {ID: "compression", Sources: src("dco.c", 419, 468),
			Note:        "Note: '--allow-compression' is not set to 'no', disabling data channel offload.",
			Replacement: "delete comp-lzo/compress/allow-compression; while old clients still frame packets for compression, a server can use `compress migrate` (dco.c suggests it), which keeps DCO on"},
		"data-ciphers": {ID: "data-ciphers", Sources: src("dco.c", 438, 488),
			Note:        "Note: cipher '%s' in --data-ciphers is not supported by ovpn-dco, disabling data channel offload.",
			Replacement: "data-ciphers with AEAD ciphers only, e.g. AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305 (DCO supports " + SupportedCiphers + ")"},
		"mktun": {ID: "mktun", Sources: src("init.c", 1141, 1113),
			Note:        "Note: --mktun does not support DCO. Creating TUN interface.",
			Replacement: "let OpenVPN create the DCO interface itself (no mktun)"},
		"disable-dco": {ID: "disable-dco", Sources: src("options.c", 6045, 5916),
			Note:        "(disable-dco: no log line; OpenVPN does not try DCO)",
			Replacement: "delete disable-dco once the config has none of the options above"},
		// Pushed by a server, compression framing makes a DCO client refuse
		// the push (init.c check_compression_settings_valid; comp.c logs
		// "Compression or compression stub framing is not allowed since
		// data-channel offloading is enabled.").
		"push-compression": {ID: "push-compression", Sources: src("init.c", 2622, 2611),
			Note:        "Compression or compression stub framing is not allowed since data-channel offloading is enabled.",
			Replacement: "stop pushing compression; `compress migrate` on the server handles clients that still ask for it"},
		// Runtime conditions: only a probe of the host can tell.
		"interface-exists": {ID: "interface-exists", Sources: src("dco.c", 350, 397),
			Note:        "Interface %s exists and is not using the ovpn DCO driver. Disabling data channel offload",
			Replacement: "delete the existing interface (ip link del NAME) or use another dev name"},
		"kernel": {ID: "kernel", Sources: src("dco_linux.c", 1011, 1242),
			Note:        "Note: Kernel support for ovpn interfaces missing, disabling data channel offload. Use Linux 6.16.0 or newer with ovpn support or use ovpn-backports for interface support.",
			Replacement: "OpenVPN 2.7 with Linux 6.16 or newer built with CONFIG_OVPN (or the ovpn-backports module); OpenVPN 2.6 with the out-of-tree ovpn-dco module (Debian package openvpn-dco-dkms)"},
		"build": {ID: "build", Sources: src("options.c", 909, 918),
			Note:        "(openvpn --version shows no [DCO]: built without ENABLE_DCO, DCO is never tried)",
			Replacement: "an OpenVPN build with DCO (openvpn --version lists [DCO]; Debian's 2.6 package has it)"},
	}
}

func src(file string, l26, l27 int) map[string]Source {
	return map[string]Source{V26: {Tag26, "src/openvpn/" + file, l26}, V27: {Tag27, "src/openvpn/" + file, l27}}
}

// Blocker is one option of a config that turns DCO off (or, Pushed,
// breaks DCO clients).
type Blocker struct {
	Rule   string `json:"rule"`
	Option string `json:"option"`
	// Text is the directive as written (never inline key material).
	Text string      `json:"text"`
	Pos  openvpn.Pos `json:"pos"`
	// Line 0: the option is missing (a default decides, e.g. topology).
	Pushed bool   `json:"pushed,omitempty"`
	Target string `json:"target"`
	Source Source `json:"source"`
	// Conditional: whether DCO is off depends on how OpenVPN is started
	// (user: its capabilities); Condition says on what.
	Conditional bool   `json:"conditional,omitempty"`
	Condition   string `json:"condition,omitempty"`
	Note        string `json:"note"`
	Replacement string `json:"replacement"`
}

// Reason is one sentence for people: which option, why, at which source
// line.
func (b Blocker) Reason() string {
	s := fmt.Sprintf("%s turns DCO off in OpenVPN %s (%s: %q)", b.Text, b.Target, b.Source, b.Note)
	if b.Pushed {
		s = fmt.Sprintf("%s reaches the clients, and an OpenVPN %s client with DCO refuses the push (%s: %q)", b.Text, b.Target, b.Source, b.Note)
	}
	if b.Conditional {
		s += "; " + b.Condition
	}
	return s
}

// NormTarget maps a version ("2.6.14", "2.7", "v2.7.0") to V26 or V27;
// ok is false for anything else.
func NormTarget(v string) (string, bool) {
	v = strings.TrimPrefix(v, "v")
	switch {
	case v == V26 || strings.HasPrefix(v, V26+"."):
		return V26, true
	case v == V27 || strings.HasPrefix(v, V27+".") || strings.HasPrefix(v, V27+"_"):
		return V27, true
	}
	return "", false
}

// DevType is the device type f's OpenVPN opens: "tun", "tap", "null"
// or "" (no dev line).
func DevType(f *openvpn.ConfigFile) string { t, _ := Config{f}.DevType(); return t }

// Config answers the questions the rules ask about a config.
type Config struct {
	f *openvpn.ConfigFile
}

func (c Config) last(name string) (openvpn.PosDirective, bool) {
	for i := len(c.f.Directives) - 1; i >= 0; i-- {
		if d := c.f.Directives[i]; d.Name == name && !d.Inline {
			return d, true
		}
	}
	return openvpn.PosDirective{}, false
}

func (c Config) has(name string) bool { _, ok := c.last(name); return ok }

func arg(d openvpn.PosDirective, i int) string {
	if i < len(d.Args) {
		return d.Args[i]
	}
	return ""
}

// Server is --mode server (server, server-bridge or mode server).
func (c Config) Server() bool {
	if c.has("server") || c.has("server-bridge") {
		return true
	}
	m, ok := c.last("mode")
	return ok && arg(m, 0) == "server"
}

// TLS: tls-client or tls-server is set (client and server imply them).
func (c Config) TLS() bool {
	for _, n := range []string{"tls-client", "tls-server", "client", "server", "server-bridge"} {
		if c.has(n) {
			return true
		}
	}
	return false
}

// DevType is options.c dev_type_enum: dev-type if given, else the dev
// name's prefix: "tun", "tap", "null" or "" (unknown).
func (c Config) DevType() (string, openvpn.PosDirective) {
	if d, ok := c.last("dev-type"); ok {
		return arg(d, 0), d
	}
	d, ok := c.last("dev")
	if !ok {
		return "", d
	}
	for _, p := range []string{"tun", "tap", "null"} {
		if strings.HasPrefix(arg(d, 0), p) {
			return p, d
		}
	}
	return "", d
}

func dcoCipher(c string) bool {
	c = strings.TrimPrefix(c, "?")
	for _, s := range strings.Split(SupportedCiphers, ":") {
		if strings.EqualFold(c, s) {
			return true
		}
	}
	// OpenSSL's alias for CHACHA20-POLY1305 (README.dco.md spells it so).
	return strings.EqualFold(c, "ChaCha20-Poly1305")
}

func text(d openvpn.PosDirective) string {
	if d.Inline {
		return "<" + d.Name + ">"
	}
	if len(d.Args) == 0 {
		return d.Name
	}
	return d.Name + " " + strings.Join(d.Args, " ")
}

// Check lists every option of f that turns DCO off on Linux with OpenVPN
// target (V26 or V27), and for a server every pushed option that DCO
// clients refuse, in config order. Conditions only the running host can
// decide (kernel, build, an existing interface) are probe's, not here.
func Check(f *openvpn.ConfigFile, target string) []Blocker {
	c := Config{f}
	var out []Blocker
	add := func(rule string, d openvpn.PosDirective, note string) {
		r := Rules()[rule]
		s, ok := r.Sources[target]
		if !ok {
			return
		}
		if note == "" {
			note = r.Note
		}
		b := Blocker{Rule: rule, Option: d.Name, Text: text(d), Pos: d.Pos, Target: target, Source: s, Note: note, Replacement: r.Replacement}
		if rule == "user" {
			b.Conditional = true
			b.Condition = "only when OpenVPN lacks CAP_SETPCAP (or CAP_NET_ADMIN in its permitted set) when it starts, which depends on how it is started (not tested here: ovpnperf probe --config checks the running host)"
		}
		out = append(out, b)
	}
	server := c.Server()
	for _, d := range f.Directives {
		if d.Inline {
			if d.Name == "connection" {
				// A <connection> block's own directives (fragment,
				// http-proxy, socks-proxy) count like top-level ones.
				sub, err := openvpn.ParseConfigText(f.Path, []byte(d.Body))
				if err == nil {
					for _, sd := range sub.Directives {
						switch sd.Name {
						case "fragment", "http-proxy", "socks-proxy":
							sd.Pos = openvpn.Pos{File: d.Pos.File, Line: d.Pos.Line + sd.Pos.Line, Col: sd.Pos.Col}
							add(sd.Name, sd, "")
						}
					}
				}
			}
			continue
		}
		switch d.Name {
		case "fragment", "http-proxy", "socks-proxy", "management-query-proxy", "mktun", "disable-dco":
			add(d.Name, d, "")
		case "user":
			add("user", d, "")
		case "data-ciphers-fallback":
			if !dcoCipher(arg(d, 0)) {
				add("data-ciphers-fallback", d, fmt.Sprintf("Note: --data-ciphers-fallback with cipher '%s' disables data channel offload.", arg(d, 0)))
			}
		case "data-ciphers", "ncp-ciphers":
			for _, ci := range strings.Split(arg(d, 0), ":") {
				if strings.EqualFold(ci, "DEFAULT") && target == V27 {
					continue
				}
				// "none" is not in Linux DCO's list, so dco.c rejects it
				// at the first check (2.7's none+auth none check is for
				// FreeBSD, whose list has none).
				if ci != "" && !dcoCipher(ci) {
					add("data-ciphers", d, fmt.Sprintf("Note: cipher '%s' in --data-ciphers is not supported by ovpn-dco, disabling data channel offload.", ci))
					break
				}
			}
		case "comp-lzo", "compress":
			if d.Name == "compress" && arg(d, 0) == "migrate" {
				continue
			}
			add("compression", d, "")
		case "allow-compression":
			if a := arg(d, 0); a == "asym" || a == "yes" {
				add("compression", d, "")
			}
		case "dev-node":
			if strings.HasPrefix(arg(d, 0), "unix:") {
				add("dev-node-unix", d, "")
			}
		case "push":
			if !server {
				continue
			}
			p := strings.Fields(arg(d, 0))
			if len(p) > 0 && (p[0] == "comp-lzo" || (p[0] == "compress" && (len(p) == 1 || p[1] != "stub-v2" && p[1] != "migrate"))) {
				b := len(out)
				add("push-compression", d, "")
				if len(out) > b {
					out[b].Pushed = true
				}
			}
		}
	}
	if !c.TLS() {
		d, ok := c.last("secret")
		if !ok {
			d = openvpn.PosDirective{Directive: openvpn.D("(no tls-client or tls-server)"), Pos: openvpn.Pos{File: f.Path}}
		}
		add("no-tls", d, "")
	}
	switch t, d := c.DevType(); t {
	case "tap":
		add("dev-type", d, "")
	case "null":
		add("dev-null", d, "")
	}
	if server {
		if t, ok := c.last("topology"); ok {
			if arg(t, 0) != "subnet" {
				add("topology", t, "")
			}
		} else if dt, _ := c.DevType(); dt == "tun" && target == V26 {
			// 2.6's default is net30; 2.7's is subnet (Changes.rst 2.7,
			// helper.c helper_setdefault_topology).
			at, ok := c.last("server")
			if !ok {
				at, _ = c.last("mode")
			}
			b := len(out)
			add("topology", at, "")
			if len(out) > b {
				out[b].Text = "no topology line (OpenVPN 2.6's default is net30)"
			}
		}
	}
	sortBlockers(out)
	return out
}

func sortBlockers(bs []Blocker) {
	for i := 1; i < len(bs); i++ {
		for j := i; j > 0 && less(bs[j], bs[j-1]); j-- {
			bs[j], bs[j-1] = bs[j-1], bs[j]
		}
	}
}

func less(a, b Blocker) bool {
	if a.Pos.File != b.Pos.File {
		return a.Pos.File < b.Pos.File
	}
	return a.Pos.Line < b.Pos.Line
}

// RuleForLogLine maps one of OpenVPN's "… data channel offload" notes to
// the rule it comes from ("" when the line is none of them).
func RuleForLogLine(line string) string {
	for _, k := range []struct{ sub, rule string }{
		{"--fragment disables", "fragment"}, {"--http-proxy disables", "http-proxy"}, {"--socks-proxy disables", "socks-proxy"},
		{"No tls-client or tls-server", "no-tls"}, {"dev-type not tun", "dev-type"}, {"afunix tun type", "dev-node-unix"},
		{"null tun type", "dev-null"}, {"lacking CAP_SETPCAP", "user"}, {"not permitted to retain CAP_NET_ADMIN", "user"},
		{"'--topology subnet' disables", "topology"}, {"--management-query-proxy disables", "management-query-proxy"},
		{"--data-ciphers-fallback with cipher", "data-ciphers-fallback"}, {"'--allow-compression' is not set to 'no'", "compression"},
		{"in --data-ciphers is not supported", "data-ciphers"},
		{"--mktun does not support DCO", "mktun"}, {"stub framing is not allowed since data-channel offloading", "push-compression"},
		{"exists and is non-DCO", "interface-exists"}, {"exists and is not using the ovpn DCO driver", "interface-exists"},
		{"Kernel support for ovpn", "kernel"},
	} {
		if strings.Contains(line, k.sub) {
			return k.rule
		}
	}
	return ""
}
