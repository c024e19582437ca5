package measure

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Each kind's sentence is rendered from its figures by Refusal.Text, the
// renderer this test checks; today's wording, so that documents and logs
// read as before.
func TestRefusalText(t *testing.T) {
	t.Parallel()
	host := func(f Figures) Figures { f[FigureHostBusyPercent], f[FigureHostStealPercent] = 30.4, 13.25; return f }
	for _, c := range []struct {
		r    Refusal
		want string
	}{
		{Refusal{Kind: RefusalEmulatorLate, Figures: host(Figures{FigureReleasedPackets: 5966, FigureLatePackets: 66, FigureLatePercent: 1.1, FigureLateMeanSeconds: 0.002754})},
			"the link emulator fell behind during the sample (66 of 5966 packets released late, 2.75ms on average): figure not valid; the host's CPUs were 30 % busy during it, 13.2 % of their time taken by the hypervisor (steal)"},
		{Refusal{Kind: RefusalEmulatorStall, Figures: Figures{FigureStalledPackets: 1, FigureStallSeconds: 0.05}},
			"the link emulator stalled during the sample (1 packets released more than 50ms late): figure not valid"},
		{Refusal{Kind: RefusalEmulatorLost, Figures: Figures{FigureLostPackets: 3}, Tries: 3, Sample: 1, Samples: 1},
			"the link emulator lost 3 packets it could not handle during the sample: figure not valid (all 3 tries of sample 1 of 1 invalid)"},
		{Refusal{Kind: RefusalWindowLong, Side: "receiver", Detail: "inconsistent iperf3 sample: the receiver measured over 3s", Tries: 3, Sample: 2, Samples: 5, NotMeasured: 3},
			"inconsistent iperf3 sample: the receiver measured over 3s (all 3 tries of sample 2 of 5 invalid; the row's 3 later samples were not measured)"},
		{Refusal{Kind: RefusalNoValidSample}, "no valid sample"},
		{Refusal{Kind: RefusalNoEcho, Figures: Figures{FigureSentProbePackets: 1000}}, "no echo came back (sent 1000 probes)"},
		{Refusal{Kind: RefusalError, Detail: "a path MTU search failed"}, "a path MTU search failed"},
	} {
		if got := c.r.Text(); got != c.want {
			t.Errorf("%s: %q\nwant %q", c.r.Kind, got, c.want)
		}
	}
}

// The row carries the refusal in its JSON beside the sentence, and a
// document without it (written before) reads with none.
func TestRefusalJSON(t *testing.T) {
	t.Parallel()
	r := NewRow("wan", "default", PathTunnel, DirectionUp, "udp")
	r.Refuse(Refusal{Kind: RefusalEmulatorStall, Figures: Figures{FigureStalledPackets: 2, FigureStallSeconds: 0.05, FigureHostStealPercent: 0, FigureHostBusyPercent: 12}})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"refusal":{"kind":"emulator-stall","figures":{`, `"host_steal_percent":0`, `"error":"the link emulator stalled`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("row JSON lacks %s:\n%s", want, b)
		}
	}
	var back Row
	if err := json.Unmarshal(b, &back); err != nil || back.Refusal == nil || back.Refusal.Kind != RefusalEmulatorStall || back.Error != r.Error {
		t.Errorf("read back: %v %+v", err, back.Refusal)
	}
	if steal, ok := back.Refusal.Figure(FigureHostStealPercent); !ok || steal != 0 {
		t.Errorf("a steal share of 0 read back as %v, present %v: 0 is a figure, absence is none", steal, ok)
	}
	if err := CheckFigures(b); err != nil {
		t.Errorf("the refusal's figures break the documents' figure rule: %v", err)
	}
	old, err := ReadJSON(strings.NewReader(`{"schema":"ovpnperf/run/v2","rows":[{"network":"wan","valid":false,"error":"no valid sample"}]}`))
	if err != nil || len(old.Rows) != 1 || old.Rows[0].Refusal != nil || old.Rows[0].Error != "no valid sample" {
		t.Errorf("a row written before the refusal: %v %+v", err, old)
	}
}

// Every kind and figure key is distinct and named in the units the
// documents use.
func TestRefusalKindsAndKeys(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, k := range append(append([]string{}, RefusalKinds()...), RefusalFigureKeys()...) {
		if seen[k] || k == "" {
			t.Errorf("%q named twice or empty", k)
		}
		seen[k] = true
	}
	if len(RefusalKinds()) < 10 || len(RefusalFigureKeys()) < 20 {
		t.Errorf("%d kinds, %d figure keys: lists shorter than the constants", len(RefusalKinds()), len(RefusalFigureKeys()))
	}
}
