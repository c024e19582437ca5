package openvpn

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{in: "verb 3", want: []string{"verb", "3"}},
		{in: "  \tverb   3  ", want: []string{"verb", "3"}},
		{in: "# comment", want: nil},
		{in: "; comment", want: nil},
		{in: "verb 3 # trailing comment", want: []string{"verb", "3"}},
		{in: "verb 3 ;trailing", want: []string{"verb", "3"}},
		{in: "dev a#b", want: []string{"dev", "a#b"}},
		{in: `push "route 10.0.0.0 255.0.0.0"`, want: []string{"push", "route 10.0.0.0 255.0.0.0"}},
		{in: `setenv X 'a "b" \c'`, want: []string{"setenv", "X", `a "b" \c`}},
		{in: `cd "C:\\Program Files"`, want: []string{"cd", `C:\Program Files`}},
		{in: `x a\ b`, want: []string{"x", "a b"}},
		{in: `x \"q\"`, want: []string{"x", `"q"`}},
		{in: `x ""`, want: []string{"x", ""}},
		{in: `x "a"b`, want: []string{"x", "a", "b"}},
		{in: `x a"b`, want: []string{"x", `a"b`}},
		{in: `x "a \" b"`, want: []string{"x", `a " b`}},
		{in: `x \#notcomment`, want: []string{"x"}}, // OpenVPN: '#' starts a comment even after '\'
		{in: `x \n`, err: "bad backslash"},
		{in: `x "abc`, err: "no closing quotation"},
		{in: `x 'abc`, err: "no closing single quotation"},
		{in: `x abc\`, err: "backslash"},
		{in: "x " + strings.Repeat("a", 255), want: []string{"x", strings.Repeat("a", 255)}},
		{in: "x " + strings.Repeat("a", 256), err: "too long"},
	}
	for _, tt := range tests {
		got, err := parseLine(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseLine(%q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseLine(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	in := "\xef\xbb\xbf# client config\r\n" +
		"--client\n" +
		"remote 192.0.2.1 1194 udp\n" +
		"\n" +
		"<ca>\n" +
		"-----BEGIN CERTIFICATE-----\n" +
		"MIIB\r\n" +
		"-----END CERTIFICATE-----\n" +
		"  </ca>\n" +
		"<connection>\n" +
		"remote 192.0.2.2\n" +
		"</connection>\n" +
		"verb 3\n"
	c, err := ParseString(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Directive{
		D("client"),
		D("remote", "192.0.2.1", "1194", "udp"),
		{Name: "ca", Inline: true, Body: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
		{Name: "connection", Inline: true, Body: "remote 192.0.2.2\n"},
		D("verb", "3"),
	}
	if !reflect.DeepEqual(c.Directives, want) {
		t.Errorf("got  %#v\nwant %#v", c.Directives, want)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, err string }{
		{"verb 3\n<ca>\nabc\n", "line 2: end tag </ca> missing"},
		{"verb 3\n</key>\n", "line 2: end tag </key> without its start tag <key>"},
		{"a " + strings.Repeat("b ", 20) + "\n", "parameters"},
		{strings.Repeat("a", 255) + "\n", "line 1: line is 255 characters long"},
		{"x \"a\x00\"\n", "NUL"},
		{"ok\nx \\q\n", "line 2: bad backslash"},
	}
	for _, tt := range tests {
		_, err := ParseString(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Parse(%q) error %v, want %q", tt.in, err, tt.err)
		}
	}
}

func TestRenderRefusesSmuggling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d   Directive
		err string
	}{
		{D("tun-mtu", "1500\nup /bin/sh"), "control character"},
		{D("tun-mtu", "1500\rup"), "control character"},
		{D("dev", "a\x00b"), "control character"},
		{D("dev", "a\tb"), "control character"},
		{D("dev", `a"b`), "quote"},
		{D("dev", `a'b`), "quote"},
		{D("dev", `a\b`), "backslash"},
		{D("dev", strings.Repeat("x", 256)), "at most 255"},
		{D("setenv", strings.Repeat("x", 200), strings.Repeat("y", 60)), "line is"},
		{D("tun-mtu\nup"), "directive name"},
		{D("Verb", "3"), "directive name"},
		{D("--verb", "3"), "directive name"},
		{D(""), "directive name"},
		{D("a", strings.Split(strings.Repeat("x ", 16), " ")[:16]...), "parameters"},
		{Directive{Name: "ca", Inline: true, Body: "x\n</ca>\nup /bin/sh\n"}, "end tag"},
		{Directive{Name: "ca", Inline: true, Body: "x\n \t</ca>\n"}, "end tag"},
		{Directive{Name: "ca", Inline: true, Body: "x"}, "newline"},
		{Directive{Name: "ca", Inline: true, Body: "x\r\n"}, "CR"},
		{Directive{Name: "ca", Inline: true, Body: strings.Repeat("x", 255) + "\n"}, "longer"},
		{Directive{Name: "ca", Inline: true, Args: []string{"x"}}, "parameters"},
		{Directive{Name: "ca", Body: "x\n"}, "not an inline block"},
	}
	for _, tt := range tests {
		c := &Config{Directives: []Directive{D("verb", "3"), tt.d}}
		_, err := c.Render()
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Render(%q) error %v, want %q", tt.d.String(), err, tt.err)
		}
		if err != nil && !strings.Contains(err.Error(), "config line 2") {
			t.Errorf("Render error %q does not name the line", err)
		}
	}
}

