package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/advise"
	"github.com/ovpnperf/ovpnperf/internal/tune"
)

// shWords returns the words sh makes of line (after variable, quote and
// escape processing), as the user who pastes it would get them.
func shWords(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", "set -f; for a in "+line+"; do printf '%s\\0' \"$a\"; done").Output()
	if err != nil {
		t.Fatalf("sh refused %q: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// after returns the word following flag in words.
func after(words []string, flag string) string {
	for i, w := range words {
		if w == flag && i+1 < len(words) {
			return words[i+1]
		}
	}
	return ""
}

// A key file whose name holds a space and a quote: the chmod command the
// usage error tells the user to run, pasted into sh, fixes exactly that
// file.
func TestPastedChmodFromPPSKeyError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "my 'pps' key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readKeyFile("--key-file", key)
	if err == nil {
		t.Fatal("a 0644 key was accepted")
	}
	msg := err.Error()
	i := strings.Index(msg, "run chmod 600 ")
	if i < 0 {
		t.Fatalf("no chmod command in %q", msg)
	}
	cmd := msg[i+len("run "):]
	if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
		t.Fatalf("pasting %q: %v\n%s", cmd, err, out)
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("after pasting %q: %v, %v", cmd, st.Mode(), err)
	}
}

// tune's "best: ovpnperf lab run …" line gives lab run the variant the
// search found, whatever characters it holds.
func TestPastedTuneBestLine(t *testing.T) {
	t.Parallel()
	variant := "best=tun-mtu 9000;mssfix 0;setenv NOTE it's \"x\""
	res := &tune.Result{Verdict: tune.Verdict{Found: true, Message: "found"},
		Best: tune.Best{Name: "best", Proto: "udp", Variant: variant}}
	var buf bytes.Buffer
	printTune(&buf, res, "--rate 20mbit --rtt 200ms")
	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(l, "best: ") {
			line = strings.TrimPrefix(l, "best: ")
		}
	}
	words := shWords(t, line)
	if got := after(words, "--variant"); got != variant {
		t.Fatalf("sh gives --variant %q, want %q (line %q)", got, variant, line)
	}
	if after(words, "--rtt") != "200ms" {
		t.Fatalf("path flags lost: %q", words)
	}
}

// advise's "test it:" line, pasted, gives lab run advise's variant.
func TestPastedAdviseTestLine(t *testing.T) {
	t.Parallel()
	a, err := advise.Advise(advise.Input{Proto: "udp", RateBitsPerSec: 1e9, RTT: 100000, PathMTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	a.Variant += ";setenv NOTE it's"
	var buf bytes.Buffer
	writeAdvice(&buf, a)
	_, line, ok := strings.Cut(buf.String(), "test it: ")
	if !ok {
		t.Fatalf("no test line:\n%s", buf.String())
	}
	line, _, _ = strings.Cut(line, "\n")
	if got := after(shWords(t, line), "--variant"); got != a.Variant {
		t.Fatalf("sh gives --variant %q, want %q", got, a.Variant)
	}
}
