package openvpn

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func TestParseVariant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []VariantItem
	}{
		{"gcm128=data-ciphers AES-128-GCM", []VariantItem{{D("data-ciphers", "AES-128-GCM"), BothSides}}},
		{"lc=data-ciphers aes-128-gcm:chacha20-poly1305", []VariantItem{{D("data-ciphers", "AES-128-GCM:CHACHA20-POLY1305"), BothSides}}},
		{"jumbo2=tun-mtu 9000;mssfix 0", []VariantItem{{D("tun-mtu", "9000"), BothSides}, {D("mssfix", "0"), BothSides}}},
		{"cbc=data-ciphers AES-256-CBC;auth SHA256", []VariantItem{{D("data-ciphers", "AES-256-CBC"), BothSides}, {D("auth", "SHA256"), BothSides}}},
		{"ms=mssfix 1400 mtu", []VariantItem{{D("mssfix", "1400", "mtu"), BothSides}}},
		{"ms2=mssfix", []VariantItem{{D("mssfix"), BothSides}}},
		{"frag=fragment 1300 mtu", []VariantItem{{D("fragment", "1300", "mtu"), BothSides}}},
		{"buf=sndbuf 1048576; rcvbuf 1048576 ;push sndbuf 1048576;push rcvbuf 1048576", []VariantItem{
			{D("sndbuf", "1048576"), BothSides}, {D("rcvbuf", "1048576"), BothSides},
			{D("push", "sndbuf 1048576"), ServerSide}, {D("push", "rcvbuf 1048576"), ServerSide}}},
		{"srv=server:sndbuf 4096", []VariantItem{{D("sndbuf", "4096"), ServerSide}}},
		{"fio=fast-io;tcp-nodelay;txqueuelen 1000", []VariantItem{{D("fast-io"), BothSides}, {D("tcp-nodelay"), ServerSide}, {D("txqueuelen", "1000"), BothSides}}},
		{"lz=allow-compression yes;compress lz4-v2", []VariantItem{{D("allow-compression", "yes"), BothSides}, {D("compress", "lz4-v2"), BothSides}}},
		{"lzo=comp-lzo adaptive", []VariantItem{{D("comp-lzo", "adaptive"), BothSides}}},
		{"shape=shaper 125000", []VariantItem{{D("shaper", "125000"), ClientSide}}},
		{"tmm=tun-mtu-max 9000", []VariantItem{{D("tun-mtu-max", "9000"), ClientSide}}},
		{"bf=providers legacy default;data-ciphers BF-CBC", []VariantItem{{D("providers", "legacy", "default"), BothSides}, {D("data-ciphers", "BF-CBC"), BothSides}}},
		{"empty=", nil},
	}
	for _, tt := range tests {
		v, err := ParseVariant(tt.in)
		if err != nil {
			t.Errorf("ParseVariant(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(v.Items, tt.want) {
			t.Errorf("ParseVariant(%q) = %v, want %v", tt.in, v.Items, tt.want)
		}
		// String renders the canonical form, which parses to the same.
		back, err := ParseVariant(v.String())
		if err != nil || !reflect.DeepEqual(back.Items, v.Items) {
			t.Errorf("ParseVariant(%q.String() = %q) = %v, %v", tt.in, v.String(), back.Items, err)
		}
	}
}

func TestParseVariantErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"bad=data-ciphers FOO", `variant "bad": data-ciphers: unknown cipher "FOO" (accepted: AES-256-GCM, AES-128-GCM, CHACHA20-POLY1305, AES-256-CBC, AES-128-CBC, BF-CBC, none)`},
		{"bad=data-ciphers AES-256-GCM:FOO", `variant "bad": data-ciphers: unknown cipher "FOO"`},
		// A backslash-n typed in a shell, and a real newline.
		{`x=tun-mtu 1500\nup /bin/sh`, `variant "x": tun-mtu: parameter "1500\\nup" contains a backslash (accepted: tun-mtu N (68-65535))`},
		{"x=tun-mtu 1500\nup /bin/sh", `variant "x": tun-mtu: parameter "1500\nup" contains a control character (accepted: tun-mtu N (68-65535))`},
		{"x=tun-mtu 1500\n;up /bin/sh", `variant "x": tun-mtu: parameter "1500\n" contains a control character`},
		{"x=tun-mtu 1500\r", `variant "x": tun-mtu: parameter "1500\r" contains a control character`},
		{"x=tun-mtu\nup /bin/sh", `variant "x": unknown directive "tun-mtu\nup"`},
		{"x=tun-mtu 1500 up", `variant "x": tun-mtu: too many parameters: "1500 up" (accepted: tun-mtu N (68-65535))`},
		{"x=tun-mtu 1500;up /bin/sh", `variant "x": "up" is not allowed in variants`},
		{"x=script-security 2", `variant "x": "script-security" is not allowed in variants`},
		{"x=plugin /x.so", `variant "x": "plugin" is not allowed`},
		{"x=management 127.0.0.1 7505", `variant "x": "management" is not allowed`},
		{"x=config /etc/x", `variant "x": "config" is not allowed`},
		{"x=log /tmp/x", `variant "x": "log" is not allowed`},
		{"x=down /bin/sh", `variant "x": "down" is not allowed`},
		{"x=proto tcp", `variant "x": unknown directive "proto"`},
		{"x=tun-mtu 20", `variant "x": tun-mtu: 20 is out of range 68-65535 (accepted: tun-mtu N (68-65535))`},
		{"x=tun-mtu 0x10", `tun-mtu: "0x10" is not a decimal number`},
		{"x=tun-mtu 01500", `tun-mtu: "01500" is not a decimal number`},
		{"x=tun-mtu", `tun-mtu: needs one parameter`},
		{"x=mssfix 1400 foo", `mssfix: unknown flag "foo" (accepted: mssfix [N (0-65535) [mtu|fixed]])`},
		{"x=fragment 1300 fixed", `fragment: unknown flag "fixed"`},
		{"x=cipher none", `variant "x": cipher: cipher none does not turn encryption off in OpenVPN 2.6 TLS mode (accepted: data-ciphers none, with auth none to drop the HMAC too)`},
		{"x=auth MD5", `auth: unknown value "MD5" (accepted: SHA1, SHA256, SHA384, SHA512, none)`},
		{"x=comp-lzo maybe", `comp-lzo: unknown value "maybe" (accepted: yes, no, adaptive)`},
		{"x=compress zstd", `compress: unknown value "zstd"`},
		{"x=fast-io yes", `fast-io: takes no parameters, got "yes"`},
		{"x=shaper 10", `shaper: 10 is out of range 100-100000000`},
		{"x=server:shaper 1000", `shaper: applies to the client only`},
		{"x=client:push sndbuf 1", `push: only the server pushes`},
		{"x=push tun-mtu-max 9000", `push: "tun-mtu-max" cannot be pushed (accepted: push comp-lzo|compress|rcvbuf|sndbuf|tun-mtu ARGS)`},
		{"x=push up /bin/sh", `push: "up" cannot be pushed`},
		{"x=push sndbuf 1\n", `push sndbuf: parameter "1\n" contains a control character`},
		{"x=peer:sndbuf 1", `"peer:sndbuf": only server: or client: may prefix a directive`},
		{"x=sndbuf 1;;rcvbuf 1", `variant "x": empty directive between ';'`},
		{"Bad=tun-mtu 1500", `variant "Bad": name must be 1-32 characters`},
		{"=tun-mtu 1500", `variant "": name must be`},
		{"default=tun-mtu 1400", `variant "default=tun-mtu 1400": default is a built-in variant`},
		{"nosuch", `variant "nosuch": not a built-in variant (default, aes256gcm, aes128gcm, chacha20, aes256cbc, none, jumbo)`},
		{"x=providers fips", `providers: unknown provider "fips"`},
		{"x=data-ciphers " + strings.Repeat("A", 300), `data-ciphers: parameter is 300 characters long, OpenVPN reads at most 255`},
	}
	for _, tt := range tests {
		_, err := ParseVariant(tt.in)
		if err == nil {
			t.Errorf("ParseVariant(%q) accepted", tt.in)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseVariant(%q)\n error %q\n want  %q", tt.in, err, tt.want)
		}
		if !usage.Is(err) {
			t.Errorf("ParseVariant(%q): %v is not a usage error", tt.in, err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseVariant(%q): error spans lines: %q", tt.in, err)
		}
	}
}

