package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/outputfile"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newClusterCommand) }

func newClusterCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Run one supervised OpenVPN server per CPU behind one address",
		Long: `OpenVPN 2.x moves every packet through one process on one core. A cluster is N
OpenVPN server processes made from one config, each pinned to its own CPU with
its own port, tun device and slice of the address pool, supervised (restarted
with backoff), observable (status, Prometheus metrics) and reachable three ways:
one public port spread by the kernel (--one-port), an authenticated dispatcher
(--dispatcher, used by ` + "`cluster connect`" + `), or a client config listing every
instance (` + "`cluster client-config`" + `).

Files live in /run/ovpnperf/cluster/ID (0700); everything is recorded there
before it is made, so ` + "`cluster clean ID`" + ` removes what a killed serve left.`,
	}
	c.AddCommand(newClusterServeCommand(), newClusterStatusCommand(), newClusterStopCommand(), newClusterCleanCommand(),
		newClusterConnectCommand(), newClusterClientConfigCommand(), newClusterSystemdUnitCommand(), newClusterDispatchCommand(),
		newClusterRouteHookCommand())
	return c
}

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
	f.IntVar(&o.reserve, "reserve-cpus", 0, "CPUs left out by --instances auto")
	f.StringVar(&o.proto, "proto", "udp", "udp, tcp or udp,tcp (one instance of each per CPU)")
	f.Uint16Var(&o.portBase, "port-base", 1195, "port of the first instance; instance i listens on port-base+i")
	f.Uint16Var(&o.onePort, "one-port", 0, "spread clients arriving at this port over the instances (iptables in the namespace)")
	f.StringVar(&o.spread, "spread", cluster.SpreadCounter, "one-port spreading: counter (new flows in turn) or hash (source address and port, HMARK)")
	f.StringVar(&o.pool, "pool", "", "IPv4 address pool split between the instances (default: the config's server network)")
	f.StringVar(&o.pool6, "pool6", "", "IPv6 pool (default: the config's server-ipv6)")
	f.StringVar(&o.cpus, "cpus", "", "CPUs to pin instances to, e.g. 0-3 (default: the CPUs this process may use)")
	f.IntVar(&o.nice, "nice", 0, "nice value of the instances (-20..19)")
	f.StringVar(&o.dispatcher, "dispatcher", "", "serve assignments over TLS on ADDR:PORT (callers need a client certificate of the cluster's CA)")
	f.StringVar(&o.public, "public", "", "host name or address the dispatcher hands out (default: the lab's server address)")
	f.StringVar(&o.strategy, "strategy", cluster.LeastLoaded, "dispatcher strategy: round-robin or least-loaded")
	floatFlag(f, &o.rate, "rate", 20, 0, 1e6, "dispatcher requests per second per source address (burst twice that; 0: no limit)")
	f.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics on ADDR:PORT/metrics")
	f.BoolVar(&o.perClient, "per-client-metrics", false, "also export bytes per client, labelled by common name")
	f.DurationVar(&o.drain, "drain", 2*time.Second, "on stop, how long instances keep running after the dispatcher stops assigning")
	f.StringVar(&o.irq, "irq", cluster.IRQOff, "NIC interrupt and RPS/XPS placement: off, plan (print it) or apply (write it; stop and clean restore the old values)")
	f.StringSliceVar(&o.nics, "nic", nil, "with --irq: the device(s) carrying the instances' traffic (default: the devices of the instances' routes)")
	f.StringArrayVar(&o.sites, "site", nil, "CIDR=CN: route this client network back over every instance the client with common name CN is connected to (for `cluster connect --tunnels N`; repeatable)")
	o.reg.add(f)
	f.StringVar(&o.advertise, "advertise", "", "with --registry: the address clients reach this host's instances at (default: --public)")
	f.StringVar(&o.regHost, "registry-host", "", "with --registry: this host's name in the registry (default: the host name)")
	f.DurationVar(&o.regTTL, "registry-ttl", 10*time.Second, "with --registry: lease TTL; a host that stops renewing it leaves the registry this long after")
	return c, o
}

