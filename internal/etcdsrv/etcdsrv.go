// Package etcdsrv runs Debian's etcd (etcd-server, /usr/bin/etcd 3.4) in a
// lab node as the registry of a cluster across hosts: TLS on the client
// port with certificates from a CA of its own, client certificates
// required, and etcd's auth on, so that a certificate's common name is the
// etcd user it acts as.
//
//	lab node (e.g. host "etcd", 198.18.i.2)
//	  etcd --name ovpnperf-LAB-etcd
//	    client  https://ADDR:2379 and https://127.0.0.1:2379   TLS, client cert required
//	    peer    http://127.0.0.1:2380                           (a cluster of one)
//	    data    DIR/data (0700)     certificates  DIR/pki (0700, files 0600)
//
// Users (certificate common name = etcd user), each with the role of its
// name:
//
//	ovpnperf-serve     reads /ovpnperf/, writes /ovpnperf/v1/clusters/ (hosts, instances)
//	ovpnperf-dispatch  reads /ovpnperf/, writes /ovpnperf/v1/assigned/ (assignment records)
//	root               role root: set-up and health checks of this package
//
// So a dispatcher cannot forge a host or an instance, and a host cannot
// forge another dispatcher's assignments. The prefixes are those of
// package cluster's registry (entry.go).
//
// A client without a certificate of this CA fails the TLS handshake; a
// certificate whose name is no user is refused by etcd's auth. etcd runs
// as a lab process, so lab down (and an ephemeral lab's owner, and lab
// clean) stops it with the lab.
package etcdsrv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/netns"
)

// Program is Debian's etcd.
const Program = "/usr/bin/etcd"

// Registry users and roles, and the key prefix they share. Each user has
// the role of the same name.
const (
	UserServe    = "ovpnperf-serve"    // cluster serve: registers instances (read-write)
	UserDispatch = "ovpnperf-dispatch" // dispatchers, status: read only
	UserRoot     = "root"              // this package's own set-up and health checks

	KeyPrefix = "/ovpnperf/" // every registry key; both users read all of it
	// ServePrefix is what hosts write: cluster.RegistryRoot.
	ServePrefix = "/ovpnperf/v1/clusters/"
	// DispatchPrefix is what dispatchers write: cluster.AssignedRoot.
	DispatchPrefix = "/ovpnperf/v1/assigned/"
)

// ClientPort and PeerPort are etcd's usual ports. Fixed ports are safe
// here: each etcd has a lab namespace of its own.
const (
	ClientPort = 2379
	PeerPort   = 2380
)

// Available says whether etcd is installed, and if not which package
// brings it.
func Available() error {
	if _, err := os.Stat(Program); err != nil {
		return fmt.Errorf("%s not found: install Debian's etcd-server package (scripts/install.sh)", Program)
	}
	return nil
}

// startTimeout bounds how long Start and Restart wait for etcd to answer.
const startTimeout = 30 * time.Second

// Server is one etcd started in a lab node.
type Server struct {
	l     *lab.Lab
	node  lab.Node
	addr  netip.Addr
	dir   string
	ca    *ca
	certs sync.Mutex // issuing client certificates

	// detached: etcd outlives this process (StartDetached).
	detached bool

	mu   sync.Mutex
	proc *lab.Process
}

// Start makes a CA and certificates in dir/pki, starts etcd in node with
// its data in dir/data, waits until it answers, and on its first start
// creates the users and roles and turns auth on. dir is made 0700; put it
// under l.Dir() to have lab down remove it. The node is a lab host
// (AddHost) or the client, router or server.
func Start(ctx context.Context, l *lab.Lab, node lab.Node, dir string) (*Server, error) {
	return start(ctx, l, node, dir, false)
}

// StartDetached is Start for a persistent lab (`ovpnperf lab up --etcd`):
// etcd outlives the calling process, until lab down stops it with the lab.
func StartDetached(ctx context.Context, l *lab.Lab, node lab.Node, dir string) (*Server, error) {
	return start(ctx, l, node, dir, true)
}

