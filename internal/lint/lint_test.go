package lint

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/openvpn/openvpntest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// debianSamples are the configs Debian's openvpn package ships in
// /usr/share/doc/openvpn/examples/sample-config-files/ (copied into
// testdata so the test does not depend on an installed doc package).
var debianSamples = []string{"server.conf", "client.conf", "loopback-server", "loopback-client"}

// TestDebianSamples: every Debian sample config parses, and lint's
// findings on each are the reviewed golden file testdata/debian.golden.
func TestDebianSamples(t *testing.T) {
	var b strings.Builder
	for _, name := range debianSamples {
		f, err := openvpn.ReadConfigFile(filepath.Join("testdata", "debian", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fs := CheckConfig(f, Context{})
		fmt.Fprintf(&b, "== %s: %d directives\n%s", name, len(f.Directives), Text(fs))
	}
	golden := filepath.Join("testdata", "debian.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("findings differ from %s (review, then -update):\n%s", golden, b.String())
	}
	// The installed package's samples, when present, must parse too, and
	// be the ones the golden file was reviewed on.
	dir := "/usr/share/doc/openvpn/examples/sample-config-files"
	ents, err := os.ReadDir(dir)
	if err != nil {
		// scripts/install.sh installs them; a check that did not run is
		// a skip, which CI fails.
		testenv.SkipOrFail(t, "no installed samples (%v); testdata copies checked", err)
	}
	if len(ents) == 0 {
		t.Errorf("%s is empty: no installed sample checked", dir)
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".sh") || strings.HasPrefix(n, "README") {
			continue
		}
		if _, err := openvpn.ReadConfigFile(filepath.Join(dir, n)); err != nil {
			t.Errorf("installed sample %s: %v", n, err)
		}
		base := strings.TrimSuffix(n, ".gz")
		if _, err := os.Stat(filepath.Join("testdata", "debian", base)); err != nil {
			t.Errorf("installed sample %s has no reviewed copy in testdata/debian", n)
		}
	}
}

type want struct {
	file string
	line int
	rule string
}

// setupRules copies testdata/rules into a temporary directory with a real
// PKI beside it (so OpenVPN finds every file), a tls-auth key readable by
// others (key-file-mode) and the client's inline tls-crypt block filled
// with a real key when real is set.
func setupRules(t *testing.T, real bool) string {
	t.Helper()
	dir := t.TempDir()
	pki, err := openvpn.NewPKI(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"ca.crt", "server.crt", "server.key", "client.crt", "client.key"} {
		b, err := os.ReadFile(filepath.Join(pki.Dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tk, err := os.ReadFile(pki.TLSCrypt())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ta.key"), tk, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "ta.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"server.conf", "extra.conf", "client.conf"} {
		b, err := os.ReadFile(filepath.Join("testdata", "rules", n))
		if err != nil {
			t.Fatal(err)
		}
		if real && n == "client.conf" {
			b = bytes.Replace(b, []byte("-----BEGIN OpenVPN Static key V1-----\nSECRETSECRETSECRETSECRETSECRET\n-----END OpenVPN Static key V1-----\n"), tk, 1)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var serverCtx = Context{RTT: 200 * time.Millisecond, RateBitsPerSec: 100e6}
var clientCtx = Context{PathMTU: 1400}

func lintFile(t *testing.T, path string, ctx Context) (*openvpn.ConfigFile, []Finding) {
	t.Helper()
	f, err := openvpn.ReadConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f, CheckConfig(f, ctx)
}

func rules(fs []Finding) []want {
	var out []want
	for _, f := range fs {
		out = append(out, want{filepath.Base(f.File), f.Line, f.Rule})
	}
	return out
}

// TestEveryRule: the two configs in testdata/rules hold every config
// rule's trigger; each finding comes once, at its line.
func TestEveryRule(t *testing.T) {
	t.Parallel()
	dir := setupRules(t, false)
	_, sfs := lintFile(t, filepath.Join(dir, "server.conf"), serverCtx)
	_, cfs := lintFile(t, filepath.Join(dir, "client.conf"), clientCtx)
	got := append(rules(sfs), rules(cfs)...)
	wantList := []want{
		{"extra.conf", 2, "duplicate-cn"},
		{"server.conf", 3, "tcp-nodelay"},
		{"server.conf", 11, "key-file-mode"},
		{"server.conf", 11, "tls-auth"},
		{"server.conf", 13, "compression"},
		{"server.conf", 14, "weak-cipher"},
		{"server.conf", 15, "removed-option"},
		{"server.conf", 16, "deprecated-option"},
		{"server.conf", 17, "script-security"},
		{"server.conf", 18, "management-password"},
		{"server.conf", 19, "verb"},
		{"server.conf", 20, "socket-buffer"},
		{"server.conf", 21, "socket-buffer"},
		{"server.conf", 22, "fragment"},
		{"server.conf", 23, "fast-io"},
		{"server.conf", 24, "txqueuelen"},
		{"server.conf", 25, "unknown-option"},
		{"server.conf", 30, "unknown-inline-block"},
		{"client.conf", 2, "remote-cert-tls"},
		{"client.conf", 10, "cipher-without-data-ciphers"},
		{"client.conf", 11, "tun-mtu-path"},
		{"client.conf", 13, "socket-buffer"},
		{"client.conf", 14, "socket-buffer"},
	}
	key := func(w want) string { return fmt.Sprintf("%s:%d:%s", w.file, w.line, w.rule) }
	var g, w []string
	for _, x := range got {
		g = append(g, key(x))
	}
	for _, x := range wantList {
		w = append(w, key(x))
	}
	sort.Strings(g)
	sort.Strings(w)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s\n\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"), Text(append(sfs, cfs...)))
	}
	for _, f := range append(sfs, cfs...) {
		if f.Problem == "" || f.Reason == "" || f.Severity == "" || f.Category == "" {
			t.Errorf("incomplete finding %+v", f)
		}
	}
	if ExitStatus(sfs) != 3 || ExitStatus(cfs) != 1 {
		t.Errorf("exit status server %d client %d, want 3 and 1", ExitStatus(sfs), ExitStatus(cfs))
	}
}

// TestInlineKeyNeverPrinted: neither text, JSON nor any finding carries
// inline block text; the --fix copy keeps it (and is 0600).
func TestInlineKeyNeverPrinted(t *testing.T) {
	t.Parallel()
	dir := setupRules(t, false)
	f, fs := lintFile(t, filepath.Join(dir, "client.conf"), clientCtx)
	j, err := json.Marshal(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{Text(fs), string(j)} {
		if strings.Contains(out, "SECRET") || strings.Contains(out, "BEGIN OpenVPN") {
			t.Errorf("inline key material printed:\n%s", out)
		}
	}
	text, _ := Fix(f, fs)
	if !strings.Contains(text, "SECRETSECRET") {
		t.Errorf("--fix copy lost the inline block:\n%s", text)
	}
	out, err := WriteFix(f.Path, text)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s mode %v, want 0600", out, st.Mode().Perm())
	}
}

// TestFixLintsCleanAndOpenVPNAccepts (Must show 2): --fix output lints
// clean except for findings that need a decision, and OpenVPN 2.6 reads it
// past option parsing in a throw-away network namespace.
func TestFixLintsCleanAndOpenVPNAccepts(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "openvpn", "unshare", "ip")
	dir := setupRules(t, true)
	for _, c := range []struct {
		name string
		ctx  Context
	}{{"server.conf", serverCtx}, {"client.conf", clientCtx}} {
		t.Run(c.name, func(t *testing.T) {
			f, fs := lintFile(t, filepath.Join(dir, c.name), c.ctx)
			text, n := Fix(f, fs)
			if n == 0 {
				t.Fatal("no fix applied")
			}
			fixed, err := WriteFix(f.Path, text)
			if err != nil {
				t.Fatal(err)
			}
			_, after := lintFile(t, fixed, c.ctx)
			for _, a := range after {
				if !a.Decision {
					t.Errorf("after --fix still: %s:%d %s: %s", a.File, a.Line, a.Rule, a.Problem)
				}
			}
			openvpntest.CheckParses(t, dir, fixed)
		})
	}
}

// TestLintLogsCaptured (Must show 3): the real logs internal/openvpn's
// TestLintLogsLive captured from OpenVPN 2.6.14.
func TestLintLogsCaptured(t *testing.T) {
	t.Parallel()
	cfg, err := openvpn.ParseConfigText("server.conf", []byte("sndbuf 16777216\nrcvbuf 16777216\ncomp-lzo yes\n"))
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join("..", "openvpn", "testdata", "logs")
	for _, c := range []struct {
		log  string
		cfg  *openvpn.ConfigFile
		want []want
	}{
		{"lint-capped-mismatch-server.log", cfg, []want{
			{"", 1, "log-compression"},
			{"", 5, "log-dco"},
			{"", 13, "log-buffer-capped"},
			{"", 13, "log-buffer-capped"},
			{"", 41, "log-cipher-mismatch"},
		}},
		{"lint-capped-mismatch-client.log", nil, []want{
			{"", 4, "log-dco"},
			{"", 21, "log-cipher-mismatch"},
		}},
	} {
		t.Run(c.log, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(logs, c.log))
			if err != nil {
				t.Fatal(err)
			}
			// The same log as journalctl shows it must give the same.
			var j strings.Builder
			for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
				j.WriteString("Nov 23 10:26:28 vpn ovpn-server[4242]: " + openvpn.StripTimestamp(l) + "\n")
			}
			for _, in := range []string{string(b), j.String()} {
				rep, err := openvpn.ScanLog(strings.NewReader(in))
				if err != nil {
					t.Fatal(err)
				}
				fs := CheckLog(rep, c.log, c.cfg, Context{})
				var got []want
				for _, f := range fs {
					got = append(got, want{"", f.Line, f.Rule})
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("findings %v, want %v\n%s", got, c.want, Text(fs))
				}
			}
		})
	}
}

// FuzzLint: any config text that parses can be linted and fixed without a
// panic; the fixed text parses again; inline block text never reaches the
// findings.
func FuzzLint(f *testing.F) {
	for _, p := range []string{"testdata/rules/server.conf", "testdata/rules/client.conf", "testdata/debian/loopback-client", "testdata/debian/server.conf"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatalf("seed: %v", err)
		}
		f.Add(string(b), 1400)
	}
	f.Add("<tls-auth>\nKEYKEY\n</tls-auth>\ncomp-lzo\nproto tcp\nfragment 1\n", 0)
	f.Fuzz(func(t *testing.T, s string, pmtu int) {
		cf, err := openvpn.ParseConfigText("f.conf", []byte(s))
		if err != nil {
			return
		}
		fs := CheckConfig(cf, Context{PathMTU: pmtu % 10000, RTT: 50 * time.Millisecond, RateBitsPerSec: 1e8})
		text, _ := Fix(cf, fs)
		if _, err := openvpn.ParseConfigText("f.conf.lint-fixed", []byte(text)); err != nil {
			t.Fatalf("fixed text does not parse: %v\n%s", err, text)
		}
		out := Text(fs)
		j, _ := json.Marshal(fs)
		for _, d := range cf.Directives {
			for _, l := range strings.Split(d.Body, "\n") {
				if len(l) >= 12 && (strings.Contains(out, l) || strings.Contains(string(j), l)) {
					t.Fatalf("inline text %q printed", l)
				}
			}
		}
	})
}

