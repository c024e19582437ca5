package lint

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	shared "github.com/ovpnperf/ovpnperf/internal/rules"
	"github.com/ovpnperf/ovpnperf/internal/shellquote"
)

// view answers questions about the whole config.
type view struct {
	f   *openvpn.ConfigFile
	ctx Context
	out []Finding
}

func (v *view) last(name string) (openvpn.PosDirective, bool) {
	for i := len(v.f.Directives) - 1; i >= 0; i-- {
		if v.f.Directives[i].Name == name {
			return v.f.Directives[i], true
		}
	}
	return openvpn.PosDirective{}, false
}

func (v *view) has(name string) bool { _, ok := v.last(name); return ok }

func (v *view) all(name string) []openvpn.PosDirective {
	var out []openvpn.PosDirective
	for _, d := range v.f.Directives {
		if d.Name == name {
			out = append(out, d)
		}
	}
	return out
}

func arg(d openvpn.PosDirective, i int) string {
	if i < len(d.Args) {
		return d.Args[i]
	}
	return ""
}

// server: multi-client server mode (server, server-bridge or mode
// server). tls-server alone is peer-to-peer TLS.
func (v *view) server() bool {
	if v.has("server") || v.has("server-bridge") {
		return true
	}
	m, ok := v.last("mode")
	return ok && arg(m, 0) == "server"
}

// client: the client of a server (client, or pull); tls-client alone is
// peer-to-peer TLS.
func (v *view) client() bool {
	return !v.server() && (v.has("client") || v.has("pull"))
}

// staticKey: p2p --secret mode (no TLS, no cipher negotiation).
func (v *view) staticKey() bool {
	return v.has("secret") && !v.server() && !v.client() && !v.has("tls-server") && !v.has("tls-client")
}

// proto returns "udp" or "tcp" (OpenVPN's default is udp).
func (v *view) proto() string {
	p, ok := v.last("proto")
	if ok && strings.HasPrefix(arg(p, 0), "tcp") {
		return "tcp"
	}
	return "udp"
}

func (v *view) family() pmtu.Family {
	if p, ok := v.last("proto"); ok && strings.HasSuffix(arg(p, 0), "6") {
		return pmtu.IPv6
	}
	return pmtu.IPv4
}

func (v *view) tunMTU() int {
	if d, ok := v.last("tun-mtu"); ok {
		if n, err := strconv.Atoi(arg(d, 0)); err == nil {
			return n
		}
	}
	return 1500
}

// dataCipher is the cipher the data channel most likely uses: the first
// of data-ciphers (the server picks the first of its list the client
// supports), or cipher in static-key mode.
func (v *view) dataCipher() string {
	if v.staticKey() {
		if d, ok := v.last("cipher"); ok {
			return arg(d, 0)
		}
		return "BF-CBC"
	}
	if d, ok := v.last("data-ciphers"); ok {
		return strings.Split(arg(d, 0), ":")[0]
	}
	return overhead.DefaultCipher
}

func (v *view) add(f Finding, d openvpn.PosDirective) {
	f.File, f.Line = d.Pos.File, d.Pos.Line
	v.out = append(v.out, f)
}

// addMissing records a finding about something absent from the top file;
// its fix appends lines there.
func (v *view) addMissing(f Finding) {
	f.File, f.Line = v.f.Path, 0
	v.out = append(v.out, f)
}

func del(d openvpn.PosDirective) []Edit {
	return []Edit{{File: d.Pos.File, Line: d.Pos.Line, Delete: true}}
}

func repl(d openvpn.PosDirective, lines ...string) []Edit {
	return []Edit{{File: d.Pos.File, Line: d.Pos.Line, Replace: lines}}
}

// CheckConfig runs every config rule.
func CheckConfig(f *openvpn.ConfigFile, ctx Context) []Finding {
	v := &view{f: f, ctx: ctx}
	v.options()
	v.arity()
	v.compression()
	v.ciphers()
	v.protection()
	v.tlsAuth()
	v.remoteCertTLS()
	v.scriptSecurity()
	v.management()
	v.duplicateCN()
	v.keyFiles()
	v.verb()
	v.buffers()
	v.fragment()
	v.tunMTUPath()
	v.tcpNodelay()
	v.fastIO()
	v.txqueuelen()
	v.dcoRule()
	v.target27()
	v.dhMissing26()
	Sort(v.out)
	return v.out
}