func (o clusterServeOptions) toOptions() (cluster.Options, error) {
	co := cluster.Options{ID: o.id, Netns: o.netns, Nice: o.nice, PortBase: o.portBase, OnePort: o.onePort, Spread: o.spread, PerClient: o.perClient, Drain: o.drain,
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
	} else if co.Instances, err = strconv.Atoi(o.instances); err != nil || co.Instances < 1 || co.Instances > 64 {
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
		b, err := inputfile.ReadFile(ctx, o.config, inputfile.Config)
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
			co.Pool = lab.TunnelV4
		} else if co.Pool, err = serverNetwork(co.Base); err != nil {
			return err
		}
	}
	if o.public == "" && o.labName != "" {
		o.public = lab.ServerV4.String()
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
	fmt.Fprintf(w, "cluster %s: %d instances, directory %s, control socket %s\n", c.ID(), len(c.Specs()), c.Dir(), cluster.ControlPath(c.ID()))
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

func clusterID(args []string) (string, error) {
	if len(args) == 1 {
		// The id names a directory and a socket under /run/ovpnperf:
		// nothing but 4 hex digits may reach a path.
		if !cluster.ValidID(args[0]) {
			return "", usage.Errorf("cluster id %q: want 4 hex digits (see `ovpnperf cluster status`)", args[0])
		}
		return args[0], nil
	}
	ids, err := cluster.List()
	if err != nil {
		return "", err
	}
	if len(ids) != 1 {
		return "", usage.Errorf("%d clusters here (%s): name one", len(ids), strings.Join(ids, ", "))
	}
	return ids[0], nil
}

func newClusterStatusCommand() *cobra.Command {
	var asJSON bool
	var reg registryFlags
	c := &cobra.Command{
		Use:   "status [ID] | status --registry etcd://HOST:PORT",
		Short: "Show each instance: state, pid, CPU, port, clients, bytes, restarts, last exit (with --registry: every host's)",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if reg.url != "" {
				if len(a) > 0 {
					return usage.Errorf("--registry shows the whole cluster: give no ID")
				}
				return runRegistryStatus(cmd.Context(), cmd.OutOrStdout(), reg, asJSON)
			}
			id, err := clusterID(a)
			if err != nil {
				return err
			}
			st, err := cluster.QueryStatus(cmd.Context(), id)
			if err != nil {
				return err
			}
			if asJSON {
				st.Schema, st.Argv = cluster.StatusSchema, os.Args
				return writeJSON(cmd.OutOrStdout(), st)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "cluster %s\tnetns %s\tone-port %d %s\n", st.ID, st.Netns, st.OnePort, st.Backend)
			fmt.Fprintln(w, "INSTANCE\tSTATE\tPID\tCPU\tPROTO\tPORT\tCLIENTS\tBYTES IN\tBYTES OUT\tRESTARTS\tLAST EXIT")
			for _, s := range st.Instances {
				state := s.State
				if s.CrashLoop {
					state += " (crash loop)"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Name, state, s.Pid, s.CPU, s.Proto, s.Port, s.Clients, s.BytesIn, s.BytesOut, s.Restarts, s.LastExit)
			}
			for _, s := range st.Sites {
				via := strings.Join(s.Via, ", ")
				if via == "" {
					via = "(no tunnel up: not routed)"
				}
				fmt.Fprintf(w, "site %s\tclient %s\ttunnels via %s\n", s.Prefix, s.CN, via)
			}
			return w.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON document (schema "+cluster.StatusSchema+")")
	reg.add(c.Flags())
	return c
}

func newClusterStopCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stop [ID]",
		Short: "Ask a running `cluster serve` to drain and stop, and wait until it has",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := clusterID(a)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
			defer cancel()
			return cluster.RequestStop(ctx, id)
		},
	}
}

func newClusterCleanCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "clean [ID]",
		Short: "Remove what a killed `cluster serve` or `cluster connect --tunnels` left: processes, iptables chains, routes, devices, sysctls, IRQ/RPS values, files",
		Long: `clean ID removes what cluster ID or connect run ID recorded in its state file
(/run/ovpnperf/cluster/ID or /run/ovpnperf/connect/ID), stopping the cluster's
serve first if it still runs (a connect that still runs is left alone: it undoes
its changes when it ends). Without ID it removes every cluster and connect run
whose process is gone, and leaves the live ones alone.

Only what the state file lists is touched: processes whose pid and start time
still match, the run's iptables chains, tun devices, nexthops and the routes
that still point at them, and sysctl and IRQ/RPS values written back as they
were before the run.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 1 {
				if !cluster.ValidID(a[0]) {
					return usage.Errorf("cluster id %q: want 4 hex digits (see `ovpnperf cluster status`)", a[0])
				}
				return cluster.CleanID(cmd.Context(), a[0])
			}
			cleaned, err := cluster.CleanDead(cmd.Context())
			for _, id := range cleaned {
				fmt.Fprintf(cmd.OutOrStdout(), "cleaned %s\n", id)
			}
			return err
		},
	}
}

// newClusterRouteHookCommand is the --route-up hook `cluster connect
// --tunnels` gives each openvpn when it takes the pushed routes: it writes
// the routes OpenVPN put into its environment to FILE. Hidden: OpenVPN
// runs it, nobody types it.
func newClusterRouteHookCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "route-hook FILE",
		Short:  "Write the routes OpenVPN pushed (run by openvpn --route-up, not by hand)",
		Hidden: true,
		Args:   args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := cluster.RouteHookFile(a[0]); err != nil {
				return err
			}
			routes, err := cluster.RoutesFromEnv(os.Environ())
			if err != nil {
				return err
			}
			return cluster.WriteRouteFile(a[0], routes)
		},
	}
}

type clusterConnectOptions struct {
	ca, cert, key, proto string
	dispatchers          []string
	reconnect            bool
	tunnels              int
	routes               []string
	onePort              string
}

func newClusterConnectCommand() *cobra.Command {
	var o clusterConnectOptions
	c := &cobra.Command{
		Use:   "connect DISPATCHER[,DISPATCHER…] -- [openvpn options]",
		Short: "Ask a dispatcher for an instance, then run openvpn with it as the first remote",
		Long: `connect asks the dispatchers (ADDR:PORT; a comma list and/or --dispatcher, tried
in order, the next when one cannot be reached or refuses) for an instance, over
TLS with the client certificate given, and execs openvpn with --remote HOST PORT
PROTO before the options after --, so the assigned instance is tried first. If
no dispatcher answers, openvpn runs with the options as given and uses the
remotes of its config.

With --reconnect, connect stays openvpn's parent and adds --remap-usr1 SIGTERM:
when openvpn gives up on its server (ping-restart, server-poll-timeout, a TLS
error) it exits instead of retrying the same remotes, and connect asks the
dispatchers again, which by then no longer name an instance whose host died.

With --tunnels N, connect asks for N distinct instances and runs one openvpn
to each (tun devices ovpnperf<ID>t<i>), with one multipath route per network
over the tunnels that are CONNECTED, hashed by addresses and ports
(fib_multipath_hash_policy=1 for IPv4 and IPv6, restored on exit): one flow
stays on one tunnel, flows spread. The networks are those given with --route,
or else those the server pushes (route and route-ipv6): OpenVPN hands them to
a --route-up hook (ovpnperf itself; this needs --script-security 2, which also
lets your config's scripts run) and installs none itself. A network this host
routes already is not taken over. A tunnel whose keepalive gives up leaves the
route and comes back when it reconnects. The server routes the client's own
networks back with ` + "`cluster serve --site CIDR=CN`" + `.

Everything connect changes is first recorded in /run/ovpnperf/connect/ID
(0600) and undone on exit, Ctrl-C or SIGTERM; after a crash or SIGKILL,
` + "`ovpnperf cluster clean`" + ` undoes it.`,
		Example: `  ovpnperf cluster connect vpn.example.net:8443 --ca ca.crt --cert me.crt --key me.key -- --config client.conf
  ovpnperf cluster connect d1.example.net:8443,d2.example.net:8443 --reconnect --ca ca.crt --cert me.crt --key me.key -- --config client.conf`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			disp := append([]string(nil), o.dispatchers...)
			extra := a
			if cmd.ArgsLenAtDash() != 0 && len(a) > 0 {
				disp = append(strings.Split(a[0], ","), disp...)
				extra = a[1:]
			}
			return runClusterConnect(cmd.Context(), cmd.ErrOrStderr(), disp, extra, o)
		},
	}
	c.Flags().StringVar(&o.ca, "ca", "", "the cluster's CA certificate")
	c.Flags().StringVar(&o.cert, "cert", "", "this client's certificate")
	c.Flags().StringVar(&o.key, "key", "", "this client's key")
	c.Flags().StringVar(&o.proto, "proto", "udp", "udp or tcp")
	c.Flags().StringSliceVar(&o.dispatchers, "dispatcher", nil, "another dispatcher ADDR:PORT (repeatable), tried after those before --")
	c.Flags().BoolVar(&o.reconnect, "reconnect", false, "stay openvpn's parent: when it gives up on a server, ask the dispatchers again")
	c.Flags().IntVar(&o.tunnels, "tunnels", 1, "open this many tunnels to distinct instances, one multipath route over them")
	c.Flags().StringVar(&o.onePort, "one-port", "", "HOST:PORT, the one-port address of a cluster (serve --one-port): open the --tunnels there instead of asking a dispatcher, each from its own source port; a tunnel that reached an instance another one has reconnects")
	c.Flags().StringArrayVar(&o.routes, "route", nil, "a network CIDR of the server side routed over the tunnels (repeatable; default with --tunnels N>1: the networks the server pushes; with --tunnels 1 runs one tunnel the same way)")
	return c
}

