package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/probe"
	"github.com/ovpnperf/ovpnperf/internal/tune"
)

func probeDoc(pathFields string) string {
	return `{"schema":"ovpnperf/probe/v1","host":"198.51.100.2","time":"2026-11-23T10:00:00Z","path":{` + pathFields + `}}`
}

// pathDFromProbe is the twin of a probe of path (d) (5 Mbit/s, 300 ms,
// 3.96 % round-trip loss, MTU 1400 behind a black hole).
func pathDFromProbe(t *testing.T) labpath.Path {
	t.Helper()
	r, err := probe.Decode(strings.NewReader(probeDoc(`
 "pmtu_ipv4":{"value":{"bytes":1400,"blackhole":true},"source":"measured"},
 "rtt_ms":{"value":300,"source":"measured"},"jitter_ms":{"value":4,"source":"measured"},
 "loss_percent":{"value":3.96,"source":"measured"},
 "path_rate_bps":{"value":5e6,"source":"measured"}`)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := tune.PathFromProbe(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A probe of path (d) (5 Mbit/s, 300 ms, loss) becomes a symmetric twin:
// half the RTT and jitter each way, and one-way losses that compound to the
// probe's round-trip loss.
func TestLabPathFromProbe(t *testing.T) {
	t.Parallel()
	p := pathDFromProbe(t)
	if p.Up != p.Down || p.Up.RateBitsPerSec != 5e6 || p.Up.Delay != 150*time.Millisecond || p.Up.Jitter != 2*time.Millisecond {
		t.Errorf("links %+v / %+v", p.Up, p.Down)
	}
	if math.Abs(p.Up.LossPercent-2) > 0.01 {
		t.Errorf("one-way loss %.3f%%, want 2%% (3.96%% of round trips)", p.Up.LossPercent)
	}
	if p.MTU != 1400 || !p.ICMPBlackhole || p.NoIPv6 {
		t.Errorf("mtu %d blackhole %v noipv6 %v", p.MTU, p.ICMPBlackhole, p.NoIPv6)
	}
}

// A probe whose pps echo measured the loss of each direction gives the
// twin those losses, not the round trip split evenly.
func TestLabPathFromProbePerDirectionLoss(t *testing.T) {
	t.Parallel()
	r, err := probe.Decode(strings.NewReader(probeDoc(`
 "rtt_ms":{"value":20,"source":"measured","method":"pps-echo"},
 "loss_percent":{"value":5,"source":"measured","method":"pps-echo"},
 "loss_up_percent":{"value":5,"source":"measured","method":"pps-echo"},
 "loss_down_percent":{"value":0,"source":"measured","method":"pps-echo"},
 "path_rate_bps":{"value":1e8,"source":"measured"}`)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := tune.PathFromProbe(r)
	if err != nil {
		t.Fatal(err)
	}
	if p.Up.LossPercent != 5 || p.Down.LossPercent != 0 {
		t.Errorf("losses up %v down %v, want 5 and 0", p.Up.LossPercent, p.Down.LossPercent)
	}
}

// A probe without a path rate or an RTT cannot be twinned: the error says
// what is missing and what to give instead.
func TestLabPathFromProbeIncomplete(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"no rate": `"rtt_ms":{"value":10,"source":"measured"},"path_rate_bps":{"value":0,"source":"not available","note":"no iperf3 server answered"}`,
		"no rtt":  `"path_rate_bps":{"value":1e8,"source":"measured"}`,
	} {
		r, err := probe.Decode(strings.NewReader(probeDoc(body)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tune.PathFromProbe(r); err == nil || !strings.Contains(err.Error(), "--rate") && !strings.Contains(err.Error(), "path flags") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The best's lab run line of a twin built from a probe carries the twin's
// path as flags, and they parse back into the same path.
func TestPathArgsOfProbeTwin(t *testing.T) {
	t.Parallel()
	p := pathDFromProbe(t)
	args := pathArgsOf(p)
	var f pathFlags
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f.bind(fs)
	if err := fs.Parse(strings.Fields(args)); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	back, err := f.path()
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	if back.Up.RateBitsPerSec != p.Up.RateBitsPerSec || back.Down.Delay != p.Down.Delay || back.Up.Jitter != p.Up.Jitter ||
		math.Abs(back.Up.LossPercent-p.Up.LossPercent) > 1e-9 || back.MTU != 1400 || !back.ICMPBlackhole {
		t.Errorf("%q parsed back as %+v, want %+v", args, back, p)
	}
}
