// Package realnet measures the user's own OpenVPN tunnel from one end of
// it: iperf3 to the far host outside the tunnel and to its address inside,
// both directions, interleaved (outside up, outside down, tunnel up,
// tunnel down, repeated), while reading what the local OpenVPN process and
// the host count (package vpnproc). The result is a run document
// (measure.Report, network "real") that `report` and `compare` read, and
// measure.Findings judges.
//
// It changes nothing on either host: the far end runs `iperf3 -s` itself,
// and on this host only iperf3 clients (and, with Capture, tcpdump for one
// sample) are started, and all of them end before Run returns.
package realnet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo/hostcollect"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/ui"

	"github.com/ovpnperf/ovpnperf/internal/capture"
	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/outputfile"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	pathprobe "github.com/ovpnperf/ovpnperf/internal/probe"
	"github.com/ovpnperf/ovpnperf/internal/rules"
	"github.com/ovpnperf/ovpnperf/internal/usage"
	"github.com/ovpnperf/ovpnperf/internal/vpnproc"
)

// Spec is what to measure.
type Spec struct {
	// Host is the far end's address outside the tunnel, Tunnel its
	// address inside.
	Host, Tunnel netip.Addr
	// Pid names the OpenVPN process; 0 finds it from the tun device.
	Pid int
	// Port of the far end's iperf3 server (0: iperf.DefaultPort).
	Port int
	// Repeat is the samples per row (experiment.RepeatRange; 0:
	// experiment.DefaultRepeat).
	Repeat int
	// Duration and Omit are each sample's length and warm-up (iperf3 -t
	// and -O, experiment.SampleTimeRange and OmitRange); Duration 0 and
	// Omit < 0 size them by the path's round trip (iperf.SampleTiming's
	// rule), measured with ICMP echoes.
	Duration time.Duration
	Omit     time.Duration
	// PathSlack is how much longer than asked a sample's measuring window
	// may run (iperf.ClientOptions.PathSlack); Run sets it from the
	// echoes when 0.
	PathSlack time.Duration
	// echoed: the echoes that sized the samples answered (a round trip
	// of 0 ms too, whose slack is 0), so each sample sends its own.
	echoed bool
	// Cipher is the data cipher the overhead model assumes ("" is
	// AES-256-GCM, OpenVPN 2.6's first default).
	Cipher string
	// Capture records the outer packets of one tunnel sample with
	// tcpdump into a private temporary directory; CaptureFile keeps the
	// file there afterwards ("" removes it after the analysis); the
	// caller checks it before the run (outputfile.Check).
	Capture     bool
	CaptureFile string
	// Directions to measure (default both).
	Directions []string
	Progress   io.Writer
}

// MinDuration is the shortest sample measure sizes by the path: 5 s
// measured (iperf3's default is 10 s; lab run takes 2 s), longer where the
// path needs it (iperf.RealPathTiming).
const MinDuration = 5 * time.Second

// sizeSamples measures the round trip to the far end outside and inside the
// tunnel with ICMP echoes and, where spec leaves them to the path, sizes
// the samples by the larger (iperf.RealPathTiming, probe's rule too) and
// lets the window check allow iperf.RealPathSlack of it. It returns what it
// did in words, for the report and the progress.
func sizeSamples(ctx context.Context, spec *Spec) string {
	var largest time.Duration
	var echoed bool
	var failed []string
	for _, a := range []netip.Addr{spec.Host, spec.Tunnel} {
		_, hi, err := pathprobe.RoundTrips(ctx, a, 5, 200*time.Millisecond)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %s", a, oneLine(err)))
			continue
		}
		largest, echoed = max(largest, hi), true
	}
	return sizeByEcho(spec, largest, echoed, failed)
}

