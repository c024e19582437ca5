package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// A cluster across hosts, with etcd as the membership store:
//
//	host A: cluster serve ──Publisher──┐  puts its keys under one lease,
//	host B: cluster serve ──Publisher──┤  keeps it alive (TTL/3)
//	                                   ▼
//	                          etcd  /ovpnperf/v1/clusters/<cluster>/…
//	                                   │  watch (one per dispatcher)
//	              ┌────────────────────┴───────────────┐
//	   cluster dispatch ──View──▶ Dispatcher    cluster dispatch ──View──▶ Dispatcher
//
// A host that dies stops sending keep-alives; etcd deletes its keys when the
// lease's TTL runs out, and every View sees the deletions on its watch.

// RegistryOptions say how to reach etcd.
type RegistryOptions struct {
	// Endpoints are HOST:PORT of etcd members.
	Endpoints []string
	// CA, Cert, Key: TLS with a client certificate (etcd's
	// --client-cert-auth; with auth enabled etcd takes the certificate's
	// common name as the user). All empty: plain TCP, which Connect
	// accepts only to loopback endpoints or with Insecure.
	CA, Cert, Key string
	// Insecure allows plain TCP to endpoints that are not loopback
	// (--registry-insecure): for a network the operator trusts.
	Insecure bool
}

// CheckTransport refuses plain TCP to an etcd beyond this host unless
// Insecure is set: without TLS anyone on the path reads and forges the
// cluster's membership and assignments (etcd's auth then has no
// certificate to take the user from, and a password would cross in clear).
func (o RegistryOptions) CheckTransport() error {
	if o.CA != "" || o.Cert != "" || o.Key != "" || o.Insecure {
		return nil
	}
	for _, ep := range o.Endpoints {
		h, _, err := net.SplitHostPort(ep)
		if err != nil {
			h = ep
		}
		if !isLoopbackHost(h) {
			return usage.Errorf("--registry etcd://%s without TLS: anyone on the network could read and forge the cluster's members and assignments; "+
				"give --registry-ca, --registry-cert and --registry-key, or --registry-insecure on a network you trust", ep)
		}
	}
	return nil
}

// isLoopbackHost reports whether h is a loopback address or "localhost";
// other names are not looked up (they could resolve anywhere).
func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Unmap().IsLoopback()
}

// ParseRegistry reads --registry etcd://HOST:PORT[,HOST:PORT…].
func ParseRegistry(s string) ([]string, error) {
	rest, ok := strings.CutPrefix(s, "etcd://")
	if !ok {
		return nil, usage.Errorf("--registry %q: use etcd://HOST:PORT[,HOST:PORT…]", s)
	}
	var eps []string
	for _, hp := range strings.Split(rest, ",") {
		h, p, err := net.SplitHostPort(hp)
		if err != nil || !ValidHost(h) || p == "" || strings.Trim(p, "0123456789") != "" {
			return nil, usage.Errorf("--registry %q: %q is not HOST:PORT", s, hp)
		}
		eps = append(eps, hp)
	}
	return eps, nil
}

// Connect opens an etcd client. It does not wait for etcd: a dispatcher
// started while etcd is down starts with an empty, stale view.
func (o RegistryOptions) Connect() (*clientv3.Client, error) {
	if err := o.CheckTransport(); err != nil {
		return nil, err
	}
	cfg := clientv3.Config{Endpoints: o.Endpoints, DialTimeout: 3 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		// gRPC's default reconnect backoff grows to minutes: after etcd
		// was away for a while a host would come back long after etcd
		// did, and its lease (restored by etcd with a fresh TTL) would
		// run out meanwhile. Retry every 2 s at most.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second})}}
	if o.CA != "" || o.Cert != "" || o.Key != "" {
		if o.CA == "" || o.Cert == "" || o.Key == "" {
			return nil, usage.Errorf("give --registry-ca, --registry-cert and --registry-key together")
		}
		cert, err := loadKeyPair(o.Cert, o.Key)
		if err != nil {
			return nil, fmt.Errorf("registry client certificate: %w", err)
		}
		pem, err := inputfile.ReadFile(context.Background(), o.CA, inputfile.Key())
		if err != nil {
			return nil, fmt.Errorf("registry CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no CA certificate", o.CA)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return clientv3.New(cfg)
}

// opTimeout bounds one etcd request, so that an unreachable etcd shows as
// an error quickly instead of a hang.
const opTimeout = 2 * time.Second
