package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/inputfile"
)

// Registry is the dispatcher's view of the instances. A running Cluster is
// one (LocalRegistry); the etcd View of several hosts is another: it only
// has to say, for each instance, where it listens, its state and its load.
type Registry interface {
	Instances() []Endpoint
}

// Endpoint is one instance as the dispatcher sees it.
type Endpoint struct {
	Name        string  `json:"name"`
	Host        string  `json:"host"` // where clients reach it
	Port        uint16  `json:"port"`
	Proto       string  `json:"proto"`
	State       string  `json:"state"`
	Clients     int     `json:"clients"`
	BytesPerSec float64 `json:"bytes_per_sec"`
	// Assigned counts recent assignments that dispatchers sharing the
	// registry recorded there (SharedRegistry); 0 for a local registry.
	Assigned int `json:"assigned,omitempty"`
}

// SharedRegistry is a Registry that several dispatchers use at once (etcd).
// For least-loaded to give the same answer on every dispatcher, each
// assignment is recorded in the registry (Record) and counted by all of
// them (Endpoint.Assigned), and a dispatcher first catches up with what the
// others recorded (Sync).
type SharedRegistry interface {
	Registry
	Sync(ctx context.Context)
	Record(ctx context.Context, name string)
}

// LocalRegistry is the Registry of one cluster on one host.
type LocalRegistry struct {
	C    *Cluster
	Host string
}

// Instances lists the cluster's instances at Host.
func (r LocalRegistry) Instances() []Endpoint {
	var out []Endpoint
	for _, s := range r.C.Status() {
		out = append(out, Endpoint{Name: s.Name, Host: r.Host, Port: s.Port, Proto: s.Proto, State: s.State, Clients: s.Clients, BytesPerSec: s.BytesPerSec})
	}
	return out
}

// Strategies.
const (
	RoundRobin  = "round-robin"
	LeastLoaded = "least-loaded"
)

// Request is what a caller sends: one JSON line of at most MaxRequest bytes.
type Request struct {
	V     int    `json:"v"`
	Proto string `json:"proto"`
	// Nonce (16 random bytes, hex) and Time (unix seconds) make every
	// request single-use: a replayed request is refused.
	Nonce string `json:"nonce"`
	Time  int64  `json:"time"`
	// Exclude names instances the caller already has a tunnel to
	// (`cluster connect --tunnels N` asks for N distinct ones).
	Exclude []string `json:"exclude,omitempty"`
}

// Reply is the dispatcher's answer: an assignment or an error.
type Reply struct {
	Instance string `json:"instance,omitempty"`
	Remote   string `json:"remote,omitempty"`
	Port     uint16 `json:"port,omitempty"`
	Proto    string `json:"proto,omitempty"`
	Error    string `json:"error,omitempty"`
}

// MaxRequest bounds a request line; ReplayWindow is how far a request's
// time may be from the dispatcher's clock.
const (
	MaxRequest   = 512
	ReplayWindow = 60 * time.Second
)

// ParseRequest checks one request line. It never panics on any input
// (FuzzParseRequest).
func ParseRequest(line []byte, now time.Time) (Request, error) {
	var r Request
	if len(line) > MaxRequest {
		return r, errors.New("request too long")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, errors.New("malformed request")
	}
	if dec.More() {
		return Request{}, errors.New("malformed request: trailing data")
	}
	if r.V != 1 {
		return Request{}, errors.New("unsupported version")
	}
	if r.Proto != "udp" && r.Proto != "tcp" && r.Proto != "" {
		return Request{}, errors.New("proto must be udp or tcp")
	}
	if len(r.Nonce) != 32 {
		return Request{}, errors.New("nonce must be 32 hex digits")
	}
	if _, err := hex.DecodeString(r.Nonce); err != nil {
		return Request{}, errors.New("nonce must be 32 hex digits")
	}
	t := time.Unix(r.Time, 0)
	if d := now.Sub(t); d > ReplayWindow || d < -ReplayWindow {
		return Request{}, errors.New("request time outside the replay window")
	}
	return r, nil
}

