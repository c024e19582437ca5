package recipe

// The experiment framework's helpers that several recipes share: variants
// by name, published figures beside rows, a network per experiment.Run.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
)

// rowExtra returns a row's Extra, made if absent.
func rowExtra(r *measure.Row) map[string]any {
	if r.Extra == nil {
		r.Extra = map[string]any{}
	}
	return r.Extra
}

// readyHook is experiment.Spec.Ready.
type readyHook = func(ctx context.Context, l *lab.Lab, variant string, t *tunnel.Tunnel) error

// networkRun is one network of a recipe, measured in its own experiment.Run so
// that networks can differ in sample length and directions.
type networkRun struct {
	net        experiment.Network
	duration   time.Duration
	directions []string // nil: the spec's
}

// runEachNetwork runs spec once per network and merges the reports into one, as
// a single experiment.Run would have made it. Labs are named as
// experiment names them with several networks: LabName-NETWORK. ready, if
// set, gives each network's Spec.Ready.
func runEachNetwork(ctx context.Context, spec experiment.Spec, runs []networkRun, ready func(network string) readyHook) (*measure.Report, error) {
	var rep *measure.Report
	durations := map[string]float64{}
	directions := map[string][]string{}
	for _, nr := range runs {
		s := spec
		s.Networks = []experiment.Network{nr.net}
		if nr.duration > 0 {
			s.Duration = nr.duration
		}
		if nr.directions != nil {
			s.Directions = nr.directions
		}
		if spec.LabName != "" {
			s.LabName = spec.LabName + "-" + nr.net.Name
		}
		if ready != nil {
			s.Ready = ready(nr.net.Name)
		}
		r, err := experiment.Run(ctx, s)
		if r != nil {
			durations[nr.net.Name] = s.Duration.Seconds()
			directions[nr.net.Name] = s.Directions
			if rep == nil {
				rep = r
			} else {
				rep.Rows = append(rep.Rows, r.Rows...)
				rep.Scenario.Networks = append(rep.Scenario.Networks, r.Scenario.Networks...)
				if r.Host.EmulationBackend == labpath.BackendNetem || lab.UserspaceBackend(r.Host.EmulationBackend) {
					rep.Host.EmulationBackend = r.Host.EmulationBackend
				}
				rep.Finished = r.Finished
			}
		}
		if err != nil {
			return rep, err
		}
	}
	if rep != nil {
		rep.Scenario.Extra["network_duration_seconds"] = durations
		if spec.Directions != nil || len(runs) > 0 {
			rep.Scenario.Extra["network_directions"] = directions
		}
		rep.FillRatios()
	}
	return rep, nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func builtinVariants(names ...string) ([]openvpn.Variant, error) {
	var out []openvpn.Variant
	for _, n := range names {
		v, err := openvpn.ParseVariant(n)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// setPublished puts the publication's figure beside each row it has one for.
func setPublished(rep *measure.Report, pub map[string][2]float64) {
	for i := range rep.Rows {
		if p, ok := pub[rep.Rows[i].Variant]; ok {
			k := 0
			if rep.Rows[i].Direction == measure.DirectionDown {
				k = 1
			}
			rep.Rows[i].PublishedBps = p[k] * 1e6
		}
	}
}

// tooFew says why rows cannot carry a verdict (missing, or fewer than
// MinSamples samples), or "" when they can.
func tooFew(rows ...*measure.Row) string {
	for _, r := range rows {
		if r == nil {
			return "a row has no valid sample"
		}
		if len(r.SamplesBps) < MinSamples {
			return fmt.Sprintf("%s %s has %d samples; a verdict needs %d (--repeat)", r.Variant, r.Direction, len(r.SamplesBps), MinSamples)
		}
	}
	return ""
}
