package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// idRE: cluster ids are 4 hex digits, so that a tun name
// ovpnperf<ID><u|t><N> fits the kernel's 15 characters.
var idRE = regexp.MustCompile(`^[0-9a-f]{4}$`)

// NewID returns a random cluster id.
func NewID() string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Options configure a cluster.
type Options struct {
	ID string // empty: random
	// Base is the server config to split. Its credentials are used as
	// they are; the dispatcher needs CACert/ServerCert/ServerKey.
	Base      *openvpn.Config
	Instances int
	Protos    []string
	PortBase  uint16
	Pool      netip.Prefix
	Pool6     netip.Prefix
	CPUs      []int
	Nice      int
	// Netns runs the instances and the one-port rules in a named network
	// namespace (a lab's server); empty means serve's own namespace.
	Netns string
	// OnePort, when non-zero, spreads flows arriving at this port over
	// the instances (see oneport.go).
	OnePort uint16
	// Spread is SpreadCounter (default) or SpreadHash.
	Spread string
	// Drain is how long SIGTERM/stop keeps instances running after the
	// dispatcher stops assigning.
	Drain time.Duration
	// PerClient exports bytes per client (by common name) in the metrics;
	// PerClientMax caps those keys per scrape (0: DefaultPerClientMax).
	PerClient    bool
	PerClientMax int
	// IRQ is IRQOff (or ""), IRQPlan or IRQApply: see irq.go. NICs names
	// the devices to plan for (default: the instances' routed devices).
	IRQ  string
	NICs []string
	// Sites are client networks routed back over every instance their
	// client is connected to (site.go).
	Sites []Site
	Log   *slog.Logger
	// Paths is where the cluster keeps its state; the zero value is the
	// host's.
	Paths Paths
	// Prepare, if set, runs after the cluster's directory exists and
	// before anything is planned, and returns the base config (the built-in
	// config writes its PKI into the cluster's directory).
	Prepare func(dir string) (*openvpn.Config, error)
	// Timing is the supervisor's restart and poll timing; zero fields
	// take DefaultTiming's.
	Timing Timing
}

// Cluster is a running cluster.
type Cluster struct {
	opts      Options
	id        string
	dir       string
	log       *slog.Logger
	state     *stateFile
	instances []*instance
	specs     []Spec
	backend   string
	draining  chan struct{}
	drainOnce sync.Once
	stopReq   chan struct{}
	stopOnce  sync.Once
	wg        sync.WaitGroup
	ctl       net.Listener
	cancel    context.CancelFunc
	irq       *IRQReport
	sites     []*Multipath
}

// ID returns the cluster id.
func (c *Cluster) ID() string { return c.id }

// Dir returns the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

// Backend is the one-port backend in use ("" without one-port mode).
func (c *Cluster) Backend() string { return c.backend }

// Specs returns the planned instances.
func (c *Cluster) Specs() []Spec { return c.specs }

// PrivateUmask is the umask of a process that starts a cluster (`cluster
// serve` sets it in main): nothing the cluster or its OpenVPN processes
// create is readable by group or others.
const PrivateUmask = 0o077

// checkPrivateUmask refuses to start in a process whose umask would let
// group or others read what the cluster creates. Linux has no call that
// reads the umask without setting it; /proc/self/status shows it.
func checkPrivateUmask() error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "Umask:")
		if !ok {
			continue
		}
		m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
		if err != nil {
			return fmt.Errorf("cluster: reading the umask: /proc/self/status says %q", line)
		}
		if m&PrivateUmask != PrivateUmask {
			return fmt.Errorf("cluster: the process umask is %04o; set umask %04o before starting a cluster (its files and sockets are private)", m, PrivateUmask)
		}
		return nil
	}
	return errors.New("cluster: /proc/self/status shows no Umask line (Linux 4.7 or later)")
}

