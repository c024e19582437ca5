package recipe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo/hostcollect"
	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/pps"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/ui"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Fixed settings of every sample.
const (
	ppsTimeout = time.Second // an echo later than this is lost
	ppsSettle  = 200 * time.Millisecond
)

// ppsNetwork names the rows of one payload size: the report's networks are
// the sizes, all measured on the same lab path, so that the table groups
// the subjects of one size and "× routed" compares within a size.
func ppsNetwork(size int) string { return strconv.Itoa(size) + "B" }

// ppsSubject is one thing measured: the routed path or a tunnel.
type ppsSubject struct {
	name   string
	target netip.Addr
	tun    *tunnel.Tunnel
}

// ppsAcc accumulates one row's samples.
type ppsAcc struct {
	rate, sentRate, p50, p99, busy []float64
	sent, received, lost           uint64
	// cpu holds each sample's OpenVPN CPU-seconds per million packets
	// the process handled (ppsTunPackets), by side; cpuPct each side's
	// share of one core during the sample.
	cpu, cpuPct map[string][]float64
	// corePPS is, per sample, the packets per second the busier OpenVPN
	// process would carry with a core of its own: 10^6 / its µs per packet.
	corePPS []float64
}

func runPPS(ctx context.Context, o Options) (_ *measure.Report, err error) {
	vs, err := ppsVariants()
	if err != nil {
		return nil, err
	}
	path := o.path(labpath.Path{})
	repeat, dur := o.repeat(), o.duration(2*time.Second)
	rep, err := ppsNewReport(ctx, vs, path, repeat, dur)
	if err != nil {
		return nil, err
	}
	prog := ui.NewProgress(repeat*len(ppsSizes)*(1+len(vs)), o.Progress)
	defer prog.Done()

	b, subs, err := ppsUpBench(ctx, o, path, vs, prog)
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := b.Close(); derr != nil && err == nil {
			err = derr
		}
	}()
	rep.Host.EmulationBackend = b.Lab.Backend()
	port, stop, err := ppsStartServer(ctx, b.Lab)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	index, accs := ppsNewRows(rep, subs)
	err = ppsRounds(ctx, b.Lab, port, subs, repeat, dur, rep, index, accs, prog)
	// The figures and verdicts of what was measured, also of a run cut
	// short.
	for i := range rep.Rows {
		ppsFill(&rep.Rows[i], accs[i])
	}
	rep.Finish()
	_ = judgeSaved(rep, ppsJudge)
	return rep, err
}

