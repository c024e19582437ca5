package openvpn

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/certs"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// CertValidity is how long the certificates made by NewPKI and IssueClient
// are valid. A lab's keys are throw-away: a short life limits the harm of a
// key left behind in a --pki directory.
const CertValidity = 7 * 24 * time.Hour

// File names inside a PKI directory.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServerCertFile = "server.crt"
	ServerKeyFile  = "server.key"
	ClientCertFile = "client.crt"
	ClientKeyFile  = "client.key"
	TLSCryptFile   = "tls-crypt.key"
)

// pkiFiles are the files every PKI directory must hold.
var pkiFiles = []string{CACertFile, CAKeyFile, ServerCertFile, ServerKeyFile, ClientCertFile, ClientKeyFile, TLSCryptFile}

// PKI is a directory holding a throw-away certificate authority, one server
// and one or more client certificates, and a tls-crypt key:
//
//	DIR/ (0700)
//	  ca.crt ca.key                CA (ECDSA P-256, self-signed)
//	  server.crt server.key        EKU serverAuth  → remote-cert-tls server
//	  client.crt client.key        EKU clientAuth  → remote-cert-tls client
//	  client-NAME.crt/.key         further clients (IssueClient)
//	  tls-crypt.key                OpenVPN Static key V1, 2048 bits
//
// Every file is 0600. The CA key stays in the directory so that a reused
// PKI (--pki DIR) can issue more client certificates later.
type PKI struct {
	Dir string

	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// Paths of the files OpenVPN reads.
func (p *PKI) CACert() string     { return filepath.Join(p.Dir, CACertFile) }
func (p *PKI) ServerCert() string { return filepath.Join(p.Dir, ServerCertFile) }
func (p *PKI) ServerKey() string  { return filepath.Join(p.Dir, ServerKeyFile) }
func (p *PKI) ClientCert() string { return filepath.Join(p.Dir, ClientCertFile) }
func (p *PKI) ClientKey() string  { return filepath.Join(p.Dir, ClientKeyFile) }
func (p *PKI) TLSCrypt() string   { return filepath.Join(p.Dir, TLSCryptFile) }

// ClientFiles returns the certificate and key paths of a client issued with
// IssueClient(name); the empty name is the default client.
func (p *PKI) ClientFiles(name string) (cert, key string) {
	if name == "" {
		return p.ClientCert(), p.ClientKey()
	}
	return filepath.Join(p.Dir, "client-"+name+".crt"), filepath.Join(p.Dir, "client-"+name+".key")
}

// NewPKI creates dir (0700) if needed and writes a fresh CA, server and
// client certificate and a tls-crypt key into it. It refuses a directory
// that already holds any of the PKI's files rather than overwrite them.
func NewPKI(dir string) (*PKI, error) {
	if dir == "" {
		return nil, usage.Errorf("PKI directory must not be empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating PKI directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restricting PKI directory: %w", err)
	}
	for _, f := range pkiFiles {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return nil, usage.Errorf("PKI directory %s already holds %s: use it as it is (--pki %s) or choose an empty directory", dir, f, dir)
		}
	}
	caCert, caKey, caDER, err := certs.NewCA("ovpnperf lab CA", CertValidity)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, caCert: caCert, caKey: caKey}
	if err := certs.WriteCertKey(p.CACert(), filepath.Join(dir, CAKeyFile), caDER, caKey); err != nil {
		return nil, err
	}
	if err := p.issue("ovpnperf server", x509.ExtKeyUsageServerAuth, p.ServerCert(), p.ServerKey()); err != nil {
		return nil, err
	}
	if err := p.issue("ovpnperf client", x509.ExtKeyUsageClientAuth, p.ClientCert(), p.ClientKey()); err != nil {
		return nil, err
	}
	key, err := NewStaticKey()
	if err != nil {
		return nil, err
	}
	if err := certs.WriteExclusive(p.TLSCrypt(), key); err != nil {
		return nil, err
	}
	return p, nil
}

var clientNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// IssueClient writes one more client certificate and key, client-NAME.crt
// and client-NAME.key, signed by the PKI's CA, and returns their paths.
// Names are 1–32 characters of a–z, 0–9, '_' and '-'.
func (p *PKI) IssueClient(name string) (cert, key string, err error) {
	if !clientNameRE.MatchString(name) {
		return "", "", usage.Errorf("client name %q: use 1-32 characters a-z, 0-9, '_' or '-', starting with a letter or digit", name)
	}
	cert, key = p.ClientFiles(name)
	if err := p.issue("ovpnperf client "+name, x509.ExtKeyUsageClientAuth, cert, key); err != nil {
		return "", "", err
	}
	return cert, key, nil
}

// issue makes an end-entity certificate with the key usage OpenVPN's
// remote-cert-tls requires (the extension must be present) and the given
// extended key usage (serverAuth for `remote-cert-tls server`, clientAuth
// for `remote-cert-tls client`).
func (p *PKI) issue(cn string, eku x509.ExtKeyUsage, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	notAfter := now.Add(CertValidity)
	if notAfter.After(p.caCert.NotAfter) {
		notAfter = p.caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          certs.Serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-certs.Backdate),
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyAgreement,
		ExtKeyUsage:           []x509.ExtKeyUsage{eku},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("creating certificate %q: %w", cn, err)
	}
	return certs.WriteCertKey(certPath, keyPath, der, key)
}