// Start plans the instances, records and makes the cluster's resources and
// starts the supervisors. It returns once every instance was started (not
// necessarily up: see WaitUp).
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	p := o.Paths
	if o.ID == "" {
		o.ID = NewID()
		for p.connectRunExists(o.ID) {
			o.ID = NewID()
		}
	}
	if !idRE.MatchString(o.ID) {
		return nil, usage.Errorf("cluster id %q: use 4 hex digits", o.ID)
	}
	if p.connectRunExists(o.ID) {
		// `cluster clean ID` must name one thing.
		return nil, usage.Errorf("id %s is a `cluster connect` run's (%s): choose another --id", o.ID, p.ConnectRunDir(o.ID))
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if o.PortBase == 0 {
		o.PortBase = 1195
	}
	o.Timing = o.Timing.withDefaults()
	// Everything serve and its children create is private: configs, status
	// files, sockets (OpenVPN creates its management socket with the
	// umask). The umask is the process's, so its entry point sets it.
	if err := checkPrivateUmask(); err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, id: o.ID, dir: p.Dir(o.ID), log: o.Log.With("cluster", o.ID),
		draining: make(chan struct{}), stopReq: make(chan struct{})}
	if err := os.MkdirAll(p.StateDir(), 0o755); err != nil {
		return nil, err
	}
	if err := os.Mkdir(c.dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, usage.Errorf("cluster %s exists (%s): stop it or run `ovpnperf cluster clean %s`", o.ID, c.dir, o.ID)
		}
		return nil, err
	}
	ticks, _ := startTicks(os.Getpid())
	if c.state, err = p.newStateFile(State{ID: o.ID, Netns: o.Netns, ServePid: os.Getpid(), Control: p.ControlPath(o.ID)}); err == nil {
		err = c.state.record(Resource{Kind: KindProcess, Name: "serve", Pid: os.Getpid(), StartTicks: ticks, Argv: os.Args})
	}
	if err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = p.Clean(context.Background(), o.ID)
		}
	}()
	if err := os.Mkdir(filepath.Join(c.dir, "run"), 0o700); err != nil {
		return nil, err
	}
	if o.Prepare != nil {
		if o.Base, err = o.Prepare(c.dir); err != nil {
			return nil, err
		}
		c.opts.Base = o.Base
	}
	if o.Base == nil {
		return nil, errors.New("cluster needs a base config")
	}
	var ccd string
	if len(o.Sites) > 0 {
		if _, ok := o.Base.Get("client-config-dir"); ok {
			return nil, usage.Errorf("--site writes the instances' client-config-dir: the base config has its own; move its iroutes to --site")
		}
		if ccd, err = writeCCD(c.dir, o.Sites); err != nil {
			return nil, err
		}
	}
	if c.specs, err = Plan(PlanOptions{ID: o.ID, Dir: c.dir, Base: o.Base, Instances: o.Instances, Protos: o.Protos,
		PortBase: o.PortBase, Pool: o.Pool, Pool6: o.Pool6, CPUs: o.CPUs, CCD: ccd}); err != nil {
		return nil, err
	}
	if _, c2c := o.Base.Get("client-to-client"); c2c {
		// Traffic between instances crosses the kernel from one tun to another.
		for _, key := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
			old, err := o.Paths.host(o.Netns).Sysctl(ctx, key)
			if err != nil {
				return nil, err
			}
			if old != "1" {
				if err := c.state.record(Resource{Kind: KindSysctl, Name: key, Netns: o.Netns, Detail: old, Set: "1"}); err != nil {
					return nil, err
				}
				if _, err := o.Paths.host(o.Netns).SetSysctl(ctx, key, "1"); err != nil {
					return nil, err
				}
			}
		}
	}
	if o.IRQ == IRQPlan || o.IRQ == IRQApply {
		if err := c.irqSetup(ctx); err != nil {
			return nil, err
		}
	}
	if o.OnePort != 0 {
		if err := c.onePort(ctx); err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	for _, s := range c.specs {
		in := &instance{spec: s, c: c}
		in.st = InstanceStatus{Name: s.Name, State: StateStarting, CPU: s.CPU, Proto: s.Proto, Port: s.Port, Dev: s.Dev, Subnet: s.Subnet.String()}
		c.instances = append(c.instances, in)
		c.wg.Add(1)
		go func() { defer c.wg.Done(); in.run(sctx) }()
	}
	if len(o.Sites) > 0 {
		if err := c.startSites(ctx, sctx); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.serveControl(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) onePort(ctx context.Context) error {
	c.backend = BackendNth
	if c.opts.Spread == SpreadHash {
		if !probeHMARK(ctx, c.opts.Paths.host(c.opts.Netns)) {
			return fmt.Errorf("--spread hash needs the iptables HMARK target (kernel option CONFIG_NETFILTER_XT_TARGET_HMARK); use --spread counter")
		}
		c.backend = BackendHMARK
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	rnd := binary.BigEndian.Uint32(rb[:]) | 1
	for _, proto := range c.opts.Protos {
		var ports []uint16
		for _, s := range c.specs {
			if s.Proto == proto {
				ports = append(ports, s.Port)
			}
		}
		for _, p := range ports {
			if p == c.opts.OnePort {
				return usage.Errorf("--one-port %d is also an instance port: choose a --port-base above it", p)
			}
		}
		ch := chainName(c.id, proto)
		if err := c.state.record(Resource{Kind: KindChain, Name: ch, Netns: c.opts.Netns, Detail: fmt.Sprintf("%s %d", proto, c.opts.OnePort)}); err != nil {
			return err
		}
		if err := addOnePort(ctx, c.opts.Paths.host(c.opts.Netns), c.id, proto, c.opts.OnePort, ports, c.backend, rnd); err != nil {
			return fmt.Errorf("one-port rules (%s): %w", c.backend, err)
		}
	}
	c.log.Info("one-port mode", "port", c.opts.OnePort, "backend", c.backend)
	return nil
}

// Status returns every instance's status.
func (c *Cluster) Status() []InstanceStatus {
	out := make([]InstanceStatus, len(c.instances))
	for i, in := range c.instances {
		out[i] = in.status()
	}
	if c.isDraining() {
		for i := range out {
			if out[i].State == StateUp {
				out[i].State = StateDraining
			}
		}
	}
	return out
}

func (c *Cluster) isDraining() bool {
	select {
	case <-c.draining:
		return true
	default:
		return false
	}
}

// WaitUp waits until every instance is up.
func (c *Cluster) WaitUp(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok := true
		for _, s := range c.Status() {
			if s.State != StateUp {
				ok = false
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			b, _ := json.Marshal(c.Status())
			return fmt.Errorf("cluster %s not up: %s", c.id, b)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// FailedStarts is how many times in a row an instance may fail to come
// up, before it was ever up, until WaitStarted calls it unable to start:
// a config OpenVPN refuses (a missing certificate, a bad option) fails
// every time, and restarting it forever helps nobody.
const FailedStarts = 2

// WaitStarted waits until every instance was up once. It returns a usage
// error naming the instance and OpenVPN's own reason when an instance
// failed FailedStarts starts without ever being up, and nil when timeout
// passes first (slow instances are then left to the supervisor).
func (c *Cluster) WaitStarted(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		all := true
		for _, in := range c.instances {
			in.mu.Lock()
			up, failed, last := in.everUp, in.failedStarts, in.st.LastExit
			in.mu.Unlock()
			if failed >= FailedStarts && !up {
				return usage.Errorf("instance %s cannot start: %s", in.spec.Name, openvpnReason(filepath.Join(c.dir, in.spec.Name+".log"), last))
			}
			all = all && up
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			if parent := context.Cause(ctx); parent != nil && !errors.Is(parent, context.DeadlineExceeded) {
				return parent
			}
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// openvpnReason is the line of an instance's log that says why OpenVPN
// stopped ("Options error: …", "Cannot load certificate …"), else the
// supervisor's own reason.
func openvpnReason(logPath, fallback string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return fallback
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// The first such line is the cause; later ones ("Please correct
	// these errors", "Exiting due to fatal error") follow from it.
	for _, l := range lines {
		l = strings.TrimSpace(openvpn.StripTimestamp(l))
		lo := strings.ToLower(l)
		if strings.Contains(lo, "please correct these errors") || strings.Contains(lo, "exiting due to fatal error") || strings.HasPrefix(l, "Use --help") {
			continue
		}
		if strings.Contains(lo, "error") || strings.Contains(lo, "cannot") || strings.Contains(lo, "fails") {
			return l
		}
	}
	return fallback
}

// Kill sends SIGKILL to instance name's process (fault tests).
func (c *Cluster) Kill(name string) (int, error) {
	for _, in := range c.instances {
		if in.spec.Name == name {
			return in.kill()
		}
	}
	return 0, fmt.Errorf("no instance %s", name)
}

// StopRequested is closed when a stop arrives on the control socket.
func (c *Cluster) StopRequested() <-chan struct{} { return c.stopReq }

// Drain stops the dispatcher from assigning any instance.
func (c *Cluster) Drain() { c.drainOnce.Do(func() { close(c.draining) }) }

// Stop drains for Options.Drain, stops every instance, removes the
// one-port rules, restores sysctls and removes the cluster's directory.
func (c *Cluster) Stop() error {
	c.Drain()
	if c.opts.Drain > 0 {
		time.Sleep(c.opts.Drain)
	}
	if c.ctl != nil {
		c.ctl.Close()
	}
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	errs := undoErrors(c.id, c.state.j.Undo(context.Background(), c.opts.Paths.undoActions(c.id, c.dir)))
	c.state.j.Close()
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// serveControl listens on the control socket: GET /status, POST /stop.
func (c *Cluster) serveControl() error {
	path := c.opts.Paths.ControlPath(c.id)
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return err
	}
	c.ctl = l
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ClusterStatus{ID: c.id, Netns: c.opts.Netns, OnePort: c.opts.OnePort, Backend: c.backend, Instances: c.Status(), IRQ: c.irq, Sites: c.SiteStatus()})
	})
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, r *http.Request) {
		c.stopOnce.Do(func() { close(c.stopReq) })
		w.WriteHeader(http.StatusAccepted)
	})
	go func() { _ = (&http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}).Serve(l) }()
	return nil
}

func (p Paths) controlClient(id string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", p.ControlPath(id))
		}}}
}

// QueryStatus asks a running serve for its status over the control socket.
func (p Paths) QueryStatus(ctx context.Context, id string) (*ClusterStatus, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://cluster/status", nil)
	resp, err := p.controlClient(id).Do(req)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", id, err)
	}
	defer resp.Body.Close()
	var s ClusterStatus
	// A status is a JSON document: read no more than one may hold.
	return &s, json.NewDecoder(io.LimitReader(resp.Body, inputfile.Document().Max)).Decode(&s)
}

// RequestStop asks a running serve to drain and stop, and waits until its
// directory is gone.
func (p Paths) RequestStop(ctx context.Context, id string) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://cluster/stop", nil)
	resp, err := p.controlClient(id).Do(req)
	if err != nil {
		return fmt.Errorf("cluster %s: %w (if serve was killed, run `ovpnperf cluster clean %s`)", id, err, id)
	}
	resp.Body.Close()
	for {
		if _, err := os.Stat(p.Dir(id)); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
