package recipe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func init() {
	register(Recipe{
		Name:    "shaper",
		Summary: "a pushed shaper 100000 limits the client's upload to about 100 kB/s and leaves its download alone; tc tbf on the server's tun limits the download",
		Source: "OpenVPN manual and forums: --shaper limits the sender's outgoing traffic (100 B/s … 100 MB/s); OpenVPN refuses it " +
			"with --mode server, so a server pushes it to clients, and limits its own direction with tc",
		Run:   runShaper,
		Judge: shaperVerdicts,
	})
}

// shaperBytesPerSec is the limit pushed to the client and set with tc on
// the server's tun device: 100 kB/s = 800 kbit/s.
const shaperBytesPerSec = 100000

// shaperPath is faster than the limit by far (20 Mbit/s each way, no
// delay): whatever is limited to 800 kbit/s is the shaper's doing.
var shaperPath = labpath.Path{Up: labpath.Link{RateBitsPerSec: 20e6}, Down: labpath.Link{RateBitsPerSec: 20e6}}

// The variants: OpenVPN 2.6 defaults; "shaper" adds push "shaper 100000"
// to the server, "tc" a tbf on the server's tun device.
//
// While the shaper holds a packet back, OpenVPN stops reading its tun
// device, so TCP's window piles up in the tun queue (the kernel lets go of
// a packet's socket accounting when tun queues it, so TCP Small Queues do
// not hold it back): at 100 kB/s each 1500-byte packet queued is 15 ms of
// delay, the default 500 packets 7.5 s. iperf3's end-of-test message waits
// behind that queue, so its receiver measures over a longer window than
// asked: experiment's DrainOK accepts such samples,
// whose receiver rate is the rate the shaper delivered. The shaper's
// client gets a 50-packet tun queue (0.75 s at the limit) so that what is
// left queued after an upload sample does not hold up the download sample
// that follows on the same tunnel; fewer starve TCP
// (docs/measurements.md#recipe-paths-and-queues).
var shaperVariants = []string{"noshaper=", "shaper=client:txqueuelen " + strconv.Itoa(shaperTxQueueLen), "tc="}

// shaperTxQueueLen is the client's tun queue in the shaper variant.
const shaperTxQueueLen = 50

// Sizes of a full TCP segment through the default tunnel (see the ipv6
// recipe's arithmetic): the shaper counts the outer IP packet (OpenVPN's
// shaper_wrote_bytes adds the IP and UDP headers to the datagram), the
// tbf on the tun device the inner IP packet.
func shaperPrediction() (outer, inner, payload int) {
	b := ipv6DefaultBudget(false, true)
	return b.Wire(), b.Wire() - b.DataChannel - b.OuterL4 - b.OuterIP, b.Payload()
}

// shaperTbf limits the server's tun device (in srv, the lab's server
// namespace) to shaperBytesPerSec. The qdisc lives on the tun device, which
// OpenVPN creates and deletes: it goes with the OpenVPN process (and the
// namespace with the lab), so it is not recorded in the lab's state.
//
// Equivalent to: ip netns exec SERVER tc qdisc replace dev DEV root handle 1:
// tbf rate 800kbit burst 5000 limit 20000
func shaperTbf(ctx context.Context, srv hostnet.Host, dev string) error {
	const burst = 5000  // bytes: three full packets
	const limit = 20000 // bytes: 200 ms at the rate
	q := hostnet.Qdisc{Kind: hostnet.Tbf, Handle: 1, Rate: shaperBytesPerSec, Burst: burst, Limit: limit}
	if err := srv.QdiscReplace(ctx, dev, q); err != nil {
		return fmt.Errorf("tbf on the server's tun device %s: %w", dev, err)
	}
	return nil
}

// labHost is the Host of a lab node's namespace.
func labHost(l *lab.Lab, n lab.Node) hostnet.Host { return hostnet.Open(l.Namespace(n)) }

// shaperLogLines returns the lines of an OpenVPN log that mention the
// shaper ("OPTIONS IMPORT: traffic shaper enabled", "Output Traffic Shaping
// initialized at 100000 bytes per second", the PUSH_REPLY, or a refusal),
// without their timestamps.
func shaperLogLines(path string) ([]string, error) {
	b, err := inputfile.ReadFile(context.Background(), path, inputfile.Log())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		// Words, not paths: the lab's directories carry variant names.
		for _, f := range strings.Fields(line) {
			if strings.Contains(strings.ToLower(f), "shap") && !strings.Contains(f, "/") {
				out = append(out, openvpn.StripTimestamp(line))
				break
			}
		}
	}
	return out, nil
}