// TestLogEventsFromSourceFormats: the log lines lint has no captured
// example of yet, written in the formats OpenVPN 2.6.14's source prints
// them (forward.c, crypto.c, init.c, dco.c), with journalctl prefixes.
// Constructed, not captured: they test the matching, not OpenVPN.
func TestLogEventsFromSourceFormats(t *testing.T) {
	t.Parallel()
	lines := []string{
		"OpenVPN 2.6.14 x86_64-pc-linux-gnu [SSL (OpenSSL)] [LZO] [LZ4] [EPOLL] [PKCS11] [MH/PKTINFO] [AEAD] [DCO]",
		"Socket Buffers: R=[212992->131072] S=[212992->131072]",
		"TCP/UDP packet too large on write to [AF_INET]192.0.2.1:1194 (tried=1600,max=1500)",
		"AEAD Decrypt error: bad packet ID (may be a replay): [ #5 ] -- see the man page entry for --no-replay and --replay-window for more info or silence this warning with --mute-replay-warnings",
		"AEAD Decrypt error: bad packet ID (may be a replay): [ #7 ] -- see the man page entry for --no-replay and --replay-window for more info or silence this warning with --mute-replay-warnings",
		"Connection reset, restarting [0]",
		"Restart pause, 5 second(s)",
		"Connection reset, restarting [0]",
		"Restart pause, 10 second(s)",
		"Connection reset, restarting [0]",
		"Data Channel: cipher 'BF-CBC', auth 'SHA1', peer-id: 0",
		"net_iface_mtu_set: mtu 1500 for tun0",
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("Nov 23 10:00:00 vpn openvpn[99]: " + l + "\n")
	}
	rep, err := openvpn.ScanLog(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	// A TCP server whose fixed 64 KiB buffers are in force: below the
	// path's BDP, the one case the shared buffer rule warns about.
	cfg, err := openvpn.ParseConfigText("s.conf", []byte("proto tcp-server\nsndbuf 65536\nrcvbuf 65536\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := Context{RTT: 100 * time.Millisecond, RateBitsPerSec: 50e6, PathMTU: 1492}
	fs := CheckLog(rep, "j", cfg, ctx)
	// The same log of a UDP tunnel, or without the config: no buffer
	// finding (advise leaves UDP buffers at the OS default).
	for _, c := range []*openvpn.ConfigFile{nil, mustParse(t, "proto udp\n")} {
		for _, f := range CheckLog(rep, "j", c, ctx) {
			if f.Rule == "log-buffer-small" {
				t.Errorf("config %v: %s", c != nil, f.Problem)
			}
		}
	}
	got := map[string]int{}
	for _, f := range fs {
		got[f.Rule] = f.Line
	}
	want := map[string]int{"log-buffer-small": 2, "log-packet-too-large": 3, "log-replay": 4, "log-restarts": 6, "log-data-cipher": 11, "log-mtu": 12}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("findings %v, want %v\n%s", got, want, Text(fs))
	}
}

// TestRuleBranches covers the branches the every-rule configs cannot hold
// at once (UDP vs TCP, with and without path context).
func TestRuleBranches(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, conf string
		ctx        Context
		want       string // "rule:line:severity:decision" joined by spaces
	}{
		{"fragment udp, no pmtu", "proto udp\nfragment 1400\n", Context{}, "fragment:2:warning:true"},
		{"fragment udp, path carries it", "proto udp\nfragment 1400\n", Context{PathMTU: 1600}, "fragment:2:warning:false"},
		{"fragment udp, small path", "proto udp\nfragment 1400\n", Context{PathMTU: 1400}, "fragment:2:warning:true"},
		{"fast-io with shaper", "fast-io\nshaper 1000\n", Context{}, "fast-io:1:info:false"},
		{"fast-io udp is fine", "proto udp\nfast-io\n", Context{}, ""},
		{"txqueuelen slow link", "txqueuelen 100\n", Context{RateBitsPerSec: 10e6}, ""},
		{"txqueuelen no rate", "txqueuelen 100\n", Context{}, "txqueuelen:1:info:false"},
		{"sndbuf 0 keeps rcvbuf", "sndbuf 0\nrcvbuf 1048576\n", Context{}, "socket-buffer:1:info:false socket-buffer:2:info:true"},
		{"buffers large enough", "proto tcp\nsndbuf 1048576\nrcvbuf 1048576\n", Context{RTT: 10 * time.Millisecond, RateBitsPerSec: 100e6}, ""},
		{"tcp buffers asymmetric", "proto tcp\nsndbuf 1048576\nrcvbuf 524288\n", Context{}, "socket-buffer-asymmetric:2:info:false"},
		// Over UDP a buffer below the BDP is no window limit: lint leaves
		// the OS default as advise does, never raises it to the BDP.
		{"udp buffers below BDP", "sndbuf 65536\nrcvbuf 65536\n", Context{RTT: 300 * time.Millisecond, RateBitsPerSec: 100e6}, "socket-buffer:1:info:false socket-buffer:2:info:false"},
		{"tcp buffers below BDP", "proto tcp\nsndbuf 65536\nrcvbuf 65536\n", Context{RTT: 300 * time.Millisecond, RateBitsPerSec: 100e6}, "socket-buffer:2:warning:false socket-buffer:3:warning:false"},
		{"jumbo small buffers", "tun-mtu 9000\nmssfix 0\nsndbuf 524288\nrcvbuf 524288\n", Context{}, "tun-mtu-path:1:info:false socket-buffer:3:info:false socket-buffer:4:info:false"},
		// advise's own jumbo lines for a fast clean path: no warning.
		{"advised jumbo", "tun-mtu 9000\nmssfix 0\nsndbuf 4194304\nrcvbuf 4194304\n", Context{RTT: time.Millisecond, RateBitsPerSec: 10e9, PathMTU: 1500}, ""},
		// The same lines on a slow path, where advise gives no jumbo tunnel.
		{"jumbo on a slow path", "tun-mtu 9000\nmssfix 0\n", Context{RTT: time.Millisecond, RateBitsPerSec: 10e6, PathMTU: 1500}, "tun-mtu-path:1:warning:false"},
		// An unencrypted data channel, in each mode.
		{"static key cipher none auth none", "secret s.key\ncipher none\nauth none\n", Context{}, "deprecated-option:1:warning:true no-encryption:2:error:true no-authentication:3:error:true"},
		{"p2p tls cipher none", "tls-client\ncipher none\nauth none\n", Context{}, "no-encryption:2:error:true no-authentication:3:error:true"},
		{"client cipher none ignored", "client\nremote-cert-tls server\ncipher none\n", Context{}, "no-encryption:3:warning:true"},
		{"data-ciphers none", "client\nremote-cert-tls server\ndata-ciphers AES-256-GCM:none\n", Context{}, "no-encryption:3:error:true"},
		{"auth none with CBC", "client\nremote-cert-tls server\ndata-ciphers AES-256-GCM:AES-256-CBC\nauth none\n", Context{}, "no-authentication:4:error:true"},
		{"auth none AEAD only", "client\nremote-cert-tls server\nauth none\n", Context{}, ""},
		{"old peers no cipher", "client\nremote-cert-tls server\nns-cert-type server\n", Context{}, "deprecated-option:3:warning:false old-peer-cipher:3:info:true"},
		{"old peers with fallback", "client\nremote-cert-tls server\nns-cert-type server\ndata-ciphers-fallback AES-256-CBC\n", Context{}, "deprecated-option:3:warning:false"},
		{"tun-mtu fits with mssfix default", "tun-mtu 1500\n", Context{PathMTU: 1500}, "tun-mtu-path:1:info:true"},
		{"tun-mtu needs mssfix", "tun-mtu 1500\n", Context{PathMTU: 1400}, "tun-mtu-path:1:warning:false"},
		{"jumbo without pmtu", "tun-mtu 9000\n", Context{}, "tun-mtu-path:1:info:false"},
		{"management unix", "management /run/x.sock unix\n", Context{}, ""},
		{"management public", "management 0.0.0.0 7505\n", Context{}, "management-password:1:error:true"},
		{"ignored unknown", "ignore-unknown-option foo\nfoo 1\n", Context{}, "unknown-option:2:info:false"},
		{"weak data-ciphers", "data-ciphers AES-256-GCM:BF-CBC\n", Context{}, "weak-cipher:1:error:false"},
		{"static key BF", "secret s.key\ncipher BF-CBC\n", Context{}, "deprecated-option:1:warning:true weak-cipher:2:error:true"},
		{"allow-compression yes", "allow-compression yes\n", Context{}, "compression:1:warning:false"},
		{"pushed compression", "server 10.8.0.0 255.255.255.0\npush \"comp-lzo no\"\n", Context{}, "compression:2:warning:true"},
		{"script-security 3 via-env", "script-security 3\nauth-user-pass-verify /x via-env\n", Context{}, "script-security:1:warning:true"},
		{"ncp-ciphers rename", "ncp-ciphers AES-256-GCM\n", Context{}, "deprecated-option:1:warning:false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := openvpn.ParseConfigText("t.conf", []byte(c.conf))
			if err != nil {
				t.Fatal(err)
			}
			fs := CheckConfig(f, c.ctx)
			var got []string
			for _, x := range fs {
				got = append(got, fmt.Sprintf("%s:%d:%s:%v", x.Rule, x.Line, x.Severity, x.Decision))
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("got %q, want %q\n%s", strings.Join(got, " "), c.want, Text(fs))
			}
			if c.name == "sndbuf 0 keeps rcvbuf" {
				text, _ := Fix(f, fs)
				if !strings.Contains(text, "\nrcvbuf 1048576\n") {
					t.Errorf("fix dropped rcvbuf:\n%s", text)
				}
			}
		})
	}
}

