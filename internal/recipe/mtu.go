package recipe

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo/hostcollect"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/ui"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// The mtu recipe: on a path whose bottleneck has a 1492-byte MTU (a DSL
// line behind PPPoE) it measures
//
//	outer       the path MTU from the client to the server (ICMP probes
//	            with Don't-Fragment, package pmtu), 1492 expected;
//	cleartext   the largest inner packet a cleartext tunnel (data-ciphers
//	            none, auth none, no compression) carries, the cookbook's
//	            method: probe through the tunnel. Both peers set
//	            `mtu-disc yes`, so an outer packet too big for the path is
//	            refused or dropped instead of fragmented, and the largest
//	            probe that passes is outer MTU − the tunnel's overhead;
//	default     a tunnel with OpenVPN 2.6's defaults (AES-256-GCM, tun-mtu
//	            1500): a Don't-Fragment ping of the tun-mtu that the
//	            translation (pmtu.DataChannel) recommends for the measured
//	            path MTU, and one of a byte more, each with the IP
//	            fragmentation counters of both ends (/proc/net/snmp);
//	            Then a TCP transfer (iperf3) through it, whose segments
//	            the default `mssfix 1492 mtu` must keep unfragmented;
//	tun-mtu-N   a default tunnel with that tun-mtu on both peers: its
//	            full-size packets must pass unfragmented.
//
// It runs on two networks, one where routers' "fragmentation needed"
// errors come back and one where the router drops them (an ICMP black
// hole): there the byte more is lost rather than fragmented.

func init() {
	register(Recipe{
		Name:    "mtu",
		Summary: "path MTU outside and through a cleartext tunnel on a 1492-byte path, the tun-mtu it implies for the default cipher, and TCP under the default mssfix",
		Source: "OpenVPN cookbook, MTU recipes: probe through a cleartext tunnel (cipher none, auth none, no compression) for the largest packet that passes; " +
			"OpenVPN 2.6 overhead: cipher none 8 bytes, AES-256-GCM 24, plus UDP 8 and IPv4 20 (36 and 52 in all); mssfix 1492 mtu by default, inner MSS 1400",
		Run:   runMTU,
		Judge: mtuJudge,
	})
}

// mtuPath is a DSL line behind PPPoE: 1492 bytes, no delay.
var mtuPath = labpath.Path{MTU: 1492}

// Published per-packet overheads over UDP/IPv4, outer headers included
// (docs/openvpn-facts.md#per-packet-overhead: cipher none + auth none 8, AEAD 24;
// UDP 8, IPv4 20).
const (
	mtuPublishedCleartext = 8 + 8 + 20
	mtuPublishedGCM       = 24 + 8 + 20
	// mtuPublishedMSS is the inner IPv4 MSS of the default
	// `mssfix 1492 mtu` with AES-GCM over UDP/IPv4.
	mtuPublishedMSS = 1400
)

var (
	mtuCleartextDC = pmtu.DataChannel{Cipher: "none", Auth: "none"}
	mtuUDP4        = pmtu.Transport{Proto: "udp", Family: pmtu.IPv4}
)

// Variant (row) names of the mtu recipe.
const (
	mtuOuter     = "outer"
	mtuCleartext = "cleartext"
	mtuDefault   = "default"
)

type mtuNet struct {
	name, desc string
	path       labpath.Path
}

func mtuNetworks(o Options) []mtuNet {
	if o.Path != nil {
		return []mtuNet{{"custom", "the path given on the command line", *o.Path}}
	}
	hole := mtuPath
	hole.ICMPBlackhole = true
	return []mtuNet{
		{"pmtud", "1492-byte path, routers' ICMP errors come back", mtuPath},
		{"hole", "1492-byte path, ICMP \"fragmentation needed\" dropped (black hole)", hole},
	}
}

// mtuProbe is the fate of Don't-Fragment pings of one size through a
// tunnel: up to three tries, until one is answered or refused locally.
type mtuProbe struct {
	Size    int    `json:"size"`
	Passed  bool   `json:"passed"`
	Outcome string `json:"outcome"`
	Tries   int    `json:"tries"`
	// Fragments counts the IP fragments both ends created or received
	// for reassembly during the try that decided (0: none).
	Fragments uint64 `json:"fragments"`
}