// NewRequest builds a fresh request.
func NewRequest(proto string) Request {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return Request{V: 1, Proto: proto, Nonce: hex.EncodeToString(b), Time: time.Now().Unix()}
}

// Dispatcher assigns instances to callers.
type Dispatcher struct {
	Registry Registry
	Strategy string
	// RatePerSec and Burst limit requests per source address.
	RatePerSec float64
	Burst      float64
	Log        *slog.Logger

	// mu guards the fields below. It is never held across registry I/O
	// (SharedRegistry's Sync and Record talk to etcd): a slow etcd must
	// delay each request by its own round trips, not queue every request
	// behind the others.
	mu      sync.Mutex
	rr      int
	pending map[string][]time.Time // assignments not yet visible as clients
	seen    expiring[struct{}]     // nonces within the replay window
	buckets expiring[*bucket]      // per-source rate limits

	Assigned, Refused atomic.Int64
}

type bucket struct {
	tokens float64
	at     time.Time
}

// expiring is a map whose entries are forgotten in bulk by age, at O(1)
// cost per operation: entries live in the current generation; every period
// the current generation becomes the previous one and the previous one is
// dropped. An entry touched (put, or found by take) within the last period
// is always kept; one untouched for two periods is always gone.
//
//	time ──┬──────── period ────────┬──────── period ────────┬──▶
//	       │ prev (read, moved up)  │ cur (written)          │ prev dropped
type expiring[V any] struct {
	period    time.Duration
	cur, prev map[string]V
	start     time.Time // when cur began
}

// rotate advances the generations to now.
func (m *expiring[V]) rotate(now time.Time) {
	if m.cur == nil {
		m.cur, m.start = map[string]V{}, now
	}
	switch age := now.Sub(m.start); {
	case age >= 2*m.period:
		m.prev, m.cur, m.start = nil, map[string]V{}, now
	case age >= m.period:
		m.prev, m.cur, m.start = m.cur, map[string]V{}, now
	}
}

// take returns the entry of key touched within the last two periods,
// moving it into the current generation.
func (m *expiring[V]) take(key string, now time.Time) (V, bool) {
	m.rotate(now)
	if v, ok := m.cur[key]; ok {
		return v, true
	}
	v, ok := m.prev[key]
	if ok {
		delete(m.prev, key)
		m.cur[key] = v
	}
	return v, ok
}

func (m *expiring[V]) put(key string, v V, now time.Time) {
	m.rotate(now)
	m.cur[key] = v
}

// len is the number of entries held (for tests and metrics).
func (m *expiring[V]) len() int { return len(m.cur) + len(m.prev) }

// PendingWindow is how long an assignment counts as a client of its
// instance in least-loaded, until the management interface shows it. A
// constant, not a setting: every dispatcher sharing an etcd registry
// counts the others' records (View.Record) over the same window.
const PendingWindow = 10 * time.Second

