package recipe

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func init() {
	register(Recipe{
		Name: "compression",
		Summary: "INSECURE (VORACLE): random against zeros payloads with no compression, comp-lzo adaptive, comp-lzo yes, " +
			"compress lz4-v2 (allow-compression yes), and comp-lzo without allow-compression",
		Source: "folklore: \"turn on comp-lzo\" to speed up a slow link. OpenVPN 2.6 deprecates compression (VORACLE) and " +
			"compresses nothing it sends unless allow-compression yes is set on that side",
		Run:   runCompression,
		Judge: compressionJudge,
	})
}

// compressionWarning goes into the report: every compressing variant here
// is unsafe to use.
const compressionWarning = "INSECURE: compression inside an encrypted tunnel lets an attacker who can inject traffic " +
	"learn secrets from packet sizes (VORACLE, 2018, of the CRIME/BREACH family); OpenVPN 2.6 sends " +
	"compressed packets only with allow-compression yes, 2.7 never. Measured here to judge the folklore, not to recommend it"

// Variants of the compression recipe. allow-compression yes goes to both
// sides: OpenVPN 2.6.14 without it still accepts compressed packets but
// compresses nothing it sends ("Sent packets are not compressed unless
// "allow-compression yes" is also set").
var compressionVariants = []string{
	"off=",
	"lzo-noallow=comp-lzo yes",
	"lzo-adaptive=comp-lzo adaptive;allow-compression yes",
	"lzo-yes=comp-lzo yes;allow-compression yes",
	"lz4-v2=compress lz4-v2;allow-compression yes",
}

// compressingVariants are the ones that compress what they send.
var compressingVariants = []string{"lzo-adaptive", "lzo-yes", "lz4-v2"}

// compressionPath is the folklore's slow link: 10 Mbit/s each way, no
// delay (no emulator to fall behind). Incompressible data is then limited
// by the line in every variant, so compression can only cost CPU;
// compressible data can outrun the line if compression works.
var compressionPath = labpath.Path{Up: labpath.Link{RateBitsPerSec: 10e6}, Down: labpath.Link{RateBitsPerSec: 10e6}}

// zerosFileBitsPerSec sizes the zeros payload file for samples of d on a
// line of lineBps: compressed zeros run far beyond the line (×10 seen at
// 10 Mbit/s), so 40 × the line; but no bigger than
// experiment.MaxPayloadBytes, beyond which every sample would send a fixed
// amount, minutes long on the line without compression.
func zerosFileBitsPerSec(lineBps uint64, d time.Duration) uint64 {
	rate := uint64(4e9)
	if lineBps > 0 {
		rate = 40 * lineBps
	}
	// iperf.PayloadSize adds 25 %; keep 1 % more room.
	most := uint64(float64(experiment.MaxPayloadBytes) * 8 / 1.25 / d.Seconds() * 0.99)
	return min(rate, most)
}

// compressionGainMin is the gain a claim "compression speeds it up" needs
// to be seen (5 %), and compressionCPUMin the extra CPU per GB that counts
// as a cost (10 %: CPU time per byte is steadier than throughput on a
// shared machine, but one aggregate per row has no spread to show).
const (
	compressionGainMin = 1.05
	compressionCPUMin  = 1.10
)

func runCompression(ctx context.Context, o Options) (*measure.Report, error) {
	vs, err := builtinVariants(compressionVariants...)
	if err != nil {
		return nil, err
	}
	path := o.path(compressionPath)
	d := o.duration(2 * time.Second)
	line := max(path.Up.RateBitsPerSec, path.Down.RateBitsPerSec)
	if path.Up.RateBitsPerSec == 0 || path.Down.RateBitsPerSec == 0 {
		line = 0
	}
	desc := fmt.Sprintf("%s link, %%s payload", measure.FormatRate(float64(path.Up.RateBitsPerSec)))
	if path.Up.RateBitsPerSec == 0 {
		desc = "unlimited link, %s payload"
	}
	var mu sync.Mutex
	logs := map[string][]string{}
	rep, err := experiment.Run(ctx, experiment.Spec{
		Command: "recipe compression",
		Networks: []experiment.Network{
			{Name: iperf.PayloadRandom, Description: fmt.Sprintf(desc, "incompressible (random)"), Path: path, Payload: iperf.PayloadRandom},
			{Name: iperf.PayloadZeros, Description: fmt.Sprintf(desc, "compressible (zeros)"), Path: path, Payload: iperf.PayloadZeros, PayloadBitsPerSec: zerosFileBitsPerSec(line, d)},
		},
		Variants: vs, Proto: openvpn.UDP,
		Repeat: o.repeat(), Duration: d, Retries: 1,
		Progress: o.Progress, PKIDir: o.PKIDir, LabName: o.LabName, Lab: o.Lab,
		Extra: map[string]any{"warning": compressionWarning},
		// Keep what each side said about compression when it came up.
		Ready: func(_ context.Context, _ *lab.Lab, variant string, t *tunnel.Tunnel) error {
			mu.Lock()
			defer mu.Unlock()
			for side, lg := range map[string]*openvpn.Log{"server": t.ServerLog, "client": t.ClientLog} {
				if lg != nil {
					logs[variant+"/"+side] = lg.Compression
				}
			}
			return nil
		},
	})
	if err != nil {
		return rep, err
	}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if r.Variant == "off" {
			continue
		}
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra["insecure"] = "VORACLE"
		r.Extra["openvpn_compression_log"] = map[string][]string{"server": logs[r.Variant+"/server"], "client": logs[r.Variant+"/client"]}
	}
	return rep, judgeSaved(rep, compressionJudge)
}

