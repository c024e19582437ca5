package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo/hostcollect"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newPMTUCommand) }

type pmtuOptions struct {
	host          string
	throughTunnel string
	ipv4, ipv6    bool
	timeout       time.Duration
	max           int
	cipher        string
	auth          string
	json          bool
	verbose       bool
	out, errOut   io.Writer
}

func newPMTUCommand() *cobra.Command {
	o := pmtuOptions{}
	c := &cobra.Command{
		Use:   "pmtu [HOST]",
		Short: "Find the path MTU to a host and what it means for OpenVPN",
		Long: `pmtu finds the largest packet that reaches HOST unfragmented. It sends ICMP
echo requests with Don't-Fragment (IPv6: never fragmented) at many sizes at
once and narrows the range in a few rounds. A router that cannot forward a
probe answers "fragmentation needed" / "packet too big" and names its MTU;
pmtu reports that hop. When large probes vanish without any such answer while
smaller ones are echoed, the path is an ICMP black hole: path-MTU discovery is
broken there, TCP connections stall, and pmtu still finds the largest size
that passes.

The result is translated for OpenVPN 2.6 (UDP and TCP transport, IPv4 and
IPv6 outside) with the exact per-packet overhead of --cipher: the largest
tun-mtu that avoids fragmentation, mssfix (2.6 "mtu" form and 2.5 form), and
whether "fragment" is needed. Rows for the family not probed assume the same
path MTU.

--through-tunnel ADDR probes ADDR, the far end's address inside a running
tunnel, instead: the result is the largest packet the tunnel carries
end to end (the inner MTU). This also works when ICMP errors are filtered on
the outer path, because the probes and their echoes travel inside the tunnel.

Needs root (or CAP_NET_RAW) for the raw ICMP socket. The kernel keeps the
path MTU it learns from routers' ICMP errors (as for any traffic; it expires
after net.ipv4.route.mtu_expires); pmtu leaves nothing else behind.`,
		Example: `  ovpnperf pmtu vpn.example.net
  ovpnperf pmtu -6 vpn.example.net --cipher CHACHA20-POLY1305 --json
  ovpnperf pmtu --through-tunnel 10.8.0.1
  ovpnperf lab exec NAME client -- ovpnperf pmtu 198.51.100.2`,
		Args: args(cobra.RangeArgs(0, 1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 1 {
				o.host = a[0]
			}
			o.out, o.errOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return runPMTU(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.BoolVarP(&o.ipv4, "ipv4", "4", false, "probe over IPv4 only")
	f.BoolVarP(&o.ipv6, "ipv6", "6", false, "probe over IPv6 only")
	durationRangeFlag(f, &o.timeout, "timeout", "", pmtu.DefaultTimeout, pmtu.TimeoutRange(), "longest wait for one round of answers, %s (raise it for paths with RTT above ~1.5 s)")
	rangeFlag(f, &o.max, "max", "", 0, pmtu.MaxRange(), "largest probe in bytes, whole IP packet, %s (default: the MTU of the outgoing interface)")
	f.StringVar(&o.cipher, "cipher", overhead.DefaultCipher, "OpenVPN data cipher for the translation ("+strings.Join(pmtu.Ciphers(), ", ")+")")
	f.StringVar(&o.auth, "auth", "SHA1", "OpenVPN --auth digest for the translation (used by CBC ciphers only)")
	stringFlag(f, &o.throughTunnel, "through-tunnel", "", "", "the far end's tunnel address, e.g. 10.8.0.1", "probe ADDR, the far tunnel address, through a running tunnel")
	f.BoolVar(&o.json, "json", false, "print the result as JSON")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print each round's probes to stderr")
	return c
}

func (o pmtuOptions) validate() error {
	if o.ipv4 && o.ipv6 {
		return usage.Errorf("-4 and -6 exclude each other")
	}
	if o.host == "" && o.throughTunnel == "" {
		return usage.Errorf("pmtu needs a HOST, or --through-tunnel ADDR")
	}
	if o.host != "" && o.throughTunnel != "" {
		return usage.Errorf("give either HOST or --through-tunnel ADDR, not both")
	}
	if r := pmtu.TimeoutRange(); !r.Contains(o.timeout) {
		return usage.Errorf("--timeout %v out of range: use %s", o.timeout, r)
	}
	if r := pmtu.MaxRange(); o.max != 0 && !r.Contains(o.max) {
		return usage.Errorf("--max %d out of range: use %s bytes", o.max, r)
	}
	if _, err := (pmtu.DataChannel{Cipher: o.cipher, Auth: o.auth}).Overhead(pmtu.Transport{Proto: "udp", Family: pmtu.IPv4}, 1000); err != nil {
		return usage.Errorf("%v", err)
	}
	return nil
}

// resolve turns HOST or ADDR into one address of the wanted family.
func (o pmtuOptions) resolve(ctx context.Context) (string, netip.Addr, error) {
	name := o.host
	if o.throughTunnel != "" {
		name = o.throughTunnel
		a, err := netip.ParseAddr(name)
		if err != nil {
			return name, netip.Addr{}, usage.Errorf("--through-tunnel %q is not an IP address: give the far end's tunnel address, e.g. 10.8.0.1", name)
		}
		a, err = checkTarget("--through-tunnel", a)
		return name, a, err
	}
	want := func(a netip.Addr) bool {
		return !(o.ipv4 && !a.Is4()) && !(o.ipv6 && !a.Is6())
	}
	a, literal, err := parseTarget("HOST", name)
	if err != nil {
		return name, a, err
	}
	if literal {
		if !want(a) {
			return name, a, usage.Errorf("%s is not an %s address", name, map[bool]string{true: "IPv4", false: "IPv6"}[o.ipv4])
		}
		return name, a, nil
	}
	addrs, err := resolveTarget(ctx, "HOST", name)
	if err != nil {
		return name, netip.Addr{}, err
	}
	// Prefer IPv4 unless -6, like OpenVPN's default "proto udp" with an
	// IPv4-reachable server; -6 picks IPv6.
	var best netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if !want(a) {
			continue
		}
		if !best.IsValid() || (a.Is4() && !best.Is4()) {
			best = a
		}
	}
	if !best.IsValid() {
		return name, best, usage.Errorf("%s has no %s address", name, map[bool]string{true: "IPv4", false: "IPv6"}[o.ipv4])
	}
	return name, best, nil
}

func runPMTU(ctx context.Context, o pmtuOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	name, addr, err := o.resolve(ctx)
	if err != nil {
		return err
	}
	route, err := pmtu.RouteTo(addr)
	if err != nil {
		return err
	}
	p, err := pmtu.NewProber(addr)
	if err != nil {
		return err
	}
	defer p.Close()
	opts := pmtu.Options{Max: o.max, Timeout: o.timeout}
	var tried []pmtu.ProbeTried
	opts.Trace = func(round int, as []pmtu.Answer) {
		tried = append(tried, pmtu.Tried(round, as)...)
		if o.verbose {
			traceRound(o.errOut, round, as)
		}
	}
	res, err := pmtu.Search(ctx, p, opts)
	if err != nil {
		return fmt.Errorf("path MTU to %s: %w", addr, err)
	}
	rep, err := pmtu.NewDocument(res, pmtu.Target{Host: name, Address: addr.String(), Interface: route.Dev,
		ThroughTunnel: o.throughTunnel != "", Cipher: o.cipher, Auth: o.auth}, tried)
	if err != nil {
		return err
	}
	rep.Argv = os.Args
	if h, herr := hostcollect.Host(ctx); herr == nil {
		rep.Machine = &h
	}
	if o.json {
		return writeJSON(o.out, rep)
	}
	writePMTUText(o.out, *rep)
	return nil
}

func writePMTUText(w io.Writer, r pmtu.Document) {
	what := "path MTU"
	if r.ThroughTunnel {
		what = "tunnel MTU (inner)"
	}
	fmt.Fprintf(w, "%s to %s (%s, %s via %s): %d bytes", what, r.Host, r.Address, r.Family, r.Interface, r.PathMTU)
	if r.Blackhole {
		fmt.Fprint(w, " — ICMP BLACK HOLE")
	}
	fmt.Fprintln(w)
	if r.Hop != nil {
		fmt.Fprintf(w, "  hop %s named MTU %d\n", *r.Hop, r.HopMTU)
	}
	fmt.Fprintf(w, "  found in %.2f s: %d rounds, %d probes, RTT %.1f ms\n", r.ElapsedSeconds, r.Rounds, r.Probes, r.RTTMillis)
	fmt.Fprintf(w, "  %s\n", r.Explanation)
	if r.OpenVPN == nil {
		return
	}
	cipher := r.OpenVPN.Cipher
	if r.OpenVPN.Auth != "" {
		cipher += " + HMAC-" + r.OpenVPN.Auth
	}
	fmt.Fprintf(w, "\nOpenVPN 2.6, %s (TLS mode, peer-id):\n", cipher)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  transport\toverhead\tmax tun-mtu\tmssfix (2.6)\tmssfix (2.5)\tinner MSS v4/v6\tfragment")
	for _, t := range r.OpenVPN.Rows {
		frag := "not needed"
		switch {
		case t.FragmentNeeded:
			frag = t.Fragment
		case t.Transport == "tcp":
			frag = "n/a (TCP)"
		}
		assumed := ""
		if !t.Measured {
			assumed = " *"
		}
		fmt.Fprintf(tw, "  %s/%s%s\t%d\t%d\t%s\t%s\t%d/%d\t%s\n", t.Transport, t.Family, assumed, t.Overhead, t.MaxTunMTU, t.MSSFix, t.MSSFix25, t.InnerMSS4, t.InnerMSS6, frag)
	}
	tw.Flush()
	fmt.Fprintf(w, "  * assumes the same path MTU over %s (not probed)\n", r.OpenVPN.Rows[len(r.OpenVPN.Rows)-1].Family)
	for _, t := range r.OpenVPN.Rows {
		if t.Measured {
			fmt.Fprintf(w, "  %s/%s: %s\n", t.Transport, t.Family, t.Advice)
		}
	}
}

func traceRound(w io.Writer, round int, as []pmtu.Answer) {
	fmt.Fprintf(w, "round %d:", round)
	for _, a := range as {
		switch a.Outcome {
		case pmtu.Reply:
			fmt.Fprintf(w, " %d✓(%.1fms)", a.Size, float64(a.RTT.Microseconds())/1000)
		case pmtu.TooBig:
			fmt.Fprintf(w, " %d✗mtu%d@%s", a.Size, a.MTU, a.From)
		case pmtu.Lost:
			fmt.Fprintf(w, " %d…", a.Size)
		default:
			fmt.Fprintf(w, " %d:%s", a.Size, a.Outcome)
		}
	}
	fmt.Fprintln(w)
}
