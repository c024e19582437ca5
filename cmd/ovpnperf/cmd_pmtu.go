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

	"github.com/ovpnperf/ovpnperf/internal/measure"
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
	durationFlag(f, &o.timeout, "timeout", "", 2*time.Second, 50*time.Millisecond, time.Minute, false, "longest wait for one round of answers (raise it for paths with RTT above ~1.5 s)")
	intFlag(f, &o.max, "max", "", 0, 68, 65535, "largest probe in bytes, whole IP packet, 68–65535 (default: the MTU of the outgoing interface)")
	f.StringVar(&o.cipher, "cipher", "AES-256-GCM", "OpenVPN data cipher for the translation ("+strings.Join(pmtu.Ciphers(), ", ")+")")
	f.StringVar(&o.auth, "auth", "SHA1", "OpenVPN --auth digest for the translation (used by CBC ciphers only)")
	stringFlag(f, &o.throughTunnel, "through-tunnel", "", "", "the far end's tunnel address, e.g. 10.8.0.1", "probe ADDR, the far tunnel address, through a running tunnel")
	f.BoolVar(&o.json, "json", false, "print the result as JSON")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print each round's probes to stderr")
	return c
}

// pmtuSchema names the JSON document of `ovpnperf pmtu`; internal/report
// reads it under that name.
const pmtuSchema = "ovpnperf/pmtu/v1"

// pmtuReport is the JSON contract of `ovpnperf pmtu`.
type pmtuReport struct {
	Schema string `json:"schema"` // pmtuSchema
	// Argv and Machine are the command line and the machine it ran on.
	Argv           []string          `json:"argv"`
	Machine        *measure.HostInfo `json:"machine,omitempty"`
	Host           string            `json:"host"`
	Address        string            `json:"address"`
	Family         string            `json:"family"`
	PathMTU        int               `json:"path_mtu"`
	Blackhole      bool              `json:"blackhole"`
	Hop            *string           `json:"hop"`     // null when no router answered
	HopMTU         int               `json:"hop_mtu"` // the MTU the hop named
	Interface      string            `json:"interface"`
	LocalMTU       int               `json:"local_mtu"`
	LocalLimit     bool              `json:"local_limit"`
	ElapsedSeconds float64           `json:"elapsed_seconds"`
	RTTMillis      float64           `json:"rtt_ms"`
	Rounds         int               `json:"rounds"`
	Probes         int               `json:"probes"`
	LostSmall      int               `json:"lost_small_probes"`
	LargestPassed  int               `json:"largest_passed,omitempty"` // above path_mtu: a band of sizes vanishes but larger ones pass
	ThroughTunnel  bool              `json:"through_tunnel"`
	// ImpliedOuterMTU (through a tunnel over a black hole): the outer path
	// MTU that the inner result and the cipher's overhead imply for a
	// tunnel over UDP/IPv4.
	ImpliedOuterMTU int                 `json:"implied_outer_path_mtu,omitempty"`
	Explanation     string              `json:"explanation"`
	OpenVPN         *pmtuOpenVPNSection `json:"openvpn,omitempty"`
	// ProbesTried is every probe of the search and its answer, round by
	// round (for the report's chart of the search).
	ProbesTried []pmtuProbe `json:"probes_tried"`
}

// pmtuProbe is one probe of the search.
type pmtuProbe struct {
	Round   int    `json:"round"`
	Size    int    `json:"size_bytes"`
	Outcome string `json:"outcome"`       // pmtu.Outcome's name: reply, too-big, lost …
	MTU     int    `json:"mtu,omitempty"` // the MTU a too-big answer named
}