func runShaper(ctx context.Context, o Options) (*measure.Report, error) {
	vs, err := builtinVariants(shaperVariants...)
	if err != nil {
		return nil, err
	}
	var clientLines, serverLines []string
	var tcDev string
	var queueProbe map[string]shaperQueueResult
	rep, err := experiment.Run(ctx, experiment.Spec{
		Command:  "recipe shaper",
		Networks: []experiment.Network{{Name: "line", Description: "20 Mbit/s each way; limits of 100 kB/s", Path: o.path(shaperPath)}},
		Variants: vs, Proto: openvpn.UDP,
		Repeat: o.repeat(), Duration: o.duration(4 * time.Second), Retries: 1, DrainOK: true,
		Progress: o.Progress, PKIDir: o.PKIDir, LabName: o.LabName, Lab: o.Lab,
		Extra: map[string]any{"shaper_bytes_per_sec": shaperBytesPerSec},
		Configure: func(variant string, server, _ *openvpn.Config) {
			if variant == "shaper" {
				server.Set(openvpn.D("push", fmt.Sprintf("shaper %d", shaperBytesPerSec)))
			}
		},
		Ready: func(ctx context.Context, l *lab.Lab, variant string, t *tunnel.Tunnel) error {
			switch variant {
			case "shaper":
				var err error
				if clientLines, err = shaperLogLines(t.Client.LogPath); err != nil {
					return err
				}
				if serverLines, err = shaperLogLines(t.Server.LogPath); err != nil {
					return err
				}
				queueProbe = shaperQueueProbe(ctx, l, t)
				return nil
			case "tc":
				tcDev = fmt.Sprintf("ovpnperf-s%d", t.Slot)
				if t.ServerLog != nil && t.ServerLog.TunDev != "" {
					tcDev = t.ServerLog.TunDev
				}
				return shaperTbf(ctx, labHost(l, lab.Server), tcDev)
			}
			return nil
		},
	})
	if err != nil {
		return rep, err
	}
	rep.Scenario.Extra["shaper_client_log"] = clientLines
	rep.Scenario.Extra["shaper_server_log"] = serverLines
	if queueProbe != nil {
		rep.Scenario.Extra["tun_queue_probe"] = queueProbe
	}
	rep.Scenario.Extra["tc"] = fmt.Sprintf("tc qdisc replace dev %s root handle 1: tbf rate 800kbit burst 5000 limit 20000 (server namespace)", tcDev)
	outer, inner, payload := shaperPrediction()
	for i := range rep.Rows {
		r := &rep.Rows[i]
		var perPacket int
		switch {
		case r.Variant == "shaper" && r.Direction == measure.DirectionUp:
			perPacket = outer
		case r.Variant == "tc" && r.Direction == measure.DirectionDown:
			perPacket = inner
		default:
			continue
		}
		r.PublishedBps = 8 * shaperBytesPerSec
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra["predicted_goodput_bps"] = 8 * shaperBytesPerSec * float64(payload) / float64(perPacket)
	}
	return rep, judgeSaved(rep, shaperVerdicts)
}

// shaperMargins: a held row's samples stay at most 10 % above the limit
// (protocol headers make it sit below), its median at least 60 % of it;
// a row entirely above 1.1 × the limit is not held.
var shaperMargins = verdict.Margins{Over: 1.1, Under: 0.6, Free: 1.1}

// shaperAloneTolerance: "leaves the other direction alone" allows that
// direction to lose at most 10 % against the unshaped tunnel. The
// shaper's own direction still carries that direction's ACKs, which at
// 18 Mbit/s cost about 86 of its 100 kB/s (ackBytesPerSec), so a download
// held back by shaped ACKs shows here as refuted, with the ACK figure.
const shaperAloneTolerance = 0.10

// shaperQueueNote says what the recipe changed to make the upload claim
// measurable.
var shaperQueueNote = fmt.Sprintf("measured with the client's tun queue cut to %d packets (txqueuelen), which the recipe sets so that an upload sample's queue drains before the next sample; OpenVPN's default is 500", shaperTxQueueLen)

// ackBytesPerSec is what the ACKs of a download of bps cost the client's
// upload through the tunnel: one ACK per two full segments (delayed ACKs),
// each an outer packet of inner IP+TCP+timestamps plus OpenVPN's overhead.
func ackBytesPerSec(bps float64) float64 {
	b := ipv6DefaultBudget(false, true)
	ack := b.InnerIP + b.TCP + b.TCPOptions + b.DataChannel + b.OuterL4 + b.OuterIP
	return bps / 8 / float64(b.Payload()) / 2 * float64(ack)
}