func (d *Dispatcher) allow(src string, now time.Time) bool {
	if d.RatePerSec <= 0 {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A bucket left alone for Burst/RatePerSec is full again, the same as
	// a new one: forgetting it after that long changes no answer, and
	// memory holds only the sources of the last two periods (a source is
	// a completed TCP handshake, so it cannot be spoofed cheaply).
	d.buckets.period = max(time.Second, time.Duration(d.Burst/d.RatePerSec*float64(time.Second)))
	b, ok := d.buckets.take(src, now)
	if !ok {
		b = &bucket{tokens: d.Burst, at: now}
		d.buckets.put(src, b, now)
	}
	b.tokens = min(d.Burst, b.tokens+now.Sub(b.at).Seconds()*d.RatePerSec)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Assign picks an instance for r. It never returns an instance that is not
// up (down, restarting, starting or draining). A shared registry's Sync and
// Record run outside the dispatcher's lock, so concurrent requests wait for
// etcd side by side.
func (d *Dispatcher) Assign(r Request, now time.Time) (Reply, error) {
	if err := d.claimNonce(r.Nonce, now); err != nil {
		return Reply{}, err
	}
	shared, _ := d.Registry.(SharedRegistry)
	if shared != nil && d.Strategy == LeastLoaded {
		shared.Sync(context.Background())
	}
	pick, err := d.pick(r, now)
	if err != nil {
		return Reply{}, err
	}
	if shared != nil && d.Strategy == LeastLoaded {
		shared.Record(context.Background(), pick.Name)
	}
	return Reply{Instance: pick.Name, Remote: pick.Host, Port: pick.Port, Proto: pick.Proto}, nil
}

// claimNonce refuses a nonce seen before. A request's time is within
// ReplayWindow of the clock (ParseRequest), so a replay can only come
// within 2×ReplayWindow of the first use: nonces are kept at least that
// long, at most twice that.
func (d *Dispatcher) claimNonce(nonce string, now time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen.period = 2 * ReplayWindow
	if _, dup := d.seen.take(nonce, now); dup {
		return errors.New("replayed request")
	}
	d.seen.put(nonce, struct{}{}, now)
	return nil
}

// pick chooses among the registry's instances that are up and records the
// assignment as pending.
func (d *Dispatcher) pick(r Request, now time.Time) (Endpoint, error) {
	var cands []Endpoint
	for _, e := range d.Registry.Instances() {
		if e.State == StateUp && (r.Proto == "" || e.Proto == r.Proto) {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		return Endpoint{}, errors.New("no instance is up")
	}
	if len(r.Exclude) > 0 {
		n := len(cands)
		cands = slices.DeleteFunc(cands, func(e Endpoint) bool { return slices.Contains(r.Exclude, e.Name) })
		if len(cands) == 0 {
			return Endpoint{}, fmt.Errorf("no other instance is up: %d up, all %d excluded already taken", n, n)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Name < cands[j].Name })
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending == nil {
		d.pending = map[string][]time.Time{}
	}
	var pick Endpoint
	switch d.Strategy {
	case LeastLoaded:
		load := func(e Endpoint) int {
			p := d.pending[e.Name][:0]
			for _, t := range d.pending[e.Name] {
				if now.Sub(t) < PendingWindow {
					p = append(p, t)
				}
			}
			d.pending[e.Name] = p
			// This dispatcher's own assignments are in both counts
			// once the registry shows them; while it cannot (etcd
			// down) the local count goes on.
			return e.Clients + max(len(p), e.Assigned)
		}
		pick = cands[0]
		best := load(pick)
		for _, e := range cands[1:] {
			l := load(e)
			if l < best || (l == best && e.BytesPerSec < pick.BytesPerSec) {
				pick, best = e, l
			}
		}
	default:
		pick = cands[d.rr%len(cands)]
		d.rr++
	}
	d.pending[pick.Name] = append(d.pending[pick.Name], now)
	return pick, nil
}

// MaxRequestsPerConn bounds the requests one connection may send; each
// gets one reply line.
const MaxRequestsPerConn = 256

// handle serves one connection: request lines, one reply line each, until
// EOF, an over-long line or MaxRequestsPerConn.
func (d *Dispatcher) handle(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	src, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
	reply := func(r Reply) error {
		if r.Error != "" {
			d.Refused.Add(1)
		} else {
			d.Assigned.Add(1)
		}
		b, _ := json.Marshal(r)
		_, err := conn.Write(append(b, '\n'))
		return err
	}
	if !d.allow(src, time.Now()) {
		_ = reply(Reply{Error: "rate limited"})
		return
	}
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return
	}
	if err := tc.Handshake(); err != nil {
		d.Refused.Add(1)
		return // no certificate from our CA: nothing to say
	}
	br := bufio.NewReaderSize(conn, MaxRequest+1)
	for i := 0; i < MaxRequestsPerConn; i++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			_ = reply(Reply{Error: "request too long"})
			return
		}
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return
		}
		if i > 0 && !d.allow(src, time.Now()) {
			_ = reply(Reply{Error: "rate limited"})
			return
		}
		var r Reply
		req, perr := ParseRequest(bytes.TrimSpace(line), time.Now())
		if perr != nil {
			r = Reply{Error: perr.Error()}
		} else if r, perr = d.Assign(req, time.Now()); perr != nil {
			r = Reply{Error: perr.Error()}
		}
		if reply(r) != nil || err != nil {
			return
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	}
}

