package lint

import (
	"fmt"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	shared "github.com/ovpnperf/ovpnperf/internal/rules"
)

// options27 are options OpenVPN 2.7 added (Changes.rst, "Overview of
// changes in 2.7" at v2.7.6): with --target 2.7 they are not unknown.
var options27 = map[string]bool{
	"allow-deprecated-insecure-static-crypto": true, "dns-updown": true, "tls-crypt-v2-max-age": true,
	"override-username": true, "route-table": true,
}

// dcoRule reports every option that turns DCO off with the target
// version (one finding per option, so each can be suppressed alone).
func (v *view) dcoRule() {
	if v.ctx.Target == "" {
		return
	}
	for _, b := range dco.Check(v.f, v.ctx.Target) {
		f := Finding{Rule: "dco-off", Severity: Warning, Category: Performance,
			Problem: fmt.Sprintf("DCO off because of %s: OpenVPN %s keeps the data channel in userspace.", b.Text, b.Target),
			Reason: fmt.Sprintf("%s. Without DCO one OpenVPN process encrypts every packet in userspace (docs/openvpn-facts.md#data-channel-offload-dco). Instead: %s.",
				b.Reason(), b.Replacement),
			Decision: true}
		switch {
		case b.Pushed:
			f.Problem = fmt.Sprintf("%s breaks clients that use DCO: OpenVPN %s clients with DCO refuse pushed compression.", b.Text, b.Target)
		case b.Conditional:
			f.Severity = Info
			f.Problem = fmt.Sprintf("DCO may be off because of %s (OpenVPN %s), depending on the capabilities OpenVPN starts with.", b.Text, b.Target)
		case b.Rule == "disable-dco":
			f.Severity = Info
			f.Problem = fmt.Sprintf("DCO off because of disable-dco: the config turns data channel offload off explicitly (OpenVPN %s).", b.Target)
		}
		d := openvpn.PosDirective{Pos: b.Pos}
		switch b.Rule {
		case "topology":
			if t, ok := v.last("topology"); ok {
				f.Edits = repl(t, "topology subnet")
			} else {
				f.Edits = []Edit{{File: v.f.Path, Append: []string{"topology subnet"}}}
			}
		case "data-ciphers":
			if dc, ok := v.last(b.Option); ok {
				var keep []string
				for _, c := range strings.Split(arg(dc, 0), ":") {
					if inList(strings.TrimPrefix(c, "?"), dco.SupportedCiphers) {
						keep = append(keep, c)
					}
				}
				if len(keep) == 0 {
					keep = []string{shared.DefaultDataCiphers}
				}
				f.Edits = repl(dc, "data-ciphers "+strings.Join(keep, ":"))
			}
		}
		if b.Pos.Line == 0 {
			v.addMissing(f)
			continue
		}
		v.add(f, d)
	}
}

const changes27 = "Changes.rst at " + dco.Tag27 + ", \"Overview of changes in 2.7\" (docs/openvpn-facts.md#changes-in-openvpn-27)"

