package openvpn

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Side says which config a variant directive goes into.
type Side uint8

// Sides of a tunnel. Push directives go into the server's config as
// `push "…"` and reach the client when it connects.
const (
	ServerSide Side = 1 << iota
	ClientSide
	BothSides = ServerSide | ClientSide
)

func (s Side) String() string {
	switch s {
	case ServerSide:
		return "server"
	case ClientSide:
		return "client"
	case BothSides:
		return "both"
	}
	return fmt.Sprintf("Side(%d)", uint8(s))
}

// variantCiphers are the data-channel ciphers a variant may name, in the order
// error messages list them. BF-CBC needs OpenSSL 3's legacy provider: add
// `providers legacy default` to the variant.
var variantCiphers = []string{"AES-256-GCM", "AES-128-GCM", "CHACHA20-POLY1305", "AES-256-CBC", "AES-128-CBC", "BF-CBC", "none"}

// variantDigests are the HMAC digests `auth` accepts in a variant (ignored by
// OpenVPN for AEAD ciphers).
var variantDigests = []string{"SHA1", "SHA256", "SHA384", "SHA512", "none"}

// spec describes one directive a variant may set.
type spec struct {
	side  Side
	form  string // the accepted form, shown in errors
	check func(args []string) ([]string, error)
	// pushable directives may also appear as `push NAME ARGS` (OpenVPN's
	// pull_permission_mask lets a client accept them).
	pushable bool
}

// directiveTable lists every directive a variant may use. Anything else —
// in particular up, down, script-security, plugin, management, config,
// log, cd, chroot — is refused: a variant must not run programs or touch
// files.
var directiveTable map[string]spec

func init() {
	directiveTable = map[string]spec{
		"data-ciphers":          {side: BothSides, form: "data-ciphers CIPHER[:CIPHER…]", check: cipherList},
		"data-ciphers-fallback": {side: BothSides, form: "data-ciphers-fallback CIPHER", check: oneCipher},
		"cipher":                {side: BothSides, form: "cipher CIPHER", check: fallbackCipher},
		"auth":                  {side: BothSides, form: "auth DIGEST", check: oneOf(variantDigests, true)},
		"tun-mtu":               {side: BothSides, form: "tun-mtu N (68-65535)", check: number(68, 65535), pushable: true},
		"tun-mtu-max":           {side: ClientSide, form: "tun-mtu-max N (68-65536)", check: number(68, 65536)},
		"mssfix":                {side: BothSides, form: "mssfix [N (0-65535) [mtu|fixed]]", check: mssfix},
		"fragment":              {side: BothSides, form: "fragment N (68-65535) [mtu]", check: fragment},
		"sndbuf":                {side: BothSides, form: "sndbuf BYTES (1-1073741824)", check: number(1, 1<<30), pushable: true},
		"rcvbuf":                {side: BothSides, form: "rcvbuf BYTES (1-1073741824)", check: number(1, 1<<30), pushable: true},
		"txqueuelen":            {side: BothSides, form: "txqueuelen N (1-1000000)", check: number(1, 1000000)},
		"fast-io":               {side: BothSides, form: "fast-io", check: noArgs},
		// A server with tcp-nodelay sets TCP_NODELAY on its sockets and
		// pushes it to clients; on a client OpenVPN 2.6 warns that it
		// does not affect the server.
		"tcp-nodelay":       {side: ServerSide, form: "tcp-nodelay", check: noArgs},
		"comp-lzo":          {side: BothSides, form: "comp-lzo [yes|no|adaptive]", check: optionalOneOf([]string{"yes", "no", "adaptive"}), pushable: true},
		"compress":          {side: BothSides, form: "compress [lz4-v2|lz4|lzo|stub|stub-v2]", check: optionalOneOf([]string{"lz4-v2", "lz4", "lzo", "stub", "stub-v2"}), pushable: true},
		"allow-compression": {side: BothSides, form: "allow-compression yes|no|asym", check: oneOf([]string{"yes", "no", "asym"}, false)},
		// shaper is refused by OpenVPN in --mode server, so it can only
		// limit the client's sending rate here.
		"shaper":      {side: ClientSide, form: "shaper BYTES_PER_SEC (100-100000000)", check: number(100, 100000000)},
		"reneg-bytes": {side: BothSides, form: "reneg-bytes BYTES (0-2147483647, 0 = never)", check: number(0, 1<<31-1)},
		"providers":   {side: BothSides, form: "providers legacy|default …", check: providers},
		// dco is no OpenVPN directive: it leaves out the lab's
		// disable-dco, so OpenVPN offloads where the kernel can. lab run
		// runs such a variant only where the kernel has the driver.
		"dco": {side: BothSides, form: "dco", check: noArgs},
	}
}