// Serve accepts TLS connections on l until it is closed. Callers must
// present a certificate signed by the CA in caFile.
func (d *Dispatcher) Serve(l net.Listener, certFile, keyFile, caFile string) error {
	cfg, err := ServerTLS(certFile, keyFile, caFile)
	if err != nil {
		return err
	}
	tl := tls.NewListener(l, cfg)
	for {
		c, err := tl.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go d.handle(c)
	}
}

// ServerTLS is the dispatcher's TLS config: TLS 1.3, client certificate
// from the cluster's CA required.
func ServerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, pool, err := tlsFiles(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}, nil
}

// ClientTLS is a caller's TLS config: its certificate, the cluster's CA.
// The dispatcher's certificate is OpenVPN's server certificate, checked
// against the CA by chain, not by host name (it names no host).
func ClientTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, pool, err := tlsFiles(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("dispatcher sent no certificate")
			}
			c, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			_, err = c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			return err
		}}, nil
}

// tlsFiles reads this side's certificate and key and the CA that checks
// the other side.
func tlsFiles(certFile, keyFile, caFile string) (tls.Certificate, *x509.CertPool, error) {
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool, err := caPool(caFile)
	return cert, pool, err
}

// loadKeyPair is tls.LoadX509KeyPair reading the files as inputs (a FIFO
// or /dev/zero named as a certificate is refused, not read forever).
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	c, err := inputfile.ReadFile(context.Background(), certFile, inputfile.Key())
	if err != nil {
		return tls.Certificate{}, err
	}
	k, err := inputfile.ReadFile(context.Background(), keyFile, inputfile.Key())
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c, k)
}

func caPool(caFile string) (*x509.CertPool, error) {
	b, err := inputfile.ReadFile(context.Background(), caFile, inputfile.Key())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no CA certificate", caFile)
	}
	return pool, nil
}

// Ask sends one request to the dispatcher at addr and returns its reply.
func Ask(ctx context.Context, addr string, cfg *tls.Config, req Request) (Reply, error) {
	c, err := (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return Reply{}, err
	}
	return AskConn(ctx, c, cfg, req)
}

// AskConn is Ask over a connection the caller opened (in another network
// namespace, say); it closes conn.
func AskConn(ctx context.Context, conn net.Conn, cfg *tls.Config, req Request) (Reply, error) {
	c := tls.Client(conn, cfg)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.HandshakeContext(ctx); err != nil {
		return Reply{}, err
	}
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return Reply{}, err
	}
	line, err := bufio.NewReader(io.LimitReader(c, 4096)).ReadBytes('\n')
	if err != nil {
		return Reply{}, fmt.Errorf("reading dispatcher reply: %w", err)
	}
	var r Reply
	if err := json.Unmarshal(line, &r); err != nil {
		return Reply{}, fmt.Errorf("dispatcher reply %q: %w", line, err)
	}
	if r.Error != "" {
		return r, fmt.Errorf("dispatcher: %s", r.Error)
	}
	if err := r.Check(); err != nil {
		return Reply{}, fmt.Errorf("dispatcher reply %q: %w", bytes.TrimSpace(line), err)
	}
	return r, nil
}

// hostRE is a host name or an IPv4/IPv6 address, and nothing that OpenVPN's
// command line could read as an option ("--up ...").
var hostRE = regexp.MustCompile(`^[A-Za-z0-9_.:][A-Za-z0-9_.:-]{0,252}$`)

// ValidHost reports whether h can be handed out as an instance's host.
func ValidHost(h string) bool { return hostRE.MatchString(h) }

// Check refuses an assignment that `cluster connect` could not pass to
// openvpn as `--remote HOST PORT PROTO` as it is: the reply comes from the
// network, and its words become openvpn's arguments.
func (r Reply) Check() error {
	if !ValidHost(r.Remote) {
		return fmt.Errorf("remote %q is not a host name or address", r.Remote)
	}
	if r.Port == 0 {
		return errors.New("port 0")
	}
	if r.Proto != "udp" && r.Proto != "tcp" {
		return fmt.Errorf("proto %q is not udp or tcp", r.Proto)
	}
	return nil
}
