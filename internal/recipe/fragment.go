package recipe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"

	"github.com/ovpnperf/ovpnperf/internal/capture"
	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func init() {
	register(Recipe{
		Name:    "fragment",
		Summary: "no fragment, fragment 1400, fragment 400: ping RTT, throughput, and a capture counting outer IP fragments vs OpenVPN's own",
		Source: "OpenVPN cookbook, tuning UDP-based connections (OpenVPN 2.3): ping RTT 9.4 ms without fragment, 9.9 ms with fragment 1400, " +
			"19.2 ms with fragment 400; the tcpdump recipe: with fragment 1400 a 1400-byte ping leaves as two equal datagrams",
		Needs:   []string{"ping", "tcpdump"},
		Run:     func(ctx context.Context, o Options) (*measure.Report, error) { return runFragment(ctx, o, nil) },
		Judge:   fragJudge,
		Columns: fragColumns,
	})
}

// The variants. fragment works over UDP only; mssfix is set to the same
// value so that TCP inside sizes its segments to fit one fragment, as the
// manual advises, rather than leaning on OpenVPN's default (mssfix 1492
// mtu) and being cut up.
const (
	fragNone = "nofrag"
	frag1400 = "frag1400"
	frag400  = "frag400"
)

var fragVariantSpecs = []string{fragNone + "=", frag1400 + "=fragment 1400;mssfix 1400", frag400 + "=fragment 400;mssfix 400"}

// publishedFragRTT are the cookbook's ping RTTs in ms.
var publishedFragRTT = map[string]float64{fragNone: 9.4, frag1400: 9.9, frag400: 19.2}

// fragPath: a LAN-like 100 Mbit/s path without added delay, so that the
// RTT is OpenVPN's and the kernel's own work per packet, which fragmenting
// multiplies (with 10 ms of emulated delay the effect would drown), and
// an MTU of 1450 on the router–server segment (a VXLAN overlay's). With
// 1450 a 1400-byte ping through the default tunnel (1428 inside, 1480 on
// the wire) exceeds the path and the kernel splits it into IP fragments,
// a 1300-byte one (1380) does not, and fragment 1400 keeps every datagram
// at or below 1428 bytes: the capture can tell the two fragmentations
// apart. PMTU discovery works (no ICMP black hole).
var fragPath = labpath.Path{Up: labpath.Link{RateBitsPerSec: 100e6}, Down: labpath.Link{RateBitsPerSec: 100e6}, MTU: 1450}

// Ping settings: the cookbook pinged with the default 56-byte payload;
// 1400 bytes is the size fragment 400 cuts into four. 100 pings 10 ms
// apart per round. The capture pings with 1300 and 1400 bytes, as the
// tcpdump recipe did.
var (
	fragRTTSizes     = []int{56, 1400}
	fragCaptureSizes = []int{1300, 1400}
)

const (
	fragPings        = 100
	fragPingInterval = "0.01"
	fragCapturePings = 10
)

// fragKeep, when not nil, receives each capture file before the lab is
// torn down (a test keeps them as the parser's test data).
type fragKeep func(variant string, size int, path string)

