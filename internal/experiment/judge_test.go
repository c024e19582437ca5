package experiment

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/emulate"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// JudgeEmulator decides whether a sample counts, from the emulator's
// counters before and after it: a refusal's kind and figures, its sentence
// rendered from them (the sentences checked are measure.Refusal.Text's,
// the renderer).
func TestJudgeSample(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	base := Emulator{Lateness: emulate.Lateness{Released: 1000, Late: 5, Stalled: 2, LateDelay: 10 * ms}, Lost: 1}
	after := func(released, late, lost, stalled uint64, lateDelay time.Duration) Emulator {
		return Emulator{Lateness: emulate.Lateness{Released: base.Released + released, Late: base.Late + late,
			Stalled: base.Stalled + stalled, LateDelay: base.LateDelay + lateDelay}, Lost: base.Lost + lost}
	}
	for _, c := range []struct {
		name    string
		after   Emulator
		kind    string // "" = valid
		figures measure.Figures
		text    string // a part of the sentence
	}{
		{"on time", after(10000, 0, 0, 0, 0), "", nil, ""},
		{"a few late, under 1 %", after(10000, 99, 0, 0, 99*5*ms), "", nil, ""},
		// Only what was counted during the sample: the late delay before
		// it (10 ms over 5 packets) does not enter the mean.
		{"more than 1 % late", after(10000, 101, 0, 0, 101*3*ms), measure.RefusalEmulatorLate,
			measure.Figures{measure.FigureReleasedPackets: 10000, measure.FigureLatePackets: 101, measure.FigureLatePercent: 1.01, measure.FigureLateMeanSeconds: 0.003},
			"fell behind during the sample (101 of 10000 packets released late, 3ms on average): figure not valid"},
		{"lost one", after(10000, 0, 1, 0, 0), measure.RefusalEmulatorLost, measure.Figures{measure.FigureLostPackets: 1},
			"the link emulator lost 1 packets it could not handle during the sample: figure not valid"},
		// A stall of the emulator stalls the flow too: few packets pass,
		// so the late share stays small, yet the path did not behave as
		// configured.
		{"one stalled packet, share of late small", after(10000, 3, 0, 1, 3*60*ms), measure.RefusalEmulatorStall,
			measure.Figures{measure.FigureStalledPackets: 1, measure.FigureStallSeconds: 0.05},
			"the link emulator stalled during the sample (1 packets released more than 50ms late): figure not valid"},
		// A lost packet is named before late ones.
		{"lost and late", after(10000, 200, 2, 0, 200*ms), measure.RefusalEmulatorLost, measure.Figures{measure.FigureLostPackets: 2}, "lost 2 packets"},
		{"nothing released", after(0, 0, 0, 0, 0), "", nil, ""},
	} {
		got := JudgeEmulator(base, c.after)
		if c.kind == "" {
			if got != nil {
				t.Errorf("%s: refused %v, want valid", c.name, got)
			}
			continue
		}
		if got == nil {
			t.Errorf("%s: valid, want %s", c.name, c.kind)
			continue
		}
		if got.Kind != c.kind || !sameFigures(got.Figures, c.figures) || got.Emulator() != (c.kind != measure.RefusalEmulatorLost) {
			t.Errorf("%s: refusal %v, want %s %v", c.name, got, c.kind, c.figures)
		}
		if !strings.Contains(got.Text(), c.text) {
			t.Errorf("%s: sentence %q, want it to say %q", c.name, got.Text(), c.text)
		}
		err := error(&RefusalError{Refusal: *got})
		if !errors.Is(err, ErrInvalidSample) || err.Error() != got.Text() {
			t.Errorf("%s: the refusal as an error: %v (is invalid sample: %v)", c.name, err, errors.Is(err, ErrInvalidSample))
		}
		if rf := RefusalOf(fmt.Errorf("wrapped: %w", err)); rf.Kind != c.kind || !sameFigures(rf.Figures, c.figures) {
			t.Errorf("%s: RefusalOf the wrapped error = %v", c.name, rf)
		}
	}
	// With /proc/stat read beside both snapshots, a refusal carries the
	// host's busy and steal shares in between; a valid sample nothing.
	a := cpuacct.SystemTimes{User: time.Second, Idle: 10 * time.Second, Steal: 100 * time.Millisecond}
	b := a
	b.User += 700 * time.Millisecond
	b.Steal += 30 * time.Millisecond
	b.Idle += 270 * time.Millisecond
	withHost := func(e Emulator, h cpuacct.SystemTimes) Emulator { e.host = h; return e }
	late := after(10000, 101, 0, 0, 101*3*ms)
	got := JudgeEmulator(withHost(base, a), withHost(late, b))
	if busy, _ := got.Figure(measure.FigureHostBusyPercent); math.Abs(busy-73) > 1e-6 {
		t.Errorf("host busy %v %%, want 73", busy)
	}
	if steal, _ := got.Figure(measure.FigureHostStealPercent); math.Abs(steal-3) > 1e-6 {
		t.Errorf("host steal %v %%, want 3", steal)
	}
	if want := "figure not valid; the host's CPUs were 73 % busy during it, 3.0 % of their time taken by the hypervisor (steal)"; !strings.HasSuffix(got.Text(), want) {
		t.Errorf("refusal with the host read: %q, want it to end %q", got.Text(), want)
	}
	if got := JudgeEmulator(withHost(base, a), withHost(after(10000, 0, 0, 0, 0), b)); got != nil {
		t.Errorf("valid sample with the host read: %v", got)
	}
	if got := JudgeEmulator(base, withHost(late, b)); got == nil || strings.Contains(got.Text(), "busy") {
		t.Errorf("refusal without the host read before it: %v", got)
	} else if _, ok := got.Figure(measure.FigureHostStealPercent); ok {
		t.Errorf("refusal without the host read before it has a steal share: %v", got)
	}
}