// askLoss sends measure.LossEchoes ICMP echoes to the host, paced, once
// the samples are done and the path is idle again, when an outside row
// raises the loss question (measure.LossQuestion: its TCP flow
// retransmitted more than 1 % in every sample); their count decides
// measure's loss finding. Nil when no row raises it: no finding needs
// them, and a run spends no 3 s on them.
func askLoss(ctx context.Context, spec Spec, rep *measure.Report, prog *ui.Progress) *measure.EchoCount {
	raised := false
	for i := range rep.Rows {
		if r := &rep.Rows[i]; r.Variant == measure.VariantOutside {
			if _, q := measure.LossQuestion(r); q {
				raised = true
			}
		}
	}
	if !raised || ctx.Err() != nil {
		return nil
	}
	prog.Logf("outside TCP retransmitted more than %.0f %% in every sample: %d paced echoes decide whether the path loses packets", 100*measure.LossShare, measure.LossEchoes)
	c := &measure.EchoCount{IntervalSeconds: measure.LossEchoInterval.Seconds()}
	sent, answered, err := pathprobe.EchoCount(ctx, spec.Host, measure.LossEchoes, measure.LossEchoInterval)
	if err != nil {
		c.Failed = oneLine(err)
		return c
	}
	c.Sent, c.Answered = sent, answered
	return c
}

// sizeByEcho sizes spec's samples by the largest echo round trip where
// spec leaves them to the path; echoed false: no echo answered (failed
// says why), and largest means nothing.
func sizeByEcho(spec *Spec, largest time.Duration, echoed bool, failed []string) string {
	var given []string
	if spec.Duration > 0 {
		given = append(given, "--time")
	}
	if spec.Omit >= 0 {
		given = append(given, "--omit")
	}
	var how string
	d, w, slack := iperf.RealPathTiming(largest, echoed)
	spec.echoed = echoed
	spec.Duration = cmp.Or(spec.Duration, max(MinDuration, d))
	if spec.Omit < 0 {
		spec.Omit = w
	}
	if spec.PathSlack == 0 {
		spec.PathSlack = slack
	}
	if !echoed {
		how = fmt.Sprintf("no ICMP echo answered (%s): not sized by the path; a window check without slack may refuse samples on a path longer than about %v", strings.Join(failed, "; "), time.Duration(float64(spec.Duration)*iperf.WindowTolerance).Round(time.Millisecond))
	} else {
		how = fmt.Sprintf("largest echo round trip %v (5 ICMP echoes each outside and inside the tunnel); window check allows %v more, or the largest round trip of echoes sent during the sample (5 a second) where longer, and the receiver above its sender by the bytes its own rate carries in that time", largest.Round(100*time.Microsecond), spec.PathSlack.Round(time.Millisecond))
	}
	src := "sized by the path's round trip"
	switch len(given) {
	case 2:
		src = "as given"
	case 1:
		src = given[0] + " as given, the rest sized by the path's round trip"
	}
	if !echoed && len(given) < 2 {
		src = "defaults"
	}
	return fmt.Sprintf("iperf3 -t %v -O %v (%s); %s", spec.Duration, spec.Omit, src, how)
}

// Located is where the tunnel of a Spec runs on this host: the route to
// the far end outside the tunnel, the route to its address inside, and the
// OpenVPN process that holds the tun device.
type Located struct {
	Outside, Inside vpnproc.Route
	Proc            *vpnproc.Process
}

