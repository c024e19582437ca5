package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/advise"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/probe"
	"github.com/ovpnperf/ovpnperf/internal/rules"
	"github.com/ovpnperf/ovpnperf/internal/shellquote"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newAdviseCommand) }

type adviseOptions struct {
	probeFile                     string
	rate, rtt, loss               string
	pmtu                          int
	blackhole                     bool
	proto, openvpn, dco, clientOS string
	outer6                        bool
	clients                       int
	cryptoMBps, chachaMBps        float64
	packetRate                    float64
	json                          bool
	format                        string
	out                           io.Writer
}

func newAdviseCommand() *cobra.Command {
	o := adviseOptions{}
	c := &cobra.Command{
		Use:   "advise",
		Short: "Recommend OpenVPN, sysctl and interface settings for a path, with reasons and a predicted ceiling",
		Long: `advise reads a path description (a probe file from ` + "`ovpnperf probe`" + ` and/or
flags; flags override the probe) and prints server, client, push, sysctl and
interface lines, each with its reason and the figure it rests on; the
predicted throughput ceiling of one TCP flow (one for both directions: the
path is one rate, RTT and loss) as the minimum of path rate × header
efficiency, window/RTT (or the loss-bound window), crypto per core and packet
cost per core, naming the term that binds; what not to do on this path; and,
under "undecided", each setting that depends on something not given (path
MTU, rate, packet cost, a measurement over TCP transport) with the
measurement that decides it and what each answer would change. The packet cost per core is an assumption (45 000 full
packets/s, measured in this project's lab; probe does not measure it) unless
--packet-rate gives a figure measured on the server; the output says so
wherever a prediction rests on it. --json includes "variant", which ` + "`ovpnperf lab run --variant`" + `
accepts as it is, so the advice can be tested in a lab.`,
		Example: `  ovpnperf advise --probe path.json
  ovpnperf advise --rate 20mbit --rtt 200ms --pmtu 1500
  ovpnperf advise --rate 100mbit --rtt 10ms --pmtu 1400 --blackhole --format conf
  ovpnperf advise --probe path.json --client-os windows --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.out = cmd.OutOrStdout()
			return runAdvise(cmd, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.probeFile, "probe", "", "path description written by `ovpnperf probe --json` (`FILE`)")
	f.StringVar(&o.rate, "rate", "", "bottleneck rate of the path (e.g. 20mbit)")
	f.StringVar(&o.rtt, "rtt", "", "round-trip time (e.g. 200ms)")
	f.StringVar(&o.loss, "loss", "", "packet loss (e.g. 2%)")
	rangeFlag(f, &o.pmtu, "pmtu", "", 0, rules.PathMTURange(), "outer path MTU in bytes (%s)")
	f.BoolVar(&o.blackhole, "blackhole", false, "ICMP \"too big\" errors are lost on the path")
	f.StringVar(&o.proto, "proto", "", "OpenVPN transport: udp or tcp (default udp)")
	f.BoolVar(&o.outer6, "outer-ipv6", false, "the tunnel runs over IPv6")
	rangeFlag(f, &o.clients, "clients", "", 0, advise.ClientsRange(), "concurrent clients, %s (default "+strconv.Itoa(advise.DefaultClients)+")")
	f.StringVar(&o.openvpn, "openvpn", "", "OpenVPN version: 2.5 or 2.6 (default: the probe's, else 2.6)")
	f.StringVar(&o.dco, "dco", "", "data-channel offload on the server: yes or no")
	f.StringVar(&o.clientOS, "client-os", "", "linux, windows, macos or android (default linux)")
	// 1e6 MB/s (1 TB/s per core) is far beyond any CPU: a larger figure is a typo.
	floatFlag(f, &o.cryptoMBps, "crypto", 0, 0.01, 1e6, "server's AES-256-GCM speed per core in MB/s (openssl speed)")
	floatFlag(f, &o.chachaMBps, "crypto-chacha", 0, 0.01, 1e6, "server's CHACHA20-POLY1305 speed per core in MB/s")
	floatFlag(f, &o.packetRate, "packet-rate", 0, 1, 1e8, "full-size packets/s one userspace OpenVPN forwards per core on the server, measured (default: an assumed "+strconv.Itoa(rules.DefaultPacketsPerSecPerCore)+")")
	f.BoolVar(&o.json, "json", false, "print the advice as JSON")
	f.StringVar(&o.format, "format", "text", "text or conf (ready-to-paste server.conf / client.conf / sysctl.conf fragments)")
	return c
}

func (o adviseOptions) input(cmd *cobra.Command) (advise.Input, error) {
	var in advise.Input
	if o.format != "text" && o.format != "conf" {
		return in, usage.Errorf("--format %q: text or conf", o.format)
	}
	if o.probeFile != "" {
		rep, err := probe.Load(o.probeFile)
		if err != nil {
			return in, usage.Errorf("%v", err)
		}
		proto := o.proto
		if proto == "" {
			proto = "udp"
		}
		in = rep.Input(proto, o.outer6)
	}
	ch := cmd.Flags().Changed
	if ch("rate") {
		r, err := lab.ParseRate("--rate", o.rate)
		if err != nil {
			return in, err
		}
		in.RateBitsPerSec = float64(r)
	}
	if ch("rtt") {
		d, err := lab.ParseTime("--rtt", o.rtt)
		if err != nil {
			return in, err
		}
		in.RTT = d
	}
	if ch("loss") {
		l, err := lab.ParsePercent("--loss", o.loss)
		if err != nil {
			return in, err
		}
		in.LossPercent, in.LossGiven = l, true
	}
	if ch("pmtu") {
		in.PathMTU = o.pmtu
	}
	if ch("blackhole") {
		in.Blackhole = o.blackhole
	}
	if ch("proto") {
		in.Proto = o.proto
	}
	if ch("outer-ipv6") {
		in.OuterIPv6 = o.outer6
	}
	if ch("clients") {
		if o.clients < 1 {
			return in, usage.Errorf("--clients %d: want 1 or more", o.clients)
		}
		in.Clients = o.clients
	}
	if ch("openvpn") {
		in.OpenVPN = o.openvpn
	}
	if ch("dco") {
		switch o.dco {
		case "yes":
			in.DCO = true
		case "no":
			in.DCO = false
		default:
			return in, usage.Errorf("--dco %q: yes or no", o.dco)
		}
	}
	if ch("client-os") {
		in.ClientOS = o.clientOS
	}
	if ch("crypto") {
		in.CryptoBytesPerSec = o.cryptoMBps * 1e6
	}
	if ch("crypto-chacha") {
		in.ChaChaBytesPerSec = o.chachaMBps * 1e6
	}
	if ch("packet-rate") {
		in.PacketsPerSecPerCore = o.packetRate
	}
	if o.probeFile == "" && !ch("rate") && !ch("rtt") && !ch("pmtu") && !ch("loss") {
		return in, usage.Errorf("advise needs a path: --probe FILE and/or --rate, --rtt, --loss, --pmtu")
	}
	return in, nil
}

func runAdvise(cmd *cobra.Command, o adviseOptions) error {
	in, err := o.input(cmd)
	if err != nil {
		return err
	}
	a, err := advise.Advise(in)
	var ie *advise.InputError
	if errors.As(err, &ie) {
		return usage.Errorf("%s", ie.Msg)
	}
	if err != nil {
		return err
	}
	switch {
	case o.json:
		enc := json.NewEncoder(o.out)
		enc.SetIndent("", "  ")
		return enc.Encode(adviceDoc{Schema: advise.Schema, Argv: os.Args, Advice: a})
	case o.format == "conf":
		writeAdviceConf(o.out, a)
	default:
		writeAdvice(o.out, a)
	}
	return nil
}

// adviceDoc is `advise --json`: the advice with its schema and the
// command line that asked for it.
type adviceDoc struct {
	Schema string   `json:"schema"`
	Argv   []string `json:"argv"`
	advise.Advice
}

func writeAdvice(w io.Writer, a advise.Advice) {
	section := func(title string, ls []advise.Line) {
		if len(ls) == 0 {
			return
		}
		fmt.Fprintf(w, "%s:\n", title)
		for _, l := range ls {
			fmt.Fprintf(w, "  %s\n      why: %s\n      figure: %s\n", l.Directive, l.Reason, l.Figure)
		}
	}
	if len(a.Server) == 0 {
		if len(a.Undecided) > 0 {
			fmt.Fprintln(w, "server and client: no line to add from what was given; what decides the rest is under \"undecided\" below")
		} else {
			fmt.Fprintln(w, "server and client: no line to add: nothing given calls for a change from OpenVPN 2.6's defaults")
		}
	}
	section("server.conf", a.Server)
	section("client.conf", a.Client)
	section("server.conf push", a.Push)
	section("sysctl (both hosts)", a.Sysctl)
	section("interface", a.Interface)
	section("firewall (TCP MSS clamp; iptables or nft, not both)", a.Firewall)
	fmt.Fprintf(w, "predicted ceiling of one TCP flow (%s, tun-mtu %d):\n", a.Cipher, a.TunMTU)
	assumed := map[string]string{}
	for _, c := range a.Ceilings {
		bound := c.Binding
		if c.BindingAssumed {
			bound += ", an assumed figure (see below): the prediction is no better than it"
		}
		fmt.Fprintf(w, "  %s: %.1f Mbit/s, bound by %s\n", c.Direction, c.BitsPerSec/1e6, bound)
		for _, t := range c.Terms {
			mark := ""
			if t.Assumed != "" {
				mark, assumed[t.Name] = " assumed", t.Assumed
			}
			fmt.Fprintf(w, "      %-32s %10.1f Mbit/s  (%s)%s\n", t.Name, t.BitsPerSec/1e6, t.Figure, mark)
		}
	}
	for _, name := range sortedKeys(assumed) {
		fmt.Fprintf(w, "  %s: %s\n", name, assumed[name])
	}
	if len(a.Undecided) > 0 {
		fmt.Fprintln(w, "undecided (depends on something not given):")
		for _, u := range a.Undecided {
			fmt.Fprintf(w, "  %s\n      missing: %s\n      measure: %s\n      changes: %s\n", u.Setting, u.Missing, u.Measure, u.Changes)
		}
	}
	section("do not", a.DoNot)
	if a.DCONote != "" {
		fmt.Fprintf(w, "DCO: %s\n", a.DCONote)
	}
	if len(a.Notes) > 0 {
		fmt.Fprintln(w, "client notes:")
		for _, n := range a.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	fmt.Fprintf(w, "test it: ovpnperf lab run --variant %s --variant default\n", shellquote.Arg(a.Variant))
}

func writeAdviceConf(w io.Writer, a advise.Advice) {
	block := func(title string, ls []advise.Line) {
		fmt.Fprintf(w, "# --- %s ---\n", title)
		for _, l := range ls {
			fmt.Fprintf(w, "# %s\n%s\n", l.Reason, l.Directive)
		}
		fmt.Fprintln(w)
	}
	block("server.conf", append(append([]advise.Line{}, a.Server...), a.Push...))
	block("client.conf", a.Client)
	if len(a.Firewall) > 0 {
		fmt.Fprintln(w, "# --- firewall: TCP MSS clamp (run the iptables lines or the nft lines, not both) ---")
		for _, l := range a.Firewall {
			fmt.Fprintf(w, "# %s\n# %s\n", l.Reason, l.Directive)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "# --- /etc/sysctl.d/90-openvpn.conf ---")
	for _, l := range a.Sysctl {
		fmt.Fprintf(w, "# %s\n%s\n", l.Reason, l.Directive)
	}
	for _, c := range a.Ceilings {
		bound := c.Binding
		if c.BindingAssumed {
			bound += ", assumed, not measured"
		}
		fmt.Fprintf(w, "# predicted %s: %.1f Mbit/s (%s)\n", c.Direction, c.BitsPerSec/1e6, bound)
	}
	for _, u := range a.Undecided {
		fmt.Fprintf(w, "# undecided: %s (missing %s; measure: %s)\n", u.Setting, u.Missing, u.Measure)
	}
}
