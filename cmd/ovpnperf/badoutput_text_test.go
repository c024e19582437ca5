package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// lintJSON runs lint --json on a config of text and decodes the report.
func lintSuppressJSON(t *testing.T, text string) (findings int, suppressed int) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.conf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	r := ovpnperf(t, "lint", "--json", p)
	if r.code == 2 {
		t.Fatalf("lint: %s", r.stderr)
	}
	var doc struct {
		Findings   []json.RawMessage `json:"findings"`
		Suppressed int               `json:"suppressed"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	return len(doc.Findings), doc.Suppressed
}

// A suppression is a comment as OpenVPN reads the file: the same text in
// a quoted parameter, in the middle of a word or in an inline block's
// data is data and suppresses nothing. Real comments still do.
func TestLintSuppressionOnlyInComments(t *testing.T) {
	const base = "client\ndev tun\nremote 192.0.2.1 1194\ncomp-lzo\n"
	const sup = "ovpnperf-lint: disable-file=all"
	for _, c := range []struct {
		name string
		text string
		want bool // suppressed
	}{
		{"double-quoted parameter", base + `setenv X "# ` + sup + `"` + "\n", false},
		{"single-quoted parameter", base + `setenv X '; ` + sup + `'` + "\n", false},
		{"inside a word", base + "setenv X a#" + sup + "\n", false},
		{"escaped space inside a parameter", base + `setenv X a\ #` + sup + "\n", false},
		{"inline <ca> block", base + "<ca>\n# " + sup + "\n</ca>\n", false},
		{"inline <tls-auth> block, ';' line", base + "<tls-auth>\n; " + sup + "\n</tls-auth>\n", false},
		{"indented line in an inline block", base + "<ca>\n   # " + sup + "\n</ca>\n", false},
		{"comment line", "# " + sup + "\n" + base, true},
		{"';' comment line", "; " + sup + "\n" + base, true},
		{"indented comment line", "   # " + sup + "\n" + base, true},
		{"trailing comment after an option", base + "verb 3 # " + sup + "\n", true},
		{"comment line after an inline block", base + "<ca>\nx\n</ca>\n# " + sup + "\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, s := lintSuppressJSON(t, c.text)
			if c.want && (s == 0 || n != 0) {
				t.Errorf("%d findings, %d suppressed: want all suppressed", n, s)
			}
			if !c.want && (s != 0 || n == 0) {
				t.Errorf("%d findings, %d suppressed: want none suppressed", n, s)
			}
		})
	}
	// The line form follows the same rule: a comment on its own line
	// covers the next line, text in a parameter covers nothing.
	n, s := lintSuppressJSON(t, "client\ndev tun\nremote 192.0.2.1 1194\nsetenv X \"# ovpnperf-lint: disable=all\"\ncomp-lzo\n")
	if s != 0 || n == 0 {
		t.Errorf("disable=all in a parameter: %d findings, %d suppressed", n, s)
	}
}

