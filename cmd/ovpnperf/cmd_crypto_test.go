package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

func TestCryptoUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"crypto", "--seconds", "0"}, "--seconds"},
		{[]string{"crypto", "--seconds", "NaN"}, "--seconds"},
		{[]string{"crypto", "--seconds", "1e9"}, "--seconds"},
		{[]string{"crypto", "--repeat", "0"}, "--repeat"},
		{[]string{"crypto", "--ciphers", "AES-192-GCM"}, "unknown cipher"},
		{[]string{"crypto", "--ciphers", "aes-256-gcm;rm"}, "unknown cipher"},
		{[]string{"crypto", "--sizes", "8"}, `--sizes "8"`},
		{[]string{"crypto", "--packet-bytes", "100000"}, `--packet-bytes "100000"`},
		{[]string{"crypto", "--sizes", "many"}, "--sizes"},
		{[]string{"crypto", "extra"}, "unknown command"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ovpnperf(t, tc.args...).mustBeUsageError(t, tc.want)
		})
	}
}

func TestCryptoMissingOpenSSL(t *testing.T) {
	// ovpnperf itself runs from its absolute path; openssl is looked up in
	// PATH, which holds nothing.
	t.Setenv("PATH", t.TempDir())
	r := ovpnperf(t, "crypto", "--ciphers", "AES-256-GCM")
	if r.code != 1 || !strings.Contains(r.stderr, "apt-get install openssl") {
		t.Errorf("exit %d, stderr %q: want 1 and the Debian package", r.code, r.stderr)
	}
}

// ovpnperf crypto --json gives AES-256-GCM at 1024
// bytes with and without AES-NI, and aesni_used derived from them.
func TestCryptoJSON(t *testing.T) {
	testenv.RequirePrograms(t, "openssl")
	r := ovpnperf(t, "crypto", "--json", "--ciphers", "AES-256-GCM,CHACHA20-POLY1305", "--sizes", "1024", "--seconds", "0.05").mustSucceed(t)
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	checkReportable(t, r.stdout, "Encryption speed (MB/s)")
	used, ok := doc["aesni_used"].(bool)
	if !ok {
		t.Fatalf("aesni_used = %v, want a boolean", doc["aesni_used"])
	}
	cpu := doc["cpu"].(map[string]any)
	if cpu["flag_aes"] == true && cpu["openssl_sees_aesni"] == true && !used {
		t.Errorf("the CPU and OpenSSL have AES-NI, aesni_used is false: %v", doc["aesni_evidence"])
	}
	found := false
	for _, c := range doc["ciphers"].([]any) {
		c := c.(map[string]any)
		if c["cipher"] != "AES-256-GCM" {
			continue
		}
		for _, s := range c["sizes"].([]any) {
			s := s.(map[string]any)
			if s["block_bytes"] != float64(1024) {
				continue
			}
			found = true
			for _, v := range []string{"with_aesni", "without_aesni"} {
				bps, _ := s[v].(map[string]any)["bytes_per_second"].(float64)
				if bps <= 0 {
					t.Errorf("AES-256-GCM 1024 bytes %s: bytes_per_second %v", v, bps)
				}
			}
		}
	}
	if !found {
		t.Fatalf("no AES-256-GCM 1024-byte figure in\n%s", r.stdout)
	}
	if p, _ := doc["projection"].(map[string]any); p["preferred_cipher"] == "" || p["preferred_cipher"] == nil {
		t.Errorf("no preferred cipher: %v", p)
	}
}

func TestCryptoText(t *testing.T) {
	testenv.RequirePrograms(t, "openssl")
	r := ovpnperf(t, "crypto", "--ciphers", "AES-128-GCM", "--sizes", "256", "--seconds", "0.05").mustSucceed(t)
	for _, want := range []string{"AES-NI used:", "AES-128-GCM", "as is", "masked", "256 B", "1440 B *", "ceiling Mbit/s", "Prefer AES-128-GCM"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r.stderr != "" {
		t.Errorf("stderr %q", r.stderr)
	}
}