// shaperVerdicts judges the saved report: rows, the client's shaper log
// lines (Scenario.Extra["shaper_client_log"]) and the path.
func shaperVerdicts(rep *measure.Report) []measure.Verdict {
	var out []measure.Verdict
	clientLines, _ := extraAs[[]string](rep.Scenario.Extra["shaper_client_log"])
	path, _ := firstPath(rep)
	limit := float64(8 * shaperBytesPerSec)
	outer, inner, payload := shaperPrediction()
	base := func(dir string) *measure.Row { return row(rep, "", "noshaper", dir) }

	// 1. Does the client take the pushed option at all?
	claim := fmt.Sprintf("OpenVPN 2.6 clients accept a pushed shaper (push \"shaper %d\"; shaper is refused in --mode server)", shaperBytesPerSec)
	imported := shaperLogLine(clientLines, "traffic shaper enabled")
	refused := ""
	for _, l := range clientLines {
		lc := strings.ToLower(l)
		if strings.Contains(lc, "error") || strings.Contains(lc, "cannot") || strings.Contains(lc, "not allowed") || strings.Contains(lc, "unrecognized") {
			refused = l
			break
		}
	}
	switch {
	case imported != "":
		init := shaperLogLine(clientLines, "Traffic Shaping initialized")
		out = append(out, newVerdict(claim, Confirmed, "the client logged %q and %q", imported, init))
	case refused != "":
		out = append(out, newVerdict(claim, Refuted, "the client logged %q", refused))
	default:
		out = append(out, newVerdict(claim, Noise, "the client's log says nothing about the shaper (lines: %q); the rates below tell whether it acted", clientLines))
	}

	// 2. The pushed shaper holds the client's upload.
	up, upBase := row(rep, "", "shaper", measure.DirectionUp), base(measure.DirectionUp)
	predUp := limit * float64(payload) / float64(outer)
	claim = fmt.Sprintf("a pushed shaper %d limits the client's upload to about 100 kB/s (800 kbit/s) [up]", shaperBytesPerSec)
	figures := fmt.Sprintf("shaper %s vs no shaper %s; predicted TCP goodput %s (%d payload bytes per %d-byte outer packet, which the shaper counts); %s",
		mbps(up), mbps(upBase), measure.FormatRate(predUp), payload, outer, shaperQueueNote)
	o, why := verdict.LimitedTo(samples(up), limit, float64(path.Up.RateBitsPerSec), shaperMargins)
	if o == Refuted {
		why += fmt.Sprintf(" (client log: %q)", clientLines)
	}
	out = append(out, withCondition(withShortfall(newVerdict(claim, o, "%s: %s", why, figures), limitShort(o, samples(up))), measure.VerdictConditionTunQueueCut, finding.Figures{"txqueuelen_packets": shaperTxQueueLen}))

	// 3. … and leaves the download alone, apart from its ACKs.
	down, downBase := row(rep, "", "shaper", measure.DirectionDown), base(measure.DirectionDown)
	claim = "the pushed shaper leaves the client's download alone [down]"
	figures = fmt.Sprintf("shaper %s vs no shaper %s", mbps(down), mbps(downBase))
	if downBase != nil {
		figures += fmt.Sprintf("; the client's ACKs for %s take %.0f of its %d B/s", mbps(downBase), ackBytesPerSec(downBase.MedianBps), shaperBytesPerSec)
	}
	out = append(out, shaperAlone(claim, down, downBase, figures))

	// 4. tc on the server's tun holds the download.
	tcDown, tcUp := row(rep, "", "tc", measure.DirectionDown), row(rep, "", "tc", measure.DirectionUp)
	predDown := limit * float64(payload) / float64(inner)
	claim = "a tc tbf of 800 kbit/s on the server's tun device limits the client's download to about 100 kB/s [down]"
	figures = fmt.Sprintf("tc %s vs no shaper %s; predicted TCP goodput %s (%d payload bytes per %d-byte inner packet, which tbf counts)",
		mbps(tcDown), mbps(downBase), measure.FormatRate(predDown), payload, inner)
	o, why = verdict.LimitedTo(samples(tcDown), limit, float64(path.Down.RateBitsPerSec), shaperMargins)
	out = append(out, withShortfall(newVerdict(claim, o, "%s: %s", why, figures), limitShort(o, samples(tcDown))))

	// 5. … and leaves the upload alone.
	claim = "the tbf on the server's tun leaves the client's upload alone [up]"
	out = append(out, shaperAlone(claim, tcUp, upBase, fmt.Sprintf("tc %s vs no shaper %s", mbps(tcUp), mbps(upBase))))

	// 6. What the recipe's 50-packet queue changes against the default.
	out = append(out, shaperQueueVerdict(rep))
	return out
}

// shaperAlone judges "a limit in the other direction leaves r alone" as a
// "no difference" claim against the unshaped tunnel (verdict.Within with
// verdict.NotBelow): confirmed only when every ratio the samples allow is
// within shaperAloneTolerance of it, refuted when r is lower beyond that,
// not tested without a baseline of MinSamples samples.
func shaperAlone(claim string, r, base *measure.Row, figures string) measure.Verdict {
	j := verdict.Within(samples(r), samples(base), verdict.NotBelow(shaperAloneTolerance))
	switch {
	case j.Outcome == Confirmed:
		return newVerdict(claim, Confirmed, "within %.0f %% of the unshaped tunnel: %s; %s", 100*shaperAloneTolerance, j.Ratio, figures)
	case j.Below:
		return newVerdict(claim, Refuted, "slower than the unshaped tunnel by more than %.0f %% beyond the spread: %s; %s", 100*shaperAloneTolerance, j.Ratio, figures)
	}
	return withShortfall(newVerdict(claim, j.Outcome, "%s: %s", j.Why, figures), j.Short)
}

// shaperLogLine returns the first line containing s, or "".
func shaperLogLine(lines []string, s string) string {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
