package experiment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/emulate"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// tunQueueTxLen is Linux's default transmit queue of a tun device
// (drivers/net/tun.c, 500 packets), which OpenVPN 2.6 leaves as it is.
const tunQueueTxLen = 500

// tunQueueDrain is how long a full tun device queue of full-size packets
// takes to drain at the path's slower rate (0 unshaped): the tunnel has
// this queue of its own, which the routed path and labpath.Path.MaxRoundTrip
// do not. Without it a tunnel sample on a slow long path runs past what
// the path's round trip allows and is refused every time
// (docs/measurements.md#iperf3s-windows-and-counts); which queue held
// the extra was not traced.
func tunQueueDrain(p labpath.Path) time.Duration {
	rate := p.Up.RateBitsPerSec
	if d := p.Down.RateBitsPerSec; d > 0 && (rate == 0 || d < rate) {
		rate = d
	}
	if rate == 0 {
		return 0
	}
	return time.Duration(float64(tunQueueTxLen*1500*8) / float64(rate) * float64(time.Second))
}

// sampleFunc takes one sample: sample, or a fake in tests of the rounds'
// bookkeeping, which measureRounds is given.
type sampleFunc func(ctx context.Context, l *lab.Lab, spec Spec, n Network, s subject, dir string, srvs *iperfServers, client iperf.CommandFunc) (*sampleResult, map[string]float64, error)

// sample runs one iperf3 test and returns its result and the CPU-seconds
// each side used during it. It fails when the emulator fell behind.
func sample(ctx context.Context, l *lab.Lab, spec Spec, n Network, s subject, dir string, srvs *iperfServers, client iperf.CommandFunc) (*sampleResult, map[string]float64, error) {
	pids := map[string]int{"iperf3": srvs.srv.Pid()}
	port := srvs.srv.Port()
	opts := iperf.ClientOptions{Server: s.target, Duration: spec.Duration, Omit: spec.Omit, Parallel: spec.Parallel, Reverse: dir == measure.DirectionDown,
		PathSlack: n.Path.MaxRoundTrip(), PathRateBitsPerSec: n.Path.Up.RateBitsPerSec}
	if opts.Reverse {
		opts.PathRateBitsPerSec = n.Path.Down.RateBitsPerSec
	}
	if s.tun != nil {
		opts.PathSlack += tunQueueDrain(n.Path)
	}
	if n.payload(spec) == iperf.PayloadZeros {
		// A compressing tunnel may carry zeros faster than the link.
		opts.PathRateBitsPerSec = 0
	}
	if srvs.payload != "" {
		opts.Bytes = srvs.fixedBytes
		if opts.Reverse {
			pids["iperf3"], port = srvs.down.Pid(), srvs.down.Port()
		} else {
			opts.FilePath = srvs.payload
		}
	}
	opts.Port = port
	if s.tun != nil {
		for side, pid := range s.tun.Pids() {
			pids[side] = pid
		}
	}
	var list []int
	for _, p := range pids {
		list = append(list, p)
	}
	before, err := cpuacct.Snapshot(list...)
	if err != nil {
		return nil, nil, err
	}
	emuBefore, err := ReadEmulator(l)
	if err != nil {
		return nil, nil, err
	}
	res, err := iperf.Run(ctx, client, opts)
	drained := false
	if err != nil {
		if !spec.DrainOK || !errors.Is(err, iperf.ErrInconsistent) || !receiverDrained(res, opts.PathSlack) {
			return nil, nil, err
		}
		drained = true
	}
	after, err := cpuacct.Snapshot(list...)
	if err != nil {
		return nil, nil, fmt.Errorf("a process died during the sample: %w", err)
	}
	emuAfter, err := ReadEmulator(l)
	if err != nil {
		return nil, nil, err
	}
	if rf := JudgeEmulator(emuBefore, emuAfter); rf != nil {
		return nil, nil, &RefusalError{Refusal: *rf}
	}
	delta, err := cpuacct.Delta(before, after)
	if err != nil {
		return nil, nil, err
	}
	cpu := map[string]float64{}
	for side, pid := range pids {
		cpu[side] = delta[pid]
	}
	return &sampleResult{Result: res, drained: drained}, cpu, nil
}

