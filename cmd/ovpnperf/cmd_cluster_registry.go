package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// registryFlags are the flags of every command that talks to the etcd
// registry of a cluster across hosts.
type registryFlags struct {
	url, ca, cert, key string
	name               string
	insecure           bool
}

func (r *registryFlags) add(f *pflag.FlagSet) {
	f.StringVar(&r.url, "registry", "", "etcd registry of a cluster across hosts: etcd://HOST:PORT[,HOST:PORT…]")
	f.StringVar(&r.ca, "registry-ca", "", "CA certificate of the etcd servers (TLS)")
	f.StringVar(&r.cert, "registry-cert", "", "client certificate for etcd (its common name is the etcd user)")
	f.StringVar(&r.key, "registry-key", "", "key of --registry-cert")
	f.BoolVar(&r.insecure, "registry-insecure", false, "allow --registry without TLS to an etcd that is not on this host (only on a network you trust: anyone on it can read and forge the registry)")
	f.StringVar(&r.name, "registry-cluster", "default", "name of the cluster in the registry (hosts and dispatchers of one cluster use the same)")
}

// options checks the flags; it does not contact etcd.
func (r *registryFlags) options() (cluster.RegistryOptions, error) {
	eps, err := cluster.ParseRegistry(r.url)
	if err != nil {
		return cluster.RegistryOptions{}, err
	}
	if !cluster.ValidName(r.name) {
		return cluster.RegistryOptions{}, usage.Errorf("--registry-cluster %q: use letters, digits, '.', '_' or '-' (at most 63)", r.name)
	}
	if (r.ca != "" || r.cert != "" || r.key != "") && (r.ca == "" || r.cert == "" || r.key == "") {
		return cluster.RegistryOptions{}, usage.Errorf("give --registry-ca, --registry-cert and --registry-key together")
	}
	for _, f := range []struct{ flag, path string }{{"--registry-ca", r.ca}, {"--registry-cert", r.cert}, {"--registry-key", r.key}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return cluster.RegistryOptions{}, usage.Errorf("%s: %v", f.flag, err)
		}
	}
	ro := cluster.RegistryOptions{Endpoints: eps, CA: r.ca, Cert: r.cert, Key: r.key, Insecure: r.insecure}
	if err := ro.CheckTransport(); err != nil {
		return cluster.RegistryOptions{}, err
	}
	return ro, nil
}

// serveRegistry is serve's part in a cluster across hosts: the publisher,
// started after the instances, stopped after they drained.
type serveRegistry struct {
	cli    *clientv3.Client
	pub    *cluster.Publisher
	cancel context.CancelFunc
	done   chan struct{}
}

func startServeRegistry(o clusterServeOptions, c *cluster.Cluster, log *slog.Logger) (*serveRegistry, error) {
	ro, err := o.reg.options()
	if err != nil {
		return nil, err
	}
	cli, err := ro.Connect()
	if err != nil {
		return nil, err
	}
	p := &cluster.Publisher{Client: cli, Cluster: o.reg.name, Host: o.regHost, Advertise: o.advertise, ClusterID: c.ID(),
		TTL: o.regTTL, Source: c.Status, Log: log}
	ctx, cancel := context.WithCancel(context.Background())
	s := &serveRegistry{cli: cli, pub: p, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(s.done); p.Run(ctx) }()
	return s, nil
}

// drained writes the instances' draining state before they stop.
func (s *serveRegistry) drained() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = s.pub.Publish(ctx)
}

// close stops publishing and revokes the lease, so that the host's keys go
// at once rather than after the TTL.
func (s *serveRegistry) close() {
	s.cancel()
	<-s.done
	_ = s.pub.Close()
	s.cli.Close()
}

// checkServeRegistry checks serve's registry flags.
func (o *clusterServeOptions) checkServeRegistry() error {
	if o.reg.url == "" {
		if o.advertise != "" || o.regHost != "" {
			return usage.Errorf("--advertise and --registry-host need --registry")
		}
		return nil
	}
	if _, err := o.reg.options(); err != nil {
		return err
	}
	if o.advertise == "" {
		o.advertise = o.public
	}
	if o.advertise == "" || !cluster.ValidHost(o.advertise) {
		return usage.Errorf("--registry needs --advertise HOST: the address clients reach this host's instances at")
	}
	if o.regHost == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		o.regHost = h
	}
	if !cluster.ValidName(o.regHost) {
		return usage.Errorf("--registry-host %q: use letters, digits, '.', '_' or '-' (at most 63)", o.regHost)
	}
	if o.regTTL < 2*time.Second || o.regTTL > time.Hour {
		return usage.Errorf("--registry-ttl %v: use 2s..1h", o.regTTL)
	}
	return nil
}

type clusterDispatchOptions struct {
	reg           registryFlags
	listen        string
	ca, cert, key string
	strategy      string
	rate          float64
	metrics       string
}

