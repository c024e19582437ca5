package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

type clusterServeOptions struct {
	id, config, labName, netns string
	instances                  string
	reserve                    int
	proto                      string
	portBase, onePort          uint16
	spread                     string
	pool, pool6                string
	cpus                       string
	nice                       int
	dispatcher, public         string
	strategy                   string
	rate                       float64
	metrics                    string
	perClient                  bool
	perClientMax               int
	drain                      time.Duration
	irq                        string
	nics                       []string
	sites                      []string
	// A cluster across hosts: this host's instances in an etcd registry.
	reg       registryFlags
	advertise string
	regHost   string
	regTTL    time.Duration
}

func newClusterServeCommand() *cobra.Command {
	c, _ := newClusterServe()
	return c
}

// newClusterServe is the serve command and the options its flags fill
// (systemd-unit parses serve's flags with it).
func newClusterServe() (*cobra.Command, *clusterServeOptions) {
	o := &clusterServeOptions{}
	c := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Start the instances and supervise them until SIGTERM or `cluster stop`",
		Example: `  ovpnperf cluster serve --config /etc/openvpn/server.conf --instances auto --one-port 1194 --port-base 1195
  ovpnperf cluster serve --lab mylab --instances 2 --one-port 1194 --dispatcher 198.51.100.2:8443`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClusterServe(cmd.Context(), cmd.OutOrStdout(), *o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.id, "id", "", "cluster id, 4 hex digits (default: random)")
	f.StringVar(&o.config, "config", "", "server config to split (default with --lab: the lab's built-in config)")
	f.StringVar(&o.labName, "lab", "", "run in this lab's server namespace (the instances, --dispatcher and --metrics all listen there)")
	f.StringVar(&o.netns, "netns", "", "run in this named network namespace (the instances, --dispatcher and --metrics all listen there)")
	f.StringVar(&o.instances, "instances", "auto", "instances per protocol: N, or auto (one per usable CPU minus --reserve-cpus)")
	intFlag(f, &o.reserve, "reserve-cpus", "", 0, 0, 1024, "CPUs left out by --instances auto (0: none)")
	f.StringVar(&o.proto, "proto", "udp", "udp, tcp or udp,tcp (one instance of each per CPU)")
	portFlag(f, &o.portBase, "port-base", 1195, "port of the first instance; instance i listens on port-base+i (1–65535)")
	portFlag(f, &o.onePort, "one-port", 0, "spread clients arriving at this port (1–65535) over the instances (iptables in the namespace)")
	f.StringVar(&o.spread, "spread", cluster.SpreadCounter, "one-port spreading: counter (new flows in turn) or hash (source address and port, HMARK)")
	f.StringVar(&o.pool, "pool", "", "IPv4 address pool split between the instances (default: the config's server network)")
	f.StringVar(&o.pool6, "pool6", "", "IPv6 pool (default: the config's server-ipv6)")
	f.StringVar(&o.cpus, "cpus", "", "CPUs to pin instances to, e.g. 0-3 (default: the CPUs this process may use)")
	intFlag(f, &o.nice, "nice", "", 0, -20, 19, "nice value of the instances (-20..19)")
	f.StringVar(&o.dispatcher, "dispatcher", "", "serve assignments over TLS on ADDR:PORT (callers need a client certificate of the cluster's CA)")
	f.StringVar(&o.public, "public", "", "host name or address the dispatcher hands out (default: the lab's server address)")
	f.StringVar(&o.strategy, "strategy", cluster.LeastLoaded, "dispatcher strategy: round-robin or least-loaded")
	floatFlag(f, &o.rate, "rate", 20, 0, 1e6, "dispatcher requests per second per source address (burst twice that; 0: no limit)")
	f.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics on ADDR:PORT/metrics")
	f.BoolVar(&o.perClient, "per-client-metrics", false, "also export bytes per client, labelled by common name (same names summed)")
	clientsCapFlag(f, &o.perClientMax, "per-client-max", cluster.DefaultPerClientMax, "with --per-client-metrics: export at most this many clients per scrape (%s), the busiest (the rest are counted in ovpnperf_cluster_client_series_dropped)")
	f.DurationVar(&o.drain, "drain", 2*time.Second, "on stop, how long instances keep running after the dispatcher stops assigning")
	f.StringVar(&o.irq, "irq", cluster.IRQOff, "NIC interrupt and RPS/XPS placement: off, plan (print it) or apply (write it; stop and clean restore the old values)")
	f.StringSliceVar(&o.nics, "nic", nil, "with --irq: the device(s) carrying the instances' traffic (default: the devices of the instances' routes)")
	f.StringArrayVar(&o.sites, "site", nil, "CIDR=CN: route this client network back over every instance the client with common name CN is connected to (for `cluster connect --tunnels N`; repeatable)")
	o.reg.add(f)
	f.StringVar(&o.advertise, "advertise", "", "with --registry: the address clients reach this host's instances at (default: --public)")
	f.StringVar(&o.regHost, "registry-host", "", "with --registry: this host's name in the registry (default: the host name)")
	f.DurationVar(&o.regTTL, "registry-ttl", 10*time.Second, "with --registry: lease TTL; a host that stops renewing it leaves the registry this long after")
	// The flags are guarded here, not only by the root: systemd-unit
	// parses serve's flags with this flag set, and what serve refuses
	// (a control character in --config, 0x10 for a port) it must refuse.
	guardCommands(c)
	return c, o
}

