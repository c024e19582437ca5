package recipe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func init() {
	register(Recipe{
		Name:    "ipv6",
		Summary: "inner IPv4 against inner IPv6 through the same tunnel, with the header arithmetic that predicts the difference",
		Source: "forum measurements: TCP over IPv6 inside an OpenVPN tunnel about 5 % slower than over IPv4 through the same tunnel " +
			"(the inner IPv6 header is 40 bytes instead of 20, within the same tun-mtu and mssfix)",
		Run:   runIPv6,
		Judge: ipv6Judge,
	})
}

// publishedIPv6Ratio is the published IPv6/IPv4 throughput: about 5 % less.
const publishedIPv6Ratio = 0.95

// ipv6Path limits the line (20 Mbit/s each way, no delay, so no emulator
// that could fall behind): both families are then limited by bytes on the
// wire, and their ratio is the ratio of TCP payload per full packet. A
// faster line lets a loaded 2-core machine starve OpenVPN
// (docs/measurements.md#recipe-paths-and-queues).
var ipv6Path = labpath.Path{Up: labpath.Link{RateBitsPerSec: 20e6}, Down: labpath.Link{RateBitsPerSec: 20e6}}

// ipv6Variant is the tunnel measured with both families: OpenVPN 2.6's
// defaults (tun-mtu 1500, mssfix 1492 mtu, AES-256-GCM negotiated).
const ipv6Variant = "default"

// ipv6Budget is the arithmetic of one full-sized TCP segment through
// the tunnel (OpenVPN 2.6 mtu.c frame_calculate_mssfix, mss.c):
//
//	outer IP | UDP | data channel | inner IP | TCP | TCP options | payload
//	<------------------------ mssfix (with the mtu keyword) ------------->
//
// OpenVPN clamps the MSS of SYNs to mssfix − outer IP − UDP − data channel
// overhead − 40 (an inner IPv4 and TCP header), and 20 less for IPv6
// (mss_fixup_ipv6), so a full segment of either family fills mssfix bytes on
// the wire and IPv6 carries 20 bytes less payload in it.
type ipv6Budget struct {
	TunMTU, Mssfix int
	// OuterIP and OuterL4 are the transport's headers: IPv4 20 / IPv6 40,
	// UDP 8.
	OuterIP, OuterL4 int
	// DataChannel is OpenVPN's per-packet overhead: 24 for AEAD
	// (P_DATA_V2 opcode and peer-id 4, packet-id 4, tag 16).
	DataChannel int
	// InnerIP is the inner packet's IP header (20 or 40), TCP the TCP
	// header without options, TCPOptions the options of every data
	// segment (12 with timestamps).
	InnerIP, TCP, TCPOptions int
	// LinkHeader is what the bottleneck counts beyond the IP packet: the
	// Ethernet header (14) on the lab's veth links.
	LinkHeader int
}

// defaultDataChannelBytes asks the overhead model what OpenVPN 2.6's
// default data channel (AES-256-GCM, P_DATA_V2) adds over UDP/IPv4,
// outer headers excluded.
func defaultDataChannelBytes() int {
	f, err := overhead.New(overhead.DataChannel{Cipher: overhead.DefaultCipher}, overhead.Transport{Proto: "udp"})
	if err != nil {
		panic(err) // a constant configuration the model knows
	}
	return f.Wire(1000)
}

// ipv6DefaultBudget is OpenVPN 2.6's default over IPv4 UDP with AES-256-GCM,
// for an inner packet of the given family.
func ipv6DefaultBudget(innerIPv6, timestamps bool) ipv6Budget {
	b := ipv6Budget{TunMTU: 1500, Mssfix: 1492, OuterIP: 20, OuterL4: 8, DataChannel: defaultDataChannelBytes(), InnerIP: 20, TCP: 20, LinkHeader: 14}
	if innerIPv6 {
		b.InnerIP = 40
	}
	if timestamps {
		b.TCPOptions = 12
	}
	return b
}

// MSS is the MSS a SYN carries after OpenVPN's clamp (and the tun MTU's
// own limit).
func (b ipv6Budget) MSS() int {
	clamp := b.Mssfix - b.OuterIP - b.OuterL4 - b.DataChannel - 20 - b.TCP - (b.InnerIP - 20)
	return min(clamp, b.TunMTU-b.InnerIP-b.TCP)
}