func runFragment(ctx context.Context, o Options, keep fragKeep) (*measure.Report, error) {
	var vs []openvpn.Variant
	for _, s := range fragVariantSpecs {
		v, err := openvpn.ParseVariant(s)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	path := o.path(fragPath)
	rounds := o.repeat(3)
	// Ready runs as each tunnel comes up; once the last is up, every
	// tunnel is, and the pings and captures run interleaved across them.
	tunnels := map[string]*tunnel.Tunnel{}
	var probe *fragProbe
	ready := func(ctx context.Context, l *lab.Lab, variant string, t *tunnel.Tunnel) error {
		tunnels[variant] = t
		if variant != vs[len(vs)-1].Name {
			return nil
		}
		p, err := runFragProbe(ctx, l, vs, tunnels, rounds, o.Progress, keep)
		probe = p
		return err
	}
	rep, err := experiment.Run(ctx, experiment.Spec{
		Command:  "recipe fragment",
		Networks: []experiment.Network{{Name: "lan", Description: fmt.Sprintf("100 Mbit/s, no delay, MTU %d router–server", path.EffectiveMTU()), Path: path}},
		Variants: vs, Routed: true, Proto: openvpn.UDP,
		Repeat: o.repeat(3), Duration: o.duration(2 * time.Second), Ready: ready, Retries: 2,
		Progress: o.Progress, PKIDir: o.PKIDir, LabName: o.LabName, Lab: o.Lab,
	})
	if rep == nil {
		return nil, err
	}
	if probe != nil {
		for i := range rep.Rows {
			r := &rep.Rows[i]
			x := rowExtra(r)
			if rtt, ok := probe.rtt[r.Variant]; ok {
				x["ping_rtt_ms"] = rtt
			}
			if c, ok := probe.capture[r.Variant]; ok {
				x["capture"] = c
			}
			if p, ok := publishedFragRTT[r.Variant]; ok {
				x["published_rtt_ms"] = p
			}
		}
		rep.Scenario.Extra["ping"] = map[string]any{"sizes": fragRTTSizes, "count": fragPings, "interval_s": fragPingInterval, "rounds": rounds}
		rep.Scenario.Extra["capture"] = map[string]any{"interface": "router rs (towards the server, the MTU bottleneck)", "sizes": fragCaptureSizes, "pings": fragCapturePings}
	}
	rep.Columns = fragColumns
	if jerr := judgeSaved(rep, fragJudge); jerr != nil && err == nil {
		err = jerr
	}
	return rep, err
}

// fragRTT is the RTT of one variant at one ping size.
type fragRTT struct {
	// MeanMs and SdMs are over every reply of every round (SD as ping's
	// mdev: the population standard deviation), the cookbook's figures.
	MeanMs float64 `json:"mean_ms"`
	SdMs   float64 `json:"sd_ms"`
	// MedianMs is over every reply too. On a shared machine a few replies
	// wait tens of milliseconds for a CPU and pull the mean and SD far
	// from the typical round trip; the verdicts compare medians.
	MedianMs float64 `json:"median_ms"`
	// RoundMediansMs are the rounds' medians, interleaved across
	// variants; their range is the spread the verdicts use.
	RoundMediansMs []float64 `json:"round_medians_ms"`
	Sent           int       `json:"sent"`
	Received       int       `json:"received"`
}

// fragCapture is what a capture on the router saw while one variant's
// tunnel carried fragCapturePings pings of one size.
type fragCapture struct {
	PingsSent     int `json:"pings_sent"`
	PingsReceived int `json:"pings_received"`
	fragCounts
}

type fragProbe struct {
	rtt     map[string]map[string]*fragRTT     // variant → size → RTT
	capture map[string]map[string]*fragCapture // variant → size → counts
}

func runFragProbe(ctx context.Context, l *lab.Lab, vs []openvpn.Variant, tunnels map[string]*tunnel.Tunnel, rounds int, progress io.Writer, keep fragKeep) (*fragProbe, error) {
	p := &fragProbe{rtt: map[string]map[string]*fragRTT{}, capture: map[string]map[string]*fragCapture{}}
	logf := func(format string, a ...any) {
		if progress != nil {
			fmt.Fprintf(progress, format+"\n", a...)
		}
	}
	all := map[[2]string][]float64{}
	for round := 0; round < rounds; round++ {
		logf("lan: pinging through every tunnel (round %d/%d)", round+1, rounds)
		for _, size := range fragRTTSizes {
			for _, v := range vs {
				t := tunnels[v.Name]
				res, err := fragPing(ctx, l, t.ServerAddr.String(), size, fragPings, fragPingInterval)
				if err != nil {
					return p, fmt.Errorf("variant %s: %w", v.Name, err)
				}
				key := strconv.Itoa(size)
				if p.rtt[v.Name] == nil {
					p.rtt[v.Name] = map[string]*fragRTT{}
				}
				r := p.rtt[v.Name][key]
				if r == nil {
					r = &fragRTT{}
					p.rtt[v.Name][key] = r
				}
				r.Sent += res.sent
				r.Received += res.received
				if len(res.rttMs) > 0 {
					r.RoundMediansMs = append(r.RoundMediansMs, verdict.Median(res.rttMs))
				}
				all[[2]string{v.Name, key}] = append(all[[2]string{v.Name, key}], res.rttMs...)
			}
		}
	}
	for k, xs := range all {
		r := p.rtt[k[0]][k[1]]
		r.MeanMs, r.SdMs, r.MedianMs = fragMean(xs), fragSD(xs), verdict.Median(xs)
	}
	logf("lan: capturing on the router while pinging with %v bytes", fragCaptureSizes)
	for _, v := range vs {
		t := tunnels[v.Name]
		p.capture[v.Name] = map[string]*fragCapture{}
		for _, size := range fragCaptureSizes {
			c, err := fragCaptureRun(ctx, l, v.Name, t, size, keep)
			if err != nil {
				return p, fmt.Errorf("variant %s: %w", v.Name, err)
			}
			p.capture[v.Name][strconv.Itoa(size)] = c
		}
	}
	return p, nil
}

// pingResult is what ping printed.
type pingResult struct {
	rttMs          []float64
	sent, received int
}

var (
	pingReplyRE   = regexp.MustCompile(`^\d+ bytes from .*: icmp_seq=\d+ .*time=([0-9.]+) ms`)
	pingSummaryRE = regexp.MustCompile(`^(\d+) packets transmitted, (\d+) received`)
)

// parsePing reads iputils ping's output: one line per reply and the
// summary line. Duplicates ("(DUP!)") are not replies to count.
func parsePing(r io.Reader) (pingResult, error) {
	var res pingResult
	summary := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if m := pingReplyRE.FindStringSubmatch(line); m != nil && !strings.Contains(line, "DUP!") {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return res, fmt.Errorf("ping: bad time in %q", line)
			}
			res.rttMs = append(res.rttMs, v)
			continue
		}
		if m := pingSummaryRE.FindStringSubmatch(line); m != nil {
			res.sent, _ = strconv.Atoi(m[1])
			res.received, _ = strconv.Atoi(m[2])
			summary = true
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if !summary {
		return res, errors.New("ping printed no summary line")
	}
	if res.received != len(res.rttMs) {
		return res, fmt.Errorf("ping: summary says %d received but %d replies were printed", res.received, len(res.rttMs))
	}
	return res, nil
}

// fragPing pings addr from the client namespace. ping exits 1 when
// replies are missing; that is a figure (loss), not a failure.
func fragPing(ctx context.Context, l *lab.Lab, addr string, size, count int, interval string) (pingResult, error) {
	cmd := l.Command(ctx, lab.Client, "ping", "-n", "-c", strconv.Itoa(count), "-i", interval, "-W", "1", "-s", strconv.Itoa(size), addr)
	out, err := cmd.CombinedOutput()
	res, perr := parsePing(strings.NewReader(string(out)))
	if perr != nil {
		if err == nil {
			err = perr
		}
		return res, fmt.Errorf("running %q: %w\n%s", cmd.String(), err, out)
	}
	return res, nil
}

// fragCaptureRun captures on the router's server-side port (the 1450-byte
// segment, where kernel fragments must appear) while pinging through one
// tunnel with one size.
//
// Immediate mode hands each packet to tcpdump at once: without it libpcap
// holds packets in its ring until a block fills or a second passes, and a
// capture stopped half a second after the pings ends up empty.
//
// Equivalent to: ip netns exec ROUTER tcpdump -i rs -n -s 128 --immediate-mode -U -w FILE ip
func fragCaptureRun(ctx context.Context, l *lab.Lab, variant string, t *tunnel.Tunnel, size int, keep fragKeep) (*fragCapture, error) {
	file := filepath.Join(l.Dir(), fmt.Sprintf("capture-%s-%d.pcap", variant, size))
	logPath := file + ".log"
	proc, err := l.Start(ctx, lab.Router, logPath, "tcpdump", "-i", "rs", "-n", "-s", "128", "--immediate-mode", "-U", "-w", file, "ip")
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = proc.Stop()
		}
	}()
	if err := fragWaitListening(ctx, logPath, proc.Done()); err != nil {
		return nil, err
	}
	res, err := fragPing(ctx, l, t.ServerAddr.String(), size, fragCapturePings, "0.05")
	if err != nil {
		return nil, err
	}
	// Replies have arrived; give the last packets time to pass the router
	// before stopping the capture.
	time.Sleep(100 * time.Millisecond)
	stopped = true
	if err := proc.Stop(); err != nil {
		// tcpdump ends on SIGTERM with status 0; anything else is odd but
		// the file written so far (-U: packet by packet) is still valid.
		if _, statErr := os.Stat(file); statErr != nil {
			return nil, fmt.Errorf("tcpdump: %w", err)
		}
	}
	f, err := inputfile.Open(ctx, file, inputfile.Capture())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts, err := countFragments(f, uint16(tunnel.BasePort+t.Slot))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if keep != nil {
		keep(variant, size, file)
	}
	return &fragCapture{PingsSent: res.sent, PingsReceived: res.received, fragCounts: counts}, nil
}

