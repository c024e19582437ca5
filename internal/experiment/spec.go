package experiment

import (
	"context"
	"io"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
)

// Network is one emulated path to measure on.
type Network struct {
	Name        string
	Description string
	Path        labpath.Path
	// Variants, when set, replace Spec.Variants on this network.
	Variants []openvpn.Variant
	// Omit, when set, replaces Spec.Omit (a path without delay needs no
	// slow-start warm-up).
	Omit *time.Duration
	// Payload, when set, replaces Spec.Payload on this network, so that
	// payloads can be compared in one report.
	Payload string
	// PayloadBitsPerSec is the rate the payload file must last at; 0
	// means the path's faster direction (4 Gbit/s without a limit).
	// Compressible data through a compressing tunnel outruns the link.
	PayloadBitsPerSec uint64
}

// payload returns the payload measured on n.
func (n Network) payload(spec Spec) string {
	if n.Payload != "" {
		return n.Payload
	}
	return spec.Payload
}

// variants returns the variants measured on n.
func (n Network) variants(spec Spec) []openvpn.Variant {
	if n.Variants != nil {
		return n.Variants
	}
	return spec.Variants
}

// Spec is what to measure.
type Spec struct {
	// Command names the run in the report ("lab run", "recipe ciphers").
	Command  string
	Networks []Network
	// Variants are the tunnels; Routed adds the bare path as baseline.
	Variants []openvpn.Variant
	Routed   bool
	// Proto is the tunnels' transport, "udp" or "tcp" ("": DefaultProto);
	// Protos overrides it
	// for the variants it names, so UDP and TCP tunnels can be compared in
	// one interleaved run.
	Proto  string
	Protos map[string]string
	// Directions: measure.DirectionUp (client→server) and/or DirectionDown.
	// Empty measures both.
	Directions []string
	// Repeat is the samples per row (RepeatRange; 0: DefaultRepeat).
	Repeat int
	// Duration of each sample and the warm-up left out of it (iperf3 -t,
	// -O; SampleTimeRange and OmitRange). Duration 0 takes the longest
	// SampleTiming of the networks' paths; Omit 0 is no warm-up.
	Duration, Omit time.Duration
	// Parallel is the iperf3 streams of a sample (ParallelRange; 0:
	// DefaultParallel).
	Parallel int
	// Payload is "" (iperf3's own data), "random" or "zeros".
	Payload string
	// LabName names the labs (NAME, or NAME-NETWORK with several
	// networks); empty picks random names.
	LabName string
	// Lab is where the labs keep their state and which ovpnperf runs
	// their owners; the zero value is the host's and this executable.
	Lab lab.Env
	// PKIDir reuses a PKI; empty makes a throw-away one inside the lab.
	PKIDir string
	// Configure edits a variant's configs beyond what variants can say.
	Configure func(variant string, server, client *openvpn.Config)
	// InnerIPv6 names variants whose tunnels also carry IPv6 inside
	// (tunnel.Options.InnerIPv6). Each is measured twice through the same
	// tunnel, interleaved: to the server's inner IPv4 address (rows named
	// VARIANT) and to its inner IPv6 address (rows named
	// VARIANT+InnerIPv6Suffix); both rows carry Extra["inner_family"].
	InnerIPv6 map[string]bool
	// Prepare, if set, runs once the lab is up, before any tunnel starts:
	// for settings of the lab's namespaces that OpenVPN reads when it
	// opens its sockets (tune raises net.core.rmem_max there). An error
	// ends the run.
	Prepare func(ctx context.Context, l *lab.Lab) error
	// Ready, if set, runs once a variant's tunnel is up, before any
	// sample: for settings outside OpenVPN (a qdisc on its tun device)
	// or checks of what it logged. An error ends the run.
	Ready func(ctx context.Context, l *lab.Lab, variant string, t *tunnel.Tunnel) error
	// Retries is how often a sample that came out invalid through no
	// fault of the subject (the emulator fell behind, iperf3's figures
	// contradict each other: ErrInvalidSample, iperf.ErrInconsistent) is
	// measured again before its row is marked invalid; 0 keeps the first
	// outcome.
	Retries int
	// DrainOK accepts a sample that iperf3's figures call inconsistent
	// only because the receiver measured over a longer window than asked,
	// while the sender's window was right and the receiver's rate is not
	// above the sender's. OpenVPN over TCP with large socket buffers does
	// that: iperf3's end-of-test message waits behind the data those
	// buffers hold, in the same outer TCP connection, while the receiver
	// drains them; its rate over that window is the rate the tunnel
	// delivered. Rows count such samples in Extra["drained_samples"].
	DrainOK bool
	// Progress receives progress lines; nil shows none.
	Progress io.Writer
	// ProbeDCO reports what the host offers for DCO, asked once when a
	// variant allows DCO; nil means dco.ProbeHost. Tests that need a host
	// with (or without) DCO give their own.
	ProbeDCO func(context.Context) dco.Host
	// Extra goes into the report's scenario.
	Extra map[string]any
}

// protoOf returns the transport of a variant's tunnel.
func (spec Spec) protoOf(variant string) string {
	if p, ok := spec.Protos[variant]; ok {
		return p
	}
	return spec.Proto
}

// maxPayloadBytes caps a payload file (it lives in the lab directory under
// /run, usually RAM).
const maxPayloadBytes = 256 << 20

// MaxPayloadBytes is the largest payload file a network gets: when
// Duration at the payload's rate needs more, every sample on that network
// sends this many bytes (-n) instead of lasting Duration. Callers that
// set Network.PayloadBitsPerSec keep below it to keep samples timed.
const MaxPayloadBytes = maxPayloadBytes

// Routed is the variant name of the baseline rows.
const Routed = "routed"

// InnerIPv6Suffix ends the names of the rows measured to a tunnel's inner
// IPv6 address (Spec.InnerIPv6).
const InnerIPv6Suffix = "-ipv6"
