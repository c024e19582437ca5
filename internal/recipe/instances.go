package recipe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo/hostcollect"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/ui"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// The instances recipe: two clients load either one OpenVPN server process
// or two server processes, each pinned to its own CPU, each with its own
// port and subnet (the way OpenVPN Access Server and eduVPN spread clients
// over cores). Two iperf3 flows run at the same time, one per client,
// each bound to its client's tun device; the aggregate is the sum of the
// receivers' rates.
//
//	one-process:  client ns                      server ns
//	              ovpnperf-c0   (cert "")     ─┐
//	              ovpnperf-c0-1 (cert second) ─┴─ :1194 ovpnperf-s0 (any CPU)
//	two-pinned:   ovpnperf-c1 ─── :1195 ovpnperf-s1 (CPU 0)
//	              ovpnperf-c2 ─── :1196 ovpnperf-s2 (CPU 1)
//
// All tunnels are up at once and the two configurations alternate
// (one two, two one, …) so that drift in the machine's load touches both.
// On a small machine the clients, servers and iperf3 share the cores with
// the pinned servers: the figure can show whether one server process was
// the bottleneck, not how a server with dedicated cores scales.

func init() {
	register(Recipe{
		Name:    "instances",
		Summary: "one OpenVPN server process for two clients against two server processes pinned to different CPUs: aggregate Mbit/s and CPU-s/GB",
		Source: "multi-instance write-up, 4-core Xeon, gigabit LAN: one process (BF-CBC+SHA1) 20–30 MB/s; three processes pinned to cores 35–40 MB/s; " +
			"cipher none 75–80 MB/s; with IRQ placement and renice up to 105 MB/s aggregate",
		Run:   runInstances,
		Judge: instVerdicts,
	})
}

// Row (variant) names of the instances recipe.
const (
	instOne = "one-process"
	instTwo = "two-pinned"
)

// Published figures in MB/s (10^6 bytes per second), BF-CBC+SHA1 on a
// 4-core Xeon.
const (
	instPubOneLow, instPubOneHigh     = 20.0, 30.0
	instPubThreeLow, instPubThreeHigh = 35.0, 40.0
)

const (
	// instMinGain is the publication's smallest gain (35 MB/s pinned
	// against 30 MB/s in one process): a smaller gain beyond the spread
	// is "changed".
	instMinGain = 35.0 / 30
	// A server process runnable (running or waiting for a CPU) this share
	// of the sample or more was the bottleneck; below instIdleShare it
	// mostly waited for packets, and was not.
	instBusyShare, instIdleShare = 0.85, 0.5
	// Host CPUs busy at least this share were saturated.
	instSaturatedHost = 0.9
	// instMinSamples is how many samples a row needs before its spread
	// means anything (see separated).
	instMinSamples   = 3
	instFlows        = 2
	instSecondClient = "second"
)

// Labels of the CPU figures (Row.CPUSecondsPerGB).
const (
	instServer = "server"
	instClient = "client"
	instIperf  = "iperf3"
)

// instFlow is one of a configuration's two iperf3 flows.
type instFlow struct {
	target, bind netip.Addr
	dev          string
	srv          *iperf.Server
	// server is the label of the OpenVPN server process carrying it.
	server string
}

// instConfig is one configuration: its server processes by label, its
// client processes and its two flows.
type instConfig struct {
	name    string
	servers map[string]int
	clients []int
	flows   [instFlows]instFlow
	cipher  string
	pinned  map[string]int // server label → CPU
}

// instSample is one sample of a configuration in one direction.
type instSample struct {
	flowBps [instFlows]float64
	// flowBytes are the bytes each flow moved during the whole sample,
	// warm-up included: the CPU times cover the same span.
	flowBytes [instFlows]uint64
	// cpu holds CPU-seconds by process label (servers by their label,
	// "client", "iperf3"); wall is the sample's wall-clock time.
	cpu  map[string]float64
	wall time.Duration
	// waitSec is the time each server process spent runnable but waiting
	// for a CPU (/proc/PID/schedstat), by label.
	waitSec  map[string]float64
	hostBusy float64
}

func (s instSample) aggregate() float64 { return s.flowBps[0] + s.flowBps[1] }