// fragWaitListening waits for tcpdump's "listening on" line, which it
// prints once the capture socket is bound.
func fragWaitListening(ctx context.Context, logPath string, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), "listening on") {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("tcpdump exited: %s", strings.TrimSpace(string(b)))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tcpdump did not start listening within 10s: %s", strings.TrimSpace(string(b)))
		}
	}
}

// fragCounts are the IPv4 packets of a capture, told apart by who split
// them:
//
//   - an outer IP fragment (MF set or offset > 0) is the kernel's work: a
//     datagram larger than the path MTU, split on the sending host (PMTU
//     known) or refused by the router with ICMP "fragmentation needed";
//   - OpenVPN's own fragmentation (--fragment) is invisible to IP: it
//     sends more, smaller UDP datagrams, each a whole IP packet.
//
// OpenVPN datagrams are counted by the tunnel's server port, in whole
// packets and first fragments (later fragments carry no UDP header).
type fragCounts struct {
	IPPackets           int `json:"ip_packets"`
	OuterFragments      int `json:"outer_fragments"`
	FragmentedDatagrams int `json:"fragmented_datagrams"`
	OpenVPNDatagramsUp  int `json:"openvpn_datagrams_up"`
	OpenVPNDatagramsDn  int `json:"openvpn_datagrams_down"`
	ICMPFragNeeded      int `json:"icmp_frag_needed"`
	MaxIPBytes          int `json:"max_ip_bytes"`
}

