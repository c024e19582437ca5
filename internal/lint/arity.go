package lint

import (
	"fmt"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// arity refuses a line with fewer or more parameters than OpenVPN 2.6
// accepts for its option (openvpn.Arity26): `dev` alone, `verb 3 4`,
// `remote HOST PORT udp extra`. OpenVPN matches no branch of its option
// parser then and stops; ignore-unknown-option makes it skip the line.
func (v *view) arity() {
	ignored := v.ignoredOptions()
	arity26 := openvpn.Arity26()
	for _, d := range v.f.Directives {
		if d.Inline {
			continue
		}
		ar, ok := arity26[d.Name]
		if !ok {
			continue
		}
		n := len(d.Args)
		if n >= ar[0] && (ar[1] < 0 || n <= ar[1]) {
			continue
		}
		f := Finding{Rule: "parameter-count", Severity: Error, Category: Compatibility,
			Problem:  fmt.Sprintf("%s takes %s, this line has %d; OpenVPN 2.6 stops with \"Unrecognized option or missing or extra parameter(s)\".", d.Name, arityText(ar), n),
			Reason:   "OpenVPN 2.6.14's option parser (options.c add_option) accepts this option only with that many parameters; quote a parameter that contains spaces.",
			Decision: true}
		if ignored[d.Name] {
			f.Severity, f.Decision = Info, false
			f.Problem = fmt.Sprintf("%s takes %s, this line has %d; ignore-unknown-option makes OpenVPN 2.6 skip it.", d.Name, arityText(ar), n)
		}
		v.add(f, d)
	}
}

func arityText(ar [2]int) string {
	plural := func(n int) string {
		if n == 1 {
			return "1 parameter"
		}
		return fmt.Sprintf("%d parameters", n)
	}
	switch {
	case ar[1] < 0:
		return "at least " + plural(ar[0])
	case ar[0] == ar[1]:
		return plural(ar[0])
	case ar[0] == 0:
		return "at most " + plural(ar[1])
	}
	return fmt.Sprintf("%d to %d parameters", ar[0], ar[1])
}