func (p mtuProbe) String() string {
	switch {
	case p.Passed && p.Fragments > 0:
		return fmt.Sprintf("%d B passed fragmented (%d fragments)", p.Size, p.Fragments)
	case p.Passed:
		return fmt.Sprintf("%d B passed unfragmented", p.Size)
	case p.Outcome == pmtu.LocalTooBig.String():
		return fmt.Sprintf("%d B refused by the local kernel", p.Size)
	}
	return fmt.Sprintf("%d B %s after %d tries", p.Size, p.Outcome, p.Tries)
}

// mtuResult is what one network showed over all repeats.
type mtuResult struct {
	Network       string
	ConfiguredMTU int
	// Outer and Inner are the path MTUs measured outside and through the
	// cleartext tunnel, one per repeat (0: the search failed).
	Outer, Inner []int
	// CleartextOverhead is the cleartext tunnel's computed overhead.
	CleartextOverhead int
	// Cipher is the default tunnel's negotiated cipher; Translation what
	// the first outer measurement means for it.
	Cipher      string
	Translation pmtu.Translation
	// DefaultMSS is the inner IPv4 MSS of OpenVPN 2.6's default
	// `mssfix 1492 mtu` with that cipher.
	DefaultMSS int
	// Fit and Over are the default tunnel's pings at the recommended
	// tun-mtu and one byte more; Lowered the pings at full size through
	// the tunnel whose tun-mtu is the recommended one.
	Fit, Over, Lowered []mtuProbe
	// TCP are the iperf3 runs through the default tunnel, whose mssfix
	// (2.6 default: 1492 mtu) must keep full-size segments unfragmented.
	TCP []mtuTCP
}

// mtuTCP is one TCP sample through the default tunnel.
type mtuTCP struct {
	Bps       float64 `json:"bps"`
	Fragments uint64  `json:"fragments"`
	Error     string  `json:"error,omitempty"`
}

func runMTU(ctx context.Context, o Options) (*measure.Report, error) {
	nets := mtuNetworks(o)
	repeat := o.repeat(3)
	host, err := hostcollect.Host(ctx)
	if err != nil {
		return nil, err
	}
	sc := measure.Scenario{Command: "recipe mtu", Repeat: repeat, Parallel: 1, Extra: map[string]any{
		"method": "ICMP echo with Don't-Fragment (ovpnperf pmtu); cleartext tunnel with data-ciphers none, auth none, mtu-disc yes on both peers; fragments from /proc/net/snmp of client and server",
	}}
	for _, n := range nets {
		sc.Networks = append(sc.Networks, measure.Network{Name: n.name, Description: n.desc, Path: n.path})
	}
	rep := measure.NewReport(host, sc)
	prog := ui.NewProgress(len(nets)*repeat*4, o.Progress)
	defer prog.Done()
	if rep.Scenario.Extra == nil {
		rep.Scenario.Extra = map[string]any{}
	}
	var results []mtuResult
	for _, n := range nets {
		name := o.LabName
		if name != "" && len(nets) > 1 {
			name += "-" + n.name
		}
		res, backend, err := mtuNetwork(ctx, o, n, name, repeat, prog)
		if backend != "" && backend != labpath.BackendNone || rep.Host.EmulationBackend == "" {
			rep.Host.EmulationBackend = backend
		}
		if res != nil {
			rep.Rows = append(rep.Rows, res.rows()...)
			results = append(results, *res)
			rep.Scenario.Extra["mtu_results"] = results
		}
		if err != nil {
			_ = judgeSaved(rep, mtuJudge)
			return rep, err
		}
	}
	rep.Finish()
	return rep, judgeSaved(rep, mtuJudge)
}

// mtuBench is one network's bench while the mtu recipe measures it: the
// experiment framework's Bench with its three tunnels, the probers opened
// in the client namespace, and what the first outer search found.
type mtuBench struct {
	b    *experiment.Bench
	n    mtuNet
	prog *ui.Progress
	// probers are the raw-socket probers by destination, each opened
	// once (prober) and closed by close.
	probers map[netip.Addr]pmtu.Prober
	outer   pmtu.Prober
	first   pmtu.Result
	// clear is the cleartext tunnel, dflt the one with OpenVPN's
	// defaults, low the default one with tun-mtu rec (variant lowered).
	clear, dflt, low *tunnel.Tunnel
	lowered          string
	rec              int
}

