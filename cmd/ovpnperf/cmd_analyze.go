package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/capture"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newAnalyzeCommand) }

type analyzeOptions struct {
	json bool
	port int
}

func newAnalyzeCommand() *cobra.Command {
	var o analyzeOptions
	c := &cobra.Command{
		Use:   "analyze FILE.pcap",
		Short: "Analyse a capture of a tunnel's outer packets: sizes, IP fragments, OpenVPN datagrams, TCP retransmissions",
		Long: `analyze reads a capture (pcap or pcapng, as ` + "`tcpdump -w`" + ` writes it) of the
packets between the two ends of a tunnel and prints the IP packet sizes (a
histogram and the most frequent sizes), the IP fragments and the datagrams
they belong to, and for --port (OpenVPN's port) its UDP datagrams and data
packets, or for a TCP transport its segments and retransmissions.
A file that is not a capture, is cut short or damaged (a record longer than
its packet, than the snap length or than libpcap's maximum of 262144 bytes, a
packet of an interface the file does not describe, a second pcapng section),
or holds more than 4194304 distinct fragmented datagrams, TCP segments or
packet sizes, is refused (exit status 2). A pcapng capture of interfaces with
different link types is read packet by packet with each one's link type.`,
		Example: `  tcpdump -i eth0 -n -s 128 -w outer.pcap host 198.51.100.7
  ovpnperf analyze outer.pcap --port 1194
  ovpnperf analyze outer.pcap --json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runAnalyze(cmd.Context(), cmd.OutOrStdout(), a[0], o)
		},
	}
	c.Flags().BoolVar(&o.json, "json", false, "print one JSON document (schema "+capture.Schema+")")
	intFlag(c.Flags(), &o.port, "port", "", 0, 0, 65535, "OpenVPN's port (0: count no port's datagrams)")
	return c
}

func runAnalyze(ctx context.Context, stdout io.Writer, file string, o analyzeOptions) error {
	f, err := inputfile.Open(ctx, file, inputfile.Capture())
	if err != nil {
		return err
	}
	defer f.Close()
	a, err := capture.Analyze(f, uint16(o.port))
	if err != nil {
		if errors.Is(err, capture.ErrNotCapture) || errors.Is(err, capture.ErrTruncated) ||
			errors.Is(err, capture.ErrCorrupt) || errors.Is(err, capture.ErrTooLarge) {
			return usage.Errorf("%s: %v", file, err)
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	if o.json {
		return writeJSON(stdout, a)
	}
	return a.WriteText(stdout)
}