// connectArgv returns openvpn's argv for a reply (nil: fall back).
func connectArgv(r *cluster.Reply, extra []string) []string {
	argv := []string{"openvpn"}
	if r != nil {
		p := r.Proto
		if p == openvpn.TCP {
			p = "tcp-client"
		}
		argv = append(argv, "--remote", r.Remote, strconv.Itoa(int(r.Port)), p)
	}
	return append(argv, extra...)
}

// askDispatchers asks each dispatcher in turn until one assigns.
func askDispatchers(ctx context.Context, stderr io.Writer, disp []string, cfg *tls.Config, proto string) *cluster.Reply {
	for _, addr := range disp {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := cluster.Ask(actx, addr, cfg, cluster.NewRequest(proto))
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "ovpnperf: dispatcher %s: %v\n", addr, err)
			continue
		}
		fmt.Fprintf(stderr, "ovpnperf: dispatcher assigned %s (%s %d %s) via %s\n", r.Instance, r.Remote, r.Port, r.Proto, addr)
		return &r
	}
	fmt.Fprintf(stderr, "ovpnperf: no dispatcher answered; using the config's remotes\n")
	return nil
}

func runClusterConnect(ctx context.Context, stderr io.Writer, disp []string, extra []string, o clusterConnectOptions) error {
	if o.onePort != "" {
		return runClusterOnePortTunnels(ctx, stderr, disp, extra, o)
	}
	if len(disp) == 0 {
		return usage.Errorf("give a dispatcher ADDR:PORT (before -- or with --dispatcher)")
	}
	for _, d := range disp {
		if _, _, err := net.SplitHostPort(d); err != nil {
			return usage.Errorf("dispatcher %q: use ADDR:PORT", d)
		}
	}
	if o.proto != openvpn.UDP && o.proto != openvpn.TCP {
		return usage.Errorf("--proto %q: use udp or tcp", o.proto)
	}
	if o.ca == "" || o.cert == "" || o.key == "" {
		return usage.Errorf("give --ca, --cert and --key (the dispatcher accepts only certificates of the cluster's CA)")
	}
	if o.tunnels < 1 || o.tunnels > 16 {
		return usage.Errorf("--tunnels %d: use 1-16", o.tunnels)
	}
	var routes []netip.Prefix
	for _, r := range o.routes {
		p, err := netip.ParsePrefix(r)
		if err != nil || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return usage.Errorf("--route %q: use a network like 10.98.0.0/24 or fd00:98::/64", r)
		}
		routes = append(routes, p)
	}
	if o.reconnect && o.tunnels > 1 {
		return usage.Errorf("--reconnect is for one tunnel; with --tunnels each tunnel reconnects to its own instance")
	}
	cfg, err := cluster.ClientTLS(o.cert, o.key, o.ca)
	if err != nil {
		return err
	}
	if len(routes) > 0 || o.tunnels > 1 {
		// --tunnels 1 --route: the same machinery with one tunnel (a
		// baseline for N). Without --route: the pushed routes.
		return runClusterTunnels(ctx, stderr, disp, extra, cfg, routes, o)
	}
	path, err := exec.LookPath("openvpn")
	if err != nil {
		return fmt.Errorf("openvpn not found (Debian package openvpn): %w", err)
	}
	if !o.reconnect {
		argv := connectArgv(askDispatchers(ctx, stderr, disp, cfg, o.proto), extra)
		return syscall.Exec(path, argv, os.Environ())
	}
	for round := 1; ; round++ {
		argv := connectArgv(askDispatchers(ctx, stderr, disp, cfg, o.proto), extra)
		argv = append(argv, "--remap-usr1", "SIGTERM")
		cmd := exec.Command(path, argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		// openvpn must not outlive connect.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-done
			return nil
		case err := <-done:
			fmt.Fprintf(stderr, "ovpnperf: openvpn ended (%v) at %s; asking the dispatchers again (round %d)\n", err, time.Now().UTC().Format("15:04:05.000"), round+1)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type clusterClientConfigOptions struct {
	base, host, out string
}

func newClusterClientConfigCommand() *cobra.Command {
	var o clusterClientConfigOptions
	c := &cobra.Command{
		Use:   "client-config [ID]",
		Short: "Write a client config with one remote per instance and remote-random",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := clusterID(a)
			if err != nil {
				return err
			}
			return runClusterClientConfig(cmd.Context(), cmd.OutOrStdout(), id, o)
		},
	}
	c.Flags().StringVar(&o.base, "base", "", "client config to start from (its remotes are replaced)")
	c.Flags().StringVar(&o.host, "host", "", "host name or address of the instances (required)")
	c.Flags().StringVarP(&o.out, "output", "o", "", "write here (0600) instead of standard output")
	return c
}

func runClusterClientConfig(ctx context.Context, w io.Writer, id string, o clusterClientConfigOptions) error {
	if o.host == "" || openvpn.ValidateToken(o.host) != nil || strings.ContainsAny(o.host, " \t") {
		return usage.Errorf("--host %q: give the instances' host name or address", o.host)
	}
	if o.base == "" {
		return usage.Errorf("give --base CLIENT.conf (credentials and options to keep)")
	}
	if err := checkOutPath("-o/--output", o.out); err != nil {
		return err
	}
	b, err := inputfile.ReadFile(ctx, o.base, inputfile.Config)
	if err != nil {
		return usage.Errorf("--base %v", err)
	}
	cfg, err := openvpn.ParseString(string(b))
	if err != nil {
		return usage.Errorf("--base %s: %v", o.base, err)
	}
	st, err := cluster.QueryStatus(ctx, id)
	if err != nil {
		return err
	}
	text, err := cluster.ClientConfig(cfg, o.host, st.Instances)
	if err != nil {
		return err
	}
	if o.out == "" {
		_, err := io.WriteString(w, text)
		return err
	}
	// 0600: the client config holds the client's keys.
	return outputfile.WriteBytes(o.out, 0o600, []byte(text))
}

// checkServeArgs parses the flags a unit would pass to `cluster serve`
// with serve's own flag set and checks them as serve would, so that a unit
// is written only for a serve that would start: unknown flags, arguments,
// bad values and a second --id (the unit's clean lines name its own id)
// are refused now, not at the service's start.
func checkServeArgs(id string, a []string) error {
	serve, o := newClusterServe()
	f := serve.Flags()
	if err := f.Parse(a); err != nil {
		return usage.Errorf("serve flags after --: %v", err)
	}
	if rest := f.Args(); len(rest) > 0 {
		return usage.Errorf("serve flags after --: %q is not a flag; cluster serve takes no arguments", rest[0])
	}
	if f.Changed("id") {
		return usage.Errorf("serve flags after --: --id %q: the unit runs cluster %s (systemd-unit --id) and its clean lines name it; give the id once, with systemd-unit --id", o.id, id)
	}
	o.id = id
	if _, err := o.toOptions(); err != nil {
		return usage.Errorf("serve flags after --: %v", err)
	}
	return nil
}

func newClusterSystemdUnitCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "systemd-unit --id ID -- [serve flags]",
		Short: "Print a systemd unit that runs `cluster serve` as a service",
		Args:  args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			if !cluster.ValidID(id) {
				return usage.Errorf("--id %q: give a fixed cluster id of 4 hex digits, so stop and clean can name it", id)
			}
			if err := checkServeArgs(id, a); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			exe, _ = filepath.Abs(exe)
			_, err = io.WriteString(cmd.OutOrStdout(), cluster.SystemdUnit(exe, id, a))
			return err
		},
	}
	c.Flags().StringVar(&id, "id", "", "the cluster id the service uses (4 hex digits)")
	return c
}