// compressionMinSamples is the samples each row needs for a verdict.
const compressionMinSamples = MinSamples

// compressionGain judges "a is faster than b by compressionGainMin":
// confirmed when a's slowest sample beats b's fastest by that much;
// refuted when neither a's median nor a's fastest sample gets that far
// above b's (load on a shared machine slows samples down, it does not
// speed them up, so the fastest samples show what each can do); noise
// otherwise.
func compressionGain(a, b *measure.Row) (verdict.Outcome, float64) {
	if a == nil || b == nil || b.MedianBps == 0 {
		return Noise, 0
	}
	ratio := a.MedianBps / b.MedianBps
	switch {
	case len(a.SamplesBps) < compressionMinSamples || len(b.SamplesBps) < compressionMinSamples:
		return Noise, ratio
	case a.MinBps >= compressionGainMin*b.MaxBps:
		return Confirmed, ratio
	case a.MaxBps < compressionGainMin*b.MaxBps && ratio < compressionGainMin:
		return Refuted, ratio
	}
	return Noise, ratio
}

// compressionCPU is the CPU-seconds per GB of both OpenVPN processes.
func compressionCPU(r *measure.Row) float64 {
	if r == nil {
		return 0
	}
	return r.CPUSecondsPerGB["server"] + r.CPUSecondsPerGB["client"]
}

// compressionBoth combines the outcomes of up and down: one outcome when
// they agree, noise when they do not.
func compressionBoth(up, down verdict.Outcome) verdict.Outcome {
	if up == down {
		return up
	}
	return Noise
}

// compressionJudge judges a saved report: each compressing row keeps its
// tunnel's compression log lines in Extra["openvpn_compression_log"].
func compressionJudge(rep *measure.Report) []measure.Verdict {
	logs := map[string][]string{}
	for _, r := range rep.Rows {
		m, ok := extraAs[map[string][]string](r.Extra["openvpn_compression_log"])
		if !ok {
			continue
		}
		for side, lines := range m {
			if lines != nil {
				logs[r.Variant+"/"+side] = lines
			}
		}
	}
	return compressionVerdicts(rep, logs)
}

