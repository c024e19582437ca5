package tune

import (
	"fmt"
	"math"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/advise"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/probe"
)

// The one seam between tune and advise/probe: AdviceForPath asks advise
// for its variant on the twin's path, PathFromProbe makes the twin of a
// probed path.

// AdviseInput describes a lab path to advise as a user would with flags:
// the slower direction's rate, the round trip, the lossier direction's
// loss, the bottleneck MTU, the black hole, and the twin's socket-buffer
// caps (the host's, which the twin's namespaces inherit).
func AdviseInput(p labpath.Path, bufCap int) advise.Input {
	rate := p.Up.RateBitsPerSec
	if rate == 0 || (p.Down.RateBitsPerSec != 0 && p.Down.RateBitsPerSec < rate) {
		rate = p.Down.RateBitsPerSec
	}
	return advise.Input{
		RateBitsPerSec: float64(rate),
		RTT:            p.Up.Delay + p.Down.Delay,
		Jitter:         max(p.Up.Jitter, p.Down.Jitter),
		LossPercent:    max(p.Up.LossPercent, p.Down.LossPercent),
		LossGiven:      true, // the lab path's loss is set, 0 included
		PathMTU:        p.EffectiveMTU(),
		Blackhole:      p.ICMPBlackhole,
		Proto:          "udp",
		RmemMax:        bufCap,
		WmemMax:        bufCap,
	}
}

// AdviceForPath returns advise's variant for path p. advise gets the path
// as its flags would describe it (the lab's settings), not a probe of the
// twin: tune checks the advice the user would get for the path they
// described.
func AdviceForPath(p labpath.Path, bufCap int) (Advice, error) {
	return AdviceFor(AdviseInput(p, bufCap), "from the path's settings")
}

// AdviceFor asks advise with in and turns its variant into tune's
// starting candidate; source says where the input came from.
func AdviceFor(in advise.Input, source string) (Advice, error) {
	bufCap := in.RmemMax
	a, err := advise.Advise(in)
	if err != nil {
		return Advice{Note: "advise refused the path: " + err.Error()}, nil
	}
	v, err := openvpn.ParseVariant(a.Variant)
	if err != nil {
		// advise promises a variant lab run accepts; if it does not,
		// that is a finding about advise, not a reason to stop.
		return Advice{Note: fmt.Sprintf("advise's variant %q is not one lab run accepts (%v): not measured", a.Variant, err)}, nil
	}
	c := FromVariant(v, in.Proto)
	return Advice{Candidate: &c, Variant: a.Variant,
		Note: fmt.Sprintf("advise for rate %.0f bit/s, RTT %v, loss %g%%, path MTU %d, black hole %v, rmem_max %d (%s)", in.RateBitsPerSec, in.RTT, in.LossPercent, in.PathMTU, in.Blackhole, bufCap, source)}, nil
}

// ProbeInput is the input advise gets from a probe, as `advise --probe`
// would, with the twin's socket-buffer caps where the probe has none.
func ProbeInput(r *probe.Report, bufCap int) advise.Input {
	in := r.Input("udp", false)
	if in.RmemMax == 0 {
		in.RmemMax = bufCap
	}
	if in.WmemMax == 0 {
		in.WmemMax = bufCap
	}
	return in
}

// PathFromProbe is the twin of a probed path. The probe's loss is of ICMP
// round trips; the twin splits it into equal one-way losses p with
// 1-(1-p)² = loss, and the RTT and jitter evenly across the directions. A
// probe without a path rate (no iperf3 run, or a lossy path whose TCP flow
// is no measure of the line) cannot be twinned: that is the user's to
// give, with the path flags.
func PathFromProbe(r *probe.Report) (labpath.Path, error) {
	pp := r.Path
	if !pp.PathRateBitsPerSec.Known() || pp.PathRateBitsPerSec.Value <= 0 {
		return labpath.Path{}, fmt.Errorf("the probe has no path rate (%s); probe with --iperf3 on a path without loss, or give --rate/--rtt/--loss/--mtu instead", noteOr(pp.PathRateBitsPerSec.Note, "not measured"))
	}
	if !pp.RTTMillis.Known() {
		return labpath.Path{}, fmt.Errorf("the probe has no RTT (%s); give the path flags instead", noteOr(pp.RTTMillis.Note, "not measured"))
	}
	rtt := time.Duration(pp.RTTMillis.Value * float64(time.Millisecond))
	var jitter time.Duration
	if pp.JitterMs.Known() {
		jitter = time.Duration(pp.JitterMs.Value * float64(time.Millisecond) / 2)
	}
	var loss float64
	if pp.LossPercent.Known() && pp.LossPercent.Value > 0 {
		loss = 100 * (1 - math.Sqrt(1-math.Min(pp.LossPercent.Value, 99.99)/100))
	}
	l := labpath.Link{RateBitsPerSec: uint64(pp.PathRateBitsPerSec.Value), Delay: rtt / 2, Jitter: min(jitter, rtt/2), LossPercent: loss}
	p := labpath.Path{Up: l, Down: l}
	if pp.LossUpPercent.Known() && pp.LossDownPercent.Known() {
		// A pps echo measured each direction: the twin loses as the
		// path did, instead of splitting the round trip evenly.
		p.Up.LossPercent = math.Min(pp.LossUpPercent.Value, 100)
		p.Down.LossPercent = math.Min(pp.LossDownPercent.Value, 100)
	}
	if pp.PMTUIPv4.Known() {
		if b := pp.PMTUIPv4.Value.Bytes; b > 0 && b < 1500 {
			p.MTU = b
			p.NoIPv6 = b < 1280
		}
		p.ICMPBlackhole = pp.PMTUIPv4.Value.Blackhole
	}
	return p, nil
}

func noteOr(note, def string) string {
	if note == "" {
		return def
	}
	return note
}