// Locate finds the routes to host (outside the tunnel) and tunnel (inside)
// and the OpenVPN process of the tunnel (pid, or the one holding the tun
// device when 0), and refuses addresses that are the wrong way round as
// a user's mistake.
func Locate(host, tunnel netip.Addr, pid int) (*Located, error) {
	outRoute, err := vpnproc.RouteTo(host)
	if err != nil {
		return nil, usage.Errorf("HOST %s: %v: give the far end's address outside the tunnel", host, err)
	}
	if outRoute.Kind == "tun" {
		return nil, usage.Errorf("HOST %s is reached through the tun device %s: give the far end's address outside the tunnel (the one OpenVPN connects to)", host, outRoute.Dev)
	}
	var proc *vpnproc.Process
	tunRoute, err := vpnproc.RouteTo(tunnel)
	if err != nil {
		return nil, usage.Errorf("--tunnel %s: %v", tunnel, err)
	}
	if pid != 0 {
		dev := ""
		if tunRoute.Kind == "tun" {
			dev = tunRoute.Dev
		}
		if proc, err = vpnproc.Open(pid, dev, host); err != nil {
			// Open's errors name the pid.
			return nil, usage.Errorf("--pid: %v", err)
		}
	} else if proc, err = vpnproc.FindByTunnel(tunnel, host); err != nil {
		if errors.Is(err, vpnproc.ErrNotTun) {
			return nil, usage.Errorf("--tunnel %s: %v: give the far end's address inside the tunnel", tunnel, err)
		}
		return nil, fmt.Errorf("--tunnel %s: %w", tunnel, err)
	}
	if tunRoute.Kind != "tun" || tunRoute.Dev != proc.Tun {
		return nil, usage.Errorf("--tunnel %s is reached through %s, not through %s of OpenVPN pid %d", tunnel, tunRoute.Dev, proc.Tun, proc.Pid)
	}
	return &Located{Outside: outRoute, Inside: tunRoute, Proc: proc}, nil
}

// CheckServer opens one connection to the far end's iperf3 server outside
// and inside the tunnel: a far end that does not answer is said at once
// (ErrNoServer), not after iperf3's retries of every sample.
func CheckServer(ctx context.Context, spec Spec) error {
	port := cmp.Or(spec.Port, iperf.DefaultPort)
	for _, a := range []netip.Addr{spec.Host, spec.Tunnel} {
		if err := probe(ctx, netip.AddrPortFrom(a, uint16(port))); err != nil {
			spec.Port = port
			return noServerError(spec, a, err)
		}
	}
	return nil
}

// WithDefaults returns spec with Repeat and Port filled when zero; the
// sample's length and warm-up are sized by the path in Run.
func (spec Spec) WithDefaults() Spec {
	spec.Repeat = cmp.Or(spec.Repeat, experiment.DefaultRepeat)
	spec.Port = cmp.Or(spec.Port, iperf.DefaultPort)
	return spec
}

// Validate refuses options outside the ranges measure's and watch's flags
// take (experiment's, lab run's too), naming the flag, as a usage error.
func (spec Spec) Validate() error {
	if err := experiment.CheckRepeat(spec.Repeat); err != nil {
		return err
	}
	if spec.Duration != 0 { // 0: sized by the path's round trip
		if err := experiment.CheckSampleTime(spec.Duration); err != nil {
			return err
		}
	}
	if spec.Omit >= 0 { // negative: sized by the path's round trip
		if err := experiment.CheckOmit(spec.Omit); err != nil {
			return err
		}
	}
	if spec.Port < 1 || spec.Port > 65535 {
		return usage.Errorf("--port %d: want 1–65535", spec.Port)
	}
	return experiment.CheckDirections(spec.Directions)
}

// Retries is how often a sample whose iperf3 figures contradict each other
// (iperf.ErrInconsistent) is measured again, as `lab run` does.
const Retries = iperf.Retries

// ErrNoServer: nothing answers iperf3 at the far end.
var ErrNoServer = errors.New("no iperf3 server")

// subject is one of the two things measured.
type subject struct {
	variant, path string
	addr          netip.Addr
}

