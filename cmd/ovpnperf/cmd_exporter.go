package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/exporter"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newExporterCommand) }

type exporterOptions struct {
	listen       string
	clientLabels bool
	maxClients   int
}

func newExporterCommand() *cobra.Command {
	var o exporterOptions
	c := &cobra.Command{
		Use:   "exporter --listen ADDR:PORT",
		Short: "Serve Prometheus metrics of every OpenVPN process on this host",
		Long: `exporter serves Prometheus metrics (/metrics) of every OpenVPN process in its
network namespace, whoever started it: CPU seconds of the process and of its
busiest thread, the transport socket's drops and buffers, the tun device's
counters, and from the process's status file (its --status, in any
status-version) the clients and, with --client-labels, the bytes per client
by common name (at most --max-clients of them, the busiest; the same names
summed). It reads /proc, sock_diag, netlink and the status file and never
connects to the management interface, which takes one client at a time.
Reading other processes' sockets needs root. Metrics are named
ovpnperf_openvpn_*; docs/exporter.md lists them.`,
		Example: `  ovpnperf exporter --listen 127.0.0.1:9234
  ovpnperf exporter --listen 127.0.0.1:9234 --client-labels --max-clients 50`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runExporter(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.listen, "listen", "", "serve /metrics on ADDR:PORT (required)")
	f.BoolVar(&o.clientLabels, "client-labels", false, "also export bytes per client, labelled by common name")
	clientsCapFlag(f, &o.maxClients, "max-clients", exporter.DefaultMaxClients, "with --client-labels: export at most this many clients per scrape (%s), the busiest (the rest are counted in ovpnperf_openvpn_client_series_dropped)")
	return c
}

func runExporter(ctx context.Context, w io.Writer, o exporterOptions) error {
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return usage.Errorf("--listen %q: use ADDR:PORT", o.listen)
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err // "address 99999: invalid port", "bind: address already in use"
		}
		return usage.Errorf("--listen %q: %v", o.listen, err)
	}
	defer l.Close()
	e, err := exporter.New(exporter.Options{ClientLabels: o.clientLabels, MaxClients: o.maxClients,
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "serving metrics on http://%s/metrics\n", l.Addr())
	return e.Serve(ctx, l)
}
