package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWriteCertKey: a self-signed pair written by WriteCertKey loads as a
// TLS key pair, both files are 0600, and a second write to the same paths
// is refused instead of replacing the key.
func TestWriteCertKey(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: Serial(), Subject: pkix.Name{CommonName: "t"},
		NotBefore: time.Now().Add(-Backdate), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, kf := filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key")
	if err := WriteCertKey(cert, kf, der, key); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(cert, kf); err != nil {
		t.Fatalf("written pair does not load: %v", err)
	}
	for _, f := range []string{cert, kf} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	if err := WriteCertKey(cert, kf, der, key); err == nil {
		t.Error("second write to existing files succeeded")
	}
	if a, b := Serial(), Serial(); a.Sign() <= 0 || a.Cmp(b) == 0 {
		t.Errorf("serials %v, %v: want positive and different", a, b)
	}
}