// Payload is the TCP payload of one full segment.
func (b ipv6Budget) Payload() int { return b.MSS() - b.TCPOptions }

// Wire is the size of the outer IP packet carrying one full segment.
func (b ipv6Budget) Wire() int {
	return b.MSS() + b.TCP + b.InnerIP + b.DataChannel + b.OuterL4 + b.OuterIP
}

// Goodput predicts the TCP payload rate on a line of linkBps, counting the
// bytes the bottleneck counts.
func (b ipv6Budget) Goodput(linkBps float64) float64 {
	return linkBps * float64(b.Payload()) / float64(b.Wire()+b.LinkHeader)
}

// ipv6MSSProbe is what one TCP connection through the tunnel negotiated.
type ipv6MSSProbe struct {
	// UpBytes and DownBytes are the payload of a full segment the client
	// and the server send (TCP_INFO tcpi_snd_mss).
	UpBytes, DownBytes int
	// Timestamps reports whether the segments carry TCP timestamps.
	Timestamps bool
}

// ipv6TCPIOptTimestamps is TCPI_OPT_TIMESTAMPS of linux/tcp.h.
const ipv6TCPIOptTimestamps = 1

// ipv6ProbeMSS opens one TCP connection from the client namespace to addr (an
// inner address of the server) and reads what the kernel on either side
// will send in a full segment, after OpenVPN clamped the SYNs' MSS.
//
// Equivalent to: ip netns exec SERVER nc -l ADDR PORT & ip netns exec
// CLIENT nc ADDR PORT, then ss -ti (mss:) on each side.
func ipv6ProbeMSS(ctx context.Context, l *lab.Lab, addr netip.Addr) (ipv6MSSProbe, error) {
	var p ipv6MSSProbe
	var ln *net.TCPListener
	err := netns.Do(l.Namespace(lab.Server), func() error {
		var err error
		ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		return err
	})
	if err != nil {
		return p, fmt.Errorf("listening on %s in the server namespace: %w", addr, err)
	}
	defer ln.Close()
	if err := ln.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return p, err
	}
	type acceptResult struct {
		c   *net.TCPConn
		err error
	}
	accepted := make(chan acceptResult, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.AcceptTCP()
		accepted <- acceptResult{c, err}
	}()
	// The accept goroutine ends when the listener closes, at the latest.
	defer wg.Wait()
	defer ln.Close()
	var client net.Conn
	err = netns.Do(l.Namespace(lab.Client), func() error {
		d := net.Dialer{Timeout: 5 * time.Second}
		var err error
		client, err = d.DialContext(ctx, "tcp", ln.Addr().String())
		return err
	})
	if err != nil {
		return p, fmt.Errorf("connecting to %s through the tunnel: %w", ln.Addr(), err)
	}
	defer client.Close()
	a := <-accepted
	if a.err != nil {
		return p, fmt.Errorf("accepting on %s: %w", ln.Addr(), a.err)
	}
	defer a.c.Close()
	up, ts, err := ipv6SendMSS(client.(*net.TCPConn))
	if err != nil {
		return p, err
	}
	down, _, err := ipv6SendMSS(a.c)
	if err != nil {
		return p, err
	}
	return ipv6MSSProbe{UpBytes: up, DownBytes: down, Timestamps: ts}, nil
}

// ipv6SendMSS reads tcpi_snd_mss (payload bytes of a full segment, options
// already taken off) and whether timestamps were negotiated.
func ipv6SendMSS(c *net.TCPConn) (int, bool, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, false, err
	}
	var info *unix.TCPInfo
	var serr error
	if err := raw.Control(func(fd uintptr) {
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return 0, false, err
	}
	if serr != nil {
		return 0, false, fmt.Errorf("getsockopt TCP_INFO: %w", serr)
	}
	return int(info.Snd_mss), info.Options&ipv6TCPIOptTimestamps != 0, nil
}