// inlineTags are the inline blocks OpenVPN 2.6 accepts (options.c: the
// options whose file parameter may be [[INLINE]], plus <connection>).
var inlineTags = map[string]bool{
	"ca": true, "cert": true, "key": true, "extra-certs": true, "dh": true, "pkcs12": true,
	"tls-auth": true, "tls-crypt": true, "tls-crypt-v2": true, "secret": true, "crl-verify": true,
	"http-proxy-user-pass": true, "auth-user-pass": true, "peer-fingerprint": true, "connection": true,
	"auth-gen-token-secret": true, "client-crresponse": false,
}

// ignoredOptions are the options the config's ignore-unknown-option lines
// name (options and arity findings leave them out).
func (v *view) ignoredOptions() map[string]bool {
	ignored := map[string]bool{}
	for _, d := range v.all("ignore-unknown-option") {
		for _, a := range d.Args {
			ignored[a] = true
		}
	}
	return ignored
}

func (v *view) options() {
	ignored := v.ignoredOptions()
	for _, d := range v.f.Directives {
		if d.Inline {
			if !inlineTags[d.Name] {
				v.add(Finding{Rule: "unknown-inline-block", Severity: Error, Category: Compatibility,
					Problem: fmt.Sprintf("<%s> is not an inline block OpenVPN 2.6 reads.", d.Name),
					Reason:  "OpenVPN 2.6 accepts inline blocks only for file options such as ca, cert, key, tls-auth, tls-crypt, dh (options.c); it stops at this one.",
					Edits:   []Edit{{File: d.Pos.File, Line: d.Pos.Line, EndLine: d.EndLine, Delete: true}}}, d)
			}
			continue
		}
		if st, ok := openvpn.RemovedOption(d.Name); ok {
			f := Finding{Rule: "removed-option", Severity: Error, Category: Compatibility,
				Problem: fmt.Sprintf("%s was removed in OpenVPN %s; 2.6 refuses the config.", d.Name, st.Since),
				Reason:  st.Note + "."}
			if !st.Removed {
				f.Rule, f.Severity = "deprecated-option", Warning
				f.Problem = fmt.Sprintf("%s is deprecated since OpenVPN %s.", d.Name, st.Since)
			}
			switch {
			case d.Name == "ncp-ciphers":
				f.Edits = repl(d, "data-ciphers "+strings.Join(quoteArgs(d.Args), " "))
			case d.Name == "ns-cert-type":
				f.Edits = repl(d, "remote-cert-tls "+arg(d, 0))
			case st.Replacement == "":
				f.Edits = del(d)
				f.Decision = d.Name == "secret" || d.Name == "link-mtu" || d.Name == "inetd"
				if d.Name == "secret" || d.Name == "link-mtu" {
					f.Edits = nil
				}
			default:
				f.Edits = repl(d, st.Replacement)
				f.Decision = strings.Contains(st.Replacement, "NAME") || d.Name == "mtu-dynamic" || d.Name == "ifconfig-pool-linear"
			}
			v.add(f, d)
			continue
		}
		if !openvpn.KnownOption26(d.Name) && !(v.ctx.Target == dco.V27 && options27[d.Name]) {
			f := Finding{Rule: "unknown-option", Severity: Error, Category: Compatibility,
				Problem: fmt.Sprintf("%s is not an option OpenVPN 2.6 knows; it stops with \"Unrecognized option or missing or extra parameter(s)\".", d.Name),
				Reason:  "the name is not among the options OpenVPN 2.6.14's options.c reads (nor 2.3–2.5's removed ones); a typo or a platform/patch-specific option. --fix comments the line out so 2.6 starts; check what it was meant to be.",
				Edits:   del(d)}
			if ignored[d.Name] {
				f.Severity, f.Decision, f.Edits = Info, false, nil
				f.Problem = fmt.Sprintf("%s is not an option OpenVPN 2.6 knows; ignore-unknown-option makes 2.6 skip it.", d.Name)
			}
			v.add(f, d)
		}
	}
}

func inList(c, list string) bool {
	for _, x := range strings.Split(list, ":") {
		if strings.EqualFold(x, c) {
			return true
		}
	}
	return false
}

