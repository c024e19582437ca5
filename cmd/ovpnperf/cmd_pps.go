package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo/hostcollect"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/pps"
	"github.com/ovpnperf/ovpnperf/internal/shellquote"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newPPSCommand) }

const defaultPPSPort = 7007

func newPPSCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pps",
		Short: "Measure packet rate, loss and RTT with small UDP echo probes",
		Long: `The UDP echo generator of a forwarding benchmark. Run "ovpnperf pps server"
on the far end and "ovpnperf pps client HOST" here: the client sends numbered,
time-stamped probes at a fixed rate (or as fast as it can, --rate 0) over one
or more flows, the server echoes them, and the client accounts for every
probe. A probe is lost when no echo came back within --timeout.

The client sends load only after the server answered a handshake accepting
the test's parameters; the server echoes only probes of sessions it accepted,
from the address that asked, until the session's duration (capped at 300 s)
is over. Send and receive are batched (sendmmsg/recvmmsg).`,
	}
	cmd.AddCommand(newPPSServerCommand(), newPPSClientCommand())
	return cmd
}

type ppsServerOptions struct {
	port        int
	bind        string
	once        bool
	json        bool
	maxDuration time.Duration
	keyFile     string
	out         io.Writer
}

func newPPSServerCommand() *cobra.Command {
	opts := ppsServerOptions{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Echo the probes of pps clients that ask for a test",
		Long: `Listens on UDP --port (all addresses, IPv4 and IPv6, unless --bind) and echoes
the probes of clients whose handshake it accepted, within its limits: at most
--max-duration per session, 64 flows, 16 sessions at once (2 per source
address unless authenticated), 10 s timeout. A session that sends no probe
within 2 s plus its timeout is dropped. With --key-file, clients that sign
their hello with the same key take the place of unauthenticated sessions
when all slots are taken.
Malformed or unsolicited packets get no answer. Prints one line per session
event (one JSON object per line with --json).`,
		Example: `  ovpnperf pps server
  ovpnperf pps server --bind 198.51.100.2 --port 7007 --once`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.out = cmd.OutOrStdout()
			return runPPSServer(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	intFlag(f, &opts.port, "port", "p", defaultPPSPort, 1, 65535, "UDP port to listen on")
	stringFlag(f, &opts.bind, "bind", "B", "", "an IP address of this host", "address to listen on (default all)")
	f.BoolVarP(&opts.once, "once", "1", false, "exit after the first session ends")
	f.BoolVar(&opts.json, "json", false, "print session events as JSON lines")
	durationFlag(f, &opts.maxDuration, "max-duration", "", pps.DefaultLimits().MaxDuration, time.Millisecond, time.Hour, false, "longest test accepted; longer requests are capped")
	stringFlag(f, &opts.keyFile, "key-file", "", "", "a file only its owner can read (mode 0600)", "shared key: clients whose hello is signed with it take precedence over unauthenticated ones")
	return cmd
}

func runPPSServer(ctx context.Context, opts ppsServerOptions) error {
	if opts.port < 1 || opts.port > 65535 {
		return usage.Errorf("--port %d: want 1–65535", opts.port)
	}
	if opts.maxDuration <= 0 || opts.maxDuration > time.Hour {
		return usage.Errorf("--max-duration %v: want more than 0 and at most 1h", opts.maxDuration)
	}
	if opts.bind != "" {
		a, err := netip.ParseAddr(opts.bind)
		if err != nil {
			return usage.Errorf("--bind %q: want an IP address of this host", opts.bind)
		}
		if a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return usage.Errorf("--bind %q: want a unicast IP address of this host", opts.bind)
		}
	}
	key, err := readKeyFile("--key-file", opts.keyFile)
	if err != nil {
		return err
	}
	limits := pps.DefaultLimits()
	limits.MaxDuration = opts.maxDuration
	var mu sync.Mutex
	enc := json.NewEncoder(opts.out)
	s := &pps.Server{
		Addr:   net.JoinHostPort(opts.bind, strconv.Itoa(opts.port)),
		Limits: limits,
		Once:   opts.once,
		Key:    key,
		Events: func(e pps.Event) {
			mu.Lock()
			defer mu.Unlock()
			if opts.json {
				_ = enc.Encode(ppsEventLine{Schema: pps.EventSchema, Event: e})
				return
			}
			fmt.Fprintln(opts.out, formatServerEvent(e))
		},
	}
	go func() {
		if a := s.LocalAddr(ctx); a != nil && !opts.json {
			mu.Lock()
			fmt.Fprintf(opts.out, "pps server listening on udp %s\n", a)
			mu.Unlock()
		}
	}()
	return s.Serve(ctx)
}

// ppsEventLine is one line of `pps server --json`.
type ppsEventLine struct {
	Schema string `json:"schema"`
	pps.Event
}

func formatServerEvent(e pps.Event) string {
	ts := e.Time.Format("15:04:05")
	switch e.Kind {
	case "accepted":
		p := e.Params
		mode := ""
		if p.OneWay {
			mode = ", one way (counted, not echoed)"
		}
		return fmt.Sprintf("%s session %08x from %s accepted: %d-byte probes, %s over %d flow(s) for %v, timeout %v%s",
			ts, e.Session, e.Client, p.Size, ratePPSText(p.RatePPS), p.Flows, p.Duration, p.Timeout, mode)
	case "refused":
		return fmt.Sprintf("%s refused %s: %s", ts, e.Client, e.Reason)
	case "finished", "expired":
		r := e.Report
		cpu := (r.CPUUser + r.CPUSystem).Seconds()
		return fmt.Sprintf("%s session %08x from %s %s: received %d, echoed %d, %.1f s, CPU %.2f s (%.0f%% of a core)",
			ts, e.Session, e.Client, e.Kind, r.Received, r.Echoed, r.Elapsed.Seconds(), cpu, 100*cpu/max(r.Elapsed.Seconds(), 1e-9))
	}
	return fmt.Sprintf("%s %s %s", ts, e.Kind, e.Client)
}

func ratePPSText(r uint64) string {
	if r == 0 {
		return "as fast as possible"
	}
	return fmt.Sprintf("%d pps", r)
}

type ppsClientOptions struct {
	host     string
	port     int
	size     int
	rate     uint64
	flows    int
	duration time.Duration
	count    uint64
	timeout  time.Duration
	oneWay   bool
	gso      bool
	keyFile  string
	json     bool
	out      io.Writer
}

func newPPSClientCommand() *cobra.Command {
	opts := ppsClientOptions{}
	cmd := &cobra.Command{
		Use:   "client HOST",
		Short: "Send probes to a pps server and report rate, loss and RTT",
		Long: `Runs a test against "ovpnperf pps server" on HOST. Probes are --size bytes of
UDP payload (18, the default, makes 64-byte Ethernet frames; 512 and 1400 are
the other usual sizes). --rate is the total over all --flows, in packets per
second (suffix k or M allowed); 0 sends as fast as the sockets take them.
The run ends after --duration or --count probes, whichever comes first, and
then waits up to --timeout for the last echoes.

Each second's line appears once its losses are known, one --timeout after the
second ends. Sent and lost count probes sent in that second; received (and
the echo rate) counts echoes that arrived in it. The summary gives the median
echo rate over whole seconds, RTT percentiles from every echo (±0.8 %), loss,
late echoes (after the timeout, counted lost), duplicates, reordering, and
the CPU the client and the server used.

Loss is per round trip: a probe is lost when it or its echo is dropped. A
path that drops p one way shows p; one that drops p each way (a lab's
symmetric --loss) shows 1−(1−p)², e.g. 9.75 % for 5 %. The server's count of
probes received tells the two directions apart.

--one-way measures what sockperf throughput and iperf3 -u measure: the server
does not echo but counts the probes it received by the second they were sent
in, and reports the counts when the run ends, so the per-second lines appear
at the end. Received and lost are then the server's, of the way there only;
no RTT is measured. It needs a server of this version or later.

--gso hands the kernel each batch as one UDP GSO write, segmented into
single probes as late as the outgoing device allows. Use it only where that
is before the path under test (a physical NIC, OpenVPN's tun device): a veth
pair or bridge, as in "ovpnperf lab", carries the unsegmented packet, so a
router there forwards one packet per 64 probes and the path looks far
faster than it is. Without kernel support the client falls back to sendmmsg
and says so.`,
		Example: `  ovpnperf pps client 198.51.100.2
  ovpnperf pps client 198.51.100.2 --rate 0 --flows 2 --duration 5s
  ovpnperf pps client 198.51.100.2 --rate 0 --one-way
  ovpnperf pps client 2001:db8:5::2 --size 1400 --rate 50k --json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.host = a[0]
			opts.out = cmd.OutOrStdout()
			return runPPSClient(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	intFlag(f, &opts.port, "port", "p", defaultPPSPort, 1, 65535, "server's UDP port")
	intFlag(f, &opts.size, "size", "l", pps.MinSize, pps.MinSize, pps.MaxSize, fmt.Sprintf("UDP payload of each probe in bytes (%d–%d)", pps.MinSize, pps.MaxSize))
	opts.rate = 1000
	addValue(f, &opts.rate, "rate", "b", "pps", "1000", parsePPS, "total probes per second over all flows, at least 1 (e.g. 20000, 100k, 1M); 0 = as fast as possible")
	intFlag(f, &opts.flows, "flows", "P", 1, 1, pps.DefaultLimits().MaxFlows, "parallel flows, each its own socket and source port (1–64)")
	durationFlag(f, &opts.duration, "duration", "t", 10*time.Second, time.Millisecond, pps.DefaultLimits().MaxDuration, false, "how long to send")
	uintFlag(f, &opts.count, "count", "n", 1e12, "stop after this many probes over all flows (0 = no limit but --duration)")
	durationFlag(f, &opts.timeout, "timeout", "", time.Second, time.Millisecond, pps.DefaultLimits().MaxTimeout, false, "a probe without echo after this long is lost (at most 10s)")
	f.BoolVar(&opts.oneWay, "one-way", false, "the server counts the probes instead of echoing them (no RTT; loss of the way there)")
	stringFlag(f, &opts.keyFile, "key-file", "", "", "a file only its owner can read (mode 0600)", "sign the hello with the key the server was given (--key-file there), for precedence over unauthenticated clients")
	f.BoolVar(&opts.gso, "gso", false, "send each batch as one UDP GSO write (see above: not over veth or bridges)")
	f.BoolVar(&opts.json, "json", false, "print the result as JSON")
	return cmd
}

// parsePPS parses a packet rate: a number with an optional k or M suffix.
// A rate that is not 0 but rounds below one packet per second is refused:
// it would otherwise become 0, "as fast as possible", and flood the path.
func parsePPS(flag, s string) (uint64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "pps"), "/s")
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "k"), strings.HasSuffix(t, "K"):
		mult, t = 1e3, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1e6, t[:len(t)-1]
	}
	form := "packets per second from 1 to 1e9, e.g. 20000, 100k, 1M, or 0 for as fast as possible"
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsNaN(v) || v*mult > 1e9 {
		return 0, usage.Errorf("%s %q: want %s", flag, s, form)
	}
	if v != 0 && v*mult < 1 {
		return 0, usage.Errorf("%s %q: below 1 packet per second (0 would mean as fast as possible); want %s", flag, s, form)
	}
	return uint64(math.Round(v * mult)), nil
}

func runPPSClient(ctx context.Context, opts ppsClientOptions) error {
	rate := opts.rate
	switch {
	case opts.port < 1 || opts.port > 65535:
		return usage.Errorf("--port %d: want 1–65535", opts.port)
	case opts.size < pps.MinSize || opts.size > pps.MaxSize:
		return usage.Errorf("--size %d: want %d–%d bytes of UDP payload", opts.size, pps.MinSize, pps.MaxSize)
	case opts.flows < 1 || opts.flows > pps.DefaultLimits().MaxFlows:
		return usage.Errorf("--flows %d: want 1–%d", opts.flows, pps.DefaultLimits().MaxFlows)
	case opts.duration < time.Millisecond || opts.duration > pps.DefaultLimits().MaxDuration:
		return usage.Errorf("--duration %v: want 1ms–%v", opts.duration, pps.DefaultLimits().MaxDuration)
	case opts.timeout < time.Millisecond || opts.timeout > pps.DefaultLimits().MaxTimeout:
		return usage.Errorf("--timeout %v: want 1ms–%v", opts.timeout, pps.DefaultLimits().MaxTimeout)
	case strings.ContainsAny(opts.host, " /\x00") || opts.host == "":
		return usage.Errorf("HOST %q: want a host name or IP address", opts.host)
	}
	key, err := readKeyFile("--key-file", opts.keyFile)
	if err != nil {
		return err
	}
	addrs, err := resolveTarget(ctx, "HOST", opts.host)
	if err != nil {
		return err
	}
	target := addrs[0]
	for _, a := range addrs {
		if a.Is4() { // as net.ResolveUDPAddr prefers
			target = a
			break
		}
	}
	cfg := pps.Config{
		Key:    key,
		Server: net.JoinHostPort(target.String(), strconv.Itoa(opts.port)),
		Params: pps.Params{RatePPS: rate, Size: opts.size, Duration: opts.duration, Flows: opts.flows, Timeout: opts.timeout, OneWay: opts.oneWay},
		Count:  opts.count,
		GSO:    opts.gso,
	}
	w := opts.out
	if !opts.json {
		header := false
		cfg.Interval = func(iv pps.Interval) {
			if !header {
				if opts.oneWay {
					fmt.Fprintf(w, "pps client to udp %s, one way: %d-byte probes, %s over %d flow(s), server counts after %v\n",
						cfg.Server, opts.size, ratePPSText(rate), opts.flows, opts.timeout)
					fmt.Fprintf(w, "%-15s %10s %10s %16s %12s %12s\n", "Interval", "Sent", "At server", "Lost", "Sent pps", "Server pps")
				} else {
					fmt.Fprintf(w, "pps client to udp %s: %d-byte probes, %s over %d flow(s), timeout %v\n",
						cfg.Server, opts.size, ratePPSText(rate), opts.flows, opts.timeout)
					fmt.Fprintf(w, "%-15s %10s %10s %16s %12s %12s %26s\n", "Interval", "Sent", "Received", "Lost", "Sent pps", "Echo pps", "RTT min/avg/max (us)")
				}
				header = true
			}
			if opts.oneWay {
				fmt.Fprintln(w, formatOneWayInterval(iv))
				return
			}
			fmt.Fprintln(w, formatInterval(iv))
		}
	}
	res, err := pps.Run(ctx, cfg)
	if res == nil {
		return err
	}
	if opts.json {
		res.Schema, res.Argv = pps.Schema, os.Args
		if h, herr := hostcollect.Host(ctx); herr == nil {
			res.Host = &h
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(res); jerr != nil {
			return jerr
		}
		return err
	}
	writePPSSummary(w, res)
	return err
}

// readKeyFile reads a pps shared key given with flag. The file must be a regular file that
// only its owner can read or write (like an OpenVPN static key), and hold
// at least 16 bytes; a trailing newline is not part of the key.
func readKeyFile(flag, path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, usage.Errorf("%s %q: %v", flag, path, errors.Unwrap(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, usage.Errorf("%s %q: not a regular file", flag, path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, usage.Errorf("%s %q: mode %04o lets others read or change the key; run chmod 600 %s", flag, path, fi.Mode().Perm(), shellquote.Arg(path))
	}
	if fi.Size() > 4096 {
		return nil, usage.Errorf("%s %q: %d bytes, want at most 4096", flag, path, fi.Size())
	}
	b, err := inputfile.ReadFile(context.Background(), path, inputfile.Key())
	if err != nil {
		return nil, usage.Errorf("%s %v", flag, err)
	}
	b = []byte(strings.TrimRight(string(b), "\r\n"))
	if len(b) < 16 {
		return nil, usage.Errorf("%s %q: %d bytes of key, want at least 16 (e.g. head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE)", flag, path, len(b))
	}
	return b, nil
}

func formatInterval(iv pps.Interval) string {
	return fmt.Sprintf("%6.2f-%-6.2f s %10d %10d %8d (%5.2f%%) %12.0f %12.0f %8.1f/%.1f/%.1f",
		iv.StartS, iv.EndS, iv.Sent, iv.Received, iv.Lost, iv.LossPercent, iv.SentPPS, iv.PPS, iv.RTTMinUs, iv.RTTMeanUs, iv.RTTMaxUs)
}

func formatOneWayInterval(iv pps.Interval) string {
	return fmt.Sprintf("%6.2f-%-6.2f s %10d %10d %8d (%5.2f%%) %12.0f %12.0f",
		iv.StartS, iv.EndS, iv.Sent, iv.Received, iv.Lost, iv.LossPercent, iv.SentPPS, iv.PPS)
}

func writePPSSummary(w io.Writer, r *pps.Result) {
	fmt.Fprintln(w, "- - - - - - - - - - - - - - - - - - - - - - - - -")
	if r.Params.OneWay {
		writePPSOneWaySummary(w, r)
		return
	}
	fmt.Fprintf(w, "sent %d, received %d, lost %d (%.3f%%) in %.2f s; late %d, duplicates %d, reordered %d\n",
		r.Sent, r.Received, r.Lost, r.LossPercent, r.SendSeconds, r.Late, r.Duplicates, r.Reordered)
	fmt.Fprintf(w, "echo rate: median %.0f pps over whole seconds (min %.0f, max %.0f), mean %.0f pps; sent %.0f pps\n",
		r.PPSMedian, r.PPSMin, r.PPSMax, r.PPSMean, r.SentPPSMean)
	fmt.Fprintf(w, "RTT: min %.1f us, p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n",
		r.RTTMinUs, r.RTTP50Us, r.RTTP90Us, r.RTTP99Us, r.RTTMaxUs)
	fmt.Fprintf(w, "client CPU: %.2f s user, %.2f s system (%.0f%% of a core)\n", r.CPU.UserS, r.CPU.SystemS, r.CPU.Percent)
	if r.ServerReport != nil {
		s := r.ServerReport
		fmt.Fprintf(w, "server: received %d, echoed %d; CPU %.2f s user, %.2f s system (%.0f%% of a core)\n",
			s.Received, s.Echoed, r.ServerCPU.UserS, r.ServerCPU.SystemS, r.ServerCPU.Percent)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if r.Interrupted {
		fmt.Fprintln(w, "interrupted: the figures cover the time until then")
	}
}

func writePPSOneWaySummary(w io.Writer, r *pps.Result) {
	if r.ServerReport == nil {
		fmt.Fprintf(w, "sent %d in %.2f s (%.0f pps); the server did not report what it received\n", r.Sent, r.SendSeconds, r.SentPPSMean)
	} else {
		fmt.Fprintf(w, "one way: sent %d, server received %d, lost %d (%.3f%%) in %.2f s; duplicates %d\n",
			r.Sent, r.Received, r.Lost, r.LossPercent, r.SendSeconds, r.Duplicates)
		fmt.Fprintf(w, "server rate: median %.0f pps over whole seconds (min %.0f, max %.0f), mean %.0f pps; sent %.0f pps\n",
			r.PPSMedian, r.PPSMin, r.PPSMax, r.PPSMean, r.SentPPSMean)
	}
	fmt.Fprintln(w, "RTT: not measured (one-way test)")
	fmt.Fprintf(w, "client CPU: %.2f s user, %.2f s system (%.0f%% of a core)\n", r.CPU.UserS, r.CPU.SystemS, r.CPU.Percent)
	if r.ServerReport != nil && r.ServerCPU != nil {
		fmt.Fprintf(w, "server CPU: %.2f s user, %.2f s system (%.0f%% of a core)\n", r.ServerCPU.UserS, r.ServerCPU.SystemS, r.ServerCPU.Percent)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if r.Interrupted {
		fmt.Fprintln(w, "interrupted: the figures cover the time until then")
	}
}
