package experiment

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/emulate"
)

// JudgeEmulator decides whether a sample counts, from the emulator's
// counters before and after it.
func TestJudgeSample(t *testing.T) {
	const ms = time.Millisecond
	base := Emulator{Lateness: emulate.Lateness{Released: 1000, Late: 5, Stalled: 2, LateDelay: 10 * ms}, Lost: 1}
	after := func(released, late, lost, stalled uint64, lateDelay time.Duration) Emulator {
		return Emulator{Lateness: emulate.Lateness{Released: base.Released + released, Late: base.Late + late,
			Stalled: base.Stalled + stalled, LateDelay: base.LateDelay + lateDelay}, Lost: base.Lost + lost}
	}
	for _, c := range []struct {
		name  string
		after Emulator
		want  string // "" = valid; else a part of the reason
	}{
		{"on time", after(10000, 0, 0, 0, 0), ""},
		{"a few late, under 1 %", after(10000, 99, 0, 0, 99*5*ms), ""},
		// Only what was counted during the sample: the late delay before
		// it (10 ms over 5 packets) does not enter the mean.
		{"more than 1 % late", after(10000, 101, 0, 0, 101*3*ms), "101 of 10000 packets released late, 3ms on average"},
		{"lost one", after(10000, 0, 1, 0, 0), "lost 1 packets"},
		// A stall of the emulator stalls the flow too: few packets pass,
		// so the late share stays small, yet the path did not behave as
		// configured.
		{"one stalled packet, share of late small", after(10000, 3, 0, 1, 3*60*ms), "1 packets released more than 50ms late"},
		{"nothing released", after(0, 0, 0, 0, 0), ""},
	} {
		got := JudgeEmulator(base, c.after)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: judge = %q, want %q", c.name, got, c.want)
		}
		if got != "" && !errors.Is(invalidSample(got), ErrInvalidSample) {
			t.Errorf("%s: reason does not read as an invalid sample", c.name)
		}
	}
	// With /proc/stat read beside both snapshots, a refusal ends with the
	// host's shares in between; a valid sample says nothing of them.
	a := cpuacct.SystemTimes{User: time.Second, Idle: 10 * time.Second}
	b := a
	b.User += 700 * time.Millisecond
	b.Steal += 30 * time.Millisecond
	b.Idle += 270 * time.Millisecond
	withHost := func(e Emulator, h cpuacct.SystemTimes) Emulator { e.host = h; return e }
	late := after(10000, 101, 0, 0, 101*3*ms)
	if got := JudgeEmulator(withHost(base, a), withHost(late, b)); !strings.HasSuffix(got, "figure not valid; "+hostDuring(a, b)) {
		t.Errorf("refusal with the host read: %q", got)
	}
	if got := JudgeEmulator(withHost(base, a), withHost(after(10000, 0, 0, 0, 0), b)); got != "" {
		t.Errorf("valid sample with the host read: %q", got)
	}
	if got := JudgeEmulator(base, withHost(late, b)); strings.Contains(got, "busy") {
		t.Errorf("refusal without the host read before it: %q", got)
	}
}

// A refused sample's reason gives the host's busy and steal shares.
func TestHostDuring(t *testing.T) {
	a := cpuacct.SystemTimes{User: time.Second, Idle: 10 * time.Second, Steal: 100 * time.Millisecond}
	b := a
	b.User += 700 * time.Millisecond
	b.Steal += 30 * time.Millisecond
	b.Idle += 270 * time.Millisecond
	if got, want := hostDuring(a, b), "the host's CPUs were 73 % busy during it, 3.0 % of their time taken by the hypervisor (steal)"; got != want {
		t.Errorf("hostDuring = %q, want %q", got, want)
	}
}