// connectRoutes parses --route.
func connectRoutes(rs []string) ([]netip.Prefix, error) {
	var routes []netip.Prefix
	for _, r := range rs {
		p, err := netip.ParsePrefix(r)
		if err != nil || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return nil, usage.Errorf("--route %q: use a network like 10.98.0.0/24 or fd00:98::/64", r)
		}
		routes = append(routes, p)
	}
	return routes, nil
}

// runClusterOnePortTunnels opens o.tunnels tunnels to one --one-port
// address: the one-port rules spread new flows over the instances, and
// RunTunnels keeps in the route only tunnels that reached distinct ones.
func runClusterOnePortTunnels(ctx context.Context, stderr io.Writer, disp, extra []string, o clusterConnectOptions) error {
	host, port, err := net.SplitHostPort(o.onePort)
	pn, perr := strconv.ParseUint(port, 10, 16)
	if err != nil || perr != nil || pn == 0 || !cluster.ValidHost(host) {
		return usage.Errorf("--one-port %q: use HOST:PORT of the cluster's one-port address", o.onePort)
	}
	if len(disp) > 0 {
		return usage.Errorf("--one-port goes to the cluster's one port without a dispatcher: give one or the other")
	}
	if o.proto != openvpn.UDP && o.proto != openvpn.TCP {
		return usage.Errorf("--proto %q: use udp or tcp", o.proto)
	}
	if o.tunnels < 1 || o.tunnels > 16 {
		return usage.Errorf("--tunnels %d: use 1-16", o.tunnels)
	}
	if o.reconnect {
		return usage.Errorf("--reconnect asks a dispatcher again; with --one-port each tunnel reconnects to the one port")
	}
	routes, err := connectRoutes(o.routes)
	if err != nil {
		return err
	}
	var got []cluster.Reply
	for range o.tunnels {
		got = append(got, cluster.Reply{Instance: "one-port", Remote: host, Port: uint16(pn), Proto: o.proto})
	}
	return cluster.RunTunnels(ctx, cluster.TunnelsOptions{Assigned: got, Routes: routes, Extra: extra, Log: stderr, Distinct: true})
}

