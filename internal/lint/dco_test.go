package lint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

func lintText(t *testing.T, name, text, target string) []Finding {
	t.Helper()
	f, err := openvpn.ParseConfigText(name, []byte(text))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return CheckConfig(f, Context{Target: target})
}

func dcoFindings(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Rule == "dco-off" {
			out = append(out, f)
		}
	}
	return out
}

const (
	clientBase = "client\ndev tun\nremote vpn.example.net 1194\nremote-cert-tls server\n"
	serverBase = "dev tun\nca ca.crt\ncert s.crt\nkey s.key\ndh none\ntopology subnet\nserver 10.8.0.0 255.255.255.0\n"
	p2pBase    = "dev tun\nremote 198.51.100.2\nifconfig 10.4.0.1 10.4.0.2\n"
)

// TestDCOEveryOption: for each option that turns DCO off on Linux, a
// config with just that option added gets one dco-off finding naming the
// option, the OpenVPN version and the deciding source line at the release
// tag (v2.6.14 for 2.6, v2.7.6 for 2.7: dco.Tag26, dco.Tag27); the same
// config without it gets none.
func TestDCOEveryOption(t *testing.T) {
	t.Parallel()
	if dco.Tag26 != "v2.6.14" || dco.Tag27 != "v2.7.6" {
		t.Fatalf("rules read at %s and %s; this table was written against v2.6.14 and v2.7.6", dco.Tag26, dco.Tag27)
	}
	cases := []struct {
		rule, without, with string
		targets             []string // where it turns DCO off
		line                int
	}{
		{"fragment", clientBase, clientBase + "fragment 1300\n", []string{"2.6", "2.7"}, 5},
		{"fragment", clientBase, clientBase + "<connection>\nremote b.example.net\nfragment 1300\n</connection>\n", []string{"2.6", "2.7"}, 7},
		{"http-proxy", clientBase, clientBase + "http-proxy proxy.example.net 3128\n", []string{"2.6", "2.7"}, 5},
		{"socks-proxy", clientBase, clientBase + "socks-proxy 127.0.0.1 1080\n", []string{"2.6", "2.7"}, 5},
		{"management-query-proxy", clientBase, clientBase + "management /run/m.sock unix\nmanagement-query-proxy\n", []string{"2.6", "2.7"}, 6},
		{"mktun", clientBase, clientBase + "mktun\n", []string{"2.6", "2.7"}, 5},
		{"disable-dco", clientBase, clientBase + "disable-dco\n", []string{"2.6", "2.7"}, 5},
		{"user", clientBase, clientBase + "user nobody\n", []string{"2.6", "2.7"}, 5},
		{"data-ciphers-fallback", clientBase, clientBase + "data-ciphers-fallback AES-256-CBC\n", []string{"2.6", "2.7"}, 5},
		{"data-ciphers", clientBase, clientBase + "data-ciphers AES-256-GCM:AES-256-CBC\n", []string{"2.6", "2.7"}, 5},
		{"data-ciphers", clientBase, clientBase + "data-ciphers AES-256-GCM:none\n", []string{"2.6", "2.7"}, 5},
		{"compression", clientBase, clientBase + "comp-lzo no\n", []string{"2.6", "2.7"}, 5},
		{"compression", clientBase, clientBase + "compress lz4-v2\n", []string{"2.6", "2.7"}, 5},
		{"compression", clientBase, clientBase + "compress stub-v2\n", []string{"2.6", "2.7"}, 5},
		{"compression", clientBase, clientBase + "allow-compression asym\n", []string{"2.6", "2.7"}, 5},
		{"compression", clientBase, clientBase + "allow-compression yes\n", []string{"2.6", "2.7"}, 5},
		{"dev-type", clientBase, strings.Replace(clientBase, "dev tun", "dev tap", 1), []string{"2.6", "2.7"}, 2},
		{"dev-type", clientBase, clientBase + "dev-type tap\n", []string{"2.6", "2.7"}, 5},
		{"dev-null", clientBase, strings.Replace(clientBase, "dev tun", "dev null", 1), []string{"2.6", "2.7"}, 2},
		{"dev-node-unix", clientBase, clientBase + "dev-node unix:/run/lwipovpn\n", []string{"2.7"}, 5},
		{"no-tls", p2pBase + "tls-client\n", p2pBase + "secret static.key\n", []string{"2.6", "2.7"}, 4},
		{"topology", serverBase, strings.Replace(serverBase, "topology subnet", "topology net30", 1), []string{"2.6", "2.7"}, 6},
		{"topology", serverBase, strings.Replace(serverBase, "topology subnet\n", "", 1), []string{"2.6"}, 6},
		{"push-compression", serverBase, serverBase + "push \"compress lz4-v2\"\n", []string{"2.6", "2.7"}, 8},
		{"push-compression", serverBase, serverBase + "push \"comp-lzo no\"\n", []string{"2.6", "2.7"}, 8},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		for _, target := range []string{dco.V26, dco.V27} {
			name := fmt.Sprintf("%s/%s", c.rule, target)
			if got := dcoFindings(lintText(t, "without.conf", c.without, target)); len(got) != 0 {
				t.Errorf("%s: without the option: %v", name, got)
			}
			got := dcoFindings(lintText(t, "with.conf", c.with, target))
			applies := false
			for _, x := range c.targets {
				applies = applies || x == target
			}
			if !applies {
				if len(got) != 0 {
					t.Errorf("%s: OpenVPN %s keeps DCO on, but lint says %v", name, target, got)
				}
				continue
			}
			covered[c.rule] = true
			if len(got) != 1 {
				t.Errorf("%s: want one dco-off finding, got %d: %+v", name, len(got), got)
				continue
			}
			f := got[0]
			src := dco.Rules()[c.rule].Sources[target]
			tag := map[string]string{dco.V26: "v2.6.14", dco.V27: "v2.7.6"}[target]
			if f.Line != c.line || !strings.Contains(f.Problem, "OpenVPN "+target) || !strings.Contains(f.Reason, src.String()) || !strings.Contains(f.Reason, tag) {
				t.Errorf("%s: finding at line %d (want %d) does not name OpenVPN %s and %s:\n%s\n%s", name, f.Line, c.line, target, src, f.Problem, f.Reason)
			}
		}
	}
	// dh: 2.6 refuses a TLS server without it; 2.7 defaults to dh none.
	noDH := strings.Replace(serverBase, "dh none\n", "", 1)
	for target, want := range map[string]int{dco.V26: 1, dco.V27: 0} {
		n := 0
		for _, f := range lintText(t, "nodh.conf", noDH, target) {
			if f.Rule == "dh-missing" {
				n++
			}
		}
		if n != want {
			t.Errorf("server without dh, --target %s: %d dh-missing findings, want %d", target, n, want)
		}
	}
	// Every config rule of the dco package is exercised (kernel, build
	// and interface-exists are the host's, probed by ovpnperf probe).
	for id := range dco.Rules() {
		switch id {
		case "kernel", "build", "interface-exists":
			continue
		}
		if !covered[id] {
			t.Errorf("dco rule %s has no test case", id)
		}
	}
}

