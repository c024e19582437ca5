package recipe

import (
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// The verdicts follow the figures: a table test over made-up rows.
func TestCipherVerdicts(t *testing.T) {
	mk := func(variant, dir, cipher string, samples ...float64) measure.Row {
		r := measure.Row{Variant: variant, Direction: dir, Cipher: cipher, Valid: true}
		for _, s := range samples {
			r.AddSample(s * 1e6)
		}
		r.Summarize()
		return r
	}
	rep := &measure.Report{}
	for _, d := range []string{measure.DirectionUp, measure.DirectionDown} {
		rep.Rows = append(rep.Rows,
			mk(experiment.Routed, d, "", 940, 941, 939),
			mk("default", d, "AES-256-GCM", 500, 510, 505),
			mk("aes256gcm", d, "AES-256-GCM", 500, 520, 510),
			mk("aes256cbc", d, "AES-256-CBC", 300, 310, 305),
		)
	}
	// none: much faster up (changed), overlapping down (noise-or-confirmed).
	rep.Rows = append(rep.Rows, mk("none", measure.DirectionUp, "none", 700, 710, 720), mk("none", measure.DirectionDown, "none", 505, 515, 530))
	got := map[string]string{}
	for _, v := range cipherVerdicts(rep) {
		dir := "up"
		if strings.HasSuffix(v.Claim, "[down]") {
			dir = "down"
		}
		got[v.Claim[:20]+"|"+dir] = v.Outcome
		if v.Reason == "" {
			t.Errorf("verdict without a reason: %+v", v)
		}
	}
	want := map[string]string{
		"AES-256-GCM is faste|up": Confirmed, "AES-256-GCM is faste|down": Confirmed,
		"cipher none is barel|up": Changed, "cipher none is barel|down": Confirmed,
		"OpenVPN's defaults a|up": Changed, "with AES-256-GCM the|up": Changed,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%q: outcome %q, want %q (all: %v)", k, got[k], w, got)
		}
	}
}

func TestCiphersRecipe(t *testing.T) {
	rep := runForTest(t, runCiphers, Options{Repeat: 1, Duration: time.Second}, "iperf3")
	variants := map[string]int{}
	for _, r := range rep.Rows {
		variants[r.Variant]++
		if r.Path == measure.PathTunnel && (r.Cipher == "" || len(r.SamplesBps) == 0) {
			t.Errorf("%s %s: cipher %q samples %v (%s)", r.Variant, r.Direction, r.Cipher, r.SamplesBps, r.Error)
		}
	}
	for _, v := range []string{"routed", "default", "aes256cbc", "aes128gcm", "aes256gcm", "chacha20", "none"} {
		if variants[v] != 2 {
			t.Errorf("variant %s: %d rows, want 2", v, variants[v])
		}
	}
	if len(rep.Verdicts) != 8 {
		t.Errorf("%d verdicts, want 8", len(rep.Verdicts))
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
		if !strings.Contains("confirmed changed refuted noise", v.Outcome) {
			t.Errorf("unknown outcome %q", v.Outcome)
		}
	}
}
