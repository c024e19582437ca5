package lint

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// A fix counts as applied only when one of its edits went into the copy:
// not when another finding's edit already took its line, nor when the
// lines it appends were already appended.
func TestFixCountsOnlyAppliedEdits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "c.conf")
	if err := os.WriteFile(p, []byte("client\ncipher BF-CBC\nverb 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := openvpn.ReadConfigFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fs := []Finding{
		{Rule: "a", Edits: []Edit{{File: p, Line: 2, Replace: []string{"data-ciphers AES-256-GCM"}}}},
		{Rule: "b", Edits: []Edit{{File: p, Line: 2, Delete: true}}},
		{Rule: "c", Edits: []Edit{{File: p, Append: []string{"remote-cert-tls server"}}}},
		{Rule: "d", Edits: []Edit{{File: p, Append: []string{"remote-cert-tls server"}}}},
		{Rule: "e", Edits: []Edit{{File: p, Line: 3, Replace: []string{"verb 4"}}}, Decision: true},
	}
	text, n := Fix(f, fs)
	if n != 2 {
		t.Errorf("applied %d fixes, want 2 (a and c; b's line was taken by a, d's line appended by c, e needs a decision):\n%s", n, text)
	}
	if !strings.Contains(text, "data-ciphers AES-256-GCM") || strings.Count(text, "remote-cert-tls server") != 1 {
		t.Errorf("fixed text:\n%s", text)
	}
}

// The chmod command of key-file-mode, pasted into sh, fixes exactly the
// file named, whatever characters its name holds.
func TestKeyFileChmodIsPasteable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "it's a key")
	if err := os.WriteFile(key, []byte("k\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "c.conf")
	if err := os.WriteFile(conf, []byte("client\nremote-cert-tls server\nkey \"it's a key\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := openvpn.ReadConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	var action string
	for _, fd := range CheckConfig(f, Context{}) {
		if fd.Rule == "key-file-mode" {
			action = fd.Action
		}
	}
	if action == "" {
		t.Fatal("no key-file-mode finding for a 0644 key")
	}
	if out, err := exec.Command("sh", "-c", action).CombinedOutput(); err != nil {
		t.Fatalf("pasting %q: %v\n%s", action, err, out)
	}
	if st, _ := os.Stat(key); st.Mode().Perm() != 0o600 {
		t.Fatalf("after %q the key has mode %v", action, st.Mode())
	}
}