// countFragments reads a pcap (Ethernet or raw IP) with the capture
// analysis `ovpnperf analyze` uses. port is the OpenVPN server's UDP port.
// A capture cut short by the stop keeps what it has.
func countFragments(r io.Reader, port uint16) (fragCounts, error) {
	a, err := capture.Analyze(r, port)
	if err != nil && !(errors.Is(err, capture.ErrTruncated) && a != nil) {
		return fragCounts{}, err
	}
	return fragCounts{IPPackets: a.IPPackets, OuterFragments: a.Fragments, FragmentedDatagrams: a.FragmentedDatagrams,
		OpenVPNDatagramsUp: a.DatagramsToPort, OpenVPNDatagramsDn: a.DatagramsFromPort,
		ICMPFragNeeded: a.ICMPFragNeeded, MaxIPBytes: a.MaxIPBytes}, nil
}

func fragMean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// fragSD is the population standard deviation, as ping's mdev.
func fragSD(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := fragMean(xs)
	var s float64
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(xs)))
}

// fragColumns are the recipe's columns of the text table.
var fragColumns = []measure.Column{
	{Header: "RTT 56B ms", Format: func(r measure.Row) string { return fragRTTText(r, 56) }},
	{Header: "RTT 1400B ms", Format: func(r measure.Row) string { return fragRTTText(r, 1400) }},
	{Header: "WIRE PER 1400B PING", Format: fragWireText},
}

func fragRTTOf(r measure.Row, size int) *fragRTT {
	m, ok := extraAs[map[string]*fragRTT](r.Extra["ping_rtt_ms"])
	if !ok {
		return nil
	}
	return m[strconv.Itoa(size)]
}

func fragRTTText(r measure.Row, size int) string {
	x := fragRTTOf(r, size)
	if x == nil || x.Received == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f ± %.3f (med %.3f)", x.MeanMs, x.SdMs, x.MedianMs)
}

func fragCaptureOf(r measure.Row, size int) *fragCapture {
	m, ok := extraAs[map[string]*fragCapture](r.Extra["capture"])
	if !ok {
		return nil
	}
	return m[strconv.Itoa(size)]
}

// fragWireText: per 1400-byte ping, the OpenVPN datagrams each way and
// the outer IP fragments seen.
func fragWireText(r measure.Row) string {
	c := fragCaptureOf(r, 1400)
	if c == nil || c.PingsSent == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f+%.1f dgrams, %.1f IP frags", float64(c.OpenVPNDatagramsUp)/float64(c.PingsSent),
		float64(c.OpenVPNDatagramsDn)/float64(max(c.PingsReceived, 1)), float64(c.OuterFragments)/float64(c.PingsSent))
}

// fragRTTCompare compares variant a's RTT with b's at one size: the ratio
// of the pooled medians, and whether the rounds' medians are apart (every
// round of a above every round of b, or below).
func fragRTTCompare(a, b *fragRTT) (ratio float64, above, below bool) {
	if a == nil || b == nil || b.MedianMs == 0 || len(a.RoundMediansMs) == 0 || len(b.RoundMediansMs) == 0 {
		return 0, false, false
	}
	ratio = a.MedianMs / b.MedianMs
	if len(a.RoundMediansMs) < MinSamples || len(b.RoundMediansMs) < MinSamples {
		return ratio, false, false // too few rounds for a spread
	}
	above = verdict.Min(a.RoundMediansMs) > verdict.Max(b.RoundMediansMs)
	below = verdict.Max(a.RoundMediansMs) < verdict.Min(b.RoundMediansMs)
	return ratio, above, below
}