func mtuNetwork(ctx context.Context, o Options, n mtuNet, name string, repeat int, prog *ui.Progress) (res *mtuResult, backend string, err error) {
	prog.Logf("%s: building lab (%s)", n.name, n.desc)
	// The experiment framework's bench: the lab, its PKI, and the
	// tunnels added below, all taken down on return.
	b, err := experiment.UpBench(ctx, experiment.Spec{LabName: name, PKIDir: o.PKIDir, Lab: o.Lab}, experiment.Network{Name: n.name, Path: n.path})
	if err != nil {
		return nil, "", err
	}
	defer func() {
		if derr := b.Close(); derr != nil && err == nil {
			err = derr
		}
	}()
	backend = b.Lab.Backend()
	res = &mtuResult{Network: n.name, ConfiguredMTU: n.path.EffectiveMTU()}
	if res.CleartextOverhead, err = mtuCleartextDC.Overhead(mtuUDP4, 1000); err != nil {
		return res, backend, err
	}
	mb := &mtuBench{b: b, n: n, prog: prog, probers: map[netip.Addr]pmtu.Prober{}}
	defer mb.close()
	if err := mb.searchOuter(ctx); err != nil {
		return res, backend, err
	}
	if err := mb.startTunnels(ctx, res); err != nil {
		return res, backend, err
	}
	l := b.Lab
	srv, err := iperf.StartServer(ctx, func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, lab.Server, argv...) }, iperf.ServerOptions{})
	if err != nil {
		return res, backend, err
	}
	defer srv.Stop()
	for r := 0; r < repeat; r++ {
		if err := mb.round(ctx, o, r, repeat, res); err != nil {
			return res, backend, err
		}
	}
	return res, backend, nil
}

// prober returns the prober towards dst, opening it on first use.
func (mb *mtuBench) prober(dst netip.Addr) (pmtu.Prober, error) {
	if p, ok := mb.probers[dst]; ok {
		return p, nil
	}
	var p pmtu.Prober
	// The raw socket stays in the client namespace once opened.
	err := netns.Do(mb.b.Lab.Namespace(lab.Client), func() error {
		var err error
		p, err = pmtu.NewProber(dst)
		return err
	})
	if err != nil {
		return nil, err
	}
	mb.probers[dst] = p
	return p, nil
}

func (mb *mtuBench) close() {
	for _, p := range mb.probers {
		p.Close()
	}
}

// searchOuter measures the path MTU to the server once. This first outer
// search decides the tun-mtu to check: the one the translation recommends
// for the default cipher.
func (mb *mtuBench) searchOuter(ctx context.Context) error {
	var err error
	if mb.outer, err = mb.prober(lab.ServerV4()); err != nil {
		return err
	}
	if mb.first, err = pmtu.Search(ctx, mb.outer, pmtu.Options{}); err != nil {
		return fmt.Errorf("%s: path MTU to the server: %w", mb.n.name, err)
	}
	mb.prog.Logf("%s: outer path MTU %d (black hole %v)", mb.n.name, mb.first.PathMTU, mb.first.Blackhole)
	return nil
}