// TestTarget27Findings: with --target 2.7 the 2.7 changes are findings
// where they apply (compression, secret, topology, dh, persist-key,
// fast-io, reneg) and nowhere else; the full output for Debian's samples,
// the rules testdata and testdata/target is the reviewed golden file
// testdata/target.golden, for both targets.
func TestTarget27Findings(t *testing.T) {
	t.Parallel()
	want27 := map[string][]string{
		"debian/server.conf":          {"v27-dh", "v27-persist-key"},
		"debian/client.conf":          {"v27-persist-key"},
		"debian/loopback-server":      {"v27-dh"},
		"debian/loopback-client":      nil,
		"rules/server.conf":           {"v27-compression", "v27-fast-io"},
		"rules/client.conf":           nil,
		"target/static-p2p.conf":      {"v27-secret"},
		"target/net30-server.conf":    {"v27-compression", "v27-dh", "v27-fast-io", "v27-persist-key", "v27-topology"},
		"target/compress-client.conf": {"v27-compression", "v27-compression", "v27-reneg"},
		"target/modern-server.conf":   nil,
	}
	var files []string
	for f := range want27 {
		files = append(files, f)
	}
	sort.Strings(files)
	var golden strings.Builder
	for _, target := range []string{dco.V26, dco.V27} {
		for _, name := range files {
			cf, err := openvpn.ReadConfigFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			fs := CheckConfig(cf, Context{Target: target})
			fmt.Fprintf(&golden, "== --target %s %s\n%s", target, name, GCC(fs))
			var got []string
			for _, f := range fs {
				if strings.HasPrefix(f.Rule, "v27-") {
					got = append(got, f.Rule)
				}
			}
			sort.Strings(got)
			want := want27[name]
			if target == dco.V26 {
				want = nil
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("--target %s %s: 2.7 findings %v, want %v", target, name, got, want)
			}
		}
	}
	checkGolden(t, filepath.Join("testdata", "target.golden"), golden.String())
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (review, then -update):\n%s", path, got)
	}
}

