package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/probe"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newProbeCommand) }

type probeOptions struct {
	host        string
	pings       int
	iperf3Port  int
	ppsPort     int
	ppsKeyFile  string
	iperf3Time  time.Duration
	noCrypto    bool
	config      string
	json        bool
	out, errOut io.Writer
}

func newProbeCommand() *cobra.Command {
	o := probeOptions{}
	c := &cobra.Command{
		Use:   "probe HOST",
		Short: "Measure what `ovpnperf advise` needs about the path to HOST and this machine",
		Long: `probe measures the path from this host to HOST (an OpenVPN server or client)
and reads this machine's limits, and prints one path description
(schema ovpnperf/probe/v1) that advise reads with --probe FILE:

  path MTU for IPv4 and IPv6 with ICMP black-hole detection (as ovpnperf pmtu),
  RTT (minimum), jitter (standard deviation, ping's mdev) and loss over
  --pings echoes 10 ms apart: UDP probes to an ` + "`ovpnperf pps server`" + ` on HOST
  (--pps-port, default 7007; --pps-key-file to sign the hello), with the
  loss of each direction from the server's counts; ICMP echoes (round trip
  only) when no pps server answers, with the reason in the notes,
  one TCP flow's throughput when --iperf3 PORT names a running iperf3 server
  (a sample whose two ends' counts contradict each other is measured again,
  up to twice: docs/evidence.md), and the IP-layer path rate it implies when the path shows no loss;
  locally: AES-256-GCM and CHACHA20-POLY1305 speed of one core (openssl
  speed, 1 s each), the OpenVPN version and build flags (the [DCO] tag of
  openvpn --version), the kernel release and its CONFIG_OVPN, whether the
  DCO kernel modules are loaded, built in or loadable (ovpn for OpenVPN 2.7,
  ovpn-dco-v2 for 2.6: /sys/module, modules.builtin, modinfo), whether DCO is
  available with the installed OpenVPN and why not, net.core.rmem_max/wmem_max,
  the outgoing interface's MTU and offloads (the ETHTOOL_GFEATURES ioctl, as
  ethtool -k; no ethtool needed).

--config FILE also says whether OpenVPN would use DCO for that config on this
host and lists every reason it would not: each option of the config that turns
DCO off (with the OpenVPN source line deciding it, as ovpnperf lint's dco-off
rule), an existing non-DCO interface of the config's dev name, and what the
host lacks.

Every field says whether it was measured, read, or is not available (and
why). Needs root (or CAP_NET_RAW) for the path-MTU probes.`,
		Example: `  ovpnperf probe vpn.example.net --json > path.json
  ovpnperf advise --probe path.json
  ovpnperf probe 127.0.0.1 --pings 10 --no-crypto --config /etc/openvpn/server/server.conf
  ovpnperf lab exec NAME client -- ovpnperf probe 198.51.100.2 --iperf3 5201 --json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.host = a[0]
			o.out, o.errOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return runProbe(cmd.Context(), o)
		},
	}
	f := c.Flags()
	rangeFlag(f, &o.pings, "pings", "", probe.DefaultPings, probe.PingsRange(), "echoes for RTT, jitter and loss (%s), "+probe.DefaultInterval.String()+" apart")
	intFlag(f, &o.ppsPort, "pps-port", "", defaultPPSPort, 0, 65535, "UDP port of an ovpnperf pps server on HOST for the echoes (0: ICMP only)")
	stringFlag(f, &o.ppsKeyFile, "pps-key-file", "", "", "a file only its owner can read (mode 0600)", "shared key to sign the pps hello, as pps client --key-file")
	intFlag(f, &o.iperf3Port, "iperf3", "", 0, 1, 65535, "measure throughput against an iperf3 server on this `PORT` of HOST")
	durationRangeFlag(f, &o.iperf3Time, "iperf3-time", "", probe.DefaultIPerf3Duration, probe.IPerf3DurationRange(), "length of the iperf3 test (%s); a long path lengthens it to ten times twice the echo round trip, at most a minute, with a warm-up for slow start")
	f.BoolVar(&o.noCrypto, "no-crypto", false, "skip the local cipher speed test")
	f.StringVar(&o.config, "config", "", "an OpenVPN config `FILE`: say whether DCO would be used for it here, and every reason not")
	f.BoolVar(&o.json, "json", false, "print the path description as JSON")
	return c
}

func runProbe(ctx context.Context, o probeOptions) error {
	switch {
	case !probe.PingsRange().Contains(o.pings):
		return usage.Errorf("--pings %d: want %s", o.pings, probe.PingsRange())
	case o.iperf3Port < 0 || o.iperf3Port > 65535:
		return usage.Errorf("--iperf3 %d: not a port", o.iperf3Port)
	case !probe.IPerf3DurationRange().Contains(o.iperf3Time):
		return usage.Errorf("--iperf3-time %v: want %s", o.iperf3Time, probe.IPerf3DurationRange())
	case strings.TrimSpace(o.host) == "" || strings.HasPrefix(o.host, "-"):
		return usage.Errorf("probe needs a HOST name or address")
	}
	if o.config != "" {
		if _, err := openvpn.ReadConfigFile(o.config); err != nil {
			return usage.Errorf("--config: %v", err)
		}
	}
	key, err := readKeyFile("--pps-key-file", o.ppsKeyFile)
	if err != nil {
		return err
	}
	// The same target rule as pmtu and pps: no unspecified, broadcast or
	// multicast address, no malformed or unresolvable name.
	if _, err := resolveTarget(ctx, "HOST", o.host); err != nil {
		return err
	}
	rep, err := probe.Run(ctx, probe.Options{Host: o.host, Pings: o.pings, PPSPort: o.ppsPort, PPSKey: key, IPerf3Port: o.iperf3Port, IPerf3Duration: o.iperf3Time,
		NoCrypto: o.noCrypto, Config: o.config, Logf: func(f string, a ...any) { fmt.Fprintf(o.errOut, "probe: "+f+"\n", a...) }})
	if err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(o.out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	b, _ := json.Marshal(rep.Path)
	var fields map[string]map[string]any
	_ = json.Unmarshal(b, &fields)
	fmt.Fprintf(o.out, "path to %s (%s)\n", rep.Host, rep.Time.Format(time.RFC3339))
	for _, k := range sortedKeys(fields) {
		f := fields[k]
		v := "-"
		if f["source"] != probe.NotAvailable {
			vb, _ := json.Marshal(f["value"])
			v = string(vb)
		}
		note := fmt.Sprint(f["note"])
		if m, ok := f["method"]; ok {
			note = fmt.Sprintf("[%v] %s", m, note)
		}
		fmt.Fprintf(o.out, "  %-42s %-24s %-13s %s\n", k, v, f["source"], note)
	}
	for _, f := range rep.Findings {
		fmt.Fprintf(o.out, "%s: %s\n", f.Kind, f.Text)
	}
	if r := rep.Path.DCOOffReasons; r.Known() && len(r.Value) > 0 {
		fmt.Fprintf(o.out, "DCO would not be used with %s here, because:\n", o.config)
		for _, w := range r.Value {
			fmt.Fprintf(o.out, "  - %s\n", w)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
