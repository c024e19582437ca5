package openvpn

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func TestNewPKI(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pki")
	p, err := NewPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %o, want 700", st.Mode().Perm())
	}
	for _, f := range pkiFiles {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %o, want 600", f, st.Mode().Perm())
		}
	}
	ca := mustCert(t, p.CACert())
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA=%v usage=%v", ca.IsCA, ca.KeyUsage)
	}
	for _, c := range []struct {
		path string
		eku  x509.ExtKeyUsage
	}{{p.ServerCert(), x509.ExtKeyUsageServerAuth}, {p.ClientCert(), x509.ExtKeyUsageClientAuth}} {
		cert := mustCert(t, c.path)
		if cert.IsCA {
			t.Errorf("%s is a CA", c.path)
		}
		// remote-cert-tls: the key usage extension must exist; TLS needs
		// digitalSignature for ECDSA.
		if cert.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyAgreement {
			t.Errorf("%s key usage %v", c.path, cert.KeyUsage)
		}
		if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != c.eku {
			t.Errorf("%s extended key usage %v, want %v", c.path, cert.ExtKeyUsage, c.eku)
		}
		if d := cert.NotAfter.Sub(time.Now()); d > CertValidity || d < CertValidity-time.Minute {
			t.Errorf("%s valid for %v more", c.path, d)
		}
		if !cert.NotBefore.Before(time.Now().Add(-30 * time.Minute)) {
			t.Errorf("%s NotBefore %v is not backdated", c.path, cert.NotBefore)
		}
		if err := cert.CheckSignatureFrom(ca); err != nil {
			t.Errorf("%s: %v", c.path, err)
		}
	}
	if _, err := NewPKI(dir); err == nil || !usage.Is(err) {
		t.Errorf("NewPKI over an existing PKI: %v, want a usage error", err)
	}
	if _, err := LoadPKI(dir); err != nil {
		t.Fatal(err)
	}
}

func mustCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	c, err := readCert(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStaticKeyFormat(t *testing.T) {
	t.Parallel()
	k, err := NewStaticKey()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(k)), "\n")
	var body []string
	in := false
	for _, l := range lines {
		switch {
		case l == "-----BEGIN OpenVPN Static key V1-----":
			in = true
		case l == "-----END OpenVPN Static key V1-----":
			in = false
		case in:
			body = append(body, l)
		}
	}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	if len(body) != 16 {
		t.Fatalf("%d key lines, want 16:\n%s", len(body), k)
	}
	for _, l := range body {
		if !hex32.MatchString(l) {
			t.Errorf("key line %q is not 32 hex digits", l)
		}
	}
	raw, err := ParseStaticKey(k)
	if err != nil || len(raw) != 256 {
		t.Errorf("ParseStaticKey: %d bytes, %v", len(raw), err)
	}
	for _, bad := range []string{"", "-----BEGIN OpenVPN Static key V1-----\nabcd\n-----END OpenVPN Static key V1-----\n",
		strings.Replace(string(k), body[3], "zz"+body[3][2:], 1)} {
		if _, err := ParseStaticKey([]byte(bad)); err == nil {
			t.Errorf("ParseStaticKey accepted %q", bad)
		}
	}
}

func TestLoadPKIRefuses(t *testing.T) {
	t.Parallel()
	fresh := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "pki")
		if _, err := NewPKI(dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	tests := []struct {
		name string
		mod  func(t *testing.T, dir string)
		want string
	}{
		{"missing", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, ClientKeyFile)) }, "lacks client.key"},
		{"mode", func(t *testing.T, dir string) { os.Chmod(filepath.Join(dir, ServerKeyFile), 0o644) }, "chmod 600"},
		{"swapped", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, ServerCertFile))
			os.WriteFile(filepath.Join(dir, ClientCertFile), b, 0o600)
		}, "does not belong"},
		{"wrong eku", func(t *testing.T, dir string) {
			for _, pair := range [][2]string{{ServerCertFile, ClientCertFile}, {ServerKeyFile, ClientKeyFile}} {
				a, _ := os.ReadFile(filepath.Join(dir, pair[0]))
				b, _ := os.ReadFile(filepath.Join(dir, pair[1]))
				os.WriteFile(filepath.Join(dir, pair[0]), b, 0o600)
				os.WriteFile(filepath.Join(dir, pair[1]), a, 0o600)
			}
		}, "usage"},
		{"other CA", func(t *testing.T, dir string) {
			other := fresh(t)
			for _, f := range []string{CACertFile, CAKeyFile} {
				b, _ := os.ReadFile(filepath.Join(other, f))
				os.WriteFile(filepath.Join(dir, f), b, 0o600)
			}
		}, "unknown authority"},
		{"tls-crypt", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, TLSCryptFile), []byte("nope\n"), 0o600)
		}, "Static key"},
		{"not pem", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, CACertFile), []byte("nope\n"), 0o600)
		}, "not a PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fresh(t)
			tt.mod(t, dir)
			_, err := LoadPKI(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadPKI: %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := LoadPKI(filepath.Join(t.TempDir(), "nope")); err == nil || !usage.Is(err) {
		t.Errorf("LoadPKI of a missing dir: %v", err)
	}
}

func TestIssueClient(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pki")
	if _, err := NewPKI(dir); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPKI(dir) // a reused PKI can issue more clients
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"c1", "c2"} {
		cert, key, err := p.IssueClient(n)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(cert) != "client-"+n+".crt" || filepath.Base(key) != "client-"+n+".key" {
			t.Errorf("paths %s %s", cert, key)
		}
		if err := p.CheckClient(n); err != nil {
			t.Error(err)
		}
		c := mustCert(t, cert)
		if c.Subject.CommonName != "ovpnperf client "+n {
			t.Errorf("CN %q", c.Subject.CommonName)
		}
		b, _ := os.ReadFile(key)
		if blk, _ := pem.Decode(b); blk == nil || blk.Type != "PRIVATE KEY" {
			t.Errorf("%s is not a PKCS#8 PEM key", key)
		}
	}
	if _, _, err := p.IssueClient("c1"); err == nil {
		t.Error("IssueClient overwrote an existing client")
	}
	for _, bad := range []string{"", "../x", "A", "a b", strings.Repeat("a", 33)} {
		if _, _, err := p.IssueClient(bad); err == nil || !usage.Is(err) {
			t.Errorf("IssueClient(%q): %v", bad, err)
		}
	}
	if got := p.Client("c2").Cert; got != filepath.Join(dir, "client-c2.crt") {
		t.Errorf("Client(c2).Cert = %s", got)
	}
}