func TestWeakCipherP2P(t *testing.T) {
	t.Parallel()
	f, err := openvpn.ParseConfigText("p.conf", []byte("tls-client\ncipher BF-CBC\n"))
	if err != nil {
		t.Fatal(err)
	}
	fs := CheckConfig(f, Context{})
	if len(fs) != 1 || fs[0].Rule != "weak-cipher" || !fs[0].Decision || fs[0].Edits[0].Replace[0] != "cipher AES-256-GCM" {
		t.Errorf("p2p BF-CBC: %s", Text(fs))
	}
}

func mustParse(t *testing.T, text string) *openvpn.ConfigFile {
	t.Helper()
	f, err := openvpn.ParseConfigText("t.conf", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A config that includes a file which is no config (a hostile
// `config /etc/shadow`) gets one finding naming that file, and no output
// format shows a byte of its text; an included config that is one keeps
// its findings.
func TestIncludedNotConfigNotShown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("shadow", "# a comment first: the finding names the first directive's line\nroot:$y$j9T$Qsaltsalt$hashhashhash:20228:0:99999:7:::\nalice:$6$rounds$abc:20228::::::\n", 0o640)
	write("more.conf", "verb 7\nbogus-option 1\n", 0o644)
	top := write("client.conf", "client\ndev tun\nremote vpn.example.net 1194\nconfig shadow\nconfig more.conf\n", 0o644)
	f, fs := lintFile(t, top, clientCtx)
	fs = Redact(fs, f)
	var notConfig, bogus int
	for _, x := range fs {
		if x.Rule == "not-a-config" {
			notConfig++
			if filepath.Base(x.File) != "shadow" || x.Line != 2 {
				t.Errorf("not-a-config at %s:%d", x.File, x.Line)
			}
		}
		if filepath.Base(x.File) == "more.conf" && x.Rule == "unknown-option" && strings.Contains(x.Problem, "bogus-option") {
			bogus++
		}
	}
	if notConfig != 1 || bogus != 1 {
		t.Errorf("%d not-a-config findings (want 1), %d for more.conf's unknown option (want 1):\n%s", notConfig, bogus, Text(fs))
	}
	j, err := json.Marshal(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{Text(fs), string(j)} {
		for _, leak := range []string{"root", "alice", "20228", "j9T", "rounds"} {
			if strings.Contains(out, leak) {
				t.Errorf("included non-config's text %q printed:\n%s", leak, out)
			}
		}
	}
}