func TestBuiltinVariants(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"default":   "default=",
		"aes256gcm": "aes256gcm=data-ciphers AES-256-GCM",
		"aes128gcm": "aes128gcm=data-ciphers AES-128-GCM",
		"chacha20":  "chacha20=data-ciphers CHACHA20-POLY1305",
		"aes256cbc": "aes256cbc=data-ciphers AES-256-CBC;auth SHA256",
		"none":      "none=data-ciphers none;auth none;reneg-bytes 0",
		"jumbo":     "jumbo=tun-mtu 9000;mssfix 0",
	}
	vs := BuiltinVariants()
	if len(vs) != len(want) {
		t.Fatalf("%d built-in variants, want %d", len(vs), len(want))
	}
	for _, v := range vs {
		if v.String() != want[v.Name] {
			t.Errorf("%s = %q, want %q", v.Name, v.String(), want[v.Name])
		}
		if v.Description == "" {
			t.Errorf("%s has no description", v.Name)
		}
		got, err := ParseVariant(v.Name)
		if err != nil || !reflect.DeepEqual(got, v) {
			t.Errorf("ParseVariant(%q) = %v, %v", v.Name, got, err)
		}
	}
}

func TestVariantApply(t *testing.T) {
	t.Parallel()
	v, err := ParseVariant("x=tun-mtu 9000;shaper 1000;push sndbuf 2048;server:rcvbuf 4096")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Config{Directives: []Directive{D("tun-mtu", "1500"), D("verb", "3")}}
	cli := &Config{Directives: []Directive{D("verb", "3")}}
	v.Apply(srv, cli)
	wantSrv := []Directive{D("tun-mtu", "9000"), D("verb", "3"), D("push", "sndbuf 2048"), D("rcvbuf", "4096")}
	wantCli := []Directive{D("verb", "3"), D("tun-mtu", "9000"), D("shaper", "1000")}
	if !reflect.DeepEqual(srv.Directives, wantSrv) {
		t.Errorf("server %q", srv.Directives)
	}
	if !reflect.DeepEqual(cli.Directives, wantCli) {
		t.Errorf("client %q", cli.Directives)
	}
	// Every directive a variant can hold renders.
	if _, err := srv.Render(); err != nil {
		t.Error(err)
	}
}

func FuzzParseVariant(f *testing.F) {
	for _, s := range builtinVariants {
		f.Add("my" + s)
	}
	f.Add("x=tun-mtu 1500\nup /bin/sh")
	f.Add("x=push sndbuf 1;client:tun-mtu-max 9000")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVariant(s)
		if err != nil {
			if !usage.Is(err) {
				t.Fatalf("not a usage error: %v", err)
			}
			return
		}
		srv, cli := &Config{}, &Config{}
		v.Apply(srv, cli)
		for _, c := range []*Config{srv, cli} {
			out, err := c.Render()
			if err != nil {
				t.Fatalf("accepted variant %q does not render: %v", s, err)
			}
			back, err := ParseString(out)
			if err != nil || len(back.Directives) != len(c.Directives) {
				t.Fatalf("variant %q rendered %q which reads back as %v (%v)", s, out, back, err)
			}
			for _, d := range back.Directives {
				if _, ok := directiveTable[d.Name]; !ok && d.Name != "push" {
					t.Fatalf("variant %q smuggled directive %q", s, d.Name)
				}
			}
		}
	})
}

// OpenVPN's own limits are checked when the variant is read: a
// data-ciphers list over 124 characters (ssl_ncp.c) and a line over 254
// (options.c, OPTION_LINE_SIZE).
func TestParseVariantOpenVPNLimits(t *testing.T) {
	t.Parallel()
	long := strings.TrimSuffix(strings.Repeat("AES-256-GCM:", 11), ":") // 131 characters
	if _, err := ParseVariant("x=data-ciphers " + long); err == nil || !strings.Contains(err.Error(), "124") {
		t.Errorf("data-ciphers of %d characters: %v", len(long), err)
	}
	ok := strings.TrimSuffix(strings.Repeat("AES-256-GCM:", 10), ":") // 119 characters
	if _, err := ParseVariant("x=data-ciphers " + ok); err != nil {
		t.Errorf("data-ciphers of %d characters: %v", len(ok), err)
	}
	// The boundary, as openvpn 2.6.14 --data-ciphers showed it here: 124
	// characters start, 125 give "over the limit of 127 chars".
	if _, err := ParseVariant("x=data-ciphers " + ok + ":none"); err != nil {
		t.Errorf("data-ciphers of 124 characters: %v", err)
	}
	l125 := strings.Repeat("AES-256-GCM:", 9) + "CHACHA20-POLY1305"
	if _, err := ParseVariant("x=data-ciphers " + l125); err == nil {
		t.Errorf("data-ciphers of %d characters accepted", len(l125))
	}
}
