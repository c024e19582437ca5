package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/realnet"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/ui"
	"github.com/ovpnperf/ovpnperf/internal/usage"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func init() {
	register(newMeasureCommand)
}

type measureOptions struct {
	tunnel    string
	pid       int
	port      int
	repeat    int
	duration  time.Duration
	omit      time.Duration
	cipher    string
	direction string
	capture   bool
	json      bool
	out       string
	html      string
}

// pct writes a share (0.01) as the help texts' percent ("1"): the help
// says the rules' thresholds from their constants.
func pct(share float64) string { return strconv.FormatFloat(100*share, 'f', -1, 64) }

func newMeasureCommand() *cobra.Command { return measureCommand(new(measureOptions)) }

// measureCommand is the command with its options parsed into o (the flag tests
// read them).
func measureCommand(o *measureOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "measure HOST --tunnel TUNNEL_ADDR",
		Short: "Measure your own OpenVPN tunnel against the path outside it, and name what limits it",
		Long: `measure runs on one end of an existing OpenVPN tunnel (client or server host).
HOST is the far end's address outside the tunnel, TUNNEL_ADDR its address inside.
The far end must run an iperf3 server (` + "`iperf3 -s`" + `); measure starts nothing there
and changes nothing here.

It takes interleaved iperf3 samples (outside up, outside down, tunnel up, tunnel
down, --repeat times) and, during each, reads the local OpenVPN process that
owns the tunnel (found from the route to TUNNEL_ADDR, its tun device and the
process holding it; --pid names it): its CPU time and busiest thread, drops at
its UDP socket or retransmits of its TCP socket, the socket buffers the kernel
gave it, the host's IP fragment counters and the tun device's drops. What
cannot be read is said.

Before the samples, 5 ICMP echoes to each address measure the path's round
trip; without --time and --omit the samples follow from it as lab run's do
(a satellite path's slow start takes seconds), and iperf3's measuring window
may run up to twice the largest echo longer than asked (the receiver's
window ends a round trip after the sender's). How the samples were sized is
printed and kept in the document (scenario.extra.sample_timing). When TCP
outside the tunnel retransmitted more than ` + pct(measure.LossShare) + ` % in every sample, ` + strconv.Itoa(measure.LossEchoes) + ` ICMP
echoes to HOST after the samples, one every ` + measure.LossEchoInterval.String() + `, count what the idle path
loses (scenario.real.loss_echoes).

Findings name the limit only when every sample shows it: path-bound (the tunnel
carries what the overhead model predicts of the outside rate, ±` + pct(measure.PathBoundTolerance) + ` %), CPU-bound
(OpenVPN's busiest thread at ` + pct(measure.CPUBoundShare) + ` % of a core or more), socket drops (with the
buffer it got and what to set), fragmentation (with the MTU advice),
window-bound and loss (outside TCP retransmitting over ` + pct(measure.LossShare) + ` % in every
sample raises it; the paced echoes decide it, since a TCP flow that fills a
path overflows its bottleneck's queue on a path that loses nothing: more
than ` + pct(measure.LossShare) + ` % of them lost confirms, ` + pct(measure.LossShare/2) + ` % or less refutes); each says what
would show it wrong.

--json prints the run document (network "real") that ` + "`ovpnperf report`" + ` draws and
` + "`ovpnperf compare before.json after.json`" + ` judges, so a configuration change is
measured before and after. --capture records the outer packets of one tunnel
sample with tcpdump and compares them with the overhead model; with --out the
capture is kept next to it (OUT.pcap), otherwise it is removed.

Up is this host → HOST, down is HOST → this host. Needs root (it reads other
processes' file descriptors).`,
		Example: `  ovpnperf measure 198.51.100.7 --tunnel 10.8.0.1
  ovpnperf measure 198.51.100.7 --tunnel 10.8.0.1 --repeat 5 --time 10s --json --out before.json
  ovpnperf measure vpn.example.org --tunnel 10.8.0.1 --capture --out after.json
  ovpnperf compare before.json after.json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runMeasure(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), a[0], *o)
		},
	}
	f := c.Flags()
	stringFlag(f, &o.tunnel, "tunnel", "", "", "an IP address", "the far end's address inside the tunnel (required)")
	intFlag(f, &o.pid, "pid", "", 0, 0, 1<<22, "the local OpenVPN process (default: the one holding the tun device the route to --tunnel uses)")
	iperf3PortFlag(f, &o.port)
	rangeFlag(f, &o.repeat, "repeat", "", experiment.DefaultRepeat, experiment.RepeatRange(), "samples per row, interleaved (%s; findings need "+strconv.Itoa(verdict.MinSamples)+")")
	sampleTimeFlags(f, &o.duration, &o.omit, "t", measureTimeRule, measureOmitRule)
	f.StringVar(&o.direction, "direction", experiment.DirectionBoth, "up (this host → HOST), down or both")
	stringFlag(f, &o.cipher, "cipher", "", "", "a data cipher", "the tunnel's data cipher, for the overhead model (default "+overhead.DefaultCipher+", OpenVPN 2.6's first choice)")
	f.BoolVar(&o.capture, "capture", false, "capture the outer packets of one tunnel sample with tcpdump and analyse them")
	f.BoolVar(&o.json, "json", false, "print one JSON document (schema "+measure.Schema+") instead of tables")
	stringFlag(f, &o.out, "out", "", "", "a file path", "also write the JSON document to this file (checked before the run)")
	stringFlag(f, &o.html, "html", "", "", "a file path", "also write the report page (as `ovpnperf report` makes it) to this file")
	return c
}

// The sample defaults of measure: lab run's rule at the round trip the
// echoes measure (iperf.RealPathTiming), at least realnet.MinDuration.
var (
	measureTimeRule = "from the path: " + iperf.TimeRule(realnet.MinDuration) + " (a loaded round trip is twice the largest echo), by ICMP echoes to both addresses"
	measureOmitRule = "from the path: " + iperf.WarmupRule() + "; " + iperf.NoEchoWarmup.String() + " if no echo answers"
)

func runMeasure(ctx context.Context, stdout, stderr io.Writer, hostArg string, o measureOptions) error {
	if o.tunnel == "" {
		return usage.Errorf("--tunnel is required: the far end's address inside the tunnel")
	}
	host, tun, err := tunnelEnds(ctx, hostArg, o.tunnel, o.cipher)
	if err != nil {
		return err
	}
	dirs, err := experiment.ParseDirections(o.direction)
	if err != nil {
		return err
	}
	if err := checkOutPath("--out", o.out); err != nil {
		return err
	}
	if err := checkOutPath("--html", o.html); err != nil {
		return err
	}
	pcap := ""
	if o.capture && o.out != "" {
		// The capture kept beside --out is an output like it.
		pcap = strings.TrimSuffix(o.out, ".json") + ".pcap"
		if err := checkOutPath("--capture (beside --out)", pcap); err != nil {
			return err
		}
	}
	need := []string{"iperf3"}
	if o.capture {
		need = append(need, "tcpdump")
	}
	if err := runner.Require(need...); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return usage.Errorf("measure needs root: it reads the OpenVPN process's file descriptors and counters")
	}
	spec := realnet.Spec{Host: host, Tunnel: tun, Pid: o.pid, Port: o.port, Repeat: o.repeat,
		Duration: o.duration, Omit: o.omit, Cipher: o.cipher, Capture: o.capture, Directions: dirs}
	spec.CaptureFile = pcap
	if err := spec.Validate(); err != nil {
		return err
	}
	if !o.json {
		spec.Progress = stderr
	}
	rep, err := realnet.Run(ctx, spec)
	if rep == nil {
		return err
	}
	rep.Scenario.Argv = os.Args
	var outErr error
	if o.out != "" {
		outErr = writeOut(o.out, func(w io.Writer) error { return rep.WriteJSON(w) })
	}
	if o.html != "" {
		if herr := writeHTML(o.html, []*measure.Report{rep}); herr != nil {
			return errors.Join(err, herr)
		}
	}
	if o.json {
		if jerr := rep.WriteJSON(stdout); jerr != nil {
			return jerr
		}
	} else {
		if terr := ui.RenderTable(stdout, rep); terr != nil {
			return terr
		}
		writeRealText(stdout, rep)
	}
	// As in lab run, a row that lost a sample is marked invalid with the
	// reason and keeps its other samples; a row without any fails the run.
	if err == nil {
		for _, r := range rep.Rows {
			if len(r.SamplesBps) == 0 {
				err = fmt.Errorf("%s %s: no valid sample: %s", r.Variant, r.Direction, r.Error)
				break
			}
		}
	}
	return errors.Join(err, outErr)
}

// writeRealText prints what measure read beside the table: the OpenVPN
// process's counters per tunnel row, the capture, and the findings.
func writeRealText(w io.Writer, rep *measure.Report) {
	rp := rep.Scenario.Real
	fmt.Fprintf(w, "OpenVPN pid %d on %s, %s; tun-mtu %d, path MTU %d; model %s: %d bytes per packet, tunnel/outside predicted %.3f\n",
		rp.Pid, rp.TunDevice, rp.Socket, rp.TunMTU, rp.PathMTU, rp.ModelCipher, rp.ModelOverheadBytes, rp.PredictedRatio)
	for _, r := range rep.Rows {
		if r.Path != measure.PathTunnel || len(r.OpenVPN) == 0 {
			continue
		}
		var drops, frags, reasm, retr, tunDrops uint64
		share := 0.0
		for _, c := range r.OpenVPN {
			drops += c.SocketDrops
			frags += c.FragCreates
			reasm += c.ReasmReqds
			retr += c.TCPRetrans
			tunDrops += c.TunTxDropped
			share = max(share, c.BusiestThreadShare)
		}
		last := r.OpenVPN[len(r.OpenVPN)-1]
		fmt.Fprintf(w, "tunnel %-4s OpenVPN %.1f CPU-s/GB, busiest thread ≤%.0f %% of a core; socket drops %d, retransmits %d, buffers R=%d S=%d; IP fragments made %d, reassembled %d; tun drops %d (txqueuelen %d)\n",
			r.Direction, r.CPUSecondsPerGB["openvpn"], 100*share, drops, retr, last.RcvbufBytes, last.SndbufBytes, frags, reasm, tunDrops, last.TxQueueLen)
	}
	if c := rp.Capture; c != nil {
		fmt.Fprintf(w, "capture (%s): %d packets, %d IP fragments of %d datagrams, largest %d bytes; overhead %.1f bytes per packet measured, %d by the model",
			c.Sample, c.Packets, c.Fragments, c.FragmentedDatagrams, c.MaxIPBytes, c.MeasuredOverheadBytes, c.ModelOverheadBytes)
		if rp.Proto == "tcp" {
			fmt.Fprintf(w, ", %d TCP retransmissions", c.TCPRetransmitted)
		}
		if c.File != "" {
			fmt.Fprintf(w, " (kept in %s)", c.File)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	for _, line := range measure.FindingLines(rep) {
		fmt.Fprintln(w, line)
	}
}