// startTunnels adds the three tunnels to the bench: cleartext with
// mtu-disc yes (slot 0), defaults (slot 1), and defaults with the tun-mtu
// the translation recommends for the default tunnel's cipher (slot 2). It
// records the cipher, translation and default MSS in res.
func (mb *mtuBench) startTunnels(ctx context.Context, res *mtuResult) error {
	mtuDiscYes := func(s, c *openvpn.Config) {
		// Equivalent to IP_MTU_DISCOVER IP_PMTUDISC_DO on the UDP socket:
		// outer packets always carry Don't-Fragment and are never
		// fragmented by the sending host.
		s.Set(openvpn.D("mtu-disc", "yes"))
		c.Set(openvpn.D("mtu-disc", "yes"))
	}
	none, err := builtinVariants("none")
	if err != nil {
		return err
	}
	mb.prog.Logf("%s: starting OpenVPN cleartext tunnel (data-ciphers none, auth none, mtu-disc yes)", mb.n.name)
	if mb.clear, err = mb.b.AddTunnel(ctx, tunnel.Options{Variant: none[0], Slot: 0, Configure: mtuDiscYes}); err != nil {
		return err
	}
	def, err := builtinVariants("default")
	if err != nil {
		return err
	}
	mb.prog.Logf("%s: starting OpenVPN with defaults", mb.n.name)
	if mb.dflt, err = mb.b.AddTunnel(ctx, tunnel.Options{Variant: def[0], Slot: 1}); err != nil {
		return err
	}
	res.Cipher = mb.dflt.ClientLog.DataCipher
	dc := pmtu.DataChannel{Cipher: res.Cipher, Auth: mb.dflt.ClientLog.DataAuth}
	if res.Translation, err = dc.Translate(mtuUDP4, mb.first.PathMTU, mb.first.Blackhole, true); err != nil {
		return err
	}
	if res.DefaultMSS, err = dc.MSS(mtuUDP4, 1492, true, false); err != nil {
		return err
	}
	rec := res.Translation.MaxTunMTU
	lowered := def[0]
	lowered.Name = "tun-mtu-" + strconv.Itoa(rec)
	mb.prog.Logf("%s: %s recommends tun-mtu %d, %s; starting OpenVPN with tun-mtu %d", mb.n.name, res.Cipher, rec, res.Translation.MSSFix, rec)
	mb.low, err = mb.b.AddTunnel(ctx, tunnel.Options{Variant: lowered, Slot: 2, Configure: func(s, c *openvpn.Config) {
		s.Set(openvpn.D("tun-mtu", strconv.Itoa(rec)))
		c.Set(openvpn.D("tun-mtu", strconv.Itoa(rec)))
	}})
	if err != nil {
		return err
	}
	mb.rec, mb.lowered = rec, lowered.Name
	return nil
}

// round is repeat r (from 0): the outer search (the first one's result in
// round 0), the search through the cleartext tunnel, the default tunnel's
// pings at the recommended tun-mtu and a byte more and its TCP sample, and
// the full-size ping through the lowered tunnel, appended to res. A failed
// search is a result (0); a failed probe or sample ends the recipe.
func (mb *mtuBench) round(ctx context.Context, o Options, r, repeat int, res *mtuResult) error {
	l, n, rec := mb.b.Lab, mb.n, mb.rec
	client := func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, lab.Client, argv...) }
	// Rounds that lose a probe end max(3 × RTT, 500 ms) after they start:
	// the lab has no delay, the margin is for the loaded machine.
	wait := pmtu.Wait{Max: 2 * time.Second, Min: 500 * time.Millisecond, RTTFactor: 3, RTT: mb.first.RTT}
	step := func(what string) { mb.prog.Step(fmt.Sprintf("%s %s (%d/%d)", n.name, what, r+1, repeat)) }

	step(mtuOuter)
	got := mb.first
	var err error
	if r > 0 {
		if got, err = pmtu.Search(ctx, mb.outer, pmtu.Options{}); err != nil {
			mb.prog.Logf("%s: outer search failed: %v", n.name, err)
		}
	}
	res.Outer = append(res.Outer, mtuOf(got, err))

	step(mtuCleartext)
	p, err := mb.prober(mb.clear.ServerAddr)
	if err != nil {
		return err
	}
	got, err = pmtu.Search(ctx, p, pmtu.Options{})
	if err != nil {
		mb.prog.Logf("%s: search through the cleartext tunnel failed: %v", n.name, err)
	}
	res.Inner = append(res.Inner, mtuOf(got, err))

	step(mtuDefault)
	if p, err = mb.prober(mb.dflt.ServerAddr); err != nil {
		return err
	}
	fit, err := mtuProbeSize(ctx, l, p, rec, wait)
	if err != nil {
		return err
	}
	over, err := mtuProbeSize(ctx, l, p, rec+1, wait)
	if err != nil {
		return err
	}
	res.Fit, res.Over = append(res.Fit, fit), append(res.Over, over)
	tcp, err := mtuTCPSample(ctx, l, client, mb.dflt.ServerAddr, o.duration(2*time.Second))
	if err != nil {
		return err
	}
	res.TCP = append(res.TCP, tcp)

	step(mb.lowered)
	if p, err = mb.prober(mb.low.ServerAddr); err != nil {
		return err
	}
	full, err := mtuProbeSize(ctx, l, p, rec, wait)
	if err != nil {
		return err
	}
	res.Lowered = append(res.Lowered, full)
	mb.prog.Logf("%s: outer %d, cleartext inner %d; default tunnel: %s, %s, TCP %s Mbit/s with %d fragments; tun-mtu %d tunnel: %s",
		n.name, res.Outer[r], res.Inner[r], fit, over, measure.FormatMbps(tcp.Bps), tcp.Fragments, rec, full)
	return nil
}