func fragRTTDesc(name string, x *fragRTT) string {
	if x == nil {
		return name + " -"
	}
	return fmt.Sprintf("%s median %.3f ms (rounds %.3f–%.3f; mean %.3f ± %.3f; %d/%d replies)", name, x.MedianMs,
		verdict.Min(x.RoundMediansMs), verdict.Max(x.RoundMediansMs), x.MeanMs, x.SdMs, x.Received, x.Sent)
}

// Windows of the fragment claims: "barely changes RTT" (published ×1.05)
// allows every round's ratio from ×0.8 to ×1.25 (sub-millisecond RTTs in
// a lab move by tenths); "nearly identical" throughput allows 5 %.
var fragRTTBarely = verdict.Window{Lo: 0.8, Hi: 1.25}

const fragSameThroughput = 0.05

// fragRounds returns the rounds' medians (none for nil).
func fragRounds(x *fragRTT) []float64 {
	if x == nil {
		return nil
	}
	return x.RoundMediansMs
}

// fragJudge judges a saved report: the pings and captures are in the rows'
// Extra (ping_rtt_ms, capture), the path in the scenario.
func fragJudge(rep *measure.Report) []measure.Verdict {
	var p *fragProbe
	for _, r := range rep.Rows {
		rtt, ok := extraAs[map[string]*fragRTT](r.Extra["ping_rtt_ms"])
		if !ok {
			continue
		}
		if p == nil {
			p = &fragProbe{rtt: map[string]map[string]*fragRTT{}, capture: map[string]map[string]*fragCapture{}}
		}
		p.rtt[r.Variant] = rtt
		if c, ok := extraAs[map[string]*fragCapture](r.Extra["capture"]); ok {
			p.capture[r.Variant] = c
		}
	}
	path, _ := firstPath(rep)
	return fragVerdicts(rep, p, path)
}

