package main

import (
	"fmt"

	"github.com/ovpnperf/ovpnperf/internal/advise"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tune"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// This file is the one seam between tune and advise/probe (issue 10):
// tuneAdvice asks advise for its variant on the twin's path, pathFromProbe
// reads a probe JSON into a lab path.

// adviseInput describes a lab path to advise as a user would with flags:
// the slower direction's rate, the round trip, the lossier direction's
// loss, the bottleneck MTU, the black hole, and the twin's socket-buffer
// caps (the host's, which the twin's namespaces inherit).
func adviseInput(p lab.Path, bufCap int) advise.Input {
	rate := p.Up.RateBitsPerSec
	if rate == 0 || (p.Down.RateBitsPerSec != 0 && p.Down.RateBitsPerSec < rate) {
		rate = p.Down.RateBitsPerSec
	}
	return advise.Input{
		RateBitsPerSec: float64(rate),
		RTT:            p.Up.Delay + p.Down.Delay,
		Jitter:         max(p.Up.Jitter, p.Down.Jitter),
		LossPercent:    max(p.Up.LossPercent, p.Down.LossPercent),
		PathMTU:        p.EffectiveMTU(),
		Blackhole:      p.ICMPBlackhole,
		Proto:          "udp",
		RmemMax:        bufCap,
		WmemMax:        bufCap,
	}
}

// tuneAdvice returns advise's variant for path p. advise gets the path as
// its flags would describe it (the lab's settings), not a probe of the
// twin: tune checks the advice the user would get for the path they
// described.
func tuneAdvice(p lab.Path, bufCap int) (tune.Advice, error) {
	in := adviseInput(p, bufCap)
	a, err := advise.Advise(in)
	if err != nil {
		return tune.Advice{Note: "advise refused the path: " + err.Error()}, nil
	}
	v, err := openvpn.ParseVariant(a.Variant)
	if err != nil {
		// advise promises a variant lab run accepts; if it does not,
		// that is a finding about advise, not a reason to stop.
		return tune.Advice{Note: fmt.Sprintf("advise's variant %q is not one lab run accepts (%v): not measured", a.Variant, err)}, nil
	}
	c := tune.FromVariant(v, in.Proto)
	return tune.Advice{Candidate: &c, Variant: a.Variant,
		Note: fmt.Sprintf("advise for rate %.0f bit/s, RTT %v, loss %g%%, path MTU %d, black hole %v, rmem_max %d (from the path's settings)", in.RateBitsPerSec, in.RTT, in.LossPercent, in.PathMTU, in.Blackhole, bufCap)}, nil
}

// pathFromProbe builds the twin's path from a probe JSON.
func pathFromProbe(file string) (lab.Path, error) {
	return lab.Path{}, usage.Errorf("--probe %s: this build cannot read probe files yet (issue 10's probe loader is not in it); give the path with --rate/--rtt/--loss/--mtu instead", file)
}