// toOptions checks every serve flag that can be checked without the host
// (files, labs, namespaces and ports are runClusterServe's) and returns
// the cluster's options; serve and systemd-unit both call it.
func (o clusterServeOptions) toOptions() (cluster.Options, error) {
	co := cluster.Options{ID: o.id, Netns: o.netns, Nice: o.nice, PortBase: o.portBase, OnePort: o.onePort, Spread: o.spread, PerClient: o.perClient, PerClientMax: o.perClientMax, Drain: o.drain,
		IRQ: o.irq, NICs: o.nics}
	var err error
	switch o.irq {
	case cluster.IRQOff, cluster.IRQPlan, cluster.IRQApply:
	default:
		return co, usage.Errorf("--irq %q: use off, plan or apply", o.irq)
	}
	if len(o.nics) > 0 && o.irq == cluster.IRQOff {
		return co, usage.Errorf("--nic names the devices for --irq plan|apply: give --irq too")
	}
	for _, s := range o.sites {
		site, err := cluster.ParseSite(s)
		if err != nil {
			return co, err
		}
		co.Sites = append(co.Sites, site)
	}
	for _, n := range o.nics {
		if !cluster.ValidDevName(n) {
			return co, usage.Errorf("--nic %q: not a network device name", n)
		}
	}
	if co.Protos, err = cluster.ParseProtos(o.proto); err != nil {
		return co, err
	}
	if o.spread != cluster.SpreadCounter && o.spread != cluster.SpreadHash {
		return co, usage.Errorf("--spread %q: use counter or hash", o.spread)
	}
	if o.strategy != cluster.RoundRobin && o.strategy != cluster.LeastLoaded {
		return co, usage.Errorf("--strategy %q: use round-robin or least-loaded", o.strategy)
	}
	if o.nice < -20 || o.nice > 19 {
		return co, usage.Errorf("--nice %d: use -20..19", o.nice)
	}
	if o.id != "" && !cluster.ValidID(o.id) {
		return co, usage.Errorf("--id %q: want 4 hex digits, e.g. 0a1b", o.id)
	}
	if o.labName != "" && o.netns != "" {
		return co, usage.Errorf("--lab and --netns: give one")
	}
	if o.labName != "" {
		if err := lab.CheckName("--lab", o.labName); err != nil {
			return co, err
		}
		co.Netns = lab.NamespaceName(o.labName, lab.Server)
	}
	if o.config == "" && o.labName == "" {
		return co, usage.Errorf("give --config FILE, or --lab NAME for the built-in lab config")
	}
	if co.CPUs, err = cluster.ParseCPUs(o.cpus); err != nil {
		return co, err
	}
	var usable []int
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		for i := 0; i < 1024 && len(usable) < set.Count(); i++ {
			if set.IsSet(i) {
				usable = append(usable, i)
			}
		}
	}
	if len(co.CPUs) == 0 {
		co.CPUs = usable
	} else if len(usable) > 0 {
		// Pinning to a CPU this process may not use fails for every
		// instance; say so now rather than log it per start.
		for _, cpu := range co.CPUs {
			if !set.IsSet(cpu) {
				return co, usage.Errorf("--cpus %q: CPU %d is not one this process may use (usable: %s)", o.cpus, cpu, cpuList(usable))
			}
		}
	}
	if o.instances == "auto" {
		if o.reserve < 0 || o.reserve >= len(co.CPUs) {
			return co, usage.Errorf("--reserve-cpus %d leaves no CPU of %d for instances", o.reserve, len(co.CPUs))
		}
		co.CPUs = co.CPUs[:len(co.CPUs)-o.reserve]
		co.Instances = len(co.CPUs)
	} else if co.Instances, err = strconv.Atoi(o.instances); err != nil || !decimalRE.MatchString(o.instances) || co.Instances < 1 || co.Instances > 64 {
		return co, usage.Errorf("--instances %q: use 1-64 or auto", o.instances)
	}
	if o.pool != "" {
		if co.Pool, err = netip.ParsePrefix(o.pool); err != nil || !co.Pool.Addr().Is4() {
			return co, usage.Errorf("--pool %q: use an IPv4 prefix like 10.8.0.0/16", o.pool)
		}
	}
	if o.pool6 != "" {
		if co.Pool6, err = netip.ParsePrefix(o.pool6); err != nil || !co.Pool6.Addr().Is6() {
			return co, usage.Errorf("--pool6 %q: use an IPv6 prefix like fd00:8::/64", o.pool6)
		}
	}
	if o.public != "" && !cluster.ValidHost(o.public) {
		return co, usage.Errorf("--public %q: give the host name or address clients reach the instances at", o.public)
	}
	if o.dispatcher != "" {
		if _, _, err := net.SplitHostPort(o.dispatcher); err != nil {
			return co, usage.Errorf("--dispatcher %q: use ADDR:PORT", o.dispatcher)
		}
	}
	if o.reg.url == "" && (o.advertise != "" || o.regHost != "") {
		return co, usage.Errorf("--advertise and --registry-host need --registry")
	}
	if o.reg.url != "" {
		if _, err := o.reg.options(); err != nil {
			return co, err
		}
		if o.advertise != "" && !cluster.ValidHost(o.advertise) {
			return co, usage.Errorf("--advertise %q: give the host name or address clients reach the instances at", o.advertise)
		}
	}
	if o.public == "" && o.labName != "" {
		o.public = lab.ServerV4().String()
	}
	if o.dispatcher != "" && o.public == "" {
		return co, usage.Errorf("--dispatcher needs --public HOST: the address clients reach the instances at")
	}
	if err := o.checkServeRegistry(); err != nil {
		return co, err
	}
	return co, nil
}