// Run measures spec. A partial report comes back with an error when the run
// was cut short.
func Run(ctx context.Context, spec Spec) (*measure.Report, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	loc, err := Locate(spec.Host, spec.Tunnel, spec.Pid)
	if err != nil {
		return nil, err
	}
	outRoute, tunRoute, proc := loc.Outside, loc.Inside, loc.Proc
	if err := CheckServer(ctx, spec); err != nil {
		return nil, err
	}
	timing := sizeSamples(ctx, &spec)
	if spec.Progress != nil {
		fmt.Fprintf(spec.Progress, "samples: %s\n", timing)
	}
	host, err := hostcollect.Host(ctx)
	if err != nil {
		return nil, err
	}
	host.EmulationBackend = "none"
	rp := &measure.RealPath{
		Host: spec.Host.String(), Tunnel: spec.Tunnel.String(),
		OutsideDevice: outRoute.Dev, TunDevice: proc.Tun, TunMTU: tunRoute.MTU,
		Pid: proc.Pid, Proto: proc.Socket.Proto,
		Socket: fmt.Sprintf("%s %s → %s (inode %d)", proc.Socket.Proto, proc.Socket.Local, proc.Socket.Remote, proc.Socket.Inode),
	}
	sc := measure.Scenario{
		Command: measure.CommandMeasure, DurationSeconds: spec.Duration.Seconds(), Repeat: spec.Repeat, Parallel: 1,
		Networks: []measure.Network{{Name: measure.NetworkReal,
			Description: fmt.Sprintf("%s outside via %s, %s inside via %s (OpenVPN pid %d, %s)", spec.Host, outRoute.Dev, spec.Tunnel, proc.Tun, proc.Pid, proc.Socket.Proto),
			Path:        map[string]string{"host": spec.Host.String(), "tunnel": spec.Tunnel.String()}}},
		Extra: map[string]any{"proto": proc.Socket.Proto, "payload": "iperf3", "sample_timing": timing},
		Real:  rp,
	}
	rep := measure.NewReport(host, sc)
	subjects := []subject{
		{measure.VariantOutside, measure.PathRouted, spec.Host},
		{measure.VariantTunnel, measure.PathTunnel, spec.Tunnel},
	}
	dirs := spec.Directions
	if len(dirs) == 0 {
		dirs = []string{measure.DirectionUp, measure.DirectionDown}
	}
	index := map[[2]string]int{}
	for _, s := range subjects {
		for _, d := range dirs {
			r := measure.NewRow(measure.NetworkReal, s.variant, s.path, d, "tcp")
			if s.path == measure.PathTunnel {
				r.Proto = proc.Socket.Proto
			}
			r.CPUSecondsPerGB = map[string]float64{}
			index[[2]string{s.variant, d}] = len(rep.Rows)
			rep.Rows = append(rep.Rows, r)
		}
	}
	prog := ui.NewProgress(spec.Repeat*len(subjects)*len(dirs), spec.Progress)
	defer prog.Done()
	cpuSum := make([]float64, len(rep.Rows))
	bytesSum := make([]uint64, len(rep.Rows))
	var capRes *captured
	for round := 0; round < spec.Repeat; round++ {
		for _, s := range subjects {
			for _, d := range dirs {
				i := index[[2]string{s.variant, d}]
				prog.Step(fmt.Sprintf("%s %s (%d/%d)", s.variant, d, round+1, spec.Repeat))
				// The capture takes the last round's first tunnel sample.
				doCapture := spec.Capture && s.path == measure.PathTunnel && d == dirs[0] && round == spec.Repeat-1
				res, loaded, ctr, cr, err := sample(ctx, spec, proc, outRoute.Dev, s, d, doCapture)
				for try := 0; try < Retries && err != nil && ctx.Err() == nil && errors.Is(err, iperf.ErrInconsistent); try++ {
					prog.Logf("%s %s: %v; measuring again", s.variant, d, err)
					res, loaded, ctr, cr, err = sample(ctx, spec, proc, outRoute.Dev, s, d, doCapture)
				}
				if ctx.Err() != nil {
					rep.InvalidateUnsampled("no sample: the run was interrupted before this row was measured")
					return finish(rep, rp, spec, proc, capRes), ctx.Err()
				}
				if err != nil {
					if noServer(err) {
						return nil, noServerError(spec, s.addr, err)
					}
					if errors.Is(err, vpnproc.ErrGone) {
						rep.InvalidateUnsampled("no sample: OpenVPN ended before this row was measured")
						return finish(rep, rp, spec, proc, capRes), fmt.Errorf("OpenVPN (pid %d) ended during the measurement: %w", proc.Pid, vpnproc.ErrGone)
					}
					rf := experiment.RefusalOf(err)
					rf.Detail = oneLine(err)
					rep.Rows[i].Refuse(rf)
					prog.Logf("%s %s: sample failed: %s", s.variant, d, oneLine(err))
					continue
				}
				if cr != nil {
					capRes = cr
					capRes.sample = fmt.Sprintf("tunnel %s, round %d", d, round+1)
				}
				r := &rep.Rows[i]
				r.AddSample(res.ReceivedBitsPerSec)
				ser := experiment.SeriesOf(res)
				ser.LoadedMaxRTTMicros = loaded.Microseconds()
				r.Samples = append(r.Samples, ser)
				r.OpenVPN = append(r.OpenVPN, ctr)
				cpuSum[i] += ctr.CPUSeconds
				bytesSum[i] += res.BytesWithWarmup()
			}
		}
	}
	for i := range rep.Rows {
		if rep.Rows[i].Path == measure.PathTunnel && bytesSum[i] > 0 {
			rep.Rows[i].CPUSecondsPerGB["openvpn"] = cpuacct.PerGB(cpuSum[i], bytesSum[i])
		}
		if len(rep.Rows[i].SamplesBps) == 0 {
			rep.Rows[i].Refuse(measure.Refusal{Kind: measure.RefusalNoValidSample})
		}
	}
	rp.LossEchoes = askLoss(ctx, spec, rep, prog)
	return finish(rep, rp, spec, proc, capRes), nil
}

