package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/runner"
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
				return cluster.Paths{}.CleanID(cmd.Context(), a[0])
			}
			cleaned, err := cluster.Paths{}.CleanDead(cmd.Context())
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
			if err := (cluster.Paths{}).RouteHookFile(a[0]); err != nil {
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
	hostNAT              bool
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
The packets this host sends itself carry one tunnel's address whichever
tunnel the hash picks, and an instance drops a source it did not give out:
connect rewrites, on each tunnel, the source of those that carry another
tunnel's address to its own (iptables and ip6tables nat, chain
ovpnperf-ID-hostnat; a site's addresses are never rewritten). That brings
connection tracking into the namespace; --host-nat=false leaves it out, and
then only the site's flows work on every tunnel.

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
	intFlag(c.Flags(), &o.tunnels, "tunnels", "", 1, 1, 16, "open this many tunnels to distinct instances, one multipath route over them (1–16)")
	c.Flags().StringVar(&o.onePort, "one-port", "", "HOST:PORT, the one-port address of a cluster (serve --one-port): open the --tunnels there instead of asking a dispatcher, each from its own source port; a tunnel that reached an instance another one has reconnects")
	c.Flags().BoolVar(&o.hostNAT, "host-nat", true, "with --tunnels: rewrite the source of the packets this host sends through a tunnel with another tunnel's address (iptables/ip6tables nat); false: only a site's flows work on every tunnel")
	c.Flags().StringArrayVar(&o.routes, "route", nil, "a network CIDR of the server side routed over the tunnels (repeatable; default with --tunnels N>1: the networks the server pushes; with --tunnels 1 runs one tunnel the same way)")
	return c
}

// hostPort splits an address a client connects to, HOST:PORT, and refuses
// what names no host: a malformed IPv4 address (999.1.1.1, which the
// resolver would look up as a name and not find, and connect would then
// fall back to the config's remotes as if no dispatcher answered), a
// name that is not a DNS name, a port that is not 1–65535 in decimal.
func hostPort(addr string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, errors.New("not HOST:PORT")
	}
	if !decimalRE.MatchString(port) {
		return "", 0, fmt.Errorf("port %q is not a decimal number", port)
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil || pn == 0 {
		return "", 0, fmt.Errorf("port %s is not 1–65535", port)
	}
	if err := checkHostName(host); err != nil {
		return "", 0, err
	}
	return host, uint16(pn), nil
}

// dnsLabelRE is one label of a host name (RFC 1123).
var dnsLabelRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// checkHostName refuses a host that is neither an IP address nor a DNS
// name; a name of digits and dots only must be an IPv4 address.
func checkHostName(h string) error {
	if h == "" {
		return errors.New("no host")
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	if strings.Contains(h, ":") {
		return fmt.Errorf("%q is not an IPv6 address", h)
	}
	if strings.Trim(h, "0123456789.") == "" {
		return fmt.Errorf("%q is not an IPv4 address", h)
	}
	name := strings.TrimSuffix(h, ".")
	if len(name) > 253 {
		return errors.New("host name longer than 253 characters")
	}
	for _, l := range strings.Split(name, ".") {
		if !dnsLabelRE.MatchString(l) {
			return fmt.Errorf("%q is not a host name or address", h)
		}
	}
	return nil
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
		if _, _, err := hostPort(d); err != nil {
			return usage.Errorf("dispatcher %q: %v; use ADDR:PORT", d, err)
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
	path, err := runner.Path("openvpn")
	if err != nil {
		return err
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
	host, pn, err := hostPort(o.onePort)
	if err != nil || !cluster.ValidHost(host) {
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
		got = append(got, cluster.Reply{Instance: "one-port", Remote: host, Port: pn, Proto: o.proto})
	}
	return cluster.RunTunnels(ctx, cluster.TunnelsOptions{Assigned: got, Routes: routes, Extra: extra, Log: stderr, Distinct: true, NoHostNAT: !o.hostNAT})
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
	return cluster.RunTunnels(ctx, cluster.TunnelsOptions{Assigned: got, Routes: routes, Extra: extra, Log: stderr, NoHostNAT: !o.hostNAT})
}