func mixedFindings(t *testing.T) (*openvpn.ConfigFile, []Finding) {
	t.Helper()
	cf, err := openvpn.ReadConfigFile(filepath.Join("testdata", "target", "net30-server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	fs := CheckConfig(cf, Context{Target: dco.V26})
	fs = append(fs, Finding{Rule: "log-dco", Severity: Warning, Category: Performance, File: "stdin", Line: 3, Problem: "DCO off because of fragment: Note: --fragment disables data channel offload.", Reason: "r"})
	return cf, fs
}

// TestSARIFValidates: --format sarif output validates against the SARIF
// 2.1.0 JSON schema (OASIS sarif-spec sarif-2.1/schema/sarif-schema-2.1.0.json,
// shipped in testdata/sarif) and carries ruleId, region.startLine and the
// rule's help text.
func TestSARIFValidates(t *testing.T) {
	t.Parallel()
	_, fs := mixedFindings(t)
	out, err := SARIF(fs, "")
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(filepath.Join("testdata", "sarif", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("SARIF does not validate: %v\n%s", err, out)
	}
	// The schema accepts a broken document too if the fields we promise
	// are missing: check them.
	var doc struct {
		Runs []struct {
			Tool struct {
				Driver struct {
					Rules []struct {
						ID   string                `json:"id"`
						Help struct{ Text string } `json:"help"`
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string } `json:"artifactLocation"`
						Region           struct {
							StartLine int `json:"startLine"`
						} `json:"region"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 1 || len(doc.Runs[0].Results) != len(fs) {
		t.Fatalf("want one run with %d results:\n%s", len(fs), out)
	}
	help := map[string]string{}
	for _, r := range doc.Runs[0].Tool.Driver.Rules {
		help[r.ID] = r.Help.Text
	}
	for i, r := range doc.Runs[0].Results {
		loc := r.Locations[0].PhysicalLocation
		if r.RuleID != fs[i].Rule || loc.Region.StartLine != max(fs[i].Line, 1) || loc.ArtifactLocation.URI != fs[i].File {
			t.Errorf("result %d: %+v, finding %+v", i, r, fs[i])
		}
		if !strings.HasPrefix(help[r.RuleID], Rules()[r.RuleID].Help) || Rules()[r.RuleID].Help == "" {
			t.Errorf("rule %s: help %q", r.RuleID, help[r.RuleID])
		}
	}
}

// TestGCCFormat: every line parses as file:line:col: severity: message [rule].
func TestGCCFormat(t *testing.T) {
	t.Parallel()
	_, fs := mixedFindings(t)
	lines := strings.Split(strings.TrimSuffix(GCC(fs), "\n"), "\n")
	if len(lines) != len(fs) {
		t.Fatalf("%d lines for %d findings", len(lines), len(fs))
	}
	for i, l := range lines {
		m := GCCLineRE().FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line %q does not match %v", l, GCCLineRE())
			continue
		}
		if m[1] != fs[i].File || m[2] != fmt.Sprint(max(fs[i].Line, 1)) || m[4] != fs[i].Severity || m[6] != fs[i].Rule {
			t.Errorf("line %q for finding %+v", l, fs[i])
		}
	}
}

// TestSuppression: a comment on a finding's line or the line before
// removes exactly that finding (by rule), the file-level form removes the
// rule in the whole file, and nothing else goes.
func TestSuppression(t *testing.T) {
	t.Parallel()
	base := serverBase + "fragment 1300\nuser nobody\ncompress lz4-v2\n"
	run := func(text string) (keep, dropped []Finding) {
		cf, err := openvpn.ParseConfigText("s.conf", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return Suppressed(CheckConfig(cf, Context{Target: dco.V26}), map[string][]string{"s.conf": strings.Split(text, "\n")})
	}
	all, none := run(base)
	if len(none) != 0 {
		t.Fatalf("suppressed without comments: %v", none)
	}
	key := func(f Finding) string { return fmt.Sprintf("%s:%d", f.Rule, f.Line) }
	keys := func(fs []Finding) []string {
		var out []string
		for _, f := range fs {
			out = append(out, key(f))
		}
		return out
	}
	cases := []struct {
		name, text string
		drop       []string
	}{
		{"same line", strings.Replace(base, "fragment 1300\n", "fragment 1300 # ovpnperf-lint: disable=dco-off\n", 1), []string{"dco-off:8"}},
		{"line before", strings.Replace(base, "fragment 1300\n", "# ovpnperf-lint: disable=dco-off\nfragment 1300\n", 1), []string{"dco-off:9"}},
		{"other rule on the line", strings.Replace(base, "fragment 1300\n", "fragment 1300 ; ovpnperf-lint: disable=fragment\n", 1), []string{"fragment:8"}},
		{"two rules", strings.Replace(base, "compress lz4-v2\n", "compress lz4-v2 # ovpnperf-lint: disable=dco-off,compression\n", 1), []string{"compression:10", "dco-off:10"}},
		{"file", "# ovpnperf-lint: disable-file=dco-off\n" + base, []string{"dco-off:10", "dco-off:11", "dco-off:9"}},
	}
	for _, c := range cases {
		keep, dropped := run(c.text)
		got := keys(dropped)
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(c.drop, " ") {
			t.Errorf("%s: dropped %v, want %v", c.name, got, c.drop)
		}
		if len(keep)+len(dropped) != len(all) {
			t.Errorf("%s: %d kept + %d dropped, %d without comments", c.name, len(keep), len(dropped), len(all))
		}
	}
}

var ruleLitRE = regexp.MustCompile(`Rule: +"([a-z0-9-]+)"`)

// TestRuleCatalog: every rule the code can report is documented.
func TestRuleCatalog(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "../../cmd/ovpnperf"} {
		ents, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, p := range ents {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			b, _ := os.ReadFile(p)
			for _, m := range ruleLitRE.FindAllStringSubmatch(string(b), -1) {
				if _, ok := Rules()[m[1]]; !ok {
					t.Errorf("%s: rule %q is not in Rules (format.go) nor docs/lint.md's list", p, m[1])
				}
			}
		}
	}
	doc, err := os.ReadFile("../../docs/lint.md")
	if err != nil {
		t.Fatal(err)
	}
	for id := range Rules() {
		if !strings.Contains(string(doc), "`"+id+"`") {
			t.Errorf("rule %s is not listed in docs/lint.md", id)
		}
	}
}

// TestLogDCOReason: in real OpenVPN 2.6.14 logs (captured on this
// project's kernel, which lacks the DCO driver: a client with fragment,
// and the same client without it), the reason DCO is off is the
// finding's subject.
func TestLogDCOReason(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		log, subject string
		line         int
	}{
		{"fragment-client.log", "DCO off because of fragment: ", 2},
		{"kernel-client.log", "DCO off because the kernel has no DCO support: ", 2},
	} {
		f, err := os.Open(filepath.Join("testdata", "dco-logs", c.log))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := openvpn.ScanLog(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var got []Finding
		for _, fd := range CheckLog(rep, c.log, nil, Context{}) {
			if fd.Rule == "log-dco" {
				got = append(got, fd)
			}
		}
		if len(got) != 1 || !strings.HasPrefix(got[0].Problem, c.subject) || got[0].Line != c.line || got[0].Severity != Warning || !strings.Contains(got[0].Reason, "at v2.6.14") {
			t.Errorf("%s: log-dco findings %+v", c.log, got)
		}
	}
}