// SARIF file locations are URI references: a space, '#', '%', '?' or a
// non-ASCII character in a file name is percent-encoded, and the URI reads
// back as the name.
func TestLintSARIFURIsEncoded(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"my vpn.conf", "a#b.conf", "100%.conf", "q?x.conf", "ünï.conf", "c:d.conf"} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte("client\ndev tun\nremote 192.0.2.1 1194\ncomp-lzo\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			r := ovpnperf(t, "lint", "--format", "sarif", p)
			var doc struct {
				Runs []struct {
					Results []struct {
						Locations []struct {
							PhysicalLocation struct {
								ArtifactLocation struct {
									URI string `json:"uri"`
								} `json:"artifactLocation"`
							} `json:"physicalLocation"`
						} `json:"locations"`
					} `json:"results"`
				} `json:"runs"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Runs) == 0 || len(doc.Runs[0].Results) == 0 {
				t.Fatalf("%v: exit %d\n%s%s", err, r.code, r.stdout, r.stderr)
			}
			for _, res := range doc.Runs[0].Results {
				uri := res.Locations[0].PhysicalLocation.ArtifactLocation.URI
				u, err := url.Parse(uri)
				if err != nil || u.Scheme != "" || u.Fragment != "" || u.RawQuery != "" || u.Path != p {
					t.Errorf("uri %q reads back as %+v (%v), want path %q", uri, u, err, p)
				}
				if strings.ContainsFunc(uri, func(r rune) bool { return r > unicode.MaxASCII || r == ' ' }) {
					t.Errorf("uri %q holds a character a URI cannot", uri)
				}
			}
		})
	}
}

// HTML written to a file goes through the filter stdout does: a control
// character or a text-direction override from a document (a variant name,
// a host's CPU model) is escaped, not written raw (report -o, compare
// --html; lab run, measure, tune and recipe --html write with the same
// renderer).
func TestHTMLEscapesControls(t *testing.T) {
	dir := t.TempDir()
	doc := `{"schema":"ovpnperf/run/v2","scenario":{"command":"recipe mtu","networks":[{"name":"lan"}]},"host":{"cpu_model":"CPU\u0007\u001b]0;owned\u0007"},"rows":[` +
		`{"network":"lan","variant":"exe.\u202efdp\u0085\u001b[2J","path":"tunnel","direction":"up","proto":"udp","samples_bps":[1,2,3],"median_bps":2,"min_bps":1,"max_bps":3,"valid":true}]}`
	in := filepath.Join(dir, "doc.json")
	if err := os.WriteFile(in, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out  string
		args []string
	}{
		{"report.html", []string{"report", in, "-o", filepath.Join(dir, "report.html")}},
		{"compare.html", []string{"compare", in, in, "--html", filepath.Join(dir, "compare.html")}},
		{"stdout", []string{"report", in}},
	} {
		t.Run(c.out, func(t *testing.T) {
			r := ovpnperf(t, c.args...)
			if r.code == 2 {
				t.Fatalf("%v: %s", c.args, r.stderr)
			}
			page := r.stdout
			if c.out != "stdout" {
				b, err := os.ReadFile(filepath.Join(dir, c.out))
				if err != nil {
					t.Fatal(err)
				}
				page = string(b)
			}
			for _, bad := range []string{"\x1b", "\x07", "\u202e", "\u0085"} {
				if strings.Contains(page, bad) {
					t.Errorf("the page holds a raw %q", bad)
				}
			}
			if !strings.Contains(page, `\u202e`) || !strings.Contains(page, `\x1b`) {
				t.Errorf("the page does not show the escaped characters")
			}
		})
	}
}

// advise predicts nothing the loss it is given rules out: at 100 % loss
// nothing gets through (ceiling 0), and above the range of the Mathis
// formula the loss term is marked as an upper bound, not a prediction.
func TestAdviseLossCeiling(t *testing.T) {
	type ceiling struct {
		BitsPerSec     float64 `json:"bits_per_sec"`
		Binding        string  `json:"binding"`
		BindingAssumed bool    `json:"binding_assumed"`
	}
	run := func(loss string) ceiling {
		r := ovpnperf(t, "advise", "--rate", "100mbit", "--rtt", "20ms", "--loss", loss, "--json").mustSucceed(t)
		var doc struct {
			Ceilings []ceiling `json:"ceilings"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Ceilings) != 1 {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		return doc.Ceilings[0]
	}
	for _, loss := range []string{"100%", "100"} {
		if c := run(loss); c.BitsPerSec != 0 || !strings.Contains(c.Binding, "every packet") {
			t.Errorf("--loss %s: ceiling %+v, want 0 bound by the loss", loss, c)
		}
	}
	for _, loss := range []string{"20%", "50%", "99.9%"} {
		if c := run(loss); c.BitsPerSec <= 0 || !c.BindingAssumed {
			t.Errorf("--loss %s: ceiling %+v, want an upper bound marked as such", loss, c)
		}
	}
	if c := run("1%"); c.BitsPerSec <= 0 || c.BindingAssumed {
		t.Errorf("--loss 1%%: ceiling %+v, want Mathis's figure as a prediction", c)
	}
	if r := ovpnperf(t, "advise", "--rate", "100mbit", "--rtt", "20ms", "--loss", "100%").mustSucceed(t); !strings.Contains(r.stdout, "each direction: 0.0 Mbit/s, bound by loss (every packet is lost)") {
		t.Errorf("text output does not give the 0 ceiling:\n%s", r.stdout)
	}
}