// ppsVariants are the tunnels measured: cleartext, the old default CBC and
// the new default GCM.
func ppsVariants() ([]openvpn.Variant, error) {
	var vs []openvpn.Variant
	for _, s := range []string{ppsNone, ppsCBCDef, ppsGCM} {
		v, err := openvpn.ParseVariant(s)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// ppsNewReport is the empty report: host, scenario (one network per
// payload size) and columns.
func ppsNewReport(ctx context.Context, vs []openvpn.Variant, path labpath.Path, repeat int, dur time.Duration) (*measure.Report, error) {
	host, err := hostcollect.Host(ctx)
	if err != nil {
		return nil, err
	}
	variants := map[string]string{}
	for _, v := range vs {
		variants[v.Name] = v.String()
	}
	sc := measure.Scenario{
		Command: "recipe pps", DurationSeconds: dur.Seconds(), Repeat: repeat, Parallel: 1,
		Extra: map[string]any{
			"proto": "udp", "rate_pps": 0, "flows": 1, "timeout_seconds": ppsTimeout.Seconds(),
			"sizes_bytes": ppsSizes, "variants": variants, "note": ppsCoresNote(),
			"rows": "network = UDP payload size; median_bps = payload bit rate of the echoes; pps figures in extra",
		},
	}
	for _, size := range ppsSizes {
		sc.Networks = append(sc.Networks, measure.Network{Name: ppsNetwork(size), Description: ppsDescription(size, path), Path: path})
	}
	rep := measure.NewReport(host, sc)
	rep.Columns = ppsColumns
	return rep, nil
}

// ppsUpBench builds the lab on the experiment framework's Bench with one
// UDP tunnel per variant and returns the subjects: the routed path, then
// the tunnels. On error nothing is left.
func ppsUpBench(ctx context.Context, o Options, path labpath.Path, vs []openvpn.Variant, prog *ui.Progress) (_ *experiment.Bench, _ []ppsSubject, err error) {
	prog.Logf("pps: building lab")
	b, err := experiment.UpBench(ctx, experiment.Spec{LabName: o.LabName, PKIDir: o.PKIDir, Lab: o.Lab}, experiment.Network{Path: path})
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	if lab.UserspaceBackend(b.Lab.Backend()) {
		prog.Logf("pps: the path's delay, jitter or loss runs through the userspace emulator, which a flood overruns: samples it cannot keep up with are marked invalid")
	}
	subs := []ppsSubject{{name: experiment.Routed, target: lab.ServerV4()}}
	for i, v := range vs {
		prog.Logf("pps: starting OpenVPN %s", v.Name)
		t, err := b.AddTunnel(ctx, tunnel.Options{Variant: v, Slot: i, Proto: openvpn.UDP})
		if err != nil {
			return nil, nil, err
		}
		subs = append(subs, ppsSubject{name: v.Name, target: t.ServerAddr, tun: t})
	}
	return b, subs, nil
}

// ppsNewRows adds one row per size and subject to rep, each with the
// accumulator its samples fill; index finds them by "network/subject".
func ppsNewRows(rep *measure.Report, subs []ppsSubject) (index map[string]int, accs []*ppsAcc) {
	index = map[string]int{}
	for _, size := range ppsSizes {
		for _, s := range subs {
			r := measure.NewRow(ppsNetwork(size), s.name, measure.PathRouted, measure.DirectionUp, "udp")
			if s.tun != nil {
				r.Path, r.Cipher, r.SocketBuffers = measure.PathTunnel, s.tun.Cipher(), s.tun.SocketBuffers()
			}
			r.Extra = map[string]any{"size_bytes": size}
			if ob := ppsOuterBytes(s.name, size); ob > 0 {
				r.Extra["outer_ip_bytes"] = ob
			}
			index[r.Network+"/"+s.name] = len(rep.Rows)
			rep.Rows = append(rep.Rows, r)
			accs = append(accs, &ppsAcc{cpu: map[string][]float64{}, cpuPct: map[string][]float64{}})
		}
	}
	return index, accs
}

// ppsRounds measures every size and subject once per round, repeat rounds,
// with a pause between samples. A failed sample invalidates its row; only
// cancellation ends the rounds early (ctx.Err()).
func ppsRounds(ctx context.Context, l *lab.Lab, port int, subs []ppsSubject, repeat int, dur time.Duration, rep *measure.Report, index map[string]int, accs []*ppsAcc, prog *ui.Progress) error {
	for k := 0; k < repeat; k++ {
		for _, size := range ppsSizes {
			for _, s := range subs {
				i := index[ppsNetwork(size)+"/"+s.name]
				prog.Step(fmt.Sprintf("%s %s (%d/%d)", ppsNetwork(size), s.name, k+1, repeat))
				err := ppsSample(ctx, l, port, s, size, dur, accs[i])
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					rep.Rows[i].Refuse(experiment.RefusalOf(err))
					prog.Logf("pps: %s %s: %v", ppsNetwork(size), s.name, err)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(ppsSettle):
				}
			}
		}
	}
	return nil
}

// ppsDescription is the title of one size's table.
func ppsDescription(size int, p labpath.Path) string {
	d := fmt.Sprintf("%d-byte UDP payload (%d-byte Ethernet frames on the routed path), one flow as fast as possible, echoed", size, size+46)
	if p != (labpath.Path{}) {
		d += ", custom path"
	} else {
		d += ", unshaped path"
	}
	return d
}

// ppsCoresNote says what the absolute figures are worth on this host.
func ppsCoresNote() string {
	return fmt.Sprintf("on this %d-CPU host the generator, the echo server, both OpenVPN processes and the router's forwarding share the cores: "+
		"absolute pps are a floor; the ratios are what carry over", runtime.NumCPU())
}

// ppsInNetns opens sockets inside a lab node's namespace. pps.Run and
// pps.Server.Serve create all their sockets inside the function they pass
// and start their goroutines only afterwards, so nothing runs on the
// switched thread but the socket calls.
func ppsInNetns(l *lab.Lab, n lab.Node) func(func() error) error {
	return func(open func() error) error { return netns.Do(l.Namespace(n), open) }
}

// ppsStartServer runs a pps echo server in this process, listening on all
// addresses of the lab's server namespace (its lab address and every
// tunnel's inner address), and returns its port and a function that stops it.
func ppsStartServer(ctx context.Context, l *lab.Lab) (int, func() error, error) {
	s := &pps.Server{Addr: ":0", Limits: pps.DefaultLimits(), OpenIn: ppsInNetns(l, lab.Server)}
	a, stop, err := s.Start(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("pps server in %s: %w", l.Namespace(lab.Server), err)
	}
	return a.(*net.UDPAddr).Port, stop, nil
}

// ppsSample runs one pps client from the client namespace to s and adds
// its figures to acc: the echo rate, the offered rate, loss, RTT, the
// OpenVPN processes' CPU time and how busy the host was. It fails if a
// process died or the lab's userspace emulator (with a custom path) fell
// behind.
func ppsSample(ctx context.Context, l *lab.Lab, port int, s ppsSubject, size int, dur time.Duration, acc *ppsAcc) error {
	pids := map[string]int{}
	if s.tun != nil {
		pids = s.tun.Pids()
	}
	var list []int
	for _, p := range pids {
		list = append(list, p)
	}
	before, err := cpuacct.Snapshot(list...)
	if err != nil {
		return err
	}
	srv, cli := labHost(l, lab.Server), labHost(l, lab.Client)
	tun0, err := ppsTunPackets(ctx, srv, cli, s.tun)
	if err != nil {
		return err
	}
	busy0, busyErr := cpuacct.ReadSystem()
	emu0, err := experiment.ReadEmulator(l)
	if err != nil {
		return err
	}
	res, err := pps.Run(ctx, pps.Config{
		Server: net.JoinHostPort(s.target.String(), strconv.Itoa(port)),
		Params: pps.Params{RatePPS: 0, Size: size, Duration: dur, Flows: 1, Timeout: ppsTimeout},
		OpenIn: ppsInNetns(l, lab.Client),
	})
	if err != nil {
		return err
	}
	after, err := cpuacct.Snapshot(list...)
	if err != nil {
		return fmt.Errorf("an OpenVPN process died during the sample: %w", err)
	}
	busy1, busyErr1 := cpuacct.ReadSystem()
	tun1, err := ppsTunPackets(ctx, srv, cli, s.tun)
	if err != nil {
		return err
	}
	// With the default unshaped path there is no emulator; a custom path
	// with delay or loss puts it in the way of the flood.
	emu1, err := experiment.ReadEmulator(l)
	if err != nil {
		return err
	}
	if rf := experiment.JudgeEmulator(emu0, emu1); rf != nil {
		return &experiment.RefusalError{Refusal: *rf}
	}
	if res.Received == 0 || res.SendSeconds <= 0 {
		return &experiment.RefusalError{Refusal: measure.Refusal{Kind: measure.RefusalNoEcho, Figures: measure.Figures{measure.FigureSentProbePackets: float64(res.Sent)}}}
	}
	delta, err := cpuacct.Delta(before, after)
	if err != nil {
		return err
	}
	acc.rate = append(acc.rate, float64(res.Received)/res.SendSeconds)
	acc.sentRate = append(acc.sentRate, float64(res.Sent)/res.SendSeconds)
	acc.p50 = append(acc.p50, res.RTTP50Us)
	acc.p99 = append(acc.p99, res.RTTP99Us)
	acc.sent += res.Sent
	acc.received += res.Received
	acc.lost += res.Lost
	wall := after.Taken.Sub(before.Taken).Seconds()
	busiest := 0.0
	for side, pid := range pids {
		n := tun1[side] - tun0[side]
		if n == 0 {
			continue
		}
		us := delta[pid] / (float64(n) / 1e6)
		acc.cpu[side] = append(acc.cpu[side], us)
		busiest = max(busiest, us)
		if wall > 0 {
			acc.cpuPct[side] = append(acc.cpuPct[side], 100*delta[pid]/wall)
		}
	}
	if busiest > 0 {
		acc.corePPS = append(acc.corePPS, 1e6/busiest)
	}
	if busyErr == nil && busyErr1 == nil && busy1.Total() > busy0.Total() {
		acc.busy = append(acc.busy, 100*busy1.BusyShareSince(busy0))
	}
	return nil
}

// ppsTunPackets returns, by side, the packets each OpenVPN process of t
// read from or wrote to its tun device so far: the tun's tx counter counts
// packets its reader took (drops at a full queue are tx_dropped), rx those
// it wrote. Each is one packet the process encrypted and sent or received
// and decrypted, so CPU time over their number is its cost per packet,
// whatever was lost elsewhere. srv and cli are the lab's server and
// client namespaces. Nil for the routed path.
//
// Equivalent to: ip -n NS -s link show dev ovpnperf-sN (and -cN).
func ppsTunPackets(ctx context.Context, srv, cli hostnet.Host, t *tunnel.Tunnel) (map[string]uint64, error) {
	if t == nil {
		return nil, nil
	}
	srvDev, cliDev := t.Devs()
	out := map[string]uint64{}
	for side, nd := range map[string]struct {
		h   hostnet.Host
		dev string
	}{"server": {srv, srvDev}, "client": {cli, cliDev}} {
		st, err := nd.h.LinkStats(ctx, nd.dev)
		if err != nil {
			return nil, err
		}
		out[side] = st.RxPackets + st.TxPackets
	}
	return out, nil
}

// ppsFill writes a row's samples and figures. Row.SamplesBps are the
// payload bit rates of the echoes (pps × size × 8); Row.Extra holds
//
//	size_bytes             UDP payload of each probe
//	outer_ip_bytes         the IPv4 datagram carrying a probe through the tunnel
//	pps_samples            echoed round trips per second, per sample
//	pps_median/_min/_max   their spread
//	sent_pps_median        the offered rate (probes sent per second)
//	sent, received, lost   probes over all samples
//	loss_percent           lost / sent (at full offered load: overload, not path loss)
//	rtt_p50_us, rtt_p99_us medians over samples of each sample's percentile
//	host_cpu_busy_percent  how busy the whole host was (median over samples)
//	cpu_server_s_per_mpkt, cpu_client_s_per_mpkt
//	                       each OpenVPN process's CPU-seconds per million
//	                       packets it read from or wrote to its tun device
//	                       (= µs per packet), median over samples
//	cpu_server_percent, cpu_client_percent  share of one core
//	cpu_s_per_mpkt_samples server + client, per sample
//	openvpn_pps_per_core   10^6 / the busier process's µs per packet
//	published_pps          the benchmark's figure (18 bytes)
func ppsFill(r *measure.Row, acc *ppsAcc) {
	size := r.Extra["size_bytes"].(int)
	for _, rate := range acc.rate {
		r.AddSample(rate * float64(size) * 8)
	}
	r.Summarize()
	if len(acc.rate) == 0 {
		r.Refuse(measure.Refusal{Kind: measure.RefusalNoValidSample})
		return
	}
	sp := verdict.Of(acc.rate)
	r.Extra["pps_samples"] = acc.rate
	r.Extra["pps_median"], r.Extra["pps_min"], r.Extra["pps_max"] = sp.Median, sp.Min, sp.Max
	r.Extra["sent_pps_median"] = verdict.Median(acc.sentRate)
	r.Extra["sent"], r.Extra["received"], r.Extra["lost"] = acc.sent, acc.received, acc.lost
	r.Extra["loss_percent"] = 100 * float64(acc.lost) / float64(max(acc.sent, 1))
	r.Extra["rtt_p50_us"] = verdict.Median(acc.p50)
	r.Extra["rtt_p99_us"] = verdict.Median(acc.p99)
	if len(acc.busy) > 0 {
		r.Extra["host_cpu_busy_percent"] = verdict.Median(acc.busy)
	}
	if r.Path == measure.PathTunnel && len(acc.cpu["server"]) > 0 {
		// Per sample, both processes: what one packet cost OpenVPN.
		var both []float64
		for i := range acc.cpu["server"] {
			if i < len(acc.cpu["client"]) {
				both = append(both, acc.cpu["server"][i]+acc.cpu["client"][i])
			}
		}
		r.Extra["cpu_s_per_mpkt_samples"] = both
		if len(acc.corePPS) > 0 {
			r.Extra["openvpn_pps_per_core"] = verdict.Median(acc.corePPS)
		}
		for _, side := range []string{"server", "client"} {
			r.Extra["cpu_"+side+"_s_per_mpkt"] = verdict.Median(acc.cpu[side])
			if len(acc.cpuPct[side]) > 0 {
				r.Extra["cpu_"+side+"_percent"] = verdict.Median(acc.cpuPct[side])
			}
		}
	}
	if p, ok := publishedPPS[r.Variant]; ok && size == ppsSmall {
		r.Extra["published_pps"] = p
		r.PublishedBps = p * float64(size) * 8
	}
}

// ppsOuterBytes is the size of the IPv4 datagram that carries one probe of
// size bytes through the tunnel (0 for the routed path), from OpenVPN's
// data-channel framing (docs/openvpn-facts.md#per-packet-overhead): outer IPv4 20
// + UDP 8, then for none (auth none) opcode/peer-id 4 + packet-id 4; for
// AES-256-GCM 4 + 4 + tag 16; for AES-128-CBC with HMAC-SHA1 4 + HMAC 20 +
// IV 16 + the encrypted packet-id 4 and inner packet padded to whole
// 16-byte blocks (at least one byte of padding). The inner packet is the
// probe with its IPv4 and UDP headers.
func ppsOuterBytes(variant string, size int) int {
	inner := size + 28
	switch variant {
	case ppsNone:
		return 28 + 8 + inner
	case ppsGCM:
		return 28 + 24 + inner
	case ppsCBC:
		return 28 + 4 + 20 + 16 + ((4+inner)/16+1)*16
	}
	return 0
}
