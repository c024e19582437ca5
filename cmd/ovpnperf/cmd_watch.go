package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/realnet"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
	"github.com/ovpnperf/ovpnperf/internal/watch"
)

func init() { register(newWatchCommand) }

type watchOptions struct {
	tunnel     string
	pid        int
	port       int
	every      time.Duration
	probe      time.Duration
	listen     string
	history    string
	historyMax int64
	repeat     int
	duration   time.Duration
	omit       time.Duration
	cipher     string
}

// History bounds: report reads a history file of up to 64 MiB
// (inputfile.Document), so the bound never makes one it refuses.
const (
	historyMaxDefault = 64 << 20
	historyMaxLeast   = 1 << 20
)

func newWatchCommand() *cobra.Command { return watchCommand(new(watchOptions)) }

// watchCommand is the command with its options parsed into o (the flag tests
// read them).
func watchCommand(o *watchOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "watch HOST --tunnel TUNNEL_ADDR --listen ADDR:PORT",
		Short: "Watch your own OpenVPN tunnel over time: counters and echoes always, measure's samples every interval, as Prometheus metrics",
		Long: `watch runs on one end of an existing OpenVPN tunnel, as measure does (HOST is the
far end's address outside the tunnel, TUNNEL_ADDR its address inside; the far end
runs ` + "`iperf3 -s`" + `), and keeps watching until stopped (SIGINT or SIGTERM, exit 130).

Between active rounds it sends no load: every --probe-interval it reads the
OpenVPN process's counters (CPU and busiest thread, socket drops and buffers,
tun drops and bytes, the host's IP fragments and TCP retransmissions) and sends
one ICMP echo inside and one outside the tunnel, kept as histograms.

Every --every (each start put off by up to a tenth of it, at random) an active
round takes the samples measure takes, with its findings. A round is skipped
when the tunnel carried 20 % or more of its last measured rate, either way, over
the probe interval before it: the users' traffic is not crowded out, and a
figure shared with it would be wrong. A round that fails (no iperf3 server, OpenVPN
gone) is counted by its kind; watching goes on.

The metrics are served at http://ADDR:PORT/metrics (Prometheus text format).
--history appends each round (its result, the skip rule's figures, the echoes'
round trips, the findings and the run document) as one JSON line; at
--history-max the file moves to FILE.1 and starts again.
` + "`ovpnperf report FILE`" + ` draws it over time. Needs root (it reads the OpenVPN
process's file descriptors). docs/watch.md lists the metrics.`,
		Example: `  ovpnperf watch 198.51.100.7 --tunnel 10.8.0.1 --listen 127.0.0.1:9477
  ovpnperf watch 198.51.100.7 --tunnel 10.8.0.1 --every 1h --listen 127.0.0.1:9477 --history /var/lib/ovpnperf/watch.jsonl`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runWatch(cmd.Context(), cmd.ErrOrStderr(), a[0], *o)
		},
	}
	f := c.Flags()
	stringFlag(f, &o.tunnel, "tunnel", "", "", "an IP address", "the far end's address inside the tunnel (required)")
	stringFlag(f, &o.listen, "listen", "", "", "ADDR:PORT", "serve Prometheus /metrics on ADDR:PORT (required)")
	intFlag(f, &o.pid, "pid", "", 0, 0, 1<<22, "the local OpenVPN process (default: the one holding the tun device the route to --tunnel uses)")
	iperf3PortFlag(f, &o.port)
	durationRangeFlag(f, &o.every, "every", "", watch.DefaultEvery, watch.EveryRange(), "time between the starts of two active rounds (%s)")
	durationRangeFlag(f, &o.probe, "probe-interval", "", watch.DefaultProbeInterval, watch.ProbeIntervalRange(), "how often counters are read and echoes sent between rounds (%s)")
	stringFlag(f, &o.history, "history", "", "", "a file path", "append each round to this file as a JSON line")
	sizeFlag(f, &o.historyMax, "history-max", historyMaxDefault, historyMaxLeast, historyMaxDefault, "size at which the history moves to FILE.1 and starts again ("+formatSize(historyMaxLeast)+"–"+formatSize(historyMaxDefault)+")")
	rangeFlag(f, &o.repeat, "repeat", "", experiment.DefaultRepeat, experiment.RepeatRange(), "samples per row in each round, interleaved (%s; findings need "+strconv.Itoa(verdict.MinSamples)+")")
	sampleTimeFlags(f, &o.duration, &o.omit, "t", measureTimeRule, measureOmitRule)
	stringFlag(f, &o.cipher, "cipher", "", "", "a data cipher", "the tunnel's data cipher, for the overhead model (default "+overhead.DefaultCipher+")")
	return c
}