// A probe document without a path is refused whether "path" is missing,
// null, or not an object.
func TestAdviseProbePathMissingOrNull(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"missing": `{"schema":"ovpnperf/probe/v1","host":"198.51.100.2"}`,
		"null":    `{"schema":"ovpnperf/probe/v1","host":"198.51.100.2","path":null}`,
		"spaces":  `{"schema":"ovpnperf/probe/v1","host":"198.51.100.2","path":  null  }`,
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name+".json")
			if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			ovpnperf(t, "advise", "--probe", p).mustBeUsageError(t, `no "path" object`)
		})
	}
	for name, doc := range map[string]string{
		"number": `{"schema":"ovpnperf/probe/v1","host":"198.51.100.2","path":5}`,
		"list":   `{"schema":"ovpnperf/probe/v1","host":"198.51.100.2","path":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name+".json")
			if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			ovpnperf(t, "advise", "--probe", p).mustBeUsageError(t, "path")
		})
	}
}

// checkWording fails a message that says a word (letters only: a path
// may well be named twice) twice in a row ("a device device") or repeats its prefix ("--pid 5: --pid 5: …"): every
// usage error goes through it (mustBeUsageError).
func checkWording(t *testing.T, msg string) {
	t.Helper()
	msg = strings.TrimSpace(strings.TrimPrefix(msg, "ovpnperf: "))
	words := strings.FieldsFunc(msg, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(`,;:()"'`, r) })
	for i := 1; i < len(words); i++ {
		w := words[i]
		if strings.EqualFold(w, words[i-1]) && len(w) > 1 && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) < 0 {
			t.Errorf("%q says %q twice in a row", msg, w)
		}
	}
	parts := strings.Split(msg, ": ")
	for i := 1; i < len(parts); i++ {
		if parts[i] == parts[i-1] || strings.HasPrefix(parts[i], parts[i-1]+" ") {
			t.Errorf("%q repeats %q", msg, parts[i-1])
		}
	}
}

// A zone on a target address (fe80::1%eth0) names the interface of a
// link-local address: one naming no interface, or on an address that is
// not link-local, is refused, before anything is sent.
func TestTargetZones(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pmtu", "fe80::1%nosuchif0"}, `no interface "nosuchif0"`},
		{[]string{"pmtu", "fe80::1%99999"}, `no interface "99999"`},
		{[]string{"pmtu", "2001:db8::1%lo"}, "link-local"},
		{[]string{"pmtu", "::ffff:192.0.2.1%lo"}, "link-local"},
		{[]string{"pps", "client", "fe80::1%nosuchif0"}, `no interface "nosuchif0"`},
		{[]string{"pps", "client", "2001:db8::1%lo"}, "link-local"},
		{[]string{"measure", "fe80::1%nosuchif0", "--tunnel", "10.8.0.1"}, `no interface "nosuchif0"`},
		{[]string{"measure", "192.0.2.1", "--tunnel", "fe80::1%nosuchif0"}, `no interface "nosuchif0"`},
		{[]string{"probe", "fe80::1%nosuchif0"}, `no interface "nosuchif0"`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
		})
	}
}