// runClusterTunnels asks for o.tunnels distinct instances (each request
// excludes those already named) and runs one tunnel to each.
func runClusterTunnels(ctx context.Context, stderr io.Writer, disp, extra []string, cfg *tls.Config, routes []netip.Prefix, o clusterConnectOptions) error {
	var got []cluster.Reply
	var names []string
	for len(got) < o.tunnels {
		req := cluster.NewRequest(o.proto)
		req.Exclude = names
		var r cluster.Reply
		var errs []string
		ok := false
		for _, addr := range disp {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var err error
			r, err = cluster.Ask(actx, addr, cfg, req)
			cancel()
			if err == nil {
				ok = true
				break
			}
			errs = append(errs, fmt.Sprintf("%s: %v", addr, err))
		}
		if !ok {
			return fmt.Errorf("--tunnels %d: only %d distinct %s instances available (%s); use --tunnels %d or fewer", o.tunnels, len(got), o.proto, strings.Join(errs, "; "), max(len(got), 1))
		}
		if slices.Contains(names, r.Instance) {
			return fmt.Errorf("dispatcher named %s twice", r.Instance)
		}
		fmt.Fprintf(stderr, "ovpnperf: dispatcher assigned %s (%s %d %s) for tunnel t%d\n", r.Instance, r.Remote, r.Port, r.Proto, len(got))
		got = append(got, r)
		names = append(names, r.Instance)
	}
	return cluster.RunTunnels(ctx, cluster.TunnelsOptions{Assigned: got, Routes: routes, Extra: extra, Log: stderr})
}