// SeriesOf keeps a sample's rate and its per-interval figures for the
// report (schema v2 rows[].samples).
func SeriesOf(res *iperf.Result) measure.Sample {
	s := measure.Sample{Bps: res.ReceivedBitsPerSec, Intervals: []measure.Interval{},
		SenderMeanRTTMicros: res.SenderMeanRTT.Microseconds(), SenderMaxSndWndBytes: res.SenderMaxSndWndBytes}
	for _, iv := range res.Intervals {
		s.Intervals = append(s.Intervals, measure.Interval{
			StartSeconds: iv.Start.Seconds(), EndSeconds: iv.End.Seconds(),
			Bps: iv.BitsPerSec, Retransmits: iv.Retransmits, Omitted: iv.Omitted,
		})
	}
	return s
}

// sampleResult is one sample's iperf3 result; drained marks one accepted
// under Spec.DrainOK.
type sampleResult struct {
	*iperf.Result
	drained bool
}

// receiverDrained reports whether an inconsistent result is one Spec.DrainOK
// accepts: the sender's window as Result.Check allows it (the requested
// length within 7.5 %, plus the path's round trip), the receiver's longer,
// and the receiver's rate at most 8 % above the sender's.
func receiverDrained(res *iperf.Result, pathSlack time.Duration) bool {
	if res == nil || res.Requested <= 0 || res.SentBitsPerSec <= 0 {
		return false
	}
	tol := time.Duration(iperf.WindowTolerance * float64(res.Requested))
	return res.SentDuration >= res.Requested-tol && res.SentDuration <= res.Requested+pathSlack+tol &&
		res.ReceivedDuration > res.Requested && res.ReceivedBitsPerSec <= 1.08*res.SentBitsPerSec
}

// Emulator are the userspace emulator's counters that judge a sample: its
// releases and how late (emulate.Lateness), and packets it lost against
// its will (kernel queue overflow, socket overrun, failed verdicts,
// unparsable messages).
type Emulator struct {
	emulate.Lateness
	Lost uint64
	// host is /proc/stat when the counters were read (zero if it could
	// not be read): a refusal gives the host's busy and steal shares
	// between the two reads.
	host cpuacct.SystemTimes
}

// ReadEmulator returns the lab's emulator counters, zero with netem or no
// emulation (nothing to fall behind). Every command that measures through
// a lab reads them before and after each sample and asks JudgeEmulator.
func ReadEmulator(l *lab.Lab) (Emulator, error) {
	if !lab.UserspaceBackend(l.Backend()) {
		return Emulator{}, nil
	}
	st, err := l.Stats()
	if err != nil {
		return Emulator{}, err
	}
	c := Counters(st)
	c.host, _ = cpuacct.ReadSystem()
	return c, nil
}

// Counters sums the emulator's queues.
func Counters(st emulate.Stats) Emulator {
	c := Emulator{Lateness: emulate.LatenessOf(st)}
	for _, q := range st.Queues {
		c.Lost += q.KernelQueueDrops + q.KernelUserDropped + q.VerdictErrors + q.Truncated
	}
	return c
}

// JudgeEmulator returns why a sample is invalid, from the emulator's
// counters before and after it, or nil if the emulator carried the path:
// no packet lost, no stall, at most emulate.MaxLateShare released late
// (docs/emulator.md, "When a measurement is not trusted"). A refusal
// carries the host's busy and steal shares in between, when both reads
// had them.
func JudgeEmulator(before, after Emulator) *measure.Refusal {
	l := after.Lateness.Since(before.Lateness)
	var rf measure.Refusal
	switch {
	case after.Lost-before.Lost > 0:
		rf = measure.Refusal{Kind: measure.RefusalEmulatorLost, Figures: measure.Figures{measure.FigureLostPackets: float64(after.Lost - before.Lost)}}
	case l.Stalled > 0:
		rf = measure.Refusal{Kind: measure.RefusalEmulatorStall, Figures: measure.Figures{
			measure.FigureStalledPackets: float64(l.Stalled), measure.FigureStallSeconds: emulate.StallLateness.Seconds()}}
	case l.TooLate():
		rf = measure.Refusal{Kind: measure.RefusalEmulatorLate, Figures: measure.Figures{
			measure.FigureReleasedPackets: float64(l.Released), measure.FigureLatePackets: float64(l.Late),
			measure.FigureLatePercent: 100 * float64(l.Late) / float64(l.Released), measure.FigureLateMeanSeconds: l.MeanLate().Seconds()}}
	default:
		return nil
	}
	if before.host.Total() > 0 && after.host.Total() > 0 {
		rf.Figures[measure.FigureHostBusyPercent] = 100 * after.host.BusyShareSince(before.host)
		rf.Figures[measure.FigureHostStealPercent] = 100 * after.host.StealShareSince(before.host)
	}
	return &rf
}