func start(ctx context.Context, l *lab.Lab, node lab.Node, dir string, detached bool) (_ *Server, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	addr, ok := l.HostAddr(node)
	switch {
	case ok:
	case node == lab.Client || node == lab.Router || node == lab.Server:
		addr = lab.Addr(node, 4)
	default:
		return nil, fmt.Errorf("etcd: lab %s has no node %q", l.Name(), node)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		return nil, fmt.Errorf("etcd: %s holds data already; Start makes a fresh registry (use Restart on its Server)", dir)
	}
	c, err := newCA(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	if _, _, err := c.issueServer(addr); err != nil {
		return nil, err
	}
	s := &Server{l: l, node: node, addr: addr, dir: dir, ca: c, detached: detached}
	if err := os.Mkdir(s.dataDir(), 0o700); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.setupAuth(ctx); err != nil {
		return nil, fmt.Errorf("etcd: setting up users and auth: %w", err)
	}
	return s, nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// LogFile is where etcd's output goes.
func (s *Server) LogFile() string { return filepath.Join(s.dir, "etcd.log") }

// Name is etcd's member name, ovpnperf-LAB-etcd, which ps shows.
func (s *Server) Name() string { return "ovpnperf-" + s.l.Name() + "-etcd" }

// Addr is the address etcd's clients reach it at.
func (s *Server) Addr() netip.Addr { return s.addr }

// Node is the lab node etcd runs in.
func (s *Server) Node() lab.Node { return s.node }

// Endpoint is etcd's client URL, https://ADDR:2379.
func (s *Server) Endpoint() string {
	return "https://" + netip.AddrPortFrom(s.addr, ClientPort).String()
}

// CAFile is the CA certificate that signed etcd's and the clients'
// certificates: a client's trust anchor for etcd.
func (s *Server) CAFile() string { return s.ca.certFile() }

// ClientCert returns a client certificate and key whose common name, and
// so etcd user, is commonName (UserServe, UserDispatch, UserRoot): issued
// on the first call, the same files afterwards. A name that is no etcd
// user gets a certificate that passes TLS but is refused by etcd's auth.
func (s *Server) ClientCert(commonName string) (certFile, keyFile string, err error) {
	s.certs.Lock()
	defer s.certs.Unlock()
	return s.ca.issueClient(commonName)
}

// ClientTLS returns a TLS configuration that trusts the registry's CA and
// presents commonName's certificate; an empty commonName presents none.
func (s *Server) ClientTLS(commonName string) (*tls.Config, error) {
	pem, err := os.ReadFile(s.CAFile())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", s.CAFile())
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if commonName != "" {
		certFile, keyFile, err := s.ClientCert(commonName)
		if err != nil {
			return nil, err
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// ClientConfig is a client configuration for etcd that opens its
// connections inside the lab node from (so that a test, which runs in the
// host's namespace, reaches etcd through the lab's router like a lab
// process would) with the given TLS configuration.
func (s *Server) ClientConfig(from lab.Node, tlsCfg *tls.Config) clientv3.Config {
	ns := s.l.Namespace(from)
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		var conn net.Conn
		// The socket is made in the namespace and stays there.
		err := netns.Do(ns, func() error {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			conn = c
			return err
		})
		return conn, err
	}
	return clientv3.Config{
		Endpoints:   []string{s.Endpoint()},
		TLS:         tlsCfg,
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial),
			// gRPC's default reconnect backoff grows to 120 s; a lab etcd
			// that was stopped for a test is back within seconds, and
			// the client should notice within a fraction of one.
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
				BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second,
			}, MinConnectTimeout: 2 * time.Second})},
		Logger: zap.NewNop(),
	}
}

// Client connects to etcd from lab node from as the user commonName ("" for
// no client certificate). Close it when done.
func (s *Server) Client(from lab.Node, commonName string) (*clientv3.Client, error) {
	tlsCfg, err := s.ClientTLS(commonName)
	if err != nil {
		return nil, err
	}
	return clientv3.New(s.ClientConfig(from, tlsCfg))
}

func (s *Server) argv() []string {
	peer := "http://" + netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), PeerPort).String()
	local := "https://" + netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ClientPort).String()
	pki := s.ca.dir
	return []string{Program,
		"--name", s.Name(),
		"--data-dir", s.dataDir(),
		"--listen-client-urls", s.Endpoint() + "," + local,
		"--advertise-client-urls", s.Endpoint(),
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", s.Name() + "=" + peer,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", s.Name(),
		"--cert-file", filepath.Join(pki, "server.crt"),
		"--key-file", filepath.Join(pki, "server.key"),
		"--client-cert-auth",
		"--trusted-ca-file", s.CAFile(),
		"--logger", "zap", "--log-outputs", "stderr",
	}
}

// start runs etcd and waits until it answers a read as root.
func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		select {
		case <-s.proc.Done():
		default:
			return fmt.Errorf("etcd %s runs already (pid %d)", s.Name(), s.proc.Pid())
		}
	}
	startFn := s.l.Start
	if s.detached {
		startFn = s.l.StartDetached
	}
	p, err := startFn(ctx, s.node, s.LogFile(), s.argv()...)
	if err != nil {
		return err
	}
	s.proc = p
	if err := s.waitHealthy(ctx, p); err != nil {
		_ = p.Stop()
		return err
	}
	return nil
}