// forbidden are directives that run programs, read or write files or
// reach the management interface; named so that the refusal says why.
var forbidden = map[string]bool{
	"up": true, "down": true, "script-security": true, "plugin": true, "management": true,
	"config": true, "log": true, "log-append": true, "cd": true, "chroot": true, "daemon": true,
	"ipchange": true, "route-up": true, "route-pre-down": true, "client-connect": true,
	"client-disconnect": true, "learn-address": true, "auth-user-pass-verify": true,
	"tls-verify": true, "writepid": true, "status": true, "setenv": true, "user": true, "group": true,
	"iproute": true, "tmp-dir": true, "ca": true, "cert": true, "key": true, "tls-crypt": true,
	"tls-auth": true, "secret": true, "dh": true, "crl-verify": true, "askpass": true,
}

// VariantDirectives lists the directive names variants accept, sorted.
func VariantDirectives() []string {
	names := make([]string, 0, len(directiveTable)+1)
	for n := range directiveTable {
		names = append(names, n)
	}
	names = append(names, "push")
	sort.Strings(names)
	return names
}

// VariantItem is one directive of a variant and the side(s) it applies
// to. A push item is Directive{Name: "push", Args: []string{"sndbuf 393216"}}
// and goes into the server's config.
type VariantItem struct {
	Directive
	Side Side
}

// Variant is a named set of directives applied on top of the lab's base
// server and client configs.
type Variant struct {
	Name string
	// Description says what the variant changes, for built-in variants.
	Description string
	Items       []VariantItem
}

// String renders the variant in the form ParseVariant reads.
func (v Variant) String() string {
	parts := make([]string, len(v.Items))
	for i, it := range v.Items {
		d := it.Directive
		if d.Name == "push" && len(d.Args) == 1 {
			d = Directive{Name: "push", Args: strings.Fields(d.Args[0])}
		}
		s := strings.Join(append([]string{d.Name}, d.Args...), " ")
		if sp, ok := directiveTable[it.Name]; ok && it.Side != sp.side {
			s = it.Side.String() + ":" + s
		}
		parts[i] = s
	}
	return v.Name + "=" + strings.Join(parts, ";")
}

// Apply adds the variant's directives to the server and client configs;
// a directive replaces any earlier one with the same name (for push: the
// same pushed option). Either config may be nil.
func (v Variant) Apply(server, client *Config) {
	for _, it := range v.Items {
		d := it.Directive
		if d.Name == "dco" {
			for _, c := range []*Config{server, client} {
				if c != nil {
					c.Remove("disable-dco")
				}
			}
			continue
		}
		d.Args = append([]string(nil), d.Args...)
		if it.Side&ServerSide != 0 && server != nil {
			server.Set(d)
		}
		if it.Side&ClientSide != 0 && client != nil {
			client.Set(d)
		}
	}
}

// DCO reports whether the variant allows data channel offload (the dco
// item: no disable-dco in its configs).
func (v Variant) DCO() bool {
	for _, it := range v.Items {
		if it.Name == "dco" {
			return true
		}
	}
	return false
}

// DCOVariant is `--variant dco`: the lab's defaults with data channel
// offload allowed. It is not among BuiltinVariants (which every lab can
// run): lab run runs it only on a kernel with the driver.
func DCOVariant() Variant {
	return Variant{Name: "dco", Description: "OpenVPN's defaults with data channel offload (kernel ovpn driver) allowed", Items: []VariantItem{{Directive: D("dco"), Side: BothSides}}}
}

var variantNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// builtinVariants are the variants ovpnperf knows by name. Their directive
// sets were checked against OpenVPN 2.6.14 (a tunnel comes up and passes
// traffic with each; see TestTunnelVariants):
//   - in TLS mode `cipher` is ignored for the data channel: only
//     data-ciphers chooses it, so CBC and none are set there;
//   - `data-ciphers none` alone keeps HMAC-SHA1; `auth none` removes it;
//   - with cipher none OpenVPN lowers reneg-bytes to 64 MB (its SWEET32
//     guard for small-block ciphers), renegotiating TLS every 64 MB, which
//     would disturb a throughput run; reneg-bytes 0 keeps the default
//     hourly renegotiation;
//   - tun-mtu 9000 set on both sides needs no tun-mtu-max (the client
//     announces IV_MTU=9000 itself).
var builtinVariants = []string{
	"default=",
	"aes256gcm=data-ciphers AES-256-GCM",
	"aes128gcm=data-ciphers AES-128-GCM",
	"chacha20=data-ciphers CHACHA20-POLY1305",
	"aes256cbc=data-ciphers AES-256-CBC;auth SHA256",
	"none=data-ciphers none;auth none;reneg-bytes 0",
	"jumbo=tun-mtu 9000;mssfix 0",
}