func runInstances(ctx context.Context, o Options) (rep *measure.Report, err error) {
	cpus, err := instCPUs()
	if err != nil {
		return nil, err
	}
	if len(cpus) < 2 {
		return nil, fmt.Errorf("the instances recipe pins two OpenVPN servers to different CPUs: this process may run on %d CPU only", len(cpus))
	}
	repeat, dur := o.repeat(), o.duration(5*time.Second)
	path := o.path(gigabitLAN)
	network, desc := "gigabit", "1 Gbit/s LAN, no delay"
	if o.Path != nil {
		network, desc = "custom", "the path given on the command line"
	}
	host, err := hostcollect.Host(ctx)
	if err != nil {
		return nil, err
	}
	dirs := []string{measure.DirectionUp, measure.DirectionDown}
	sc := measure.Scenario{
		Command: "recipe instances", DurationSeconds: dur.Seconds(), Repeat: repeat, Parallel: instFlows,
		Networks: []measure.Network{{Name: network, Description: desc, Path: path}},
		Extra: map[string]any{
			"flows":  "two iperf3 TCP flows at once, one per OpenVPN client, each bound to its client's tun device; the row's rate is the sum of the receivers' rates",
			"cpus":   len(cpus),
			"caveat": fmt.Sprintf("%d CPUs shared by the OpenVPN servers, both OpenVPN clients and four iperf3 processes: the figure shows whether one server process was the bottleneck, not the scaling of a server whose processes have dedicated cores", len(cpus)),
		},
	}
	rep = measure.NewReport(host, sc)
	prog := ui.NewProgress(repeat*2*len(dirs), o.Progress)
	defer prog.Done()

	prog.Logf("%s: building lab (%s)", network, desc)
	// The experiment framework's bench: the lab, its PKI, and the
	// tunnels and extra client added below, all taken down on return.
	b, err := experiment.UpBench(ctx, experiment.Spec{LabName: o.LabName, PKIDir: o.PKIDir, Lab: o.Lab}, experiment.Network{Name: network, Path: path})
	if err != nil {
		return rep, err
	}
	defer func() {
		if derr := b.Close(); derr != nil && err == nil {
			err = derr
		}
	}()
	l := b.Lab
	rep.Host.EmulationBackend = l.Backend()
	cmd := func(node lab.Node) iperf.CommandFunc {
		return func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, node, argv...) }
	}
	var srvs [instFlows]*iperf.Server
	for i, port := range []int{iperf.DefaultPort, iperf.DefaultPort + 1} {
		if srvs[i], err = iperf.StartServer(ctx, cmd(lab.Server), iperf.ServerOptions{Port: port}); err != nil {
			return rep, err
		}
		defer srvs[i].Stop()
	}
	cfgOne, err := instUpOne(ctx, b, network, srvs, prog)
	if err != nil {
		return rep, err
	}
	cfgTwo, err := instUpTwoPinned(ctx, b, network, cpus, srvs, prog)
	if err != nil {
		return rep, err
	}

	type key struct{ cfg, dir string }
	samples := map[key][]instSample{}
	errs := map[key]*measure.Refusal{}
	for r := 0; r < repeat; r++ {
		order := []*instConfig{&cfgOne, &cfgTwo}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, cfg := range order {
			for _, d := range dirs {
				prog.Step(fmt.Sprintf("%s %s %s (%d/%d)", network, cfg.name, d, r+1, repeat))
				s, err := instMeasure(ctx, l, cfg, d, dur, cmd(lab.Client))
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
				k := key{cfg.name, d}
				if err != nil {
					if errs[k] == nil {
						rf := experiment.RefusalOf(err)
						errs[k] = &rf
					}
					prog.Logf("%s %s: sample failed: %v", cfg.name, d, err)
					continue
				}
				samples[k] = append(samples[k], s)
				prog.Logf("%s %s: %s + %s = %s Mbit/s", cfg.name, d, measure.FormatMbps(s.flowBps[0]), measure.FormatMbps(s.flowBps[1]), measure.FormatMbps(s.aggregate()))
			}
		}
	}
	for _, cfg := range []*instConfig{&cfgOne, &cfgTwo} {
		for _, d := range dirs {
			k := key{cfg.name, d}
			row := instRow(network, cfg, d, samples[k])
			if rf := errs[k]; rf != nil {
				row.Refuse(*rf)
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	rep.Finish()
	return rep, judgeSaved(rep, instVerdicts)
}

// instUpOne starts the one-process configuration on the bench: one server
// (slot 0) with its own client and a second client, one flow each.
func instUpOne(ctx context.Context, b *experiment.Bench, network string, srvs [instFlows]*iperf.Server, prog *ui.Progress) (instConfig, error) {
	// With --pki the second client's certificate is added to that
	// directory (client-second.crt, .key) and reused by later runs.
	if b.PKI.CheckClient(instSecondClient) != nil {
		if _, _, err := b.PKI.IssueClient(instSecondClient); err != nil {
			return instConfig{}, err
		}
	}
	vs, err := builtinVariants("default")
	if err != nil {
		return instConfig{}, err
	}
	prog.Logf("%s: starting one OpenVPN server with two clients", network)
	one, err := b.AddTunnel(ctx, tunnel.Options{Variant: vs[0], Slot: 0})
	if err != nil {
		return instConfig{}, err
	}
	second, err := b.AddClient(ctx, one, instSecondClient)
	if err != nil {
		return instConfig{}, err
	}
	return instConfig{
		name: instOne, cipher: one.Cipher(),
		servers: map[string]int{instServer: one.Server.Pid()},
		clients: []int{one.Client.Pid(), second.Pid()},
		flows: [instFlows]instFlow{
			{target: one.ServerAddr, bind: one.ClientAddr, dev: clientDev(one.Slot), srv: srvs[0], server: instServer},
			{target: one.ServerAddr, bind: second.Addr, dev: second.Dev, srv: srvs[1], server: instServer},
		},
	}, nil
}

// instUpTwoPinned starts the two-process configuration on the bench: two
// servers (slots 1 and 2), each pinned to its own CPU, with a client each.
func instUpTwoPinned(ctx context.Context, b *experiment.Bench, network string, cpus []int, srvs [instFlows]*iperf.Server, prog *ui.Progress) (instConfig, error) {
	vs, err := builtinVariants("default")
	if err != nil {
		return instConfig{}, err
	}
	cfg := instConfig{name: instTwo, servers: map[string]int{}, pinned: map[string]int{}}
	for i := 0; i < instFlows; i++ {
		prog.Logf("%s: starting OpenVPN server %d of two, pinned to CPU %d", network, i+1, cpus[i])
		t, err := b.AddTunnel(ctx, tunnel.Options{Variant: vs[0], Slot: 1 + i})
		if err != nil {
			return instConfig{}, err
		}
		label := fmt.Sprintf("server-cpu%d", cpus[i])
		if err := instPin(t.Server.Pid(), cpus[i]); err != nil {
			return instConfig{}, err
		}
		cfg.cipher = t.Cipher()
		cfg.servers[label] = t.Server.Pid()
		cfg.pinned[label] = cpus[i]
		cfg.clients = append(cfg.clients, t.Client.Pid())
		cfg.flows[i] = instFlow{target: t.ServerAddr, bind: t.ClientAddr, dev: clientDev(t.Slot), srv: srvs[i], server: label}
	}
	return cfg, nil
}

// clientDev is the tun device of a tunnel's own client (tunnel.Up names
// it ovpnperf-cSLOT).
func clientDev(slot int) string { return fmt.Sprintf("ovpnperf-c%d", slot) }

// instMeasure runs both flows of cfg at once. A failed pair is tried again
// once: iperf3 3.12 sometimes refuses a test that follows the previous one
// closely, and a sample whose figures contradict each other is worth one
// retry (iperf.ErrInconsistent).
func instMeasure(ctx context.Context, l *lab.Lab, cfg *instConfig, dir string, dur time.Duration, client iperf.CommandFunc) (instSample, error) {
	var err error
	for try := 0; try < 2; try++ {
		var s instSample
		if s, err = instMeasureOnce(ctx, l, cfg, dir, dur, client); err == nil {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
	return instSample{}, err
}

func instMeasureOnce(ctx context.Context, l *lab.Lab, cfg *instConfig, dir string, dur time.Duration, client iperf.CommandFunc) (instSample, error) {
	labels := map[int]string{}
	var pids []int
	for label, pid := range cfg.servers {
		labels[pid] = label
		pids = append(pids, pid)
	}
	for _, pid := range cfg.clients {
		labels[pid] = instClient
		pids = append(pids, pid)
	}
	for _, f := range cfg.flows {
		labels[f.srv.Pid()] = instIperf
		pids = append(pids, f.srv.Pid())
	}
	before, err := cpuacct.Snapshot(pids...)
	if err != nil {
		return instSample{}, err
	}
	statBefore, err := cpuacct.ReadSystem()
	if err != nil {
		return instSample{}, err
	}
	emuBefore, err := experiment.ReadEmulator(l)
	if err != nil {
		return instSample{}, err
	}
	waitBefore := map[string]time.Duration{}
	for label, pid := range cfg.servers {
		if waitBefore[label], err = instRunqueueWait(pid); err != nil {
			return instSample{}, err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	var res [instFlows]*iperf.Result
	var errs [instFlows]error
	for i, f := range cfg.flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The second of warm-up (-O 1) also absorbs the few
			// milliseconds between the two flows' starts.
			// --bind-dev: both clients of one server hold an address of
			// the same subnet, so the route alone would send both flows
			// through the first client's device.
			res[i], errs[i] = iperf.Run(ctx, client, iperf.ClientOptions{
				Server: f.target, Port: f.srv.Port(), Bind: f.bind, ExtraArgs: []string{"--bind-dev", f.dev},
				Duration: dur, Omit: time.Second, Reverse: dir == measure.DirectionDown,
			})
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if err := errors.Join(errs[:]...); err != nil {
		return instSample{}, err
	}
	after, err := cpuacct.Snapshot(pids...)
	if err != nil {
		return instSample{}, fmt.Errorf("a process died during the sample: %w", err)
	}
	statAfter, err := cpuacct.ReadSystem()
	if err != nil {
		return instSample{}, err
	}
	emuAfter, err := experiment.ReadEmulator(l)
	if err != nil {
		return instSample{}, err
	}
	// A path with delay or loss runs through the userspace emulator
	// (no sch_netem here); a sample during which it fell behind measured
	// the emulator, as in `lab run`.
	if rf := experiment.JudgeEmulator(emuBefore, emuAfter); rf != nil {
		return instSample{}, &experiment.RefusalError{Refusal: *rf}
	}
	delta, err := cpuacct.Delta(before, after)
	if err != nil {
		return instSample{}, err
	}
	s := instSample{cpu: map[string]float64{}, waitSec: map[string]float64{}, wall: wall, hostBusy: statAfter.BusyShareSince(statBefore)}
	for label, pid := range cfg.servers {
		w, err := instRunqueueWait(pid)
		if err != nil {
			return instSample{}, err
		}
		s.waitSec[label] = (w - waitBefore[label]).Seconds()
	}
	for pid, sec := range delta {
		s.cpu[labels[pid]] += sec
	}
	for i, r := range res {
		s.flowBps[i] = r.ReceivedBitsPerSec
		for _, iv := range r.Intervals {
			s.flowBytes[i] += iv.Bytes
		}
	}
	return s, nil
}

// instRow summarizes a configuration's samples in one direction.
func instRow(network string, cfg *instConfig, dir string, ss []instSample) measure.Row {
	r := measure.NewRow(network, cfg.name, measure.PathTunnel, dir, openvpn.UDP)
	r.Cipher = cfg.cipher
	r.CPUSecondsPerGB = map[string]float64{}
	var flows [][instFlows]float64
	var busy []float64
	util, wait := map[string][]float64{}, map[string][]float64{}
	cpu := map[string]float64{}
	var bytes, flowBytes = uint64(0), map[string]uint64{}
	for _, s := range ss {
		r.AddSample(s.aggregate())
		flows = append(flows, s.flowBps)
		busy = append(busy, s.hostBusy)
		for label, sec := range s.cpu {
			cpu[label] += sec
		}
		for label := range cfg.servers {
			util[label] = append(util[label], s.cpu[label]/s.wall.Seconds())
			wait[label] = append(wait[label], s.waitSec[label]/s.wall.Seconds())
		}
		for i, f := range cfg.flows {
			bytes += s.flowBytes[i]
			flowBytes[f.server] += s.flowBytes[i]
		}
	}
	var serverCPU float64
	for label := range cfg.servers {
		serverCPU += cpu[label]
		if len(cfg.servers) > 1 {
			// Each pinned process against the bytes it carried.
			r.CPUSecondsPerGB[label] = cpuacct.PerGB(cpu[label], flowBytes[label])
		}
	}
	if len(ss) > 0 {
		r.CPUSecondsPerGB[instServer] = cpuacct.PerGB(serverCPU, bytes)
		r.CPUSecondsPerGB[instClient] = cpuacct.PerGB(cpu[instClient], bytes)
		r.CPUSecondsPerGB[instIperf] = cpuacct.PerGB(cpu[instIperf], bytes)
	}
	r.Extra = map[string]any{
		"flow_bps":         flows,
		"server_cpu_cores": util, // CPU-seconds per second of each server process over each sample
		// Seconds per second each server process was runnable but waited
		// for a CPU: with server_cpu_cores, the share of the sample it
		// had work to do.
		"server_runqueue_wait": wait,
		"host_cpu_busy":        busy, // share of all CPUs busy during each sample
	}
	if cfg.pinned != nil {
		r.Extra["pinned_cpus"] = cfg.pinned
	}
	if cfg.name == instOne {
		r.PublishedBps = (instPubOneLow + instPubOneHigh) / 2 * 8e6 // the range's middle; Extra has the range
		r.Extra["published"] = fmt.Sprintf("one process %g–%g MB/s (%g–%g Mbit/s), %s", instPubOneLow, instPubOneHigh, instPubOneLow*8, instPubOneHigh*8, "BF-CBC+SHA1 on a 4-core Xeon")
	} else {
		r.Extra["published"] = fmt.Sprintf("three pinned processes %g–%g MB/s (%g–%g Mbit/s), %s; no figure for two", instPubThreeLow, instPubThreeHigh, instPubThreeLow*8, instPubThreeHigh*8, "BF-CBC+SHA1 on a 4-core Xeon")
	}
	if len(ss) == 0 {
		r.Refuse(measure.Refusal{Kind: measure.RefusalNoValidSample})
	}
	return r
}

// instVerdicts judges, per direction, whether one server process was the
// bottleneck and whether a second pinned process raised the aggregate.
//
// On a host whose CPUs were all busy, every process that has work is
// runnable all the time, so a runnable server proves nothing about it
// being the limit: that claim is not tested on such a host.
func instVerdicts(rep *measure.Report) []measure.Verdict {
	cpus, _ := extraAs[int](rep.Scenario.Extra["cpus"])
	var out []measure.Verdict
	for _, dir := range []string{measure.DirectionUp, measure.DirectionDown} {
		one, two := row(rep, "", instOne, dir), row(rep, "", instTwo, dir)

		claim := fmt.Sprintf("one OpenVPN server process is the bottleneck for two clients (published: one process %g–%g MB/s) [%s]", instPubOneLow, instPubOneHigh, dir)
		u, w := instMedianExtra(one, "server_cpu_cores", instServer), instMedianExtra(one, "server_runqueue_wait", instServer)
		// Runnable = running or waiting for a CPU: a process that never
		// sleeps waiting for packets is what limits the flows, whether it
		// fills a core of its own or, on a crowded host, waits for one.
		runnable := u + w
		figures := fmt.Sprintf("the one server process ran %.2f of a core and waited for a CPU %.2f of the time (runnable %.0f%%) while carrying %s; host CPUs %s busy",
			u, w, 100*runnable, mbps(one), instBusy(one))
		switch {
		case one == nil || u < 0 || w < 0:
			out = append(out, fewSamples(newVerdict(claim, Noise, "no valid sample of one process"), 0, instMinSamples))
		case len(one.SamplesBps) < instMinSamples:
			out = append(out, fewSamples(newVerdict(claim, Noise, "only %d sample(s), %d needed: %s", len(one.SamplesBps), instMinSamples, figures), len(one.SamplesBps), instMinSamples))
		case runnable >= instBusyShare && u >= instBusyShare:
			out = append(out, newVerdict(claim, Confirmed, "%s: its single thread saturates a core", figures))
		case instMedianBusy(one) >= instSaturatedHost && runnable >= instIdleShare:
			out = append(out, newVerdict(claim, NotTested, "%s: the host's CPUs were saturated, so every process with work is runnable all the time; that does not show which one limits the flows (it needs a host with a core to spare)", figures))
		case runnable >= instBusyShare:
			out = append(out, newVerdict(claim, Confirmed, "%s: it always had work but got the CPU only in turn with the clients and iperf3, so on this host one process limits the flows by the CPU time it gets, not by filling a core", figures))
		case runnable < instIdleShare:
			out = append(out, newVerdict(claim, Refuted, "%s: it mostly waited for packets, something else limited the flows", figures))
		default:
			out = append(out, newVerdict(claim, Noise, "%s: neither clearly the limit nor clearly idle", figures))
		}

		claim = fmt.Sprintf("a second server process pinned to its own core raises the aggregate (published: %g–%g MB/s with one, %g–%g MB/s with three pinned) [%s]",
			instPubOneLow, instPubOneHigh, instPubThreeLow, instPubThreeHigh, dir)
		outcome, ratio := compareRates(two, one, instMinGain)
		few, fewest := "", -1
		if one == nil || two == nil || len(one.SamplesBps) < instMinSamples || len(two.SamplesBps) < instMinSamples {
			outcome, few, fewest = Noise, fmt.Sprintf("fewer than %d samples per row, no spread to judge by. ", instMinSamples), 0
			if one != nil && two != nil {
				fewest = min(len(one.SamplesBps), len(two.SamplesBps))
			}
		}
		var utils []string
		if two != nil {
			if m, ok := extraAs[map[string][]float64](two.Extra["server_cpu_cores"]); ok {
				for label := range m {
					utils = append(utils, fmt.Sprintf("%s ran %.2f, waited %.2f", label, verdict.Median(m[label]), instMedianExtra(two, "server_runqueue_wait", label)))
				}
			}
		}
		sort.Strings(utils)
		reason := few + fmt.Sprintf("two pinned %s vs one %s: %s; pinned servers (share of a core): %s; host CPUs %s busy (one: %s). ",
			mbps(two), mbps(one), ratioText(ratio, one), strings.Join(utils, ", "), instBusy(two), instBusy(one))
		if b := instMedianBusy(two); b >= instSaturatedHost {
			reason += fmt.Sprintf("All %d CPUs were saturated (two servers, two clients, four iperf3 and whatever else runs on the host): the machine, not one OpenVPN thread, bounds the aggregate, so this shows whether one process was the bottleneck but not how a server with dedicated cores scales", cpus)
		} else {
			reason += fmt.Sprintf("The %d CPUs also ran the clients and iperf3: the figure shows whether one process was the bottleneck, not how a server with dedicated cores scales", cpus)
		}
		v := newVerdict(claim, outcome, "%s", reason)
		if fewest >= 0 {
			v = fewSamples(v, fewest, instMinSamples)
		}
		out = append(out, v)
	}
	return out
}

// instMedianExtra is the median of Extra[key][label] of a row (-1 if absent).
func instMedianExtra(r *measure.Row, key, label string) float64 {
	if r == nil {
		return -1
	}
	m, ok := extraAs[map[string][]float64](r.Extra[key])
	if !ok || len(m[label]) == 0 {
		return -1
	}
	return verdict.Median(m[label])
}

func instMedianBusy(r *measure.Row) float64 {
	if r == nil {
		return -1
	}
	b, ok := extraAs[[]float64](r.Extra["host_cpu_busy"])
	if !ok || len(b) == 0 {
		return -1
	}
	return verdict.Median(b)
}

func instBusy(r *measure.Row) string {
	b := instMedianBusy(r)
	if b < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*b)
}

// instRunqueueWait returns how long the threads of pid have been runnable
// but waiting for a CPU, from /proc/PID/task/TID/schedstat (proc(5):
// time on the CPU, time waiting on a runqueue, timeslices; nanoseconds).
func instRunqueueWait(pid int) (time.Duration, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tids, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("run-queue wait of pid %d: %w", pid, err)
	}
	var sum time.Duration
	for _, t := range tids {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			return 0, fmt.Errorf("run-queue wait of pid %d: %w (the kernel needs CONFIG_SCHED_INFO)", pid, err)
		}
		w, err := instParseSchedstat(b)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		sum += w
	}
	return sum, nil
}

// instParseSchedstat returns the run-queue wait of a schedstat line.
func instParseSchedstat(b []byte) (time.Duration, error) {
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, fmt.Errorf("%d fields, want 3", len(f))
	}
	ns, err := strconv.ParseUint(f[1], 10, 63)
	if err != nil {
		return 0, err
	}
	return time.Duration(ns), nil
}

// instCPUs lists the CPUs this process may run on.
func instCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var out []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			out = append(out, i)
		}
	}
	return out, nil
}

// instPin binds every thread of pid to one CPU.
//
// Equivalent to: taskset -a -p -c CPU PID
func instPin(pid, cpu int) error {
	tids, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return fmt.Errorf("pinning pid %d: %w", pid, err)
	}
	var set unix.CPUSet
	set.Set(cpu)
	for _, t := range tids {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("sched_setaffinity(%d, CPU %d): %w", tid, cpu, err)
		}
	}
	return nil
}