func fragVerdicts(rep *measure.Report, p *fragProbe, path labpath.Path) []measure.Verdict {
	var out []measure.Verdict
	if p == nil {
		return append(out, newVerdict("fragment changes ping RTT and the packets on the wire", Noise, "the pings and captures did not run"))
	}
	get := func(v string, size int) *fragRTT { return p.rtt[v][strconv.Itoa(size)] }
	for _, size := range fragRTTSizes {
		tag := fmt.Sprintf(" [%d-byte pings]", size)
		a, b := get(frag1400, size), get(fragNone, size)
		ratio, above, below := fragRTTCompare(a, b)
		claim := "fragment 1400 barely changes ping RTT (published 9.9 vs 9.4 ms, ×1.05)" + tag
		why := fragRTTDesc("fragment 1400", a) + " vs " + fragRTTDesc("none", b) + fmt.Sprintf(": ×%.2f", ratio)
		// Every ratio of interleaved rounds must lie in the window: the
		// medians' ratio alone says nothing about the spread.
		j := verdict.Within(fragRounds(a), fragRounds(b), fragRTTBarely)
		switch {
		case ratio == 0:
			out = append(out, newVerdict(claim, Noise, "%s", why))
		case j.Outcome == Confirmed:
			out = append(out, newVerdict(claim, Confirmed, "%s; rounds %s, inside %s", why, j.Ratio, fragRTTBarely))
		case j.Above:
			out = append(out, newVerdict(claim, Refuted, "%s; rounds %s: fragment 1400 costs more than a quarter", why, j.Ratio))
		case j.Below:
			out = append(out, newVerdict(claim, Changed, "%s; rounds %s: faster with fragment 1400", why, j.Ratio))
		default:
			out = append(out, withShortfall(newVerdict(claim, j.Outcome, "%s: %s", why, j.Why), j.Short))
		}
		a = get(frag400, size)
		ratio, above, below = fragRTTCompare(a, b)
		claim = "fragment 400 roughly doubles ping RTT (published 19.2 vs 9.4 ms, ×2.0)" + tag
		why = fragRTTDesc("fragment 400", a) + " vs " + fragRTTDesc("none", b) + fmt.Sprintf(": ×%.2f", ratio)
		// Inner packet (payload + ICMP 8 + IP 20), GCM 24, fragment 4.
		if size+28+24+4 > 400 {
			why += "; fragment 400 cuts this ping into several datagrams"
		} else {
			why += "; a ping this small fits one 400-byte fragment"
		}
		switch {
		case ratio == 0:
			out = append(out, newVerdict(claim, Noise, "%s", why))
		case above && ratio >= 1.6:
			out = append(out, newVerdict(claim, Confirmed, "%s", why))
		case above && ratio >= 1.15:
			out = append(out, newVerdict(claim, Changed, "%s: it rises, by less than the published doubling", why))
		case len(a.RoundMediansMs) < MinSamples || len(b.RoundMediansMs) < MinSamples:
			out = append(out, newVerdict(claim, Noise, "%s: a verdict needs %d rounds", why, MinSamples))
		case ratio < 1.15 && !above:
			out = append(out, newVerdict(claim, Refuted, "%s: no rise beyond 15%%", why))
		case below:
			out = append(out, newVerdict(claim, Refuted, "%s: lower with fragment 400", why))
		default:
			out = append(out, newVerdict(claim, Noise, "%s: the rounds overlap", why))
		}
	}
	for _, dir := range []string{measure.DirectionUp, measure.DirectionDown} {
		f, n := row(rep, "", frag1400, dir), row(rep, "", fragNone, dir)
		claim := fmt.Sprintf("fragment 1400 keeps the tunnel's throughput (cookbook: nearly identical) [%s]", dir)
		j := verdict.Within(samples(f), samples(n), verdict.Unchanged(fragSameThroughput))
		why := fmt.Sprintf("fragment 1400 %s vs none %s: %s; fragment 400 %s", mbps(f), mbps(n), j.Ratio, mbps(row(rep, "", frag400, dir)))
		switch {
		case j.Outcome == Confirmed:
			out = append(out, newVerdict(claim, Confirmed, "%s, inside %s", why, verdict.Unchanged(fragSameThroughput)))
		case j.Below:
			out = append(out, newVerdict(claim, Changed, "%s: slower by more than %.0f %% beyond the spread", why, 100*fragSameThroughput))
		case j.Above:
			out = append(out, newVerdict(claim, Changed, "%s: faster by more than %.0f %% beyond the spread (no IP fragments of full-size packets on this %d-byte path)", why, 100*fragSameThroughput, path.EffectiveMTU()))
		default:
			out = append(out, withShortfall(newVerdict(claim, j.Outcome, "%s: %s", why, j.Why), j.Short))
		}
	}
	out = append(out, fragCaptureVerdict(p, path))
	return out
}

// fragCaptureVerdict reads the captures: with fragment 1400 a 1400-byte
// ping leaves as several UDP datagrams and no IP fragments; without
// fragment, what exceeds the path MTU is split by the kernel instead.
func fragCaptureVerdict(p *fragProbe, path labpath.Path) measure.Verdict {
	claim := "OpenVPN's fragment splits a 1400-byte ping into whole UDP datagrams, not IP fragments (cookbook tcpdump recipe)"
	c := p.capture[frag1400]["1400"]
	n := p.capture[fragNone]["1400"]
	n13 := p.capture[fragNone]["1300"]
	if c == nil || c.PingsSent == 0 || c.PingsReceived == 0 {
		return newVerdict(claim, Noise, "no capture of 1400-byte pings through fragment 1400")
	}
	per := func(x *fragCapture) string {
		if x == nil || x.PingsSent == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f datagrams up, %.1f down, %.1f IP fragments per ping (%d/%d replies, largest packet %d B)",
			float64(x.OpenVPNDatagramsUp)/float64(x.PingsSent), float64(x.OpenVPNDatagramsDn)/float64(max(x.PingsReceived, 1)),
			float64(x.OuterFragments)/float64(x.PingsSent), x.PingsReceived, x.PingsSent, x.MaxIPBytes)
	}
	why := fmt.Sprintf("fragment 1400: %s; no fragment: %s; no fragment, 1300 B: %s; path MTU %d", per(c), per(n), per(n13), path.EffectiveMTU())
	up := float64(c.OpenVPNDatagramsUp) / float64(c.PingsSent)
	switch {
	case c.OuterFragments == 0 && up >= 1.9:
		return newVerdict(claim, Confirmed, "%s", why)
	case c.OuterFragments > 0:
		return newVerdict(claim, Refuted, "%s: IP fragments appeared with fragment 1400", why)
	}
	return newVerdict(claim, Changed, "%s: fragment 1400 did not split the ping", why)
}