var builtinDescriptions = map[string]string{
	"default":   "OpenVPN 2.6 defaults (AES-256-GCM negotiated)",
	"aes256gcm": "AES-256-GCM data channel",
	"aes128gcm": "AES-128-GCM data channel",
	"chacha20":  "CHACHA20-POLY1305 data channel",
	"aes256cbc": "AES-256-CBC with HMAC-SHA256 (no AEAD)",
	"none":      "no encryption and no HMAC (insecure; measures OpenVPN without crypto), TLS renegotiation kept hourly",
	"jumbo":     "tun-mtu 9000 on both sides, mssfix off",
}

// BuiltinVariants returns the built-in variants in a fixed order.
func BuiltinVariants() []Variant {
	out := make([]Variant, 0, len(builtinVariants))
	for _, s := range builtinVariants {
		v, err := parseVariantSpec(s)
		if err != nil {
			panic(err) // the table above is fixed and tested
		}
		v.Description = builtinDescriptions[v.Name]
		out = append(out, v)
	}
	return out
}

// BuiltinVariantNames lists the built-in variants' names.
func BuiltinVariantNames() []string {
	var names []string
	for _, s := range builtinVariants {
		names = append(names, s[:strings.IndexByte(s, '=')])
	}
	return names
}

func builtin(name string) (Variant, bool) {
	for _, v := range BuiltinVariants() {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// ParseVariant reads a variant as the user writes it on the command line:
// either the name of a built-in variant (default, aes256gcm, aes128gcm,
// chacha20, aes256cbc, none, jumbo) or
//
//	NAME=DIRECTIVE ARGS;DIRECTIVE ARGS…
//
// for example `gcm128=data-ciphers AES-128-GCM`, `jumbo=tun-mtu 9000;mssfix
// 0` or `bigbuf=sndbuf 1048576;rcvbuf 1048576;push sndbuf 1048576`. A
// directive applies to the side(s) the directive table gives it; prefix it
// with `server:` or `client:` to set it on one side only
// (`srvbuf=server:sndbuf 1048576`). Parameters are separated by spaces;
// there is no quoting. Every directive and parameter is checked against
// the table; the error is a usage error naming the variant, the directive
// and the accepted form.
func ParseVariant(s string) (Variant, error) {
	if s == "dco" {
		return DCOVariant(), nil
	}
	if !strings.Contains(s, "=") {
		if v, ok := builtin(s); ok {
			return v, nil
		}
		return Variant{}, usage.Errorf("variant %q: not a built-in variant (%s) and not NAME=DIRECTIVE ARGS;…", s, strings.Join(BuiltinVariantNames(), ", "))
	}
	name := s[:strings.IndexByte(s, '=')]
	if _, ok := builtin(name); ok {
		return Variant{}, usage.Errorf("variant %q: %s is a built-in variant; give yours another name", s, name)
	}
	return parseVariantSpec(s)
}

func parseVariantSpec(s string) (Variant, error) {
	eq := strings.IndexByte(s, '=')
	name, body := s[:eq], s[eq+1:]
	if !variantNameRE.MatchString(name) {
		return Variant{}, usage.Errorf("variant %q: name must be 1-32 characters a-z, 0-9, '_' or '-' (form NAME=DIRECTIVE ARGS;DIRECTIVE ARGS)", name)
	}
	v := Variant{Name: name}
	if strings.TrimSpace(body) == "" {
		return v, nil
	}
	for _, item := range strings.Split(body, ";") {
		// Only spaces separate parameters, so that a newline, tab or other
		// control character stays inside a parameter and is refused with
		// the directive it was meant to extend.
		fields := splitSpaces(item)
		if len(fields) == 0 {
			return Variant{}, usage.Errorf("variant %q: empty directive between ';'", name)
		}
		it, err := parseVariantItem(fields)
		if err != nil {
			return Variant{}, usage.Errorf("variant %q: %v", name, err)
		}
		v.Items = append(v.Items, it)
	}
	return v, nil
}

func splitSpaces(s string) []string {
	var out []string
	for _, f := range strings.Split(s, " ") {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseVariantItem(fields []string) (VariantItem, error) {
	dname := fields[0]
	var only Side
	if p, rest, ok := strings.Cut(dname, ":"); ok {
		switch p {
		case "server":
			only = ServerSide
		case "client":
			only = ClientSide
		default:
			return VariantItem{}, fmt.Errorf("%q: only server: or client: may prefix a directive", dname)
		}
		dname = rest
	}
	if dname == "push" {
		if only == ClientSide {
			return VariantItem{}, fmt.Errorf("push: only the server pushes (accepted: push DIRECTIVE ARGS)")
		}
		if len(fields) < 2 {
			return VariantItem{}, fmt.Errorf("push: missing directive (accepted: push %s ARGS)", strings.Join(pushable(), "|"))
		}
		inner := fields[1]
		sp, ok := directiveTable[inner]
		if !ok || !sp.pushable {
			return VariantItem{}, fmt.Errorf("push: %q cannot be pushed (accepted: push %s ARGS)", inner, strings.Join(pushable(), "|"))
		}
		args, err := checkArgs(inner, sp, fields[2:])
		if err != nil {
			return VariantItem{}, fmt.Errorf("push %v", err)
		}
		d := D("push", strings.Join(append([]string{inner}, args...), " "))
		if err := d.Validate(); err != nil {
			return VariantItem{}, err
		}
		return VariantItem{Directive: d, Side: ServerSide}, nil
	}
	sp, ok := directiveTable[dname]
	if !ok {
		if forbidden[dname] {
			return VariantItem{}, fmt.Errorf("%q is not allowed in variants: it runs programs, touches files or the management interface (variant directives: %s)", dname, strings.Join(VariantDirectives(), ", "))
		}
		return VariantItem{}, fmt.Errorf("unknown directive %q (variant directives: %s)", dname, strings.Join(VariantDirectives(), ", "))
	}
	side := sp.side
	if only != 0 {
		if sp.side&only == 0 {
			return VariantItem{}, fmt.Errorf("%s: applies to the %s only", dname, sp.side)
		}
		side = only
	}
	args, err := checkArgs(dname, sp, fields[1:])
	if err != nil {
		return VariantItem{}, err
	}
	d := D(dname, args...)
	// The config reader's own limits (line length, parameter count), now
	// rather than when the lab is already built.
	if err := d.Validate(); err != nil {
		return VariantItem{}, err
	}
	return VariantItem{Directive: d, Side: side}, nil
}

// checkArgs refuses control characters and anything OpenVPN could read
// differently before the directive's own check, so a smuggled newline is
// reported against the directive it hides in.
func checkArgs(name string, sp spec, args []string) ([]string, error) {
	for _, a := range args {
		if err := ValidateToken(a); err != nil {
			return nil, fmt.Errorf("%s: %v (accepted: %s)", name, err, sp.form)
		}
	}
	out, err := sp.check(args)
	if err != nil {
		if strings.Contains(err.Error(), "(accepted:") {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		return nil, fmt.Errorf("%s: %v (accepted: %s)", name, err, sp.form)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func pushable() []string {
	var out []string
	for _, n := range VariantDirectives() {
		if directiveTable[n].pushable {
			out = append(out, n)
		}
	}
	return out
}

func wantArgs(args []string, min, max int) error {
	switch {
	case len(args) < min && min == 1 && max == 1:
		return fmt.Errorf("needs one parameter")
	case len(args) < min:
		return fmt.Errorf("needs at least %d parameters", min)
	case len(args) > max && max == 0:
		return fmt.Errorf("takes no parameters, got %q", strings.Join(args, " "))
	case len(args) > max:
		return fmt.Errorf("too many parameters: %q", strings.Join(args, " "))
	}
	return nil
}

func noArgs(args []string) ([]string, error) { return nil, wantArgs(args, 0, 0) }

func parseNumber(s string, min, max int64) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || (len(s) > 1 && s[0] == '0') || s[0] == '+' {
		return fmt.Errorf("%q is not a decimal number", s)
	}
	if n < min || n > max {
		return fmt.Errorf("%d is out of range %d-%d", n, min, max)
	}
	return nil
}

func number(min, max int64) func([]string) ([]string, error) {
	return func(args []string) ([]string, error) {
		if err := wantArgs(args, 1, 1); err != nil {
			return nil, err
		}
		return args, parseNumber(args[0], min, max)
	}
}

func mssfix(args []string) ([]string, error) {
	if err := wantArgs(args, 0, 2); err != nil {
		return nil, err
	}
	if len(args) >= 1 {
		if err := parseNumber(args[0], 0, 65535); err != nil {
			return nil, err
		}
	}
	if len(args) == 2 && args[1] != "mtu" && args[1] != "fixed" {
		return nil, fmt.Errorf("unknown flag %q", args[1])
	}
	return args, nil
}

func fragment(args []string) ([]string, error) {
	if err := wantArgs(args, 1, 2); err != nil {
		return nil, err
	}
	if err := parseNumber(args[0], 68, 65535); err != nil {
		return nil, err
	}
	if len(args) == 2 && args[1] != "mtu" {
		return nil, fmt.Errorf("unknown flag %q", args[1])
	}
	return args, nil
}

// canonical finds s in list, ignoring case as OpenSSL does for cipher and
// digest names, and returns the list's spelling.
func canonical(list []string, s string) (string, bool) {
	for _, c := range list {
		if strings.EqualFold(c, s) {
			return c, true
		}
	}
	return "", false
}

func oneCipher(args []string) ([]string, error) {
	if err := wantArgs(args, 1, 1); err != nil {
		return nil, err
	}
	c, ok := canonical(variantCiphers, args[0])
	if !ok {
		return nil, fmt.Errorf("unknown cipher %q (accepted: %s)", args[0], strings.Join(variantCiphers, ", "))
	}
	return []string{c}, nil
}

// fallbackCipher checks `cipher`, which OpenVPN 2.6 uses only as the
// fallback for peers that cannot negotiate; `cipher none` alone was seen to
// leave AES-256-GCM in use (2.6.14), so it is refused as misleading.
func fallbackCipher(args []string) ([]string, error) {
	out, err := oneCipher(args)
	if err == nil && out[0] == "none" {
		return nil, fmt.Errorf("cipher none does not turn encryption off in OpenVPN 2.6 TLS mode (accepted: data-ciphers none, with auth none to drop the HMAC too)")
	}
	return out, err
}

func cipherList(args []string) ([]string, error) {
	if err := wantArgs(args, 1, 1); err != nil {
		return nil, err
	}
	var out []string
	for _, n := range strings.Split(args[0], ":") {
		c, ok := canonical(variantCiphers, n)
		if !ok {
			return nil, fmt.Errorf("unknown cipher %q (accepted: %s)", n, strings.Join(variantCiphers, ", "))
		}
		out = append(out, c)
	}
	list := strings.Join(out, ":")
	if len(list) > MaxDataCiphersLen {
		return nil, fmt.Errorf("list of %d characters; OpenVPN 2.6 refuses one longer than %d (its 127-byte buffer, MAX_NCP_CIPHERS_LENGTH)", len(list), MaxDataCiphersLen)
	}
	return []string{list}, nil
}

// MaxDataCiphersLen is the longest data-ciphers list OpenVPN 2.6 accepts:
// mutate_ncp_cipher_list (ssl_ncp.c) builds the normalised list in a
// buffer of MAX_NCP_CIPHERS_LENGTH = 127 bytes and refuses a cipher unless
// the buffer keeps room for it, a colon and the terminating NUL, which
// leaves 124 characters for the list.
const MaxDataCiphersLen = 124

func oneOf(list []string, foldCase bool) func([]string) ([]string, error) {
	return func(args []string) ([]string, error) {
		if err := wantArgs(args, 1, 1); err != nil {
			return nil, err
		}
		if foldCase {
			if c, ok := canonical(list, args[0]); ok {
				return []string{c}, nil
			}
		} else {
			for _, c := range list {
				if c == args[0] {
					return args, nil
				}
			}
		}
		return nil, fmt.Errorf("unknown value %q (accepted: %s)", args[0], strings.Join(list, ", "))
	}
}

func optionalOneOf(list []string) func([]string) ([]string, error) {
	one := oneOf(list, false)
	return func(args []string) ([]string, error) {
		if len(args) == 0 {
			return nil, nil
		}
		return one(args)
	}
}

func providers(args []string) ([]string, error) {
	if err := wantArgs(args, 1, 2); err != nil {
		return nil, err
	}
	for _, a := range args {
		if a != "legacy" && a != "default" {
			return nil, fmt.Errorf("unknown provider %q (accepted: legacy, default)", a)
		}
	}
	return args, nil
}