func newClusterDispatchCommand() *cobra.Command {
	var o clusterDispatchOptions
	c := &cobra.Command{
		Use:   "dispatch --registry etcd://HOST:PORT --listen ADDR:PORT --ca CA --cert CERT --key KEY",
		Short: "Assign clients to the instances of every host in an etcd registry",
		Long: `dispatch watches the registry of a cluster across hosts and answers ` + "`cluster connect`" + `
like serve's --dispatcher: TLS 1.3, the caller's certificate must be of --ca's
CA. It names only instances that are up and whose host's lease is alive. If etcd
cannot be reached it goes on assigning from its last view, marks it stale
(/status, ovpnperf_cluster_registry_stale) and lists everything again once
etcd answers. Any number of dispatchers can watch one registry; least-loaded
counts the assignments all of them recorded in etcd, so they agree.`,
		Example: `  ovpnperf cluster dispatch --registry etcd://10.0.0.5:2379 --registry-ca etcd-ca.crt --registry-cert dispatch1.crt --registry-key dispatch1.key \
    --listen 0.0.0.0:8443 --ca ca.crt --cert server.crt --key server.key --metrics 127.0.0.1:9188`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClusterDispatch(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := c.Flags()
	o.reg.add(f)
	f.StringVar(&o.listen, "listen", "", "serve assignments over TLS on ADDR:PORT (required)")
	f.StringVar(&o.ca, "ca", "", "CA whose client certificates may ask (the cluster's OpenVPN CA)")
	f.StringVar(&o.cert, "cert", "", "the dispatcher's certificate")
	f.StringVar(&o.key, "key", "", "its key")
	f.StringVar(&o.strategy, "strategy", cluster.LeastLoaded, "round-robin or least-loaded")
	floatFlag(f, &o.rate, "rate", 20, 0, 1e6, "requests per second per source address (burst twice that; 0: no limit)")
	f.StringVar(&o.metrics, "metrics", "", "serve Prometheus /metrics and JSON /status on ADDR:PORT")
	return c
}

func runClusterDispatch(ctx context.Context, w io.Writer, o clusterDispatchOptions) error {
	ro, err := o.reg.options()
	if err != nil {
		return err
	}
	if o.strategy != cluster.RoundRobin && o.strategy != cluster.LeastLoaded {
		return usage.Errorf("--strategy %q: use round-robin or least-loaded", o.strategy)
	}
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return usage.Errorf("--listen %q: use ADDR:PORT", o.listen)
	}
	if o.metrics != "" {
		if _, _, err := net.SplitHostPort(o.metrics); err != nil {
			return usage.Errorf("--metrics %q: use ADDR:PORT", o.metrics)
		}
	}
	if o.ca == "" || o.cert == "" || o.key == "" {
		return usage.Errorf("give --ca, --cert and --key (the dispatcher's TLS; callers need a certificate of --ca)")
	}
	if _, err := cluster.ServerTLS(o.cert, o.key, o.ca); err != nil {
		return usage.Errorf("--ca/--cert/--key: %v", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("dispatch", o.listen)
	cli, err := ro.Connect()
	if err != nil {
		return err
	}
	defer cli.Close()
	v := cluster.NewView(cli, o.reg.name, log)
	d := &cluster.Dispatcher{Registry: v, Strategy: o.strategy, RatePerSec: o.rate, Burst: 2 * o.rate, Log: log}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	defer l.Close()
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); v.Run(vctx) }()
	defer func() { cancel(); <-done }()
	if o.metrics != "" {
		ml, err := net.Listen("tcp", o.metrics)
		if err != nil {
			return err
		}
		defer ml.Close()
		go func() { _ = cluster.ServeDispatchMetrics(ml, d, v) }()
		fmt.Fprintf(w, "metrics on http://%s/metrics, status on http://%s/status\n", ml.Addr(), ml.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- d.Serve(l, o.cert, o.key, o.ca) }()
	fmt.Fprintf(w, "dispatcher on %s (%s) for registry cluster %q at %v\n", l.Addr(), o.strategy, o.reg.name, ro.Endpoints)
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

// runRegistryStatus is `cluster status --registry`.
func runRegistryStatus(ctx context.Context, w io.Writer, r registryFlags, asJSON bool) error {
	ro, err := r.options()
	if err != nil {
		return err
	}
	cli, err := ro.Connect()
	if err != nil {
		return err
	}
	defer cli.Close()
	st, err := cluster.ReadRegistry(ctx, cli, r.name)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, st)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "registry cluster %q at revision %d, hosts: %d\n", st.Cluster, st.Revision, len(st.Hosts))
	fmt.Fprintln(tw, "HOST\tADVERTISE\tLEASE LEFT/TTL\tUPDATED\tINSTANCE\tSTATE\tPROTO\tPORT\tCLIENTS\tASSIGNED\tBYTES/S")
	for _, h := range st.Hosts {
		lease := "none"
		if h.LeaseTTLSeconds >= 0 {
			lease = fmt.Sprintf("%ds/%ds", h.LeaseTTLSeconds, h.LeaseGranted)
		}
		upd := "-"
		if !h.Updated.IsZero() {
			upd = time.Since(h.Updated).Round(100*time.Millisecond).String() + " ago"
		}
		if len(h.Instances) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t\t\t\t\t\t\n", h.Host, h.Advertise, lease, upd)
		}
		for i, in := range h.Instances {
			if i > 0 {
				fmt.Fprintf(tw, "\t\t\t\t")
			} else {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t", h.Host, h.Advertise, lease, upd)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%.0f\n", in.Name, in.State, in.Proto, in.Port, in.Clients, st.Assigned[in.Host+"/"+in.Name], in.BytesPerSec)
		}
	}
	for _, r := range st.Rejected {
		fmt.Fprintf(tw, "ignored entry: %s\n", r)
	}
	return tw.Flush()
}
