package etcdsrv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/certs"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// CertValidity is how long the registry's certificates are valid: like the
// lab's OpenVPN PKI, throw-away keys with a short life.
const CertValidity = 7 * 24 * time.Hour

// ca is the registry's own certificate authority. It is not the cluster's
// OpenVPN CA on purpose: a VPN client's certificate must not open the
// registry, and a registry user's certificate must not open the VPN.
//
//	DIR/ (0700)
//	  ca.crt ca.key                   CA (ECDSA P-256, self-signed)
//	  server.crt server.key           etcd: IP SANs of its address and
//	                                  127.0.0.1; serverAuth and clientAuth
//	  CN.crt CN.key                   a client whose common name is CN,
//	                                  which etcd takes as its user name
//
// Every file is 0600.
type ca struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var commonNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

func newCA(dir string) (*ca, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	cert, key, der, err := certs.NewCA("ovpnperf registry CA", CertValidity)
	if err != nil {
		return nil, err
	}
	c := &ca{dir: dir, cert: cert, key: key}
	if err := writeCertKey(c.certFile(), filepath.Join(dir, "ca.key"), der, key); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *ca) certFile() string { return filepath.Join(c.dir, "ca.crt") }

// issueServer writes server.crt/.key for etcd at addr. The grpc gateway
// inside etcd 3.4 dials etcd itself with this certificate, so with
// --client-cert-auth it needs clientAuth beside serverAuth.
func (c *ca) issueServer(addr netip.Addr) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(c.dir, "server.crt"), filepath.Join(c.dir, "server.key")
	ips := []net.IP{net.IP(addr.AsSlice()), net.IPv4(127, 0, 0, 1)}
	return certFile, keyFile, c.issue("ovpnperf registry "+addr.String(), ips,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, certFile, keyFile)
}

// issueClient writes CN.crt/.key, or returns them if they exist already
// (a restart, or a second caller asking for the same user).
func (c *ca) issueClient(cn string) (certFile, keyFile string, err error) {
	if !commonNameRE.MatchString(cn) || cn == "server" || cn == "ca" {
		return "", "", usage.Errorf("registry user %q: want 1-63 lower-case letters, digits or dashes, starting with a letter (not server or ca)", cn)
	}
	certFile, keyFile = filepath.Join(c.dir, cn+".crt"), filepath.Join(c.dir, cn+".key")
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
		return certFile, keyFile, nil
	}
	return certFile, keyFile, c.issue(cn, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, certFile, keyFile)
}

func (c *ca) issue(cn string, ips []net.IP, eku []x509.ExtKeyUsage, certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          certs.Serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-certs.Backdate),
		NotAfter:              c.cert.NotAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           eku,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return fmt.Errorf("creating certificate %q: %w", cn, err)
	}
	return writeCertKey(certFile, keyFile, der, key)
}

// writeCertKey writes the key, then the certificate, each 0600: a
// half-written pair from an earlier failure is removed first so that the
// pair always belongs together.
func writeCertKey(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	for _, f := range []string{certFile, keyFile} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return certs.WriteCertKey(certFile, keyFile, der, key)
}