// finish fills what the figures of the whole run decide: the path MTU the
// kernel learnt meanwhile, the overhead model's prediction and the advice
// of the MTU and buffer rules.
func finish(rep *measure.Report, rp *measure.RealPath, spec Spec, proc *vpnproc.Process, cr *captured) *measure.Report {
	if rt, err := vpnproc.RouteTo(spec.Host); err == nil {
		rp.PathMTU, rp.PathMTULearnt = rt.PathMTU, rt.PathMTU < rt.MTU
	}
	if cr != nil && !rp.PathMTULearnt && cr.maxFragment > 0 {
		// A fragment followed by more is as large as the path let it be
		// (rounded down to 8 bytes of payload): the best figure left.
		rp.PathMTU = cr.maxFragment
	}
	cipher := spec.Cipher
	if cipher == "" {
		cipher = overhead.DefaultCipher
	}
	rp.ModelCipher = cipher
	tr := overhead.Transport{Proto: rp.Proto, IPv6: !spec.Host.Is4()}
	f, err := overhead.New(overhead.DataChannel{Cipher: cipher}, tr)
	if err == nil {
		rp.PredictedRatio, rp.PredictionBasis, rp.ModelOverheadBytes = Predict(f, rp.PathMTU, rp.TunMTU, !spec.Tunnel.Is4(), !spec.Host.Is4())
		fam := pmtu.IPv4
		if !spec.Host.Is4() {
			fam = pmtu.IPv6
		}
		if t, err := (pmtu.DataChannel{Cipher: cipher}).Translate(pmtu.Transport{Proto: rp.Proto, Family: fam}, rp.PathMTU, false, rp.PathMTULearnt); err == nil {
			rp.MTUAdvice = fmt.Sprintf("For a path MTU of %d: %s", rp.PathMTU, t.Advice)
		}
	}
	var rcv uint32
	for _, r := range rep.Rows {
		for _, c := range r.OpenVPN {
			rcv = max(rcv, c.RcvbufBytes)
		}
	}
	d, s := rules.BufferAfterDrops(int(rcv))
	rp.BufferAdvice = fmt.Sprintf("Set `%s` in the configuration of this end (and `%s` in /etc/sysctl.d, without which the kernel caps it).", d, s)
	if cr != nil {
		rp.Capture = cr.summary(rep, rp, f)
	}
	rep.Finish()
	return rep
}