type pmtuOpenVPNSection struct {
	Cipher string             `json:"cipher"`
	Auth   string             `json:"auth,omitempty"`
	Rows   []pmtu.Translation `json:"translations"`
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
	if o.timeout < 50*time.Millisecond || o.timeout > time.Minute {
		return usage.Errorf("--timeout %v out of range: use 50ms … 1m", o.timeout)
	}
	if o.max != 0 && (o.max < 68 || o.max > 65535) {
		return usage.Errorf("--max %d out of range: use 68 … 65535 bytes", o.max)
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
	var tried []pmtuProbe
	opts.Trace = func(round int, as []pmtu.Answer) {
		for _, a := range as {
			tried = append(tried, pmtuProbe{Round: round, Size: a.Size, Outcome: a.Outcome.String(), MTU: a.MTU})
		}
		if o.verbose {
			traceRound(o.errOut, round, as)
		}
	}
	res, err := pmtu.Search(ctx, p, opts)
	if err != nil {
		return fmt.Errorf("path MTU to %s: %w", addr, err)
	}
	rep := pmtuReport{
		Schema: pmtuSchema, Host: name, Address: addr.String(), Family: res.Family.String(),
		PathMTU: res.PathMTU, Blackhole: res.Blackhole, HopMTU: res.HopMTU,
		Interface: route.Dev, LocalMTU: res.LocalMTU, LocalLimit: res.LocalLimit,
		ElapsedSeconds: res.Elapsed.Seconds(), RTTMillis: float64(res.RTT.Microseconds()) / 1000,
		Rounds: res.Rounds, Probes: res.Probes, LostSmall: res.Lost,
		ThroughTunnel: o.throughTunnel != "", ProbesTried: tried, Argv: os.Args,
	}
	if h, herr := measure.CollectHost(ctx); herr == nil {
		rep.Machine = &h
	}
	if res.Hop.IsValid() {
		h := res.Hop.String()
		rep.Hop = &h
	}
	if res.LargestPassed > res.PathMTU {
		rep.LargestPassed = res.LargestPassed
	}
	if rep.ThroughTunnel && res.Blackhole {
		// The inner packet that vanished first made an outer packet one
		// byte too big for the outer path.
		dc := pmtu.DataChannel{Cipher: o.cipher, Auth: o.auth}
		if ov, err := dc.Overhead(pmtu.Transport{Proto: "udp", Family: pmtu.IPv4}, res.PathMTU); err == nil {
			rep.ImpliedOuterMTU = res.PathMTU + ov
		}
	}
	rep.Explanation = explainPMTU(res, rep.ThroughTunnel, route.Dev, rep.ImpliedOuterMTU)
	if rep.ImpliedOuterMTU > 0 {
		bound := "" // CBC padding blurs the figure by up to a block
		if !isAEAD(o.cipher) {
			bound = "at least "
		}
		rep.Explanation += fmt.Sprintf(" With %s over UDP/IPv4 that means an outer path MTU of %s%d bytes (over UDP/IPv6: %s%d).", strings.ToUpper(o.cipher), bound, rep.ImpliedOuterMTU, bound, rep.ImpliedOuterMTU+20)
	}
	if !rep.ThroughTunnel {
		sec, err := translatePMTU(o.cipher, o.auth, res)
		if err != nil {
			return err
		}
		rep.OpenVPN = sec
	}
	if o.json {
		return writeJSON(o.out, rep)
	}
	writePMTUText(o.out, rep)
	return nil
}

// translatePMTU fills the OpenVPN rows: UDP and TCP over the probed family
// (measured), then over the other family (assuming the same path MTU).
func translatePMTU(cipher, auth string, res pmtu.Result) (*pmtuOpenVPNSection, error) {
	dc := pmtu.DataChannel{Cipher: cipher, Auth: auth}
	sec := &pmtuOpenVPNSection{Cipher: strings.ToUpper(cipher)}
	if !isAEAD(cipher) {
		sec.Auth = strings.ToUpper(auth)
	}
	other := pmtu.IPv6
	if res.Family == pmtu.IPv6 {
		other = pmtu.IPv4
	}
	for _, fam := range []pmtu.Family{res.Family, other} {
		for _, proto := range []string{"udp", "tcp"} {
			tr, err := dc.Translate(pmtu.Transport{Proto: proto, Family: fam}, res.PathMTU, res.Blackhole, fam == res.Family)
			if err != nil {
				return nil, err
			}
			sec.Rows = append(sec.Rows, tr)
		}
	}
	return sec, nil
}

func isAEAD(cipher string) bool {
	c := strings.ToUpper(cipher)
	return strings.HasSuffix(c, "-GCM") || c == "CHACHA20-POLY1305"
}

// explainPMTU says in plain words what the result means. impliedOuter is
// the outer path MTU a tunnel measurement implies (0 if none).
func explainPMTU(res pmtu.Result, tunnel bool, dev string, impliedOuter int) string {
	var b strings.Builder
	n := res.PathMTU
	switch {
	case res.Blackhole && tunnel:
		fmt.Fprintf(&b, "Inside the tunnel, packets larger than %d bytes vanished without any ICMP error while smaller ones arrived: OpenVPN's bigger outer packets die on the path and nobody tells the sender (an ICMP black hole under the tunnel). "+
			"TCP inside the tunnel stalls on full-size segments unless its MSS is clamped to %d (IPv4) / %d (IPv6)",
			n, n-40, n-60)
		if impliedOuter > 0 {
			fmt.Fprintf(&b, " (OpenVPN 2.6: mssfix %d mtu)", impliedOuter)
		}
		fmt.Fprintf(&b, "; larger UDP packets inside are lost unless tun-mtu is lowered to %d on both peers or OpenVPN fragments (fragment, UDP transport only).", n)
	case res.Blackhole:
		fmt.Fprintf(&b, "ICMP black hole: probes larger than %d bytes vanished without any \"fragmentation needed\"/\"packet too big\" reply, while smaller probes were echoed. "+
			"Path-MTU discovery is broken on this path: TCP connections that send full-size segments stall after the handshake, and larger UDP packets are silently lost. "+
			"Clamp the TCP MSS to %d (IPv4) / %d (IPv6) or fragment before this path (OpenVPN: mssfix %d mtu, or fragment %d mtu over UDP).",
			n, n-40, n-60, n, n)
	case res.Hop.IsValid() && res.HopMTU > 0:
		fmt.Fprintf(&b, "Router %s answered \"fragmentation needed\"/\"packet too big\" for larger probes and named MTU %d; path-MTU discovery works on this path.", res.Hop, res.HopMTU)
		if res.HopMTU != n {
			fmt.Fprintf(&b, " (The largest probe echoed was %d bytes.)", n)
		}
	case res.LocalLimit:
		fmt.Fprintf(&b, "The local interface %s (MTU %d) is the limit; the path beyond it may carry more.", dev, res.LocalMTU)
	default:
		fmt.Fprintf(&b, "Packets up to %d bytes (the largest probed) pass.", n)
	}
	if res.LargestPassed > n {
		fmt.Fprintf(&b, " Sizes from %d bytes up vanished again when re-sent, yet larger probes up to %d bytes passed: the path drops a band of sizes just above %d and fragments bigger packets (typical of a tunnel whose outer packets carry Don't-Fragment into a black hole).",
			res.HoleFrom, res.LargestPassed, n)
	}
	if tunnel {
		fmt.Fprintf(&b, " Measured inside the tunnel (via %s): %d bytes is the largest inner packet that reaches the far end unfragmented.", dev, n)
		if res.LocalLimit {
			fmt.Fprintf(&b, " That is the tunnel device's own MTU: the tunnel carries all it accepts (OpenVPN or the kernel fragments the outer packets where needed).")
		}
		if !strings.HasPrefix(dev, "tun") && !strings.HasPrefix(dev, "ovpn") && !strings.Contains(dev, "tun") {
			fmt.Fprintf(&b, " Note: the route to this address leaves by %s, which does not look like a tunnel device.", dev)
		}
	}
	if res.Lost > 0 {
		fmt.Fprintf(&b, " %d probe(s) below the path MTU went unanswered at first: the path also loses packets.", res.Lost)
	}
	return b.String()
}

func writePMTUText(w io.Writer, r pmtuReport) {
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