// target27 reports what OpenVPN 2.7 refuses or reads differently from 2.6.
func (v *view) target27() {
	if v.ctx.Target != dco.V27 {
		return
	}
	for _, d := range v.f.Directives {
		if d.Inline {
			continue
		}
		switch d.Name {
		case "comp-lzo", "compress":
			if d.Name == "compress" && (arg(d, 0) == "migrate" || arg(d, 0) == "stub" || arg(d, 0) == "stub-v2" || arg(d, 0) == "") {
				continue
			}
			if d.Name == "comp-lzo" && arg(d, 0) == "no" {
				continue
			}
			v.add(Finding{Rule: "v27-compression", Severity: Warning, Category: Compatibility,
				Problem: strings.TrimSpace(d.Name+" "+strings.Join(d.Args, " ")) + " no longer compresses anything in OpenVPN 2.7: it only decompresses what peers send.",
				Reason:  changes27 + ": \"Compression on send has been removed. OpenVPN 2.7 will never compress data before sending. Decompression of received data is still supported.\" The line keeps compression framing (and so keeps DCO off); drop it on both sides, or `compress migrate` on a server while old clients remain.",
				Edits:   del(d), Decision: true}, d)
		case "allow-compression":
			if arg(d, 0) == "yes" {
				v.add(Finding{Rule: "v27-compression", Severity: Warning, Category: Compatibility,
					Problem: "allow-compression yes means asym in OpenVPN 2.7 (decompress only).",
					Reason:  changes27 + ": \"--allow-compression yes is now an alias for --allow-compression asym\" (options.c:8258 at " + dco.Tag27 + " warns \"DEPRECATED OPTION\").",
					Edits:   repl(d, "allow-compression asym")}, d)
			}
		case "secret":
			if v.has("allow-deprecated-insecure-static-crypto") {
				v.add(Finding{Rule: "v27-secret", Severity: Warning, Category: Security,
					Problem:  "secret (static-key mode) runs on OpenVPN 2.7 only because allow-deprecated-insecure-static-crypto is set; 2.8 removes it.",
					Reason:   changes27 + ": \"secret support has been removed (by default) … will be removed in OpenVPN 2.8\". Use TLS mode; peer-fingerprint makes it about as easy as a static key.",
					Decision: true}, d)
				continue
			}
			v.add(Finding{Rule: "v27-secret", Severity: Error, Category: Compatibility,
				Problem:  "secret (static-key mode without TLS): OpenVPN 2.7 refuses to start with this config.",
				Reason:   changes27 + ": \"secret support has been removed (by default)\"; options.c:2714 at " + dco.Tag27 + " stops with \"DEPRECATION: No tls-client or tls-server option in configuration detected\" unless allow-deprecated-insecure-static-crypto is set (2.8 removes it). Move to TLS mode; peer-fingerprint makes it about as easy as a static key. Static-key mode also keeps DCO off.",
				Decision: true}, d)
		case "dh":
			if arg(d, 0) == "none" || !v.server() && !v.has("tls-server") {
				continue
			}
			v.add(Finding{Rule: "v27-dh", Severity: Info, Category: Compatibility,
				Problem: "dh " + arg(d, 0) + " is no longer needed: OpenVPN 2.7 defaults to dh none.",
				Reason:  changes27 + ": \"--dh none is now the default if --dh is not specified. Modern TLS implementations will prefer ECDH\"; the 2.7 sample configs use dh none. Keep the line while the same config must also start on 2.6, which requires a dh line (options.c:3746 at " + dco.Tag26 + ").",
				Edits:   repl(d, "dh none"), Decision: true}, d)
		case "persist-key":
			v.add(Finding{Rule: "v27-persist-key", Severity: Info, Category: Compatibility,
				Problem:  "persist-key is the default in OpenVPN 2.7.",
				Reason:   changes27 + ": \"persist-key option has been enabled by default\"; the line is harmless and still needed by 2.6 peers sharing this file.",
				Decision: true}, d)
		case "fast-io":
			v.add(Finding{Rule: "v27-fast-io", Severity: Info, Category: Compatibility,
				Problem: "fast-io is ignored by OpenVPN 2.7.",
				Reason:  "options.c:6621 at " + dco.Tag27 + " logs \"DEPRECATED OPTION: --fast-io option ignored.\"",
				Edits:   del(d)}, d)
		case "reneg-bytes", "reneg-pkts":
			v.add(Finding{Rule: "v27-reneg", Severity: Info, Category: Compatibility,
				Problem:  d.Name + " is ignored by OpenVPN 2.7 whenever DCO is in use.",
				Reason:   "options.c:3335 at " + dco.Tag27 + ": \"'--reneg-bytes' and '--reneg-pkts' are not supported by data channel offload; automatic key renegotiation mechanisms are sufficient for modern ciphers. Ignoring these options.\" (" + changes27 + ").",
				Decision: true}, d)
		}
	}
	// topology: 2.6's default for a tun server is net30, 2.7's subnet.
	if v.server() && !v.has("topology") {
		if dco.DevType(v.f) == "tun" {
			at, ok := v.last("server")
			if !ok {
				at, _ = v.last("mode")
			}
			f := Finding{Rule: "v27-topology", Severity: Warning, Category: Compatibility,
				Problem: "no topology line: this server runs topology net30 on OpenVPN 2.6 and topology subnet on 2.7.",
				Reason: changes27 + ": \"Default for --topology changed to subnet for --mode server … this changes the semantics of --ifconfig\" (helper.c helper_setdefault_topology at " + dco.Tag27 +
					"); client addresses, ifconfig and ifconfig-push lines mean something else. Write the topology you mean: subnet (what DCO needs, pushed to clients) or net30 to keep the old addressing.",
				Edits: []Edit{{File: v.f.Path, Append: []string{"topology subnet"}}}, Decision: true}
			if at.Pos.Line == 0 {
				v.addMissing(f)
			} else {
				v.add(f, at)
			}
		}
	}
}

// dhMissing26: a 2.6 TLS server needs a dh line (dh none is fine).
func (v *view) dhMissing26() {
	if v.ctx.Target != dco.V26 || v.has("dh") || !(v.server() || v.has("tls-server")) {
		return
	}
	f := Finding{Rule: "dh-missing", Severity: Error, Category: Compatibility,
		Problem: "this TLS server has no dh line; OpenVPN 2.6 stops with \"You must define DH file (--dh)\".",
		Reason:  "options.c:3746 at " + dco.Tag26 + " requires --dh on a tls-server; `dh none` uses ECDH only (2.7's default, " + changes27 + ").",
		Edits:   []Edit{{File: v.f.Path, Append: []string{"dh none"}}}}
	if at, ok := v.last("server"); ok {
		v.add(f, at)
		return
	}
	v.addMissing(f)
}
