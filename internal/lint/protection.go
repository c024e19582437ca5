package lint

import (
	"strings"

	shared "github.com/ovpnperf/ovpnperf/internal/rules"
)

// protection reports data channels that may run without encryption or
// authentication (cipher none, auth none with a CBC cipher, none in
// data-ciphers) and configs that OpenVPN 2.6 refuses to old peers, by the
// shared cipher rules (shared.Protection), which advise's "do not" quotes.
func (v *view) protection() {
	c := shared.Crypto{Mode: shared.ClientServer}
	switch {
	case v.staticKey():
		c.Mode = shared.StaticKey
	case !v.server() && !v.client():
		c.Mode = shared.PeerToPeerTLS
	}
	for _, x := range []struct {
		name string
		to   *string
	}{{"cipher", &c.Cipher}, {"data-ciphers", &c.DataCiphers}, {"data-ciphers-fallback", &c.Fallback}, {"auth", &c.Auth}} {
		if d, ok := v.last(x.name); ok {
			*x.to = arg(d, 0)
		}
	}
	for _, name := range shared.OldPeerOptions() {
		if v.has(name) {
			c.OldPeerSigns = append(c.OldPeerSigns, name)
		}
	}
	for _, p := range shared.Protection(c) {
		f := Finding{Rule: p.Rule, Severity: p.Severity, Category: Security, Problem: p.Problem, Reason: p.Reason, Decision: true}
		if p.Directive == "" {
			f.Category = Compatibility
			d, _ := v.last(c.OldPeerSigns[0])
			v.add(f, d)
			continue
		}
		d, _ := v.last(p.Directive)
		switch p.Directive {
		case "cipher":
			switch c.Mode {
			case shared.StaticKey:
				f.Edits = repl(d, "cipher AES-256-CBC")
			case shared.PeerToPeerTLS:
				f.Edits = repl(d, "cipher AES-256-GCM")
			default:
				f.Edits = del(d)
			}
		case "data-ciphers":
			var keep []string
			for _, x := range strings.Split(c.DataCiphers, ":") {
				if x != "" && !strings.EqualFold(strings.TrimPrefix(x, "?"), "none") {
					keep = append(keep, x)
				}
			}
			if len(keep) == 0 {
				keep = []string{shared.DefaultDataCiphers}
			}
			f.Edits = repl(d, "data-ciphers "+strings.Join(keep, ":"))
		default: // data-ciphers-fallback none, auth none
			f.Edits = del(d)
		}
		v.add(f, d)
	}
}
