package main

import (
	"github.com/ovpnperf/ovpnperf/internal/advise"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/probe"
	"github.com/ovpnperf/ovpnperf/internal/tune"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// pathFromProbe reads a probe JSON (ovpnperf probe) into the twin's path
// and the input advise gets from the same probe (tune.PathFromProbe,
// tune.ProbeInput); its errors are the user's, about --probe.
func pathFromProbe(file string, bufCap int) (labpath.Path, advise.Input, error) {
	r, err := probe.Load(file)
	if err != nil {
		return labpath.Path{}, advise.Input{}, usage.Errorf("--probe: %v", err)
	}
	p, err := tune.PathFromProbe(r)
	if err != nil {
		return labpath.Path{}, advise.Input{}, usage.Errorf("--probe %s: %v", file, err)
	}
	return p, tune.ProbeInput(r, bufCap), nil
}