// staticKeyBegin and staticKeyEnd frame OpenVPN's static key file format,
// used by --tls-crypt, --tls-auth and --secret.
const (
	staticKeyBegin = "-----BEGIN OpenVPN Static key V1-----"
	staticKeyEnd   = "-----END OpenVPN Static key V1-----"
	staticKeyBytes = 256 // 2048 bits
)

// NewStaticKey returns a fresh 2048-bit key in the format `openvpn --genkey
// secret` writes: 16 lines of 32 hex digits between the BEGIN/END markers.
func NewStaticKey() ([]byte, error) {
	raw := make([]byte, staticKeyBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("#\n# 2048 bit OpenVPN static key (ovpnperf lab)\n#\n")
	b.WriteString(staticKeyBegin + "\n")
	for i := 0; i < staticKeyBytes; i += 16 {
		b.WriteString(hex.EncodeToString(raw[i:i+16]) + "\n")
	}
	b.WriteString(staticKeyEnd + "\n")
	return b.Bytes(), nil
}

// ParseStaticKey checks an OpenVPN static key file and returns its 256
// bytes.
func ParseStaticKey(data []byte) ([]byte, error) {
	var hexDigits strings.Builder
	state := 0 // 0 before BEGIN, 1 inside, 2 after END
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case state == 0 && line == staticKeyBegin:
			state = 1
		case state == 1 && line == staticKeyEnd:
			state = 2
		case state == 1:
			hexDigits.WriteString(line)
		}
	}
	if state != 2 {
		return nil, errors.New("not an OpenVPN static key: missing BEGIN/END OpenVPN Static key V1 lines")
	}
	raw, err := hex.DecodeString(hexDigits.String())
	if err != nil {
		return nil, fmt.Errorf("OpenVPN static key: %w", err)
	}
	if len(raw) != staticKeyBytes {
		return nil, fmt.Errorf("OpenVPN static key has %d bits, want %d", len(raw)*8, staticKeyBytes*8)
	}
	return raw, nil
}

// LoadPKI opens a PKI directory made earlier by NewPKI (or by hand with the
// same file names). It checks that every file is there, that key files are
// not readable by group or others, that the certificates chain to the CA,
// carry the usages OpenVPN checks and are valid now, and that the tls-crypt
// key is well formed.
func LoadPKI(dir string) (*PKI, error) {
	st, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, usage.Errorf("PKI directory %s does not exist", dir)
		}
		return nil, err
	}
	if !st.IsDir() {
		return nil, usage.Errorf("PKI path %s is not a directory", dir)
	}
	var missing []string
	for _, f := range pkiFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return nil, usage.Errorf("PKI directory %s lacks %s (a PKI needs %s)", dir, strings.Join(missing, ", "), strings.Join(pkiFiles, ", "))
	}
	for _, f := range []string{CAKeyFile, ServerKeyFile, ClientKeyFile, TLSCryptFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		if st.Mode().Perm()&0o077 != 0 {
			return nil, usage.Errorf("%s is readable by others (mode %04o): chmod 600 %s", filepath.Join(dir, f), st.Mode().Perm(), filepath.Join(dir, f))
		}
	}
	caCert, err := readCert(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, err
	}
	caKey, err := readKey(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, err
	}
	if !caKey.PublicKey.Equal(caCert.PublicKey) {
		return nil, usage.Errorf("%s does not belong to %s", filepath.Join(dir, CAKeyFile), filepath.Join(dir, CACertFile))
	}
	p := &PKI{Dir: dir, caCert: caCert, caKey: caKey}
	if err := p.check(p.ServerCert(), p.ServerKey(), x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if err := p.check(p.ClientCert(), p.ClientKey(), x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	tc, err := inputfile.ReadFile(context.Background(), p.TLSCrypt(), inputfile.Key())
	if err != nil {
		return nil, err
	}
	if _, err := ParseStaticKey(tc); err != nil {
		return nil, usage.Errorf("%s: %v", p.TLSCrypt(), err)
	}
	return p, nil
}

// CheckClient verifies a client certificate issued with IssueClient(name).
func (p *PKI) CheckClient(name string) error {
	cert, key := p.ClientFiles(name)
	return p.check(cert, key, x509.ExtKeyUsageClientAuth)
}

func (p *PKI) check(certPath, keyPath string, eku x509.ExtKeyUsage) error {
	cert, err := readCert(certPath)
	if err != nil {
		return err
	}
	key, err := readKey(keyPath)
	if err != nil {
		return err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return usage.Errorf("%s does not belong to %s", keyPath, certPath)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.caCert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{eku}}); err != nil {
		return usage.Errorf("%s: %v (make a fresh PKI without --pki)", certPath, err)
	}
	if cert.KeyUsage == 0 {
		return usage.Errorf("%s has no key usage extension, which OpenVPN's remote-cert-tls requires", certPath)
	}
	return nil
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := inputfile.ReadFile(context.Background(), path, inputfile.Key())
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, usage.Errorf("%s is not a PEM certificate", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, usage.Errorf("%s: %v", path, err)
	}
	return c, nil
}

func readKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := inputfile.ReadFile(context.Background(), path, inputfile.Key())
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, usage.Errorf("%s is not a PEM private key", path)
	}
	var k any
	switch blk.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		return nil, usage.Errorf("%s: unsupported key type %q (ovpnperf uses ECDSA keys)", path, blk.Type)
	}
	if err != nil {
		return nil, usage.Errorf("%s: %v", path, err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, usage.Errorf("%s: not an ECDSA key (ovpnperf uses ECDSA keys)", path)
	}
	return ek, nil
}