func quoteArgs(a []string) []string {
	out := make([]string, len(a))
	for i, s := range a {
		if s == "" || strings.ContainsAny(s, " \t#;\"'\\") {
			s = `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
		}
		out[i] = s
	}
	return out
}

const compressionReason = "compression before encryption leaks plaintext through packet sizes (VORACLE); OpenVPN 2.6 defaults to allow-compression no, where comp-lzo/compress only make it accept compressed packets and send nothing compressed (measured with 2.6.14 by `ovpnperf recipe compression`), and 2.7 removes compression on send (docs/openvpn-facts.md#compression)"

func (v *view) compression() {
	for _, d := range v.f.Directives {
		if d.Inline {
			continue
		}
		switch {
		case d.Name == "allow-compression" && (arg(d, 0) == "yes" || arg(d, 0) == "asym"):
			f := Finding{Rule: "compression", Severity: Warning, Category: Security,
				Problem: "allow-compression " + arg(d, 0) + " lets OpenVPN decompress (and with yes, compress) data-channel packets.",
				Reason:  compressionReason + ".", Edits: del(d)}
			if arg(d, 0) == "yes" {
				f.Edits = repl(d, "allow-compression asym")
				f.Reason = compressionReason + "; asym keeps accepting compressed packets from peers that still send them but sends none."
			} else {
				f.Decision = true
				f.Reason = compressionReason + "; deleting it needs every peer to stop compressing first."
			}
			v.add(f, d)
		case d.Name == "comp-lzo" || d.Name == "compress" || d.Name == "comp-noadapt":
			v.add(Finding{Rule: "compression", Severity: Warning, Category: Security,
				Problem: d.Name + " enables compression framing on the data channel.",
				Reason:  compressionReason + "; both sides must drop it together (a peer still framing packets for compression cannot talk to one that is not).",
				Edits:   del(d), Decision: true}, d)
		case d.Name == "push" && len(d.Args) > 0 && (strings.HasPrefix(d.Args[0], "comp-lzo") || strings.HasPrefix(d.Args[0], "compress")):
			v.add(Finding{Rule: "compression", Severity: Warning, Category: Security,
				Problem: "the server pushes compression (" + d.Args[0] + ") to its clients.",
				Reason:  compressionReason + ".", Edits: del(d), Decision: true}, d)
		}
	}
}

// weakCipher reports 64-bit-block and single-DES ciphers (the shared
// cipher rule).
func weakCipher(c string) bool { return shared.WeakCipher(c) }

const weakReason = shared.WeakCipherReason

func (v *view) ciphers() {
	dc, hasDC := v.last("data-ciphers")
	for _, d := range v.f.Directives {
		if d.Inline {
			continue
		}
		switch d.Name {
		case "cipher":
			c := arg(d, 0)
			if weakCipher(c) {
				f := Finding{Rule: "weak-cipher", Severity: Error, Category: Security,
					Problem: "cipher " + c + " is a 64-bit block or single-DES cipher.",
					Reason:  weakReason}
				if v.staticKey() {
					f.Edits, f.Decision = repl(d, "cipher AES-256-CBC"), true
					f.Reason += "; in static-key (--secret) mode both peers must change cipher together."
				} else if !v.server() && !v.client() {
					// Peer-to-peer TLS: without --cipher 2.6 falls back to
					// BF-CBC for a pre-2.6 peer (options_postprocess_cipher),
					// so the line must name a strong cipher, on both peers.
					f.Reason += "; in peer-to-peer TLS mode --cipher is the fallback for a peer older than 2.6, and without it 2.6 falls back to BF-CBC (options.c options_postprocess_cipher), so both peers need a strong --cipher."
					f.Edits, f.Decision = repl(d, "cipher AES-256-GCM"), true
				} else {
					f.Reason += "; in client/server mode 2.6 negotiates the data cipher from data-ciphers and ignores --cipher (Changes.rst 2.6; a fallback for pre-2.4 peers needs data-ciphers-fallback)."
					if hasDC {
						f.Edits = del(d)
					} else {
						f.Edits = repl(d, "data-ciphers "+shared.DefaultDataCiphers)
					}
				}
				v.add(f, d)
			} else if !v.staticKey() && !hasDC && inList(c, shared.DefaultDataCiphers) {
				f := Finding{Rule: "cipher-without-data-ciphers", Severity: Info, Category: Compatibility,
					Problem: "cipher " + c + " has no effect: it is already in OpenVPN 2.6's default data-ciphers.",
					Reason:  "Changes.rst 2.6: --cipher is a no-op in TLS mode; the peers negotiate from data-ciphers (default " + shared.DefaultDataCiphers + ", docs/openvpn-facts.md#cipher-negotiation).",
					Edits:   del(d)}
				if !v.server() && !v.client() {
					// Peer-to-peer TLS: ssl_ncp.c p2p_mode_ncp falls back
					// to --cipher when the peer predates 2.6.
					f.Problem = "cipher " + c + " only matters for a peer older than 2.6: 2.6 peers negotiate from data-ciphers, which already holds it."
					f.Reason = "in peer-to-peer TLS mode 2.6 negotiates the data cipher with a 2.6 peer (ssl_ncp.c p2p_mode_ncp) and uses --cipher only as the fallback for an older peer; Changes.rst 2.6: --cipher is otherwise a no-op in TLS mode. Keep it while such a peer exists."
					f.Decision = true
				}
				v.add(f, d)
			} else if !v.staticKey() && !hasDC && strings.ToLower(c) != "none" {
				v.add(Finding{Rule: "cipher-without-data-ciphers", Severity: Warning, Category: Compatibility,
					Problem: "cipher " + c + " is set but data-ciphers is not; OpenVPN 2.6 ignores --cipher when it negotiates.",
					Reason:  "Changes.rst 2.6: the implicit fallback to --cipher was removed, --cipher is a no-op in TLS mode; options.c warns \"DEPRECATED OPTION: --cipher set to '" + c + "' but missing in --data-ciphers\". data-ciphers-fallback keeps the cipher for peers older than 2.4 that cannot negotiate.",
					Edits:   repl(d, "data-ciphers "+shared.DefaultDataCiphers, "data-ciphers-fallback "+c)}, d)
			}
		case "data-ciphers", "data-ciphers-fallback":
			var weak, keep []string
			for _, c := range strings.Split(arg(d, 0), ":") {
				if weakCipher(strings.TrimPrefix(c, "?")) {
					weak = append(weak, c)
				} else if c != "" {
					keep = append(keep, c)
				}
			}
			if len(weak) == 0 {
				continue
			}
			f := Finding{Rule: "weak-cipher", Severity: Error, Category: Security,
				Problem: d.Name + " allows " + strings.Join(weak, ", ") + ".", Reason: weakReason + "."}
			if d.Name == "data-ciphers-fallback" {
				f.Reason = weakReason
			}
			switch {
			case d.Name == "data-ciphers-fallback":
				f.Edits, f.Decision = del(d), true
				f.Reason += "; the fallback is only for peers that cannot negotiate (before 2.4): upgrade them."
			case len(keep) == 0:
				f.Edits = repl(d, "data-ciphers "+shared.DefaultDataCiphers)
			default:
				f.Edits = repl(d, "data-ciphers "+strings.Join(keep, ":"))
			}
			v.add(f, d)
		}
	}
	_ = dc
}

func (v *view) tlsAuth() {
	if v.has("tls-crypt") || v.has("tls-crypt-v2") {
		return
	}
	for _, d := range v.all("tls-auth") {
		f := Finding{Rule: "tls-auth", Severity: Info, Category: Security,
			Problem:  "tls-auth authenticates the control channel but leaves the TLS handshake (certificates, names) readable; tls-crypt also encrypts it.",
			Reason:   "tls-auth and tls-crypt both wrap control-channel packets only, so the switch costs no data-channel speed (docs/openvpn-facts.md#per-packet-overhead); the same static key file works for tls-crypt, without key-direction, but both sides must switch together.",
			Decision: true}
		if d.Inline {
			f.Edits = []Edit{{File: d.Pos.File, Line: d.Pos.Line, Replace: []string{"<tls-crypt> (same key, and </tls-crypt> at line " + strconv.Itoa(d.EndLine) + ")"}}}
		} else {
			f.Edits = repl(d, "tls-crypt "+strings.Join(quoteArgs(d.Args[:min(1, len(d.Args))]), " "))
		}
		v.add(f, d)
	}
}

func (v *view) remoteCertTLS() {
	if !v.client() || v.staticKey() {
		return
	}
	if d, ok := v.last("remote-cert-tls"); ok && arg(d, 0) == "server" {
		return
	}
	if v.has("peer-fingerprint") {
		return
	}
	where, ok := v.last("client")
	f := Finding{Rule: "remote-cert-tls", Severity: Warning, Category: Security,
		Problem: "this client does not check that the server's certificate is a server certificate (no remote-cert-tls server).",
		Reason:  "without it any client certificate from the same CA can pose as the server (man-in-the-middle); remote-cert-tls server requires the TLS Web Server Authentication key usage, which easy-rsa and ovpnperf's PKI put in server certificates.",
		Edits:   []Edit{{File: v.f.Path, Append: []string{"remote-cert-tls server"}}}}
	if ok {
		v.add(f, where)
		return
	}
	v.addMissing(f)
}

func (v *view) scriptSecurity() {
	d, ok := v.last("script-security")
	if !ok || arg(d, 0) != "3" {
		return
	}
	f := Finding{Rule: "script-security", Severity: Warning, Category: Security,
		Problem: "script-security 3 passes passwords to scripts in environment variables.",
		Reason:  "man page --script-security: level 3 allows passwords to be passed to scripts via environment variables (readable by every process the script starts); level 2 runs user-defined scripts without that.",
		Edits:   repl(d, "script-security 2")}
	for _, a := range v.all("auth-user-pass-verify") {
		if arg(a, 1) == "via-env" {
			f.Decision = true
			f.Reason += " auth-user-pass-verify via-env needs level 3: switch it to via-file first."
		}
	}
	v.add(f, d)
}

func (v *view) management() {
	for _, d := range v.all("management") {
		if arg(d, 1) == "unix" || arg(d, 2) != "" {
			continue
		}
		addr := arg(d, 0)
		sev := Warning
		if addr != "127.0.0.1" && addr != "localhost" && addr != "::1" {
			sev = Error
		}
		v.add(Finding{Rule: "management-password", Severity: sev, Category: Security,
			Problem: fmt.Sprintf("the management interface listens on TCP %s port %s without a password file.", addr, arg(d, 1)),
			Reason:  "anyone who can connect can kill clients, read status and change the running server (man page --management: use a password file or a unix socket); any local user reaches 127.0.0.1, everyone on the network reaches other addresses.",
			Edits:   repl(d, fmt.Sprintf("management %s %s /etc/openvpn/management-password", addr, arg(d, 1))), Decision: true}, d)
	}
}

func (v *view) duplicateCN() {
	for _, d := range v.all("duplicate-cn") {
		v.add(Finding{Rule: "duplicate-cn", Severity: Warning, Category: Security,
			Problem: "duplicate-cn lets many clients connect with the same certificate at once.",
			Reason:  "a stolen client certificate can be used beside the real one and nothing notices; one certificate per client lets you revoke one (man page --duplicate-cn).",
			Edits:   del(d), Decision: true}, d)
	}
}

// secretFileOptions hold private material when they name a file.
var secretFileOptions = map[string]bool{"key": true, "tls-auth": true, "tls-crypt": true, "tls-crypt-v2": true,
	"secret": true, "pkcs12": true, "auth-user-pass": true, "askpass": true, "http-proxy-user-pass": true}

func (v *view) keyFiles() {
	for _, d := range v.f.Directives {
		if d.Inline || !secretFileOptions[d.Name] || len(d.Args) == 0 {
			continue
		}
		p := d.Args[0]
		if p == "" || p == "[[INLINE]]" || p == "stdin" {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(d.Pos.File), p)
		}
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o077 == 0 {
			continue
		}
		v.add(Finding{Rule: "key-file-mode", Severity: Warning, Category: Security,
			Problem: fmt.Sprintf("%s file %s has mode %#o: group or others can read it.", d.Name, d.Args[0], st.Mode().Perm()),
			Reason:  "whoever reads it can impersonate this peer or decrypt its control channel; OpenVPN 2.6 itself logs \"WARNING: file '…' is group or others accessible\" (options.c).",
			Action:  "chmod 600 " + shellquote.Arg(p), Decision: true}, d)
	}
}

func (v *view) verb() {
	d, ok := v.last("verb")
	if !ok {
		return
	}
	n, err := strconv.Atoi(arg(d, 0))
	if err != nil || n < 5 {
		return
	}
	v.add(Finding{Rule: "verb", Severity: Warning, Category: Operations,
		Problem: fmt.Sprintf("verb %d logs for debugging, not for production.", n),
		Reason:  "man page --verb: 1–4 is the normal usage range, 5 writes an R/W character for every packet read and written, 6–11 dump debug details; on a busy server that is log I/O and CPU per packet and floods the journal.",
		Edits:   repl(d, "verb 3")}, d)
}

func fmtBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func bufStr(n int) string {
	if n < 0 {
		return "OS default"
	}
	return fmtBytes(n)
}

func rateStr(b uint64) string { return fmt.Sprintf("%g Mbit/s", float64(b)/1e6) }

func (v *view) fragment() {
	d, ok := v.last("fragment")
	if !ok {
		return
	}
	if v.proto() == "tcp" {
		v.add(Finding{Rule: "fragment", Severity: Error, Category: Compatibility,
			Problem: "fragment is set with TCP transport; OpenVPN 2.6 refuses it.",
			Reason:  "options.c 2.6: \"--fragment can only be used with --proto udp\" (TCP never needs it: the outer TCP segments the stream).",
			Edits:   del(d)}, d)
		return
	}
	f := Finding{Rule: "fragment", Severity: Warning, Category: Performance,
		Problem: "fragment makes OpenVPN split packets itself, which turns off data channel offload (DCO).",
		Reason:  "fragment adds 4 bytes per packet and disables DCO (docs/openvpn-facts.md#fragment); the cookbook measured ping RTT 9.9 ms with fragment 1400 and 19.2 ms with fragment 400 against 9.4 ms without.",
		Edits:   del(d), Decision: true}
	if v.ctx.PathMTU > 0 {
		maxTun, err := pmtu.DataChannel{Cipher: v.dataCipher()}.MaxTunMTU(pmtu.Transport{Proto: "udp", Family: v.family()}, v.ctx.PathMTU)
		if err == nil && maxTun >= v.tunMTU() {
			f.Decision = false
			f.Reason += fmt.Sprintf(" With the path MTU %d given, tun-mtu %d fits without it (largest unfragmented tun-mtu %d).", v.ctx.PathMTU, v.tunMTU(), maxTun)
		} else if err == nil {
			f.Reason += fmt.Sprintf(" With the path MTU %d given, full-size packets need tun-mtu ≤ %d; mssfix %d mtu keeps TCP inside within the path instead.", v.ctx.PathMTU, maxTun, v.ctx.PathMTU)
			f.Edits = repl(d, fmt.Sprintf("mssfix %d mtu", v.ctx.PathMTU))
		}
	} else {
		f.Reason += " Not tested here whether your path needs it: pass --pmtu (ovpnperf pmtu measures it)."
	}
	v.add(f, d)
}

func (v *view) tunMTUPath() {
	if v.proto() == "tcp" {
		// Over TCP transport tunnel packets travel as a byte stream in
		// the outer connection's own segments: no outer packet exceeds
		// the path MTU whatever the tun-mtu (a jumbo tunnel over TCP is
		// what advise recommends, docs/measurements.md#tcp-transport-sweep).
		return
	}
	tun := v.tunMTU()
	d, hasTun := v.last("tun-mtu")
	if v.ctx.PathMTU == 0 {
		if hasTun && tun > 1500 {
			v.add(Finding{Rule: "tun-mtu-path", Severity: Info, Category: Performance,
				Problem: fmt.Sprintf("tun-mtu %d is above 1500; whether the path carries it is not tested here.", tun),
				Reason:  "packets of tun-mtu plus OpenVPN's overhead (52 bytes for AES-GCM over IPv4 UDP, docs/openvpn-facts.md#per-packet-overhead) must fit the path MTU; pass --pmtu (ovpnperf pmtu measures it)."}, d)
		}
		return
	}
	if v.has("fragment") {
		return
	}
	dc := pmtu.DataChannel{Cipher: v.dataCipher()}
	tr := pmtu.Transport{Proto: v.proto(), Family: v.family()}
	over, err := dc.Overhead(tr, tun)
	if err != nil {
		return
	}
	outer := tun + over
	if outer <= v.ctx.PathMTU || v.advisedMTU() {
		return
	}
	// mssfix target as an outer packet size: 2.6 default is "1492 mtu"
	// with tun-mtu 1500; with another tun-mtu and no mssfix line 2.6 sets
	// mssfix to the tun-mtu itself (options.c 2.6.14
	// options_postprocess_mutate_ce, docs/openvpn-facts.md#mssfix), which
	// clamps nothing below the tunnel's own size.
	mssOuter := 1492
	if tun != 1500 {
		mssOuter = 1 << 30
	}
	ms, hasMss := v.last("mssfix")
	if hasMss {
		n, _ := strconv.Atoi(arg(ms, 0))
		switch {
		case n == 0:
			mssOuter = 1 << 30
		case arg(ms, 1) == "mtu":
			mssOuter = n
		default:
			mssOuter = n + tr.Family.HeaderBytes() + map[string]int{"udp": 8, "tcp": 20}[tr.Proto]
		}
	}
	maxTun, _ := dc.MaxTunMTU(tr, v.ctx.PathMTU)
	at := d
	if !hasTun {
		at = ms
	}
	f := Finding{Rule: "tun-mtu-path", Category: Performance}
	if mssOuter > v.ctx.PathMTU {
		f.Severity = Warning
		f.Problem = fmt.Sprintf("tun-mtu %d with %s-byte overhead makes %d-byte packets, larger than the path MTU %d, and mssfix does not keep TCP below it.", tun, strconv.Itoa(over), outer, v.ctx.PathMTU)
		f.Reason = fmt.Sprintf("oversized outer packets are fragmented by the kernel or dropped where ICMP is filtered (a black hole: TCP stalls); 2.6's mssfix with the mtu keyword counts the outer IP and UDP headers, so mssfix %d mtu clamps inner TCP to the path (docs/openvpn-facts.md#mssfix).", v.ctx.PathMTU)
		if hasMss {
			f.Edits = repl(ms, fmt.Sprintf("mssfix %d mtu", v.ctx.PathMTU))
		} else {
			f.Edits = []Edit{{File: v.f.Path, Append: []string{fmt.Sprintf("mssfix %d mtu", v.ctx.PathMTU)}}}
		}
	} else {
		f.Severity = Info
		f.Problem = fmt.Sprintf("tun-mtu %d makes %d-byte packets, larger than the path MTU %d; mssfix keeps TCP within the path, other large packets are fragmented outside.", tun, outer, v.ctx.PathMTU)
		f.Reason = fmt.Sprintf("UDP and ICMP inside the tunnel are not clamped by mssfix; tun-mtu %d would fit the path exactly (computed with the data-channel overhead of %s, docs/openvpn-facts.md#per-packet-overhead), but both sides must agree.", maxTun, dc.Cipher)
		f.Decision = true
		if hasTun {
			f.Edits = repl(d, fmt.Sprintf("tun-mtu %d", maxTun))
		} else {
			f.Edits = []Edit{{File: v.f.Path, Append: []string{fmt.Sprintf("tun-mtu %d", maxTun)}}}
		}
	}
	if at.Pos.Line == 0 {
		v.addMissing(f)
		return
	}
	v.add(f, at)
}

func (v *view) fastIO() {
	d, ok := v.last("fast-io")
	if !ok {
		return
	}
	why := ""
	switch {
	case v.proto() == "tcp":
		why = "not using UDP"
	case v.has("shaper"):
		why = "using --shaper"
	default:
		return
	}
	v.add(Finding{Rule: "fast-io", Severity: Info, Category: Performance,
		Problem: "fast-io has no effect here (" + why + ").",
		Reason:  "init.c do_setup_fast_io (2.6): \"NOTE: --fast-io is disabled since we are " + why + "\"; fast-io only applies to UDP without a shaper (docs/openvpn-facts.md#fast-io).",
		Edits:   del(d)}, d)
}

func (v *view) txqueuelen() {
	d, ok := v.last("txqueuelen")
	if !ok {
		return
	}
	n, err := strconv.Atoi(arg(d, 0))
	if err != nil || n > 100 {
		return
	}
	f := Finding{Rule: "txqueuelen", Category: Performance, Edits: del(d),
		Problem: fmt.Sprintf("txqueuelen %d keeps the tun device's queue at the pre-2.5 value.", n),
		Reason:  "OpenVPN before 2.5 forced txqueuelen 100; 2.5+ leaves the OS default (500 for a Linux tun, docs/openvpn-facts.md#txqueuelen). A short queue drops bursts on fast links before TCP can back off."}
	switch {
	case v.ctx.RateBitsPerSec >= 100e6:
		f.Severity = Warning
		f.Reason += fmt.Sprintf(" At %s the queue holds %d full packets = %.1f ms.", rateStr(v.ctx.RateBitsPerSec), n, float64(n*1500*8)/float64(v.ctx.RateBitsPerSec)*1000)
	case v.ctx.RateBitsPerSec > 0:
		return
	default:
		f.Severity = Info
		f.Reason += " Not tested here whether your link is fast: pass --rate."
	}
	v.add(f, d)
}