// mtuTCPSample runs iperf3 (TCP, client to server) through a tunnel and
// counts the IP fragments meanwhile. A failed transfer is a result (TCP
// stalls when full-size segments vanish), not an error of the recipe.
func mtuTCPSample(ctx context.Context, l *lab.Lab, client iperf.CommandFunc, dst netip.Addr, d time.Duration) (mtuTCP, error) {
	before, err := mtuFragCounters(l)
	if err != nil {
		return mtuTCP{}, err
	}
	res, rerr := iperf.Run(ctx, client, iperf.ClientOptions{Server: dst, Duration: d})
	after, err := mtuFragCounters(l)
	if err != nil {
		return mtuTCP{}, err
	}
	t := mtuTCP{Fragments: after - before}
	if rerr != nil {
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		t.Error = rerr.Error()
		return t, nil
	}
	t.Bps = res.ReceivedBitsPerSec
	return t, nil
}

func mtuOf(r pmtu.Result, err error) int {
	if err != nil {
		return 0
	}
	return r.PathMTU
}

// mtuProbeSize pings size bytes (whole IP packet, Don't-Fragment) through p
// up to three times: the first big packet on a path whose MTU the kernel
// has not learnt yet may die while the router's error teaches it. A
// packet the local kernel refuses is not retried.
func mtuProbeSize(ctx context.Context, l *lab.Lab, p pmtu.Prober, size int, w pmtu.Wait) (mtuProbe, error) {
	var r mtuProbe
	for try := 1; try <= 3; try++ {
		before, err := mtuFragCounters(l)
		if err != nil {
			return r, err
		}
		as, err := p.Round(ctx, []int{size}, w)
		if err != nil {
			return r, err
		}
		after, err := mtuFragCounters(l)
		if err != nil {
			return r, err
		}
		r = mtuProbe{Size: size, Tries: try, Outcome: as[0].Outcome.String(), Fragments: after - before, Passed: as[0].Outcome == pmtu.Reply}
		if r.Passed || as[0].Outcome == pmtu.LocalTooBig {
			break
		}
	}
	return r, nil
}

// mtuFragCounters sums the IP fragmentation counters of the client and the
// server namespace: fragments created (FragCreates) and fragments received
// for reassembly (ReasmReqds). Idle tunnels send small keepalives only, so
// during a probe any change is the probe's.
//
// Equivalent to: ip netns exec NS cat /proc/net/snmp
func mtuFragCounters(l *lab.Lab) (uint64, error) {
	var sum uint64
	for _, node := range []lab.Node{lab.Client, lab.Server} {
		var b []byte
		// /proc/thread-self/net is the calling thread's namespace.
		err := netns.Do(l.Namespace(node), func() error {
			var err error
			b, err = os.ReadFile("/proc/thread-self/net/snmp")
			return err
		})
		if err != nil {
			return 0, err
		}
		st, err := mtuParseSNMP(b)
		if err != nil {
			return 0, fmt.Errorf("%s /proc/net/snmp: %w", node, err)
		}
		for _, k := range []string{"FragCreates", "ReasmReqds"} {
			v, ok := st["Ip"][k]
			if !ok {
				return 0, fmt.Errorf("%s /proc/net/snmp has no Ip %s", node, k)
			}
			sum += v
		}
	}
	return sum, nil
}