// cpuList writes CPUs as taskset does: 0-3,6.
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// checkNetns refuses a network namespace name that names no namespace
// under /run/netns (where `ip netns add` puts them), before anything
// starts in it.
func checkNetns(flag, name string) error {
	if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return usage.Errorf("%s %q: not a network namespace name", flag, name)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", name)); err != nil {
		return usage.Errorf("%s: no network namespace %q (see `ip netns list`)", flag, name)
	}
	return nil
}

func runClusterServe(ctx context.Context, w io.Writer, o clusterServeOptions) error {
	co, err := o.toOptions()
	if err != nil {
		return err
	}
	var pki *openvpn.PKI
	if o.config != "" {
		b, err := inputfile.ReadFile(ctx, o.config, inputfile.Config())
		if err != nil {
			return usage.Errorf("--config %v", err)
		}
		base, err := openvpn.ParseString(string(b))
		if err != nil {
			return usage.Errorf("--config %s: %v", o.config, err)
		}
		if err := cluster.CheckBase(base); err != nil {
			return err
		}
		cwd, _ := os.Getwd()
		if err := cluster.CheckBaseFiles(base, cwd); err != nil {
			return err
		}
		co.Base = base
	} else {
		co.Prepare = func(dir string) (*openvpn.Config, error) {
			base, p, err := cluster.LabBase(dir, true)
			pki = p
			return base, err
		}
	}
	if !co.Pool.IsValid() {
		if o.config == "" {
			co.Pool = lab.TunnelV4()
		} else if co.Pool, err = serverNetwork(co.Base); err != nil {
			return err
		}
	}
	if o.public == "" && o.labName != "" {
		o.public = lab.ServerV4().String()
	}
	if o.dispatcher != "" && o.public == "" {
		return usage.Errorf("--dispatcher needs --public HOST: the address clients reach the instances at")
	}
	if err := o.checkServeRegistry(); err != nil {
		return err
	}
	// The lab or namespace must exist: checked after every flag and the
	// config, so that those mistakes are named first.
	if o.labName != "" {
		if _, err := lab.Open(o.labName); err != nil {
			return usage.Errorf("--lab %q: no such lab here (see `ovpnperf lab status`)", o.labName)
		}
		if err := checkNetns("--lab "+o.labName, co.Netns); err != nil {
			return err
		}
	}
	if o.netns != "" {
		if err := checkNetns("--netns", o.netns); err != nil {
			return err
		}
	}
	// Everything that can be refused is refused before an instance
	// starts: the listeners are bound first, and the supervisor's log is
	// held back until every instance was up once, so that a refusal is
	// one line.
	var closers []io.Closer
	defer func() {
		for _, cl := range closers {
			cl.Close()
		}
	}()
	var dispL, metricsL net.Listener
	if o.dispatcher != "" {
		if dispL, err = netns.Listen(co.Netns, "tcp", o.dispatcher); err != nil {
			return usage.Errorf("--dispatcher %q: cannot listen: %v", o.dispatcher, err)
		}
		closers = append(closers, dispL)
	}
	if o.metrics != "" {
		if metricsL, err = netns.Listen(co.Netns, "tcp", o.metrics); err != nil {
			return usage.Errorf("--metrics %q: cannot listen: %v", o.metrics, err)
		}
		closers = append(closers, metricsL)
	}
	startLog := &heldWriter{w: os.Stderr}
	co.Log = slog.New(slog.NewTextHandler(startLog, nil))
	// serve's process exists for the cluster: everything it and its
	// OpenVPN processes create is private.
	syscall.Umask(cluster.PrivateUmask)
	c, err := cluster.Start(ctx, co)
	if err != nil {
		return err
	}
	if err := c.WaitStarted(ctx, 60*time.Second); err != nil {
		c.Stop()
		return err
	}
	startLog.release()
	fmt.Fprintf(w, "cluster %s: %d instances, directory %s, control socket %s\n", c.ID(), len(c.Specs()), c.Dir(), cluster.Paths{}.ControlPath(c.ID()))
	for _, s := range c.Specs() {
		fmt.Fprintf(w, "  %s %s port %d dev %s subnet %s cpu %d\n", s.Name, s.Proto, s.Port, s.Dev, s.Subnet, s.CPU)
	}
	if c.Backend() != "" {
		fmt.Fprintf(w, "one-port %d: backend %s\n", o.onePort, c.Backend())
	}
	if r := c.IRQReport(); r != nil {
		r.WriteText(w)
	}
	if dispL != nil {
		l := dispL
		ca, cert, key, err := dispatcherCreds(co.Base, pki)
		if err != nil {
			c.Stop()
			return err
		}
		d := &cluster.Dispatcher{Registry: cluster.LocalRegistry{C: c, Host: o.public}, Strategy: o.strategy, RatePerSec: o.rate, Burst: 2 * o.rate}
		go func() { _ = d.Serve(l, cert, key, ca) }()
		fmt.Fprintf(w, "dispatcher on %s (%s), handing out %s\n", l.Addr(), o.strategy, o.public)
	}
	if metricsL != nil {
		l := metricsL
		go func() { _ = c.ServeMetrics(l) }()
		fmt.Fprintf(w, "metrics on http://%s/metrics\n", l.Addr())
	}
	var reg *serveRegistry
	if o.reg.url != "" {
		if reg, err = startServeRegistry(o, c, co.Log); err != nil {
			c.Stop()
			return err
		}
		fmt.Fprintf(w, "registering as host %q of registry cluster %q (lease TTL %v), advertising %s\n", o.regHost, o.reg.name, o.regTTL, o.advertise)
	}
	select {
	case <-ctx.Done():
	case <-c.StopRequested():
	}
	fmt.Fprintf(w, "cluster %s: draining %v, then stopping\n", c.ID(), o.drain)
	c.Drain()
	if reg != nil {
		// Dispatchers of other hosts see "draining" before the
		// instances stop, and the keys go (lease revoked) after.
		reg.drained()
		defer reg.close()
	}
	return c.Stop()
}