func compressionVerdicts(rep *measure.Report, logs map[string][]string) []measure.Verdict {
	var out []measure.Verdict
	dirs := []string{measure.DirectionUp, measure.DirectionDown}
	gain := map[string]verdict.Outcome{} // payload/variant → combined outcome
	for _, payload := range []string{iperf.PayloadRandom, iperf.PayloadZeros} {
		for _, v := range compressingVariants {
			claim := fmt.Sprintf("turning on compression (%s) speeds up the tunnel on a slow link [%s payload]", v, payload)
			var outcomes []verdict.Outcome
			var reasons []string
			for _, d := range dirs {
				a, b := row(rep, payload, v, d), row(rep, payload, "off", d)
				o, ratio := compressionGain(a, b)
				outcomes = append(outcomes, o)
				reasons = append(reasons, fmt.Sprintf("%s: %s vs off %s, %s (%s)", d, mbps(a), mbps(b), ratioText(ratio, b), o))
			}
			o := compressionBoth(outcomes[0], outcomes[1])
			gain[payload+"/"+v] = o
			out = append(out, newVerdict(claim, o, "%s", strings.Join(reasons, "; ")))
		}
	}

	// CPU on incompressible data: one aggregate per row, so both
	// directions must agree: a cost when both are 10 % up, none when
	// neither is up at all.
	for _, v := range compressingVariants {
		claim := fmt.Sprintf("on incompressible data compression (%s) costs CPU [random payload]", v)
		var ratios []float64
		var reasons []string
		for _, d := range dirs {
			a, b := row(rep, iperf.PayloadRandom, v, d), row(rep, iperf.PayloadRandom, "off", d)
			ca, cb := compressionCPU(a), compressionCPU(b)
			if ca > 0 && cb > 0 && len(a.SamplesBps) >= compressionMinSamples && len(b.SamplesBps) >= compressionMinSamples {
				ratios = append(ratios, ca/cb)
				reasons = append(reasons, fmt.Sprintf("%s: %.2f vs off %.2f CPU-s/GB (server+client OpenVPN), ×%.2f", d, ca, cb, ca/cb))
			}
		}
		if len(ratios) < len(dirs) {
			out = append(out, newVerdict(claim, Noise, "CPU figures over %d samples per row are needed in both directions, found: %s", compressionMinSamples, strings.Join(reasons, "; ")))
			continue
		}
		mean, least, most := 0.0, ratios[0], 0.0
		for _, r := range ratios {
			mean += r / float64(len(ratios))
			most = max(most, r)
			least = min(least, r)
		}
		o := Noise
		switch {
		case least >= compressionCPUMin:
			o = Confirmed
		case most <= 1:
			// No direction used more CPU per byte with compression.
			o = Refuted
		}
		out = append(out, newVerdict(claim, o, "%s; mean ×%.2f (a cost counts from ×%.2f in both directions; one aggregate per row, so no spread)", strings.Join(reasons, "; "), mean, compressionCPUMin))
	}

	// 2.6 without allow-compression: comp-lzo yes on both sides, yet
	// nothing sent is compressed, so zeros gain nothing.
	{
		claim := "OpenVPN 2.6 compresses nothing it sends unless allow-compression yes is set (comp-lzo yes alone) [zeros payload]"
		var outcomes []verdict.Outcome
		var reasons []string
		for _, d := range dirs {
			a, b := row(rep, iperf.PayloadZeros, "lzo-noallow", d), row(rep, iperf.PayloadZeros, "off", d)
			o, ratio := compressionGain(a, b)
			// The claim is the opposite of a gain.
			switch o {
			case Confirmed:
				o = Refuted
			case Refuted:
				o = Confirmed
			}
			outcomes = append(outcomes, o)
			reasons = append(reasons, fmt.Sprintf("%s: comp-lzo yes without allow-compression %s vs off %s, %s", d, mbps(a), mbps(b), ratioText(ratio, b)))
		}
		if line := compressionLogLine(logs["lzo-noallow/server"], "not compressed"); line != "" {
			reasons = append(reasons, fmt.Sprintf("OpenVPN said: %q", openvpn.StripTimestamp(line)))
		}
		out = append(out, newVerdict(claim, compressionBoth(outcomes[0], outcomes[1]), "%s", strings.Join(reasons, "; ")))
	}

	// The warning: every side that compresses must have said so.
	{
		claim := "compression is insecure (VORACLE) and OpenVPN 2.6 warns when allow-compression yes enables it"
		var missing []string
		var said string
		for _, v := range compressingVariants {
			for _, side := range []string{"server", "client"} {
				line := compressionLogLine(logs[v+"/"+side], "allows attacks that break encryption")
				if line == "" {
					missing = append(missing, v+"/"+side)
				} else if said == "" {
					said = openvpn.StripTimestamp(line)
				}
			}
		}
		sort.Strings(missing)
		switch {
		case len(logs) == 0:
			out = append(out, newVerdict(claim, Noise, "no OpenVPN logs were read"))
		case len(missing) == 0:
			out = append(out, newVerdict(claim, Confirmed, "every compressing server and client logged: %q", said))
		default:
			out = append(out, newVerdict(claim, Refuted, "no warning from %s (the attack works all the same)", strings.Join(missing, ", ")))
		}
	}

	// The folklore, judged on comp-lzo yes.
	{
		claim := "\"turn on comp-lzo\" makes the tunnel faster (folklore)"
		r, z := gain[iperf.PayloadRandom+"/lzo-yes"], gain[iperf.PayloadZeros+"/lzo-yes"]
		cpu := 0.0
		for _, d := range dirs {
			a, b := compressionCPU(row(rep, iperf.PayloadRandom, "lzo-yes", d)), compressionCPU(row(rep, iperf.PayloadRandom, "off", d))
			if a > 0 && b > 0 {
				cpu += (a/b - 1) / float64(len(dirs))
			}
		}
		zu, zo := row(rep, iperf.PayloadZeros, "lzo-yes", measure.DirectionUp), row(rep, iperf.PayloadZeros, "off", measure.DirectionUp)
		zerosGain := 0.0
		if zu != nil && zo != nil && zo.MedianBps > 0 {
			zerosGain = zu.MedianBps / zo.MedianBps
		}
		insecure := "and it is insecure (VORACLE): OpenVPN 2.6 needs allow-compression yes to do it, 2.7 will not"
		switch {
		case r == Refuted && z == Confirmed:
			out = append(out, newVerdict(claim, Changed, "only for compressible traffic: zeros ×%.1f up; incompressible (random) gains nothing and costs %+.0f %% OpenVPN CPU per GB, %s",
				zerosGain, 100*cpu, insecure))
		case r == Confirmed && z == Confirmed:
			out = append(out, newVerdict(claim, Confirmed, "both payloads gained (zeros ×%.1f up), %s", zerosGain, insecure))
		case r == Refuted && z == Refuted:
			out = append(out, newVerdict(claim, Refuted, "neither payload gained, %s", insecure))
		default:
			out = append(out, newVerdict(claim, Noise, "random: %s, zeros: %s (see above), %s", r, z, insecure))
		}
	}
	return out
}

// compressionLogLine returns the first line containing s, or "".
func compressionLogLine(lines []string, s string) string {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