// ErrInvalidSample marks a sample the emulator did not carry faithfully
// (errors.Is); the message says why.
var ErrInvalidSample = errors.New("invalid sample")

// RefusalError is a sample refused by a judgement of its own (the
// emulator's counters): it reads as the refusal's sentence, errors.Is
// ErrInvalidSample, and RefusalOf gives the refusal back.
type RefusalError struct{ Refusal measure.Refusal }

func (e *RefusalError) Error() string        { return e.Refusal.Text() }
func (e *RefusalError) Is(target error) bool { return target == ErrInvalidSample }

// RefusalOf is why err refused a sample, as data: the emulator's judgement
// (RefusalError), iperf3's consistency rules (iperf.InconsistentError)
// with their figures, a payload file that ran out, iperf3's own error, or
// any other failure (kind "error"); Detail is the message of every kind
// whose sentence is not measure's to write.
func RefusalOf(err error) measure.Refusal {
	var re *RefusalError
	var ie *iperf.InconsistentError
	var pe *iperf.PayloadShortError
	var te *iperf.TestError
	switch {
	case errors.As(err, &re):
		return re.Refusal
	case errors.As(err, &ie):
		rf := measure.Refusal{Kind: ie.Rule, Side: ie.Side, Detail: err.Error(), Figures: measure.Figures{
			measure.FigureRequestedSeconds: ie.Requested.Seconds(), measure.FigurePathSlackSeconds: ie.PathSlack.Seconds(),
			measure.FigureTolerancePercent: ie.TolerancePercent}}
		if ie.Rule == iperf.RuleReceiverAboveSender {
			for k, v := range map[string]float64{
				measure.FigureReceivedBps: ie.ReceivedBitsPerSec, measure.FigureReceivedBytes: float64(ie.ReceivedBytes), measure.FigureReceivedSeconds: ie.ReceivedDuration.Seconds(),
				measure.FigureSentBps: ie.SentBitsPerSec, measure.FigureSentBytes: float64(ie.SentBytes), measure.FigureSentSeconds: ie.SentDuration.Seconds(),
				measure.FigureAbovePercent: ie.AbovePercent(),
			} {
				rf.Figures[k] = v
			}
		} else {
			rf.Figures[measure.FigureWindowSeconds] = ie.Window.Seconds()
			if ie.Limit > 0 {
				rf.Figures[measure.FigureLimitSeconds] = ie.Limit.Seconds()
			}
		}
		if ie.CPUs > 0 {
			rf.Figures[measure.FigureLoad1m], rf.Figures[measure.FigureLoad5m], rf.Figures[measure.FigureLoad15m] = ie.Load[0], ie.Load[1], ie.Load[2]
			rf.Figures[measure.FigureCPUs] = float64(ie.CPUs)
		}
		return rf
	case errors.As(err, &pe):
		rf := measure.Refusal{Kind: measure.RefusalPayloadShort, Detail: err.Error(), Figures: measure.Figures{}}
		if pe.WantBytes > 0 {
			rf.Figures[measure.FigureSentBytes], rf.Figures[measure.FigureRequestedBytes] = float64(pe.SentBytes), float64(pe.WantBytes)
		} else {
			rf.Figures[measure.FigureReceivedBytes], rf.Figures[measure.FigureReceivedSeconds] = float64(pe.ReceivedBytes), pe.Received.Seconds()
			rf.Figures[measure.FigureRequestedSeconds] = pe.Requested.Seconds()
		}
		return rf
	case errors.As(err, &te):
		return measure.Refusal{Kind: measure.RefusalIperfError, Detail: err.Error()}
	}
	return measure.Refusal{Kind: measure.RefusalError, Detail: err.Error()}
}