func sameFigures(a, b measure.Figures) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || w < v-1e-9 || w > v+1e-9 {
			return false
		}
	}
	return true
}

// RefusalOf gives iperf3's refusals their kind and figures, and any other
// failure the kind "error" with its message.
func TestRefusalOf(t *testing.T) {
	t.Parallel()
	window := &iperf.InconsistentError{Rule: iperf.RuleWindowShort, Side: "sender", Window: 1700 * time.Millisecond,
		Requested: 2 * time.Second, Limit: 1850 * time.Millisecond, TolerancePercent: 7.5, Load: [3]float64{1.5, 1.25, 1}, CPUs: 2}
	above := &iperf.InconsistentError{Rule: iperf.RuleReceiverAboveSender, Requested: 2 * time.Second, TolerancePercent: 8,
		ReceivedBitsPerSec: 60e6, SentBitsPerSec: 50e6, ReceivedBytes: 15e6, SentBytes: 12.5e6, ReceivedDuration: 2 * time.Second, SentDuration: 2 * time.Second}
	for _, c := range []struct {
		name string
		err  error
		kind string
		side string
		figs measure.Figures
	}{
		{"window short", fmt.Errorf("running %q: %w", "iperf3 -c x", window), measure.RefusalWindowShort, "sender", measure.Figures{
			measure.FigureWindowSeconds: 1.7, measure.FigureRequestedSeconds: 2, measure.FigureLimitSeconds: 1.85, measure.FigurePathSlackSeconds: 0,
			measure.FigureTolerancePercent: 7.5, measure.FigureLoad1m: 1.5, measure.FigureLoad5m: 1.25, measure.FigureLoad15m: 1, measure.FigureCPUs: 2}},
		{"receiver above sender", above, measure.RefusalReceiverAboveSender, "", measure.Figures{
			measure.FigureRequestedSeconds: 2, measure.FigurePathSlackSeconds: 0, measure.FigureTolerancePercent: 8,
			measure.FigureReceivedBps: 60e6, measure.FigureReceivedBytes: 15e6, measure.FigureReceivedSeconds: 2,
			measure.FigureSentBps: 50e6, measure.FigureSentBytes: 12.5e6, measure.FigureSentSeconds: 2, measure.FigureAbovePercent: 20}},
		{"payload", &iperf.PayloadShortError{Command: "iperf3", File: "f", SentBytes: 10, WantBytes: 20}, measure.RefusalPayloadShort, "",
			measure.Figures{measure.FigureSentBytes: 10, measure.FigureRequestedBytes: 20}},
		{"iperf3's error", &iperf.TestError{Msg: "the server has terminated"}, measure.RefusalIperfError, "", nil},
		{"other", errors.New("a process died during the sample"), measure.RefusalError, "", nil},
	} {
		rf := RefusalOf(c.err)
		if rf.Kind != c.kind || rf.Side != c.side || !sameFigures(rf.Figures, c.figs) {
			t.Errorf("%s: %v, want %s %q %v", c.name, rf, c.kind, c.side, c.figs)
		}
		if rf.Detail != c.err.Error() || rf.Text() != c.err.Error() {
			t.Errorf("%s: detail %q, text %q, want the error's message %q", c.name, rf.Detail, rf.Text(), c.err.Error())
		}
		if rf.Emulator() {
			t.Errorf("%s: counted as the emulator's refusal", c.name)
		}
	}
}

// iperf3's rules are named as the run document's refusal kinds.
func TestIperfRulesAreKinds(t *testing.T) {
	t.Parallel()
	for rule, kind := range map[string]string{
		iperf.RuleWindowEndedEarly: measure.RefusalWindowEndedEarly, iperf.RuleWindowShort: measure.RefusalWindowShort,
		iperf.RuleWindowLong: measure.RefusalWindowLong, iperf.RuleReceiverAboveSender: measure.RefusalReceiverAboveSender,
	} {
		if got := RefusalOf(&iperf.InconsistentError{Rule: rule, Requested: time.Second}).Kind; got != kind {
			t.Errorf("rule %s: kind %q, want %q", rule, got, kind)
		}
	}
}
