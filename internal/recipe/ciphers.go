package recipe

import (
	"context"
	"fmt"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func init() {
	register(Recipe{
		Name:    "ciphers",
		Summary: "the gigabit recipe: routed, defaults, AES-256-CBC+SHA256, AES-128/256-GCM, CHACHA20-POLY1305, cipher none",
		Source: "OpenVPN cookbook, performance tuning, gigabit LAN, OpenVPN 2.4: plain 900 Mbit/s; default (BF-CBC) 233; " +
			"AES-256-CBC 610/646; AES-256-GCM 859/865; cipher none 874/879",
		Run:   runCiphers,
		Judge: cipherVerdicts,
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

// gigabitLAN is the cookbook's network: a gigabit link, no delay.
var gigabitLAN = labpath.Path{Up: labpath.Link{RateBitsPerSec: 1e9}, Down: labpath.Link{RateBitsPerSec: 1e9}}

func runCiphers(ctx context.Context, o Options) (*measure.Report, error) {
	vs, err := builtinVariants("default", "aes256cbc", "aes128gcm", "aes256gcm", "chacha20", "none")
	if err != nil {
		return nil, err
	}
	rep, err := experiment.Run(ctx, experiment.Spec{
		Command:  "recipe ciphers",
		Networks: []experiment.Network{{Name: "gigabit", Description: "1 Gbit/s LAN, no delay", Path: o.path(gigabitLAN)}},
		Variants: vs, Routed: true, Proto: openvpn.UDP, Retries: 2,
		Repeat: o.repeat(), Duration: o.duration(2 * time.Second),
		Progress: o.Progress, PKIDir: o.PKIDir, LabName: o.LabName, Lab: o.Lab,
	})
	if err != nil {
		return rep, err
	}
	setPublished(rep, publishedCiphers)
	return rep, judgeSaved(rep, cipherVerdicts)
}

// Windows of the cipher claims, as ratios (see verdict.Within).
var (
	// cipherBarely: "barely faster" allows none from 5 % slower to 10 %
	// faster than GCM (published +2 %).
	cipherBarely = verdict.Window{Lo: 0.95, Hi: 1.10}
	// cipherLineShare: "keeps 95 % of the line" holds when every ratio
	// to routed is at least 0.90 (the published 95 % less five points for
	// headers and timing).
	cipherLineShare = verdict.NotBelow(0.10)
)

// cipherSameTolerance: the defaults are "as fast" as GCM within 10 %;
// cipherSlowShare: "slow" means at most half GCM's rate (published ×0.27).
const (
	cipherSameTolerance = 0.10
	cipherSlowShare     = 0.5
)

// cipherVerdicts judges the saved rows.
func cipherVerdicts(rep *measure.Report) []measure.Verdict {
	var out []measure.Verdict
	for _, dir := range []string{measure.DirectionUp, measure.DirectionDown} {
		gcm, cbc := row(rep, "", "aes256gcm", dir), row(rep, "", "aes256cbc", dir)
		none, def := row(rep, "", "none", dir), row(rep, "", "default", dir)
		routed := row(rep, "", experiment.Routed, dir)
		if few := tooFew(gcm, cbc, none, def, routed); few != "" {
			for _, c := range []string{"AES-256-GCM is faster than AES-256-CBC", "cipher none is barely faster than AES-256-GCM",
				"OpenVPN's defaults are slow", "with AES-256-GCM the tunnel keeps 95% of the line"} {
				out = append(out, newVerdict(fmt.Sprintf("%s [%s]", c, dir), Noise, "%s", few))
			}
			continue
		}

		claim := fmt.Sprintf("AES-256-GCM is faster than AES-256-CBC (published 859 vs 610 Mbit/s) [%s]", dir)
		outcome, ratio := compareRates(gcm, cbc, 1.05)
		out = append(out, newVerdict(claim, outcome, "GCM %s vs CBC+SHA256 %s: %s", mbps(gcm), mbps(cbc), ratioText(ratio, cbc)))

		claim = fmt.Sprintf("cipher none is barely faster than AES-256-GCM (published 874 vs 859: +2%%) [%s]", dir)
		j := verdict.Within(samples(none), samples(gcm), cipherBarely)
		figs := fmt.Sprintf("none %s vs GCM %s: %s", mbps(none), mbps(gcm), j.Ratio)
		switch {
		case j.Outcome == Confirmed:
			out = append(out, newVerdict(claim, Confirmed, "%s, inside %s: with AES-NI the cipher is not what limits the tunnel", figs, cipherBarely))
		case j.Above:
			out = append(out, newVerdict(claim, Changed, "%s, above %s beyond the spread: encryption costs more here than on the cookbook's host", figs, cipherBarely))
		case j.Below:
			out = append(out, newVerdict(claim, Refuted, "%s: none is slower than GCM beyond the spread", figs))
		default:
			out = append(out, withShortfall(newVerdict(claim, j.Outcome, "%s: %s", figs, j.Why), j.Short))
		}

		// Judged on rates, not on the cipher's name: are the defaults
		// far slower than the tuned cipher the cookbook recommends?
		claim = fmt.Sprintf("OpenVPN's defaults are slow (published 233 of 900 Mbit/s, BF-CBC in 2.4) [%s]", dir)
		j = verdict.Within(samples(def), samples(gcm), verdict.Unchanged(cipherSameTolerance))
		figs = fmt.Sprintf("default (negotiates %s) %s vs AES-256-GCM %s: %s; routed %s", def.Cipher, mbps(def), mbps(gcm), j.Ratio, mbps(routed))
		switch {
		case j.Below && j.Ratio.Hi <= cipherSlowShare:
			out = append(out, newVerdict(claim, Confirmed, "%s: the defaults reach at most %.0f %% of AES-256-GCM's rate", figs, 100*j.Ratio.Hi))
		case j.Below:
			out = append(out, newVerdict(claim, Changed, "%s: slower than AES-256-GCM beyond the spread, but by less than the published ×0.27", figs))
		case j.Outcome == Confirmed || j.Above:
			out = append(out, newVerdict(claim, Refuted, "%s: the defaults are as fast as the tuned cipher (within %.0f %% or faster)", figs, 100*cipherSameTolerance))
		default:
			out = append(out, withShortfall(newVerdict(claim, j.Outcome, "%s: %s", figs, j.Why), j.Short))
		}

		claim = fmt.Sprintf("with AES-256-GCM the tunnel keeps 95%% of the line (published 859 of 900) [%s]", dir)
		j = verdict.Within(samples(gcm), samples(routed), cipherLineShare)
		figs = fmt.Sprintf("GCM %s vs routed %s: %s", mbps(gcm), mbps(routed), j.Ratio)
		switch {
		case j.Outcome == Confirmed || j.Above:
			out = append(out, newVerdict(claim, Confirmed, "%s: every ratio the samples allow is %s", figs, cipherLineShare))
		case j.Below:
			out = append(out, newVerdict(claim, Changed, "%s: below %s beyond the spread: one OpenVPN process is CPU-bound on this host (CPU-s/GB: %s)",
				figs, cipherLineShare, measure.FormatCPUPerGB(gcm.CPUSecondsPerGB)))
		default:
			out = append(out, withShortfall(newVerdict(claim, j.Outcome, "%s: %s", figs, j.Why), j.Short))
		}
	}
	return out
}