// mutateRows loads the recorded ciphers recipe result, applies f to each
// row (as decoded JSON) and writes it to a temporary file.
func mutateRows(t *testing.T, f func(i int, row map[string]any)) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "internal", "recipe", "testdata", "recorded", "ciphers-*.json"))
	if len(files) == 0 {
		t.Fatal("no recorded ciphers result")
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for i, r := range doc["rows"].([]any) {
		f(i, r.(map[string]any))
	}
	out, _ := json.Marshal(doc)
	p := filepath.Join(t.TempDir(), "mutated.json")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A document whose two lists of the same samples disagree, or whose
// median, min or max are not its samples', is refused by every reader
// (recipe judge, report, compare): a table drawn from one list and a
// verdict from the other would contradict each other.
func TestContradictingSamplesRefused(t *testing.T) {
	// withSeries gives a row the per-sample series its samples_bps have
	// (the recorded result predates them).
	withSeries := func(row map[string]any) []any {
		var series []any
		for _, v := range row["samples_bps"].([]any) {
			series = append(series, map[string]any{"bps": v})
		}
		row["samples"] = series
		return series
	}
	cases := []struct {
		name string
		file string
		want string
	}{
		{"samples_bps differs from samples[].bps", mutateRows(t, func(i int, row map[string]any) {
			if i == 1 {
				withSeries(row)
				row["samples_bps"].([]any)[0] = 1.0
			}
		}), "samples[0].bps"},
		{"one sample more in samples_bps", mutateRows(t, func(i int, row map[string]any) {
			if i == 0 {
				withSeries(row)
				row["samples_bps"] = append(row["samples_bps"].([]any), 5e6)
			}
		}), "samples_bps"},
		{"series rate differs", mutateRows(t, func(i int, row map[string]any) {
			if i == 2 {
				withSeries(row)[1].(map[string]any)["bps"] = 1.0
			}
		}), "samples[1].bps"},
		{"median not the samples'", mutateRows(t, func(i int, row map[string]any) {
			if i == 0 {
				row["median_bps"] = 1e12
			}
		}), "median_bps = 1e+12"},
		{"max not the samples'", mutateRows(t, func(i int, row map[string]any) {
			if i == 0 {
				row["max_bps"] = 1.0
			}
		}), "max_bps = 1"},
	}
	for _, c := range cases {
		for _, cmd := range [][]string{{"recipe", "judge", c.file}, {"report", c.file}, {"compare", c.file, c.file}} {
			t.Run(c.name+"/"+cmd[0], func(t *testing.T) {
				ovpnperf(t, cmd...).mustBeUsageError(t, c.want)
			})
		}
	}
}

// Samples of 0 bit/s are judged for what they are: a verdict that needs a
// ratio to a baseline of zeros says no ratio can be taken, not that it has
// too few samples, and quotes no ratio (×0.00) where there is none. Every
// recorded recipe result, with every rate set to 0.
func TestJudgeZeroSamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "internal", "recipe", "testdata", "recorded", "*.json"))
	if len(files) == 0 {
		t.Fatal("no recorded results")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			docs, ok := v.([]any)
			if !ok {
				docs = []any{v}
			}
			for _, d := range docs {
				for _, r := range d.(map[string]any)["rows"].([]any) {
					row := r.(map[string]any)
					s := row["samples_bps"].([]any)
					for j := range s {
						s[j] = 0.0
					}
					delete(row, "samples")
					row["median_bps"], row["min_bps"], row["max_bps"] = 0.0, 0.0, 0.0
					delete(row, "ratio_to_routed")
				}
			}
			out, _ := json.Marshal(v)
			p := filepath.Join(t.TempDir(), "zero.json")
			if err := os.WriteFile(p, out, 0o600); err != nil {
				t.Fatal(err)
			}
			// The verdicts' data: no verdict with enough samples is
			// called short of them, and a baseline of 0 bit/s is judged
			// for what it is (no ratio can be taken to 0), not as too few
			// samples.
			js := ovpnperf(t, "recipe", "judge", p, "--json")
			if js.code != 0 {
				t.Fatalf("recipe judge --json: exit %d: %s", js.code, js.stderr)
			}
			var doc any
			if err := json.Unmarshal([]byte(js.stdout), &doc); err != nil {
				t.Fatal(err)
			}
			reps, ok := doc.([]any)
			if !ok {
				reps = []any{doc}
			}
			zeroBaseline := 0
			for _, d := range reps {
				vs, _ := d.(map[string]any)["verdicts"].([]any)
				for _, x := range vs {
					v := x.(map[string]any)
					figs, _ := v["figures"].(map[string]any)
					switch v["basis"] {
					case measure.VerdictBasisTooFew:
						n, has := figs["samples"].(float64)
						if need, _ := figs["samples_needed"].(float64); has && n >= need {
							t.Errorf("enough samples called too few: %v", v)
						}
					case measure.VerdictBasisZeroBaseline:
						zeroBaseline++
						if z, _ := figs["zero_baseline_samples"].(float64); z == 0 {
							t.Errorf("zero baseline without its zero samples: %v", v)
						}
					}
				}
			}
			if strings.Contains(f, "ciphers") && zeroBaseline == 0 {
				t.Errorf("no verdict judged on a baseline of 0 bit/s:\n%s", js.stdout)
			}
			// The text renders no ratio between two sides of 0 bit/s (a
			// test of the rendering, ratioText and verdict.Ratio's String:
			// 0 against a bound above 0 is a ratio, ×0.00).
			r := ovpnperf(t, "recipe", "judge", p)
			if r.code == 2 {
				t.Fatalf("refused: %s", r.stderr)
			}
			for _, line := range strings.Split(r.stdout, "\n") {
				if strings.Count(line, "0 Mbit/s (0–0)") >= 2 && strings.Contains(line, "×0.0") {
					t.Errorf("a ratio of 0 bit/s to 0 bit/s: %s", line)
				}
			}
		})
	}
}

// measure's errors about the tunnel and --pid say each thing once: a
// plain device is not "a device device", and --pid's error does not
// repeat the flag (checkWording, in mustBeUsageError). Needs root (measure
// refuses to run without it) and iperf3; nothing is sent.
func TestMeasureProcessMessages(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "iperf3")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"measure", "127.0.0.1", "--tunnel", "127.0.0.2"}, "lo (a network device, not a tun device)"},
		{[]string{"measure", "127.0.0.1", "--tunnel", "127.0.0.2", "--pid", "4194303"}, "--pid: pid 4194303: no such process"},
		{[]string{"measure", "::1", "--tunnel", "fe80::1%lo"}, "no route to fe80::1%lo"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
		})
	}
}
