package openvpn

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfigTextPositions(t *testing.T) {
	t.Parallel()
	text := "# comment\n  --proto udp ; trailing\n\tremote \"my host\" 1194\n<ca>\nPEM\n</ca>\nstatus 'a b#c' 5 # x\nkey-direction 1\n"
	f, err := ParseConfigText("c.ovpn", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name      string
		args      []string
		line, col int
	}{
		{"proto", []string{"udp"}, 2, 3},
		{"remote", []string{"my host", "1194"}, 3, 2},
		{"ca", nil, 4, 1},
		{"status", []string{"a b#c", "5"}, 7, 1},
		{"key-direction", []string{"1"}, 8, 1},
	}
	if len(f.Directives) != len(want) {
		t.Fatalf("got %d directives: %+v", len(f.Directives), f.Directives)
	}
	for i, w := range want {
		d := f.Directives[i]
		if d.Name != w.name || strings.Join(d.Args, "|") != strings.Join(w.args, "|") || d.Pos.Line != w.line || d.Pos.Col != w.col || d.Pos.File != "c.ovpn" {
			t.Errorf("directive %d = %s %q at %v, want %s %q at %d:%d", i, d.Name, d.Args, d.Pos, w.name, w.args, w.line, w.col)
		}
	}
	if f.Directives[2].EndLine != 6 || f.Directives[2].Body != "PEM\n" {
		t.Errorf("inline block %+v", f.Directives[2])
	}
	// The same text through the old API gives the same directives.
	c, err := ParseString(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Directives) != len(f.Directives) {
		t.Errorf("Parse and ParseConfigText disagree: %d vs %d", len(c.Directives), len(f.Directives))
	}
}

func TestParseConfigTextErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"verb 3\nremote \"a\n", "x.conf:2:10: no closing quotation"},
		{"ok\nx \\q\n", "x.conf:2:3: bad backslash"},
		{"verb 3\n<ca>\nabc\n", "x.conf:2:1: end tag </ca> missing"},
		{"verb 3\n  </key>\n", "x.conf:2:3: end tag </key> without its start tag <key>"},
		{"a 'b\n", "x.conf:1:5: no closing single quotation"},
	} {
		_, err := ParseConfigText("x.conf", []byte(c.in))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: error %v, want prefix %q", c.in, err, c.want)
		}
	}
}

func TestReadConfigFileIncludes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("main.conf", "verb 3\nconfig sub/a.conf\nmute 5\n")
	write("sub/a.conf", "# a\nproto tcp\n")
	f, err := ReadConfigFile(filepath.Join(dir, "main.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range f.Directives {
		got = append(got, d.Name+"@"+filepath.Base(d.Pos.File)+":"+string(rune('0'+d.Pos.Line)))
	}
	if strings.Join(got, " ") != "verb@main.conf:1 config@main.conf:2 proto@a.conf:2 mute@main.conf:3" {
		t.Errorf("directives %v", got)
	}

	write("loop1.conf", "verb 3\nconfig loop2.conf\n")
	write("loop2.conf", "\nconfig loop1.conf\n")
	_, err = ReadConfigFile(filepath.Join(dir, "loop1.conf"))
	var perr *ParseError
	if !errors.As(err, &perr) || filepath.Base(perr.File) != "loop2.conf" || perr.Line != 2 || !strings.Contains(perr.Msg, "loop") {
		t.Errorf("loop: %v", err)
	}
	write("missing.conf", "config nothere.conf\n")
	if _, err := ReadConfigFile(filepath.Join(dir, "missing.conf")); err == nil || !strings.Contains(err.Error(), "missing.conf:1:1: cannot read included config") {
		t.Errorf("missing include: %v", err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("verb 4\n"))
	zw.Close()
	write("z.conf.gz", gz.String())
	if f, err := ReadConfigFile(filepath.Join(dir, "z.conf.gz")); err != nil || len(f.Directives) != 1 || f.Directives[0].Args[0] != "4" {
		t.Errorf("gzip: %v %+v", err, f)
	}
}

func TestOptionTables(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"tun-mtu", "data-ciphers", "key-direction", "config", "tls-crypt-v2", "disable-dco"} {
		if !KnownOption26(n) {
			t.Errorf("%s should be a 2.6 option", n)
		}
	}
	for n, st := range removedOptions {
		if st.Removed && KnownOption26(n) && !strings.Contains(st.Note, "options.c 2.6") {
			t.Errorf("%s: in 2.6's option list but marked removed without citing options.c's refusal", n)
		}
		if !st.Removed && !KnownOption26(n) {
			t.Errorf("%s: marked deprecated (still read) but 2.6 does not know it", n)
		}
	}
}

// FuzzParseConfigText: the reader never panics, positions are inside the
// text, and every directive it returns is one Parse returns too.
func FuzzParseConfigText(f *testing.F) {
	for _, s := range []string{"verb 3\n", "<ca>\nx\n</ca>\n", "remote \"a b\" 1 # c\n", "--dev tun\n", "a \\\\ \\\" \\ b\n", "config x\n"} {
		f.Add(s)
	}
	for _, p := range []string{"../lint/testdata/rules/server.conf", "../lint/testdata/debian/loopback-client"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatalf("seed: %v", err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		cf, err := ParseConfigText("f", []byte(s))
		c, err2 := ParseString(s)
		if (err == nil) != (err2 == nil) {
			// Parse reads with a line scanner; it agrees except on text
			// the scanner cannot split (over 16 MiB lines).
			t.Fatalf("ParseConfigText err %v, Parse err %v", err, err2)
		}
		if err != nil {
			return
		}
		n := strings.Count(s, "\n") + 1
		if len(cf.Directives) != len(c.Directives) {
			t.Fatalf("%d vs %d directives", len(cf.Directives), len(c.Directives))
		}
		for i, d := range cf.Directives {
			if d.Pos.Line < 1 || d.Pos.Line > n || d.Pos.Col < 1 || d.EndLine < d.Pos.Line {
				t.Fatalf("bad position %+v", d.Pos)
			}
			if d.Name != c.Directives[i].Name || strings.Join(d.Args, "\x00") != strings.Join(c.Directives[i].Args, "\x00") {
				t.Fatalf("directive %d: %+v vs %+v", i, d.Directive, c.Directives[i])
			}
		}
	})
}

// FuzzScanLog: the log scanner never panics and numbers events within the
// input.
func FuzzScanLog(f *testing.F) {
	for _, p := range []string{"testdata/logs/lint-capped-mismatch-server.log", "testdata/logs/lint-capped-mismatch-client.log"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatalf("seed: %v", err)
		}
		f.Add(string(b))
	}
	f.Add("Nov 23 10:26:28 vpn ovpn-server[1]: Socket Buffers: R=[1->2] S=[3->4]\n")
	f.Fuzz(func(t *testing.T, s string) {
		rep, err := ScanLog(strings.NewReader(s))
		if err != nil {
			return
		}
		n := strings.Count(s, "\n") + 1
		for _, e := range rep.Events {
			if e.Line < 1 || e.Line > n {
				t.Fatalf("event line %d of %d", e.Line, n)
			}
		}
		if len(rep.SocketBufferLines) != len(rep.SocketBuffers) {
			t.Fatalf("%d buffer lines for %d buffers", len(rep.SocketBufferLines), len(rep.SocketBuffers))
		}
	})
}