// Predict is the tunnel/outside ratio of TCP goodput the overhead model
// expects on a path of pathMTU bytes: outside, full packets of pathMTU
// carry pathMTU − 52 bytes of data (IPv4 and TCP headers with timestamps);
// inside, OpenVPN 2.6's default `mssfix 1492 mtu` (or the path MTU if
// smaller and known) sizes the inner packets so that the outer ones fit,
// and each inner packet becomes one outer datagram, or several IP
// fragments when it does not fit the path.
func Predict(f overhead.Frame, pathMTU, tunMTU int, innerV6, outerV6 bool) (ratio float64, basis string, overheadBytes int) {
	if pathMTU <= 0 || tunMTU <= 0 {
		return 0, "", 0
	}
	inHdr, outHdr := 52, 52 // IP + TCP + timestamps
	if innerV6 {
		inHdr = 72
	}
	if outerV6 {
		outHdr = 72
	}
	n := min(tunMTU, f.MaxInner(1492))
	outer := f.OuterSize(n)
	frags := 1
	if outer > pathMTU {
		ipHdr := 20
		if outerV6 {
			ipHdr = 48 // + fragment header
		}
		per := (pathMTU - ipHdr) &^ 7
		frags = int(math.Ceil(float64(outer-ipHdr) / float64(per)))
		outer += (frags - 1) * ipHdr
	}
	ratio = (float64(n-inHdr) / float64(outer)) / (float64(pathMTU-outHdr) / float64(pathMTU))
	basis = fmt.Sprintf("%d-byte inner packets in %d-byte outer packets against %d-byte packets outside", n, outer, pathMTU)
	if frags > 1 {
		basis = fmt.Sprintf("%d-byte inner packets in %d IP fragments of %d bytes in all against %d-byte packets outside", n, frags, outer, pathMTU)
	}
	return ratio, basis, f.Overhead(n)
}

// captured is the capture of one sample.
type captured struct {
	sample      string
	analysis    *capture.Analysis
	file        string
	tunPackets  uint64
	tunBytes    uint64
	maxFragment int
}

func (c *captured) summary(rep *measure.Report, rp *measure.RealPath, f overhead.Frame) *measure.CaptureSummary {
	a := c.analysis
	s := &measure.CaptureSummary{Sample: c.sample, Packets: a.Packets, Fragments: a.Fragments,
		FragmentedDatagrams: a.FragmentedDatagrams, Datagrams: a.Datagrams, TCPRetransmitted: a.TCPRetransmitted, File: c.file}
	for sz := range a.Sizes {
		s.MaxIPBytes = max(s.MaxIPBytes, sz)
	}
	if c.tunPackets > 0 && a.Datagrams > 0 {
		inner := float64(c.tunBytes) / float64(c.tunPackets)
		s.MeasuredOverheadBytes = a.MeanDatagramBytes() - inner
		s.ModelOverheadBytes = f.Overhead(int(math.Round(inner)))
	}
	return s
}