func runIPv6(ctx context.Context, o Options) (*measure.Report, error) {
	v, err := openvpn.ParseVariant(ipv6Variant)
	if err != nil {
		return nil, err
	}
	path := o.path(ipv6Path)
	probes := map[string]ipv6MSSProbe{}
	var probeErr error
	rep, err := experiment.Run(ctx, experiment.Spec{
		Command:   "recipe ipv6",
		Networks:  []experiment.Network{{Name: "line", Description: "the same tunnel, inner IPv4 and inner IPv6 interleaved", Path: path}},
		Variants:  []openvpn.Variant{v},
		InnerIPv6: map[string]bool{v.Name: true},
		Proto:     openvpn.UDP, Retries: 2,
		Repeat: o.repeat(5), Duration: o.duration(3 * time.Second),
		Progress: o.Progress, PKIDir: o.PKIDir, LabName: o.LabName, Lab: o.Lab,
		// Measure what the clamp made of a real connection of each
		// family before the samples; a failed probe leaves the
		// arithmetic unchecked but the samples still run.
		Ready: func(ctx context.Context, l *lab.Lab, variant string, t *tunnel.Tunnel) error {
			for fam, addr := range map[string]netip.Addr{"ipv4": t.ServerAddr, "ipv6": t.ServerAddr6} {
				p, err := ipv6ProbeMSS(ctx, l, addr)
				if err != nil {
					probeErr = err
					continue
				}
				probes[fam] = p
			}
			return nil
		},
	})
	if err != nil {
		return rep, err
	}
	rep.Scenario.Extra["published_ipv6_to_ipv4"] = publishedIPv6Ratio
	if probeErr != nil {
		rep.Scenario.Extra["mss_probe_error"] = probeErr.Error()
	}
	rep.Scenario.Extra["mss_probes"] = probes
	// The first call adds the arithmetic to the rows' Extra; the verdicts
	// are those of the saved report, which carries it.
	ipv6Verdicts(rep, path, probes)
	return rep, judgeSaved(rep, ipv6Judge)
}

// ipv6Budgets returns the arithmetic of both families, with TCP options as
// the probe found them (timestamps unless a probe saw none).
func ipv6Budgets(probes map[string]ipv6MSSProbe) (v4, v6 ipv6Budget) {
	ts := true
	if p, ok := probes["ipv4"]; ok {
		ts = p.Timestamps
	}
	return ipv6DefaultBudget(false, ts), ipv6DefaultBudget(true, ts)
}

// interleavedRatios divides a's samples by b's, sample by sample: interleaved
// samples taken moments apart share the machine's load, so their ratio
// is steadier than the ratio of medians. On a path the line limits, load
// only ever pulls a sample down (OpenVPN starved of CPU for a moment),
// never up; a pair in which either sample is below starved × its row's
// best is left out (0 keeps every pair). When a sample of either row
// failed the pairs no longer line up; it then falls back to the bounds
// the two rows' kept samples allow. n is the number of pairs (or samples
// of the smaller row) kept.
func interleavedRatios(a, b *measure.Row, starved float64) (med, lo, hi float64, n int) {
	ka := func(x float64) bool { return x >= starved*a.MaxBps }
	kb := func(x float64) bool { return x >= starved*b.MaxBps }
	if len(a.SamplesBps) == len(b.SamplesBps) {
		var rs []float64
		for i := range a.SamplesBps {
			if b.SamplesBps[i] > 0 && ka(a.SamplesBps[i]) && kb(b.SamplesBps[i]) {
				rs = append(rs, a.SamplesBps[i]/b.SamplesBps[i])
			}
		}
		if len(rs) == 0 {
			return 0, 0, 0, 0
		}
		return verdict.Median(rs), verdict.Min(rs), verdict.Max(rs), len(rs)
	}
	var as, bs []float64
	for _, x := range a.SamplesBps {
		if ka(x) {
			as = append(as, x)
		}
	}
	for _, x := range b.SamplesBps {
		if kb(x) && x > 0 {
			bs = append(bs, x)
		}
	}
	if len(as) == 0 || len(bs) == 0 {
		return 0, 0, 0, 0
	}
	return verdict.Median(as) / verdict.Median(bs), verdict.Min(as) / verdict.Max(bs), verdict.Max(as) / verdict.Min(bs), min(len(as), len(bs))
}

// ipv6Starved marks a sample as starved of CPU rather than limited by the
// line: below 90 % of its row's best. The difference to measure is 1–5 %;
// a sample 10 % down was slowed by something other than the headers.
const ipv6Starved = 0.90

// ipv6MinPairs is how many samples of each family a verdict needs: with three
// interleaved pairs all on one side of 1, the chance that load alone put
// them there is 1 in 8 (1 in 32 with the default five).
const ipv6MinPairs = MinSamples