// mtuParseSNMP reads /proc/net/snmp: pairs of lines "Proto: names…" and
// "Proto: values…".
func mtuParseSNMP(b []byte) (map[string]map[string]uint64, error) {
	out := map[string]map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	var header []string
	var proto string
	for sc.Scan() {
		p, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if header == nil || p != proto {
			header, proto = f, p
			continue
		}
		if len(f) != len(header) {
			return nil, fmt.Errorf("%s: %d names but %d values", p, len(header), len(f))
		}
		m := map[string]uint64{}
		for i, name := range header {
			// Some fields (Ip Forwarding 1/2, Tcp MaxConn -1) are not
			// counters; only counters are read.
			if v, err := strconv.ParseUint(f[i], 10, 64); err == nil {
				m[name] = v
			}
		}
		out[p] = m
		header = nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no counters")
	}
	return out, nil
}

// rows turns a network's figures into report rows; the figures are in
// Extra (the rows carry no throughput).
func (m *mtuResult) rows() []measure.Row {
	outer := measure.NewRow(m.Network, mtuOuter, measure.PathRouted, measure.DirectionUp, "icmp")
	outer.Extra = map[string]any{
		"configured_mtu": m.ConfiguredMTU, "path_mtu_samples": m.Outer, "path_mtu": mtuMedian(m.Outer),
	}
	clear := measure.NewRow(m.Network, mtuCleartext, measure.PathTunnel, measure.DirectionUp, "udp")
	clear.Cipher = "none/none"
	clear.Extra = map[string]any{
		"inner_mtu_samples": m.Inner, "inner_mtu": mtuMedian(m.Inner),
		"overhead_bytes": m.CleartextOverhead, "published_overhead_bytes": mtuPublishedCleartext,
		"expected_inner_mtu": mtuMedian(m.Outer) - m.CleartextOverhead,
	}
	dflt := measure.NewRow(m.Network, mtuDefault, measure.PathTunnel, measure.DirectionUp, "udp")
	dflt.Cipher = m.Cipher
	tr := m.Translation
	dflt.Extra = map[string]any{
		"recommended_tun_mtu": tr.MaxTunMTU, "mssfix": tr.MSSFix, "inner_mss_ipv4": tr.InnerMSS4,
		"overhead_bytes": tr.Overhead, "published_overhead_bytes": mtuPublishedGCM,
		"tun_mtu_1500_fits": tr.TunMTU1500Fits, "advice": tr.Advice,
		"probe_at_recommended": m.Fit, "probe_one_byte_more": m.Over,
		"tcp": m.TCP, "default_inner_mss_ipv4": m.DefaultMSS, "published_inner_mss_ipv4": mtuPublishedMSS,
	}
	for _, t := range m.TCP {
		if t.Error != "" {
			dflt.Refuse(measure.Refusal{Kind: measure.RefusalError, Detail: "TCP through the tunnel failed: " + t.Error})
			continue
		}
		dflt.AddSample(t.Bps)
	}
	low := measure.NewRow(m.Network, "tun-mtu-"+strconv.Itoa(tr.MaxTunMTU), measure.PathTunnel, measure.DirectionUp, "udp")
	low.Cipher = m.Cipher
	low.Extra = map[string]any{"tun_mtu": tr.MaxTunMTU, "probe_full_size": m.Lowered}
	invalidate := func(r *measure.Row, xs []int) {
		for _, v := range xs {
			if v == 0 {
				r.Refuse(measure.Refusal{Kind: measure.RefusalError, Detail: "a path MTU search failed"})
			}
		}
	}
	invalidate(&outer, m.Outer)
	invalidate(&clear, m.Inner)
	return []measure.Row{outer, clear, dflt, low}
}

func mtuMedian(xs []int) int {
	var f []float64
	for _, x := range xs {
		if x > 0 {
			f = append(f, float64(x))
		}
	}
	if len(f) == 0 {
		return 0
	}
	return int(verdict.Median(f))
}