// sample runs one iperf3 test against s in direction d with the OpenVPN
// counters read around it, and a capture when asked.
//
// loaded is the largest round trip of the echoes sent during the sample
// (0: none sent or none came back).
func sample(ctx context.Context, spec Spec, proc *vpnproc.Process, outDev string, s subject, d string, doCapture bool) (res *iperf.Result, loaded time.Duration, ctr measure.OpenVPNCounters, cr *captured, err error) {
	opts := iperf.ClientOptions{Server: s.addr, Port: spec.Port, Duration: spec.Duration, Omit: spec.Omit, Reverse: d == measure.DirectionDown,
		PathSlack: spec.PathSlack, RateUnknown: true}
	if spec.PathSlack > 0 || spec.echoed {
		// The echoes before the samples saw an idle path; these see the
		// queue the sample itself fills.
		wait := pathprobe.EchoDuring(ctx, s.addr, spec.Omit+spec.Duration+spec.PathSlack)
		opts.LoadedRoundTrip = func() time.Duration {
			loaded = wait()
			return loaded
		}
	}
	before, err := proc.Read()
	if err != nil {
		return nil, loaded, measure.OpenVPNCounters{}, nil, err
	}
	var td *capture.Tcpdump
	if doCapture {
		// tcpdump writes into a file ovpnperf makes in a directory
		// only root can enter; a kept capture is put in place from
		// there as every output is (outputfile: never through a link,
		// never over a device).
		dir, err := os.MkdirTemp("", "ovpnperf-capture-")
		if err != nil {
			return nil, loaded, measure.OpenVPNCounters{}, nil, err
		}
		defer os.RemoveAll(dir)
		f, err := os.OpenFile(filepath.Join(dir, "outer.pcap"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, loaded, measure.OpenVPNCounters{}, nil, err
		}
		defer f.Close()
		filter := "host " + spec.Host.String()
		if td, err = capture.Start(ctx, outDev, f, filter); err != nil {
			return nil, loaded, measure.OpenVPNCounters{}, nil, err
		}
		defer td.Stop()
		cr = &captured{}
	}
	res, err = iperf.Run(ctx, iperf.Local, opts)
	if err != nil {
		return res, loaded, measure.OpenVPNCounters{}, nil, err
	}
	after, err := proc.Read()
	if err != nil {
		return nil, loaded, measure.OpenVPNCounters{}, nil, err
	}
	ctr = vpnproc.Sub(before, after)
	if td != nil {
		td.Stop()
		fh, err := inputfile.Open(ctx, td.File, inputfile.Capture())
		if err != nil {
			return nil, loaded, ctr, nil, fmt.Errorf("reading the capture: %w", err)
		}
		a, err := capture.Analyze(fh, proc.Socket.Local.Port())
		fh.Close()
		if err != nil && !errors.Is(err, capture.ErrTruncated) {
			return nil, loaded, ctr, nil, fmt.Errorf("reading the capture %s: %w", td.File, err)
		}
		if a == nil {
			a = &capture.Analysis{Sizes: map[int]int{}}
		}
		if spec.CaptureFile != "" {
			if err := keepCapture(ctx, td.File, spec.CaptureFile); err != nil {
				return nil, loaded, ctr, nil, err
			}
			cr.file = spec.CaptureFile
		}
		cr.analysis, cr.tunPackets, cr.tunBytes = a, ctr.TunPackets, ctr.TunBytes
		// Fragments of the port's datagrams never exceed the path MTU;
		// the largest one is the path MTU or just below (8-byte units).
		cr.maxFragment = a.MaxFragmentBytes
	}
	return res, loaded, ctr, cr, nil
}

// keepCapture puts the capture made at tmp in place at path.
func keepCapture(ctx context.Context, tmp, path string) error {
	src, err := inputfile.Open(ctx, tmp, inputfile.Capture())
	if err != nil {
		return fmt.Errorf("reading the capture: %w", err)
	}
	defer src.Close()
	return outputfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := io.Copy(w, src)
		return err
	})
}

// ProbeTimeout bounds the connection to each iperf3 server before the
// samples.
const ProbeTimeout = 5 * time.Second

// probe opens and closes one TCP connection to ap. iperf3's server takes
// it as a client that went away before sending its cookie and listens on.
func probe(ctx context.Context, ap netip.AddrPort) error {
	d := net.Dialer{Timeout: ProbeTimeout}
	c, err := d.DialContext(ctx, "tcp", ap.String())
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			return op.Err
		}
		return err
	}
	c.Close()
	// The server needs a moment to listen again (iperf.Run retries too).
	time.Sleep(200 * time.Millisecond)
	return nil
}

// noServer reports whether a sample failed because nothing answered: the
// test never started (iperf.Run tried it again already), or the probe's
// connection was refused or found no route.
func noServer(err error) bool {
	for _, e := range []error{iperf.ErrNotStarted, syscall.ECONNREFUSED, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func noServerError(spec Spec, addr netip.Addr, cause error) error {
	why := oneLine(cause)
	if i := strings.LastIndex(why, "iperf3: "); i >= 0 {
		why = why[i+len("iperf3: "):]
	}
	return fmt.Errorf("%w answers at %s (%s): start one on the far host with `iperf3 -s -p %d` (it listens on all its addresses, inside the tunnel too); ovpnperf starts nothing there",
		ErrNoServer, netip.AddrPortFrom(addr, uint16(spec.Port)), why, spec.Port)
}

// oneLine keeps the first line of an error (iperf3's output follows it).
func oneLine(err error) string {
	m, _, _ := strings.Cut(err.Error(), "\n")
	return m
}