// waitHealthy waits until etcd serves a linearizable read from root (auth
// on or off), or fails with the end of etcd's log when etcd exits or does
// not answer within startTimeout.
func (s *Server) waitHealthy(ctx context.Context, p *lab.Process) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cli, err := s.Client(s.node, UserRoot)
	if err != nil {
		return err
	}
	defer cli.Close()
	var last error
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(rctx, "health")
		rcancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-p.Done():
			return fmt.Errorf("etcd exited during start-up: %v\n%s", p.Wait(), s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("etcd at %s did not answer within %v: %v\n%s", s.Endpoint(), startTimeout, last, s.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.LogFile())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// setupAuth creates the users and roles and turns auth on; from then on
// etcd takes a client certificate's common name as its user.
//
// Equivalent to:
//
//	etcdctl user add root --no-password; etcdctl user grant-role root root
//	etcdctl role add ovpnperf-serve
//	etcdctl role grant-permission ovpnperf-serve --prefix read /ovpnperf/
//	etcdctl role grant-permission ovpnperf-serve --prefix readwrite /ovpnperf/v1/clusters/
//	etcdctl role add ovpnperf-dispatch
//	etcdctl role grant-permission ovpnperf-dispatch --prefix read /ovpnperf/
//	etcdctl role grant-permission ovpnperf-dispatch --prefix readwrite /ovpnperf/v1/assigned/
//	etcdctl user add ovpnperf-serve --no-password; etcdctl user grant-role ovpnperf-serve ovpnperf-serve
//	etcdctl user add ovpnperf-dispatch --no-password; etcdctl user grant-role ovpnperf-dispatch ovpnperf-dispatch
//	etcdctl auth enable
func (s *Server) setupAuth(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cli, err := s.Client(s.node, UserRoot)
	if err != nil {
		return err
	}
	defer cli.Close()
	roles := []struct{ name, writes string }{{UserServe, ServePrefix}, {UserDispatch, DispatchPrefix}}
	// Users authenticate by certificate only: etcd refuses a password
	// for a user made without one.
	noPassword := &clientv3.UserAddOptions{NoPassword: true}
	if _, err := cli.UserAddWithOptions(ctx, UserRoot, "", noPassword); err != nil {
		return fmt.Errorf("user add %s: %w", UserRoot, err)
	}
	if _, err := cli.UserGrantRole(ctx, UserRoot, "root"); err != nil {
		return fmt.Errorf("user grant-role %s root: %w", UserRoot, err)
	}
	for _, r := range roles {
		if _, err := cli.RoleAdd(ctx, r.name); err != nil {
			return fmt.Errorf("role add %s: %w", r.name, err)
		}
		if _, err := cli.RoleGrantPermission(ctx, r.name, KeyPrefix, clientv3.GetPrefixRangeEnd(KeyPrefix), clientv3.PermissionType(clientv3.PermRead)); err != nil {
			return fmt.Errorf("role grant-permission %s read %s: %w", r.name, KeyPrefix, err)
		}
		if _, err := cli.RoleGrantPermission(ctx, r.name, r.writes, clientv3.GetPrefixRangeEnd(r.writes), clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
			return fmt.Errorf("role grant-permission %s readwrite %s: %w", r.name, r.writes, err)
		}
		if _, err := cli.UserAddWithOptions(ctx, r.name, "", noPassword); err != nil {
			return fmt.Errorf("user add %s: %w", r.name, err)
		}
		if _, err := cli.UserGrantRole(ctx, r.name, r.name); err != nil {
			return fmt.Errorf("user grant-role %s: %w", r.name, err)
		}
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("auth enable: %w", err)
	}
	return nil
}

// Pid returns etcd's process id, or 0 when it is stopped.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	select {
	case <-s.proc.Done():
		return 0
	default:
		return s.proc.Pid()
	}
}

// Stop ends etcd (SIGTERM; SIGKILL after 3 s) and waits for it. Its data
// and certificates stay for Restart. Stopping a stopped etcd is no error.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { _ = p.Stop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Restart starts etcd again on the same data and certificates (after Stop,
// or after it died) and waits until it answers.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Stop(ctx); err != nil {
		return err
	}
	return s.start(ctx)
}

// Close stops etcd. The files stay in dir (lab down removes them when dir
// is under the lab's directory).
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Stop(ctx)
}