// sizeFlag registers a byte-size flag: a whole number of bytes, or of
// KiB, MiB or GiB, from lo to hi.
func sizeFlag(fs *pflag.FlagSet, dst *int64, name string, def, lo, hi int64, help string) {
	*dst = def
	form := fmt.Sprintf("a size from %s to %s (e.g. 64MiB)", formatSize(lo), formatSize(hi))
	v := addValue(fs, dst, name, "", "size", formatSize(def), func(flag, s string) (int64, error) {
		num, mult := s, int64(1)
		for _, u := range []struct {
			suffix string
			m      int64
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
			if n, ok := strings.CutSuffix(s, u.suffix); ok {
				num, mult = n, u.m
				break
			}
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n < 0 || strings.HasPrefix(num, "+") || n > hi/mult || n*mult < lo {
			return 0, usage.Errorf("%s %q: want %s", flag, s, form)
		}
		return n * mult, nil
	}, help)
	v.bounds = [2]string{strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)}
}

func formatSize(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

func runWatch(ctx context.Context, stderr io.Writer, hostArg string, o watchOptions) error {
	if o.tunnel == "" {
		return usage.Errorf("--tunnel is required: the far end's address inside the tunnel")
	}
	if o.listen == "" {
		return usage.Errorf("--listen is required: the ADDR:PORT Prometheus scrapes")
	}
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return usage.Errorf("--listen %q: use ADDR:PORT", o.listen)
	}
	host, tun, err := tunnelEnds(ctx, hostArg, o.tunnel, o.cipher)
	if err != nil {
		return err
	}
	if o.probe >= o.every {
		return usage.Errorf("--probe-interval %v is not shorter than --every %v", o.probe, o.every)
	}
	if err := checkOutPath("--history", o.history); err != nil {
		return err
	}
	if err := runner.Require("iperf3", "ping"); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return usage.Errorf("watch needs root: it reads the OpenVPN process's file descriptors and counters")
	}
	spec := realnet.Spec{Host: host, Tunnel: tun, Pid: o.pid, Port: o.port, Repeat: o.repeat,
		Duration: o.duration, Omit: o.omit, Cipher: o.cipher}
	if err := spec.Validate(); err != nil {
		return err
	}
	opts := watch.Options{Spec: spec, Every: o.every, ProbeInterval: o.probe, Log: stderr, Argv: os.Args}
	w, err := watch.New(opts)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return usage.Errorf("--listen %s: %v", o.listen, err)
	}
	defer l.Close()
	if o.history != "" {
		h, err := watch.OpenHistory(o.history, o.historyMax)
		if err != nil {
			return usage.Errorf("--history: %v", err)
		}
		defer h.Close()
		w.SetHistory(h)
	}
	if err := realnet.CheckServer(ctx, spec); err != nil {
		if !errors.Is(err, realnet.ErrNoServer) {
			return err
		}
		fmt.Fprintf(stderr, "ovpnperf watch: %v; watching counters and echoes only until it answers (each round tries again)\n", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", w.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer srv.Close()
	fmt.Fprintf(stderr, "watching OpenVPN pid %d: a round every %v, counters and echoes every %v; metrics on http://%s/metrics\n",
		w.Pid(), o.every, o.probe, l.Addr())
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	select {
	case err := <-ran:
		return err
	case err := <-served:
		// The watcher stops before the function returns: nothing of it
		// (iperf3, ping) outlives the command.
		cancel()
		<-ran
		return fmt.Errorf("serving metrics: %w", err)
	}
}
