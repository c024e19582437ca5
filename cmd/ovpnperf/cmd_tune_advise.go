package main

import (
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/tune"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// This file is the one seam between tune and advise/probe (issue 10):
// tuneAdvice asks advise for its variant on the twin's path, pathFromProbe
// reads a probe JSON into a lab path. Until advise is in this build, tune
// starts from OpenVPN's defaults alone and says why.

// tuneAdvice returns advise's variant for path p (or the probe file).
func tuneAdvice(p lab.Path, probeFile string) (tune.Advice, error) {
	return tune.Advice{Note: "advise's variant was not available: this build has no advise (issue 10); the search started from OpenVPN's defaults only"}, nil
}

// pathFromProbe builds the twin's path from a probe JSON.
func pathFromProbe(file string) (lab.Path, error) {
	return lab.Path{}, usage.Errorf("--probe %s: this build cannot read probe files (issue 10's probe is not in it); give the path with --rate/--rtt/--loss/--mtu instead", file)
}
