package recipe

import (
	"context"
	"fmt"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

func init() {
	register(Recipe{
		Name:    "ciphers",
		Summary: "the gigabit recipe: routed, defaults, AES-256-CBC+SHA256, AES-128/256-GCM, CHACHA20-POLY1305, cipher none",
		Source: "OpenVPN cookbook, performance tuning, gigabit LAN, OpenVPN 2.4: plain 900 Mbit/s; default (BF-CBC) 233; " +
			"AES-256-CBC 610/646; AES-256-GCM 859/865; cipher none 874/879",
		Run: runCiphers,
	})
}

// Published figures of the gigabit recipe, up/down in Mbit/s.
var publishedCiphers = map[string][2]float64{
	experiment.Routed: {900, 900},
	"default":         {233, 233},
	"aes256cbc":       {610, 646},
	"aes256gcm":       {859, 865},
	"none":            {874, 879},
}

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

// gigabitLAN is the cookbook's network: a gigabit link, no delay.
var gigabitLAN = lab.Path{Up: lab.Link{RateBitsPerSec: 1e9}, Down: lab.Link{RateBitsPerSec: 1e9}}

func runCiphers(ctx context.Context, o Options) (*measure.Report, error) {
	vs, err := builtinVariants("default", "aes256cbc", "aes128gcm", "aes256gcm", "chacha20", "none")
	if err != nil {
		return nil, err
	}
	rep, err := experiment.Run(ctx, experiment.Spec{
		Command:  "recipe ciphers",
		Networks: []experiment.Network{{Name: "gigabit", Description: "1 Gbit/s LAN, no delay", Path: o.path(gigabitLAN)}},
		Variants: vs, Routed: true, Proto: openvpn.UDP, Retries: 2,
		Repeat: o.repeat(3), Duration: o.duration(2 * time.Second),
		Progress: o.Progress, PKIDir: o.PKIDir, LabName: o.LabName,
	})
	if err != nil {
		return rep, err
	}
	setPublished(rep, publishedCiphers)
	rep.Verdicts = cipherVerdicts(rep)
	return rep, nil
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

func cipherVerdicts(rep *measure.Report) []measure.Verdict {
	var out []measure.Verdict
	for _, dir := range []string{measure.DirectionUp, measure.DirectionDown} {
		gcm, cbc := row(rep, "", "aes256gcm", dir), row(rep, "", "aes256cbc", dir)
		none, def := row(rep, "", "none", dir), row(rep, "", "default", dir)
		routed := row(rep, "", experiment.Routed, dir)
		if few := tooFew(gcm, cbc, none, def, routed); few != "" {
			for _, c := range []string{"AES-256-GCM is faster than AES-256-CBC", "cipher none is barely faster than AES-256-GCM",
				"OpenVPN's defaults are slow", "with AES-256-GCM the tunnel keeps 95% of the line"} {
				out = append(out, verdict(fmt.Sprintf("%s [%s]", c, dir), Noise, "%s", few))
			}
			continue
		}

		claim := fmt.Sprintf("AES-256-GCM is faster than AES-256-CBC (published 859 vs 610 Mbit/s) [%s]", dir)
		outcome, ratio := compareRates(gcm, cbc, 1.05)
		out = append(out, verdict(claim, outcome, "GCM %s vs CBC+SHA256 %s: ×%.2f", mbps(gcm), mbps(cbc), ratio))

		claim = fmt.Sprintf("cipher none is barely faster than AES-256-GCM (published 874 vs 859: +2%%) [%s]", dir)
		o2, r2 := compareRates(none, gcm, 1.0)
		switch {
		case none == nil || gcm == nil:
			out = append(out, verdict(claim, Noise, "missing rows: none %s, GCM %s", mbps(none), mbps(gcm)))
		case o2 == Confirmed && r2 > 1.10:
			out = append(out, verdict(claim, Changed, "none %s is %.0f%% faster than GCM %s: encryption costs more here than on the cookbook's host", mbps(none), 100*(r2-1), mbps(gcm)))
		case o2 == Refuted:
			out = append(out, verdict(claim, Refuted, "none %s is slower than GCM %s beyond the spread", mbps(none), mbps(gcm)))
		case r2 >= 0.9 && r2 <= 1.1:
			out = append(out, verdict(claim, Confirmed, "none %s vs GCM %s: ×%.2f: with AES-NI the cipher is not what limits the tunnel", mbps(none), mbps(gcm), r2))
		default:
			out = append(out, verdict(claim, Noise, "none %s vs GCM %s: ×%.2f, but the spreads overlap", mbps(none), mbps(gcm), r2))
		}

		claim = fmt.Sprintf("OpenVPN's defaults are slow (published 233 of 900 Mbit/s, BF-CBC in 2.4) [%s]", dir)
		switch {
		case def == nil || routed == nil:
			out = append(out, verdict(claim, Noise, "missing rows: default %s, routed %s", mbps(def), mbps(routed)))
		case def.Cipher != "" && def.Cipher != "BF-CBC":
			out = append(out, verdict(claim, Changed, "2.6's default negotiates %s and reaches %s, %.0f%% of routed %s", def.Cipher, mbps(def), 100*def.MedianBps/routed.MedianBps, mbps(routed)))
		default:
			out = append(out, verdict(claim, Confirmed, "default (%s) reaches %s of routed %s", def.Cipher, mbps(def), mbps(routed)))
		}

		claim = fmt.Sprintf("with AES-256-GCM the tunnel keeps 95%% of the line (published 859 of 900) [%s]", dir)
		switch {
		case gcm == nil || routed == nil:
			out = append(out, verdict(claim, Noise, "missing rows: GCM %s, routed %s", mbps(gcm), mbps(routed)))
		case gcm.MedianBps >= 0.85*routed.MedianBps:
			out = append(out, verdict(claim, Confirmed, "GCM %s is %.0f%% of routed %s", mbps(gcm), 100*gcm.MedianBps/routed.MedianBps, mbps(routed)))
		default:
			out = append(out, verdict(claim, Changed, "GCM %s is only %.0f%% of routed %s: one OpenVPN process is CPU-bound on this host (CPU-s/GB: %s)",
				mbps(gcm), 100*gcm.MedianBps/routed.MedianBps, mbps(routed), measure.FormatCPUPerGB(gcm.CPUSecondsPerGB)))
		}
	}
	return out
}