func TestRenderQuoting(t *testing.T) {
	t.Parallel()
	c := &Config{Directives: []Directive{
		D("push", "route 10.0.0.0 255.0.0.0"),
		D("x", "", "#a", ";b", "c#d"),
		{Name: "ca", Inline: true, Body: "line1\n</cax>\n"},
		{Name: "tls-crypt", Inline: true},
	}}
	got, err := c.Render()
	if err != nil {
		t.Fatal(err)
	}
	want := "push \"route 10.0.0.0 255.0.0.0\"\nx \"\" \"#a\" \";b\" c#d\n<ca>\nline1\n</cax>\n</ca>\n<tls-crypt>\n</tls-crypt>\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	back, err := ParseString(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip: %#v", back.Directives)
	}
}

func TestConfigSet(t *testing.T) {
	t.Parallel()
	c := &Config{}
	c.Add("verb", "3")
	c.Add("push", "sndbuf 1")
	c.Add("push", "rcvbuf 1")
	c.Add("verb", "4")
	c.Set(D("verb", "5"))
	c.Set(D("push", "sndbuf 2"))
	c.Set(D("mssfix", "0"))
	want := []Directive{D("verb", "5"), D("push", "sndbuf 2"), D("push", "rcvbuf 1"), D("mssfix", "0")}
	if !reflect.DeepEqual(c.Directives, want) {
		t.Errorf("got %q", c.Directives)
	}
	if d, ok := c.Get("push"); !ok || d.Args[0] != "rcvbuf 1" {
		t.Errorf("Get(push) = %v", d)
	}
	cl := c.Clone()
	cl.Directives[0].Args[0] = "9"
	if c.Directives[0].Args[0] != "5" {
		t.Error("Clone shares argument slices")
	}
	c.Remove("push")
	if len(c.Directives) != 2 {
		t.Errorf("Remove: %q", c.Directives)
	}
}

// FuzzConfigRoundTrip: whatever Parse accepts and Render then renders,
// Parse must read back unchanged; and Render's output never holds more
// directives than the config had (no smuggling).
func FuzzConfigRoundTrip(f *testing.F) {
	for _, s := range []string{
		"verb 3\n",
		"push \"route 10.0.0.0 255.0.0.0\"\n",
		"<ca>\nabc\n</ca>\n",
		"x \"\" '#' \\\"a\\\" a\\ b\n",
		"tun-mtu 1500 # c\n; x\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := ParseString(in)
		if err != nil {
			return
		}
		out, err := c.Render()
		if err != nil {
			return
		}
		back, err := ParseString(out)
		if err != nil {
			t.Fatalf("Parse(Render(c)) failed: %v\nrendered:\n%s", err, out)
		}
		if len(back.Directives) != len(c.Directives) {
			t.Fatalf("round trip changed the number of directives: %d -> %d\n%s", len(c.Directives), len(back.Directives), out)
		}
		for i := range c.Directives {
			a, b := c.Directives[i], back.Directives[i]
			if a.Name != b.Name || a.Inline != b.Inline || a.Body != b.Body || strings.Join(a.Args, "\x00") != strings.Join(b.Args, "\x00") || len(a.Args) != len(b.Args) {
				t.Fatalf("directive %d: %#v became %#v", i, a, b)
			}
		}
	})
}

// FuzzRenderDirective builds directives from arbitrary values: Render
// either refuses them or produces text that parses back to exactly them.
func FuzzRenderDirective(f *testing.F) {
	f.Add("tun-mtu", "1500", "", false)
	f.Add("push", "sndbuf 393216", "x", false)
	f.Add("tun-mtu", "1500\nup /bin/sh", "", false)
	f.Add("ca", "", "-----BEGIN-----\n</ca>\nup x\n", true)
	f.Fuzz(func(t *testing.T, name, arg1, arg2 string, inline bool) {
		var d Directive
		if inline {
			d = Directive{Name: name, Inline: true, Body: arg2}
		} else {
			d = D(name, arg1, arg2)
		}
		c := &Config{Directives: []Directive{d, D("verb", "3")}}
		out, err := c.Render()
		if err != nil {
			return
		}
		back, err := ParseString(out)
		if err != nil {
			t.Fatalf("rendered text does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip %#v -> %#v\n%s", c.Directives, back.Directives, out)
		}
	})
}

// Comments finds what OpenVPN takes for a comment: not text in quotes,
// in a word or in an inline block.
func TestComments(t *testing.T) {
	t.Parallel()
	lines := []string{
		"# a comment line",
		"verb 3 ; trailing",
		`setenv X "# quoted"`,
		"setenv X a#word",
		"<ca>",
		"# pem data",
		"</ca>",
		"  ;indented",
		`x \#after-backslash`,
		`bad "unclosed # quote`,
	}
	wantC := []string{"# a comment line", "; trailing", "", "", "", "", "", ";indented", "#after-backslash", ""}
	wantCode := []bool{false, true, false, false, false, false, false, false, true, false}
	c, code := Comments(lines)
	for i := range lines {
		if c[i] != wantC[i] || code[i] != wantCode[i] {
			t.Errorf("line %q: comment %q after code %v, want %q, %v", lines[i], c[i], code[i], wantC[i], wantCode[i])
		}
	}
}