// mtuSame returns the common value of the successful searches (x > 0), how
// many succeeded, and whether they all agree (false also without any).
func mtuSame(xs []int) (v, n int, agree bool) {
	agree = true
	for _, x := range xs {
		switch {
		case x <= 0:
			continue
		case v == 0:
			v = x
		case x != v:
			agree = false
		}
		n++
	}
	return v, n, agree && n > 0
}

// mtuJudge judges a saved report: each network's measurements are in
// Scenario.Extra["mtu_results"].
func mtuJudge(rep *measure.Report) []measure.Verdict {
	results, ok := extraAs[[]mtuResult](rep.Scenario.Extra["mtu_results"])
	if !ok {
		return []measure.Verdict{newVerdict("the mtu recipe's claims", NotTested, "the saved report carries no mtu_results (recorded before ovpnperf saved them): nothing to judge")}
	}
	var out []measure.Verdict
	for i := range results {
		out = append(out, mtuVerdicts(&results[i])...)
	}
	return out
}

func mtuVerdicts(m *mtuResult) []measure.Verdict {
	var out []measure.Verdict
	tag := " [" + m.Network + "]"

	// No verdict rests on fewer than MinSamples successful
	// searches (docs/evidence.md): a failed search is no evidence either
	// way, so [0 0 1400] is one search, not three.
	claim := fmt.Sprintf("outside the tunnel the path MTU is the path's %d bytes", m.ConfiguredMTU) + tag
	outer, nOuter, agree := mtuSame(m.Outer)
	failedNote := func(n int, xs []int) string {
		if f := len(xs) - n; f > 0 {
			return fmt.Sprintf("; %d failed", f)
		}
		return ""
	}
	ok := agree && nOuter >= MinSamples
	switch {
	case nOuter < MinSamples:
		out = append(out, fewSamples(newVerdict(claim, Noise, "%d of %d searches succeeded (%v), a verdict needs %d", nOuter, len(m.Outer), m.Outer, MinSamples), nOuter, MinSamples))
	case !agree:
		out = append(out, newVerdict(claim, Noise, "the searches disagree: %v", m.Outer))
	case outer == m.ConfiguredMTU:
		out = append(out, newVerdict(claim, Confirmed, "all %d successful searches found %d bytes (%v%s)", nOuter, outer, m.Outer, failedNote(nOuter, m.Outer)))
	default:
		out = append(out, newVerdict(claim, Refuted, "all %d successful searches found %d bytes, not %d (%v%s)", nOuter, outer, m.ConfiguredMTU, m.Outer, failedNote(nOuter, m.Outer)))
	}

	claim = fmt.Sprintf("through a cleartext tunnel the largest packet that passes is the outer MTU minus the tunnel's %d bytes (published: 8 + UDP 8 + IPv4 20 = %d)",
		m.CleartextOverhead, mtuPublishedCleartext) + tag
	inner, nInner, iagree := mtuSame(m.Inner)
	iok := iagree && nInner >= MinSamples
	var diffs []int
	match := true
	for i := range m.Inner {
		if i < len(m.Outer) && m.Inner[i] > 0 && m.Outer[i] > 0 {
			diffs = append(diffs, m.Outer[i]-m.Inner[i])
			match = match && m.Outer[i]-m.Inner[i] == m.CleartextOverhead
		}
	}
	switch {
	case len(diffs) < MinSamples:
		out = append(out, newVerdict(claim, Noise, "%d of %d repeats measured both the outer (%v) and the inner MTU (%v), a verdict needs %d", len(diffs), len(m.Inner), m.Outer, m.Inner, MinSamples))
	case match:
		out = append(out, newVerdict(claim, Confirmed, "inner %v = outer %v − %d in all %d repeats that measured both", m.Inner, m.Outer, m.CleartextOverhead, len(diffs)))
	case iok && ok:
		out = append(out, newVerdict(claim, Refuted, "inner %d = outer %d − %d in all %d repeats that measured both: the tunnel costs %d bytes, the computation says %d", inner, outer, outer-inner, len(diffs), outer-inner, m.CleartextOverhead))
	default:
		out = append(out, newVerdict(claim, Noise, "outer %v, inner %v: the repeats disagree (differences %v)", m.Outer, m.Inner, diffs))
	}

	rec := m.Translation.MaxTunMTU
	claim = fmt.Sprintf("tun-mtu %d (%s, %s over UDP/IPv4, %d bytes overhead; published %d) is the largest that avoids fragmentation",
		rec, strings.TrimSpace(m.Translation.MSSFix), m.Cipher, m.Translation.Overhead, mtuPublishedGCM) + tag
	fitOK, fitBad, overBlocked, overClean := 0, 0, 0, 0
	for i := range m.Fit {
		if f := m.Fit[i]; f.Passed && f.Fragments == 0 {
			fitOK++
		} else {
			fitBad++
		}
		if i < len(m.Over) {
			if v := m.Over[i]; v.Passed && v.Fragments == 0 {
				overClean++
			} else {
				overBlocked++
			}
		}
	}
	lowOK := 0
	for _, p := range m.Lowered {
		if p.Passed && p.Fragments == 0 {
			lowOK++
		}
	}
	n := len(m.Fit)
	describe := func(ps []mtuProbe) string {
		if len(ps) == 0 {
			return "not measured"
		}
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = p.String()
		}
		return strings.Join(mtuCompact(s), "; ")
	}
	detail := fmt.Sprintf("default tunnel (tun-mtu 1500): %s, one byte more: %s; tunnel with tun-mtu %d: %s",
		describe(m.Fit), describe(m.Over), rec, describe(m.Lowered))
	switch {
	case n < MinSamples:
		out = append(out, newVerdict(claim, Noise, "%d repeats probed, a verdict needs %d: %s", n, MinSamples, detail))
	case fitOK == n && overBlocked == n && lowOK == len(m.Lowered):
		out = append(out, newVerdict(claim, Confirmed, "%s", detail))
	case fitBad == n || (len(m.Lowered) > 0 && lowOK == 0):
		out = append(out, newVerdict(claim, Refuted, "%s", detail))
	case fitOK == n && overClean == n:
		out = append(out, newVerdict(claim, Changed, "a byte more also passes unfragmented: the recommendation is conservative: %s", detail))
	default:
		out = append(out, newVerdict(claim, Noise, "the repeats disagree: %s", detail))
	}

	claim = fmt.Sprintf("OpenVPN 2.6's default mssfix 1492 mtu (inner MSS %d, published %d) keeps TCP through a tun-mtu 1500 tunnel unfragmented on this path",
		m.DefaultMSS, mtuPublishedMSS) + tag
	var clean, fragd, failed int
	var rates []float64
	var frags []uint64
	for _, t := range m.TCP {
		switch {
		case t.Error != "" || t.Bps <= 0:
			failed++
		case t.Fragments > 0:
			fragd++
		default:
			clean++
		}
		rates = append(rates, t.Bps)
		frags = append(frags, t.Fragments)
	}
	tcp := fmt.Sprintf("TCP %s Mbit/s with %v fragments", measure.FormatMbpsSpread(verdict.Of(rates)), frags)
	if !m.Translation.DefaultMSSFixOK {
		tcp += fmt.Sprintf("; for this path the translation recommends %s (inner MSS %d)", m.Translation.MSSFix, m.Translation.InnerMSS4)
	}
	switch {
	case len(m.TCP) < MinSamples:
		out = append(out, newVerdict(claim, Noise, "%d TCP samples, a verdict needs %d: %s", len(m.TCP), MinSamples, tcp))
	case clean == len(m.TCP):
		out = append(out, newVerdict(claim, Confirmed, "%s in every repeat", tcp))
	case fragd+failed == len(m.TCP) && (fragd == len(m.TCP) || failed == len(m.TCP)):
		what := "fragmented"
		if failed > 0 {
			what = "failed (full-size segments vanished)"
		}
		out = append(out, newVerdict(claim, Refuted, "TCP %s in every repeat: %s", what, tcp))
	default:
		out = append(out, newVerdict(claim, Noise, "the repeats disagree: %s, %d failed", tcp, failed))
	}
	return out
}

// mtuCompact replaces runs of equal strings by one with a count.
func mtuCompact(s []string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s (×%d)", s[i], j-i))
		} else {
			out = append(out, s[i])
		}
		i = j
	}
	return out
}
