package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/ovpnperf/ovpnperf/internal/bounds"
	"github.com/ovpnperf/ovpnperf/internal/clientseries"
	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
)

// The flags of a sample that lab run, recipe, measure and watch share
// (--time, --omit, --port of the far end's iperf3), registered once here
// with experiment's ranges, so that each command's help, its parse and
// experiment.Spec.Validate read the same values.

// sampleTimeFlags registers --time (with shorthand short) and --omit;
// timeDef and omitDef are how the defaults are shown (the rule that sizes
// a sample from the path).
func sampleTimeFlags(fs *pflag.FlagSet, duration, omit *time.Duration, short, timeDef, omitDef string) {
	durationRangeFlag(fs, duration, "time", short, 0, experiment.SampleTimeRange(), "length of each iperf3 sample (whole seconds, %s)")
	durationRangeFlag(fs, omit, "omit", "", -1, experiment.OmitRange(), "warm-up left out of each sample (iperf3 -O; whole seconds, %s)")
	fs.Lookup("time").DefValue = timeDef
	fs.Lookup("omit").DefValue = omitDef
}

// iperf3PortFlag registers -p/--port, the far end's iperf3 server port.
func iperf3PortFlag(fs *pflag.FlagSet, dst *int) {
	intFlag(fs, dst, "port", "p", iperf.DefaultPort, 1, 65535, "the far end's iperf3 server port")
}

// clientsCapFlag registers a cap on the clients a scrape exports (the
// exporter's --max-clients, cluster serve's --per-client-max): at least
// one, at most clientseries.LargestMax; help is a format whose %s is the
// range.
func clientsCapFlag(fs *pflag.FlagSet, dst *int, name string, def int, help string) {
	rangeFlag(fs, dst, name, "", def, bounds.Int{Min: 1, Max: clientseries.LargestMax}, help)
}