// ipv6RatioResolution is the widest spread of IPv6/IPv4 ratios that can still
// tell the predicted difference (1–2 %) from the published one (5 %).
const ipv6RatioResolution = 0.04

// ipv6Judge judges a saved report: the MSS probes are in
// Scenario.Extra["mss_probes"], the path in the scenario's network.
func ipv6Judge(rep *measure.Report) []measure.Verdict {
	probes, ok := extraAs[map[string]ipv6MSSProbe](rep.Scenario.Extra["mss_probes"])
	if !ok && rep.Scenario.Extra["mss_probe_error"] == nil {
		if rep.Scenario.Extra == nil {
			rep.Scenario.Extra = map[string]any{}
		}
		rep.Scenario.Extra["mss_probe_error"] = "the saved report carries no MSS probes (recorded before ovpnperf saved them)"
	}
	path, _ := firstPath(rep)
	return ipv6Verdicts(rep, path, probes)
}

func ipv6Verdicts(rep *measure.Report, path labpath.Path, probes map[string]ipv6MSSProbe) []measure.Verdict {
	var out []measure.Verdict
	b4, b6 := ipv6Budgets(probes)
	predicted := float64(b6.Payload()) / float64(b4.Payload())

	// The clamp itself: deterministic, from one connection per family.
	claim := fmt.Sprintf("OpenVPN clamps the inner MSS to %d (IPv4) and %d (IPv6) with tun-mtu %d and mssfix %d mtu", b4.MSS(), b6.MSS(), b4.TunMTU, b4.Mssfix)
	p4, ok4 := probes["ipv4"]
	p6, ok6 := probes["ipv6"]
	if !ok4 || !ok6 {
		out = append(out, newVerdict(claim, Noise, "the MSS probe through the tunnel failed: %v", rep.Scenario.Extra["mss_probe_error"]))
	} else {
		m4, m6 := p4.UpBytes+b4.TCPOptions, p6.UpBytes+b6.TCPOptions
		d4, d6 := p4.DownBytes+b4.TCPOptions, p6.DownBytes+b6.TCPOptions
		outcome := Confirmed
		if m4 != b4.MSS() || m6 != b6.MSS() || d4 != b4.MSS() || d6 != b6.MSS() {
			outcome = Changed
		}
		out = append(out, newVerdict(claim, outcome, "measured MSS up/down: IPv4 %d/%d, IPv6 %d/%d (TCP timestamps %v, %d bytes of options per segment): payload per full packet %d vs %d bytes, both packets %d bytes on the wire",
			m4, d4, m6, d6, p4.Timestamps, b4.TCPOptions, p4.UpBytes, p6.UpBytes, b4.Wire()))
	}

	for _, dir := range []string{measure.DirectionUp, measure.DirectionDown} {
		r4 := row(rep, "", ipv6Variant, dir)
		r6 := row(rep, "", ipv6Variant+experiment.InnerIPv6Suffix, dir)
		link := path.Up.RateBitsPerSec
		if dir == measure.DirectionDown {
			link = path.Down.RateBitsPerSec
		}
		for _, rb := range []struct {
			r *measure.Row
			b ipv6Budget
		}{{r4, b4}, {r6, b6}} {
			if rb.r == nil {
				continue
			}
			if rb.r.Extra == nil {
				rb.r.Extra = map[string]any{}
			}
			rb.r.Extra["predicted_mss_bytes"] = rb.b.MSS()
			rb.r.Extra["payload_bytes_per_packet"] = rb.b.Payload()
			rb.r.Extra["wire_bytes_per_packet"] = rb.b.Wire()
			if link > 0 {
				rb.r.Extra["predicted_goodput_bps"] = rb.b.Goodput(float64(link))
			}
		}
		if r6 != nil {
			r6.Extra["predicted_ratio_to_ipv4"] = predicted
			r6.Extra["published_ratio_to_ipv4"] = publishedIPv6Ratio
		}

		claim := fmt.Sprintf("IPv6 inside the tunnel is about 5 %% slower than IPv4 (published ×%.2f) [%s]", publishedIPv6Ratio, dir)
		if r4 == nil || r6 == nil {
			out = append(out, newVerdict(claim, Noise, "missing rows: IPv4 %s, IPv6 %s", mbps(r4), mbps(r6)))
			out = append(out, newVerdict(fmt.Sprintf("the header arithmetic predicts IPv6/IPv4 ×%.3f [%s]", predicted, dir), Noise, "missing rows"))
			continue
		}
		med, lo, hi, n := interleavedRatios(r6, r4, ipv6Starved)
		r6.Extra["measured_ratio_to_ipv4"] = med
		r6.Extra["line_bound_pairs"] = n
		measured := fmt.Sprintf("×%.3f (range %.3f–%.3f over %d of %d samples, leaving out any below 90 %% of its row's best)", med, lo, hi, n, min(len(r4.SamplesBps), len(r6.SamplesBps)))
		if n == 0 {
			// No pair is left to take a ratio of: quote none.
			measured = fmt.Sprintf("no ratio: no pair of the %d samples is left (each must be within 90 %% of its row's best, the IPv4 one above 0 bit/s)", min(len(r4.SamplesBps), len(r6.SamplesBps)))
		}
		figures := fmt.Sprintf("IPv6 %s vs IPv4 %s: %s; arithmetic ×%.3f (%d vs %d payload bytes per %d-byte packet)",
			mbps(r6), mbps(r4), measured, predicted, b6.Payload(), b4.Payload(), b4.Wire())
		if link > 0 {
			figures += fmt.Sprintf("; predicted at the %s line: %s vs %s", measure.FormatRate(float64(link)),
				measure.FormatRate(b6.Goodput(float64(link))), measure.FormatRate(b4.Goodput(float64(link))))
		}
		// OpenVPN's CPU per GB carries the kernel's work for the inner
		// packets it writes to and reads from tun: where IPv6 falls short
		// of the arithmetic on a busy machine, this shows whether it cost
		// more CPU per byte.
		c4 := r4.CPUSecondsPerGB["server"] + r4.CPUSecondsPerGB["client"]
		c6 := r6.CPUSecondsPerGB["server"] + r6.CPUSecondsPerGB["client"]
		if c4 > 0 && c6 > 0 {
			figures += fmt.Sprintf("; OpenVPN CPU-s/GB IPv6 %.1f vs IPv4 %.1f (%+.0f %%; fewer payload bytes per packet alone make %+.1f %%)", c6, c4, 100*(c6/c4-1), 100*(1/predicted-1))
		}
		switch {
		case n < ipv6MinPairs:
			out = append(out, newVerdict(claim, Noise, "%d line-bound samples per family are too few to judge (want %d): %s", n, ipv6MinPairs, figures))
		case hi < 1 && med >= publishedIPv6Ratio-0.02 && med <= publishedIPv6Ratio+0.02:
			out = append(out, newVerdict(claim, Confirmed, "%s", figures))
		case hi < 1:
			out = append(out, newVerdict(claim, Changed, "IPv6 is slower beyond the spread, by %.1f %% rather than 5 %%: %s", 100*(1-med), figures))
		case lo > 1:
			out = append(out, newVerdict(claim, Refuted, "IPv6 is faster beyond the spread: %s", figures))
		case lo > publishedIPv6Ratio+0.02 && hi-lo <= ipv6RatioResolution:
			out = append(out, newVerdict(claim, Changed, "any difference is within the samples' spread and smaller than 3 %%, not 5 %%: %s", figures))
		default:
			out = append(out, newVerdict(claim, Noise, "the ratios straddle 1 and spread %.1f %%: %s", 100*(hi-lo), figures))
		}

		claim = fmt.Sprintf("the header arithmetic predicts IPv6/IPv4 ×%.3f [%s]", predicted, dir)
		const margin = 0.005
		switch {
		case n < ipv6MinPairs:
			out = append(out, newVerdict(claim, Noise, "%d line-bound samples per family are too few to judge (want %d): %s", n, ipv6MinPairs, figures))
		case hi-lo > ipv6RatioResolution:
			out = append(out, newVerdict(claim, Noise, "the IPv6/IPv4 ratios spread %.1f %%, too wide to check a %.1f %% difference: %s", 100*(hi-lo), 100*(1-predicted), figures))
		case predicted >= lo-margin && predicted <= hi+margin:
			out = append(out, newVerdict(claim, Confirmed, "%s", figures))
		default:
			out = append(out, newVerdict(claim, Refuted, "the measured ratio lies outside the prediction beyond the spread: %s", figures))
		}
	}
	return out
}