// heldWriter holds what is written until release, then writes it and
// everything after straight through; what is held when the command fails
// is dropped (the error says why).
type heldWriter struct {
	mu       sync.Mutex
	w        io.Writer
	held     bytes.Buffer
	released bool
}

func (h *heldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return h.w.Write(p)
	}
	return h.held.Write(p)
}

func (h *heldWriter) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = true
	_, _ = h.w.Write(h.held.Bytes())
	h.held.Reset()
}

// serverNetwork reads the pool from the config's `server NET MASK`.
func serverNetwork(c *openvpn.Config) (netip.Prefix, error) {
	d, ok := c.Get("server")
	if !ok || len(d.Args) < 2 {
		return netip.Prefix{}, usage.Errorf("config has no `server NET MASK`; give --pool")
	}
	a, err1 := netip.ParseAddr(d.Args[0])
	m, err2 := netip.ParseAddr(d.Args[1])
	if err1 != nil || err2 != nil || !a.Is4() || !m.Is4() {
		return netip.Prefix{}, usage.Errorf("config: server %s %s: want IPv4 NET MASK", d.Args[0], d.Args[1])
	}
	ones, _ := net.IPMask(m.AsSlice()).Size()
	return netip.PrefixFrom(a, ones).Masked(), nil
}

// dispatcherCreds are the TLS files the dispatcher uses: the cluster's own
// PKI, or the base config's ca/cert/key files.
func dispatcherCreds(base *openvpn.Config, pki *openvpn.PKI) (ca, cert, key string, err error) {
	if pki != nil {
		return pki.CACert(), pki.ServerCert(), pki.ServerKey(), nil
	}
	get := func(n string) string {
		if d, ok := base.Get(n); ok && len(d.Args) > 0 {
			return d.Args[0]
		}
		return ""
	}
	ca, cert, key = get("ca"), get("cert"), get("key")
	if ca == "" || cert == "" || key == "" {
		return "", "", "", usage.Errorf("--dispatcher needs ca, cert and key files in the config (inline blocks are not supported)")
	}
	return ca, cert, key, nil
}
