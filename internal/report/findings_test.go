package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Tune and probe documents carry findings as records, also those written
// before them (judged on reading); the page shows each record's sentence
// with its kind and outcome.
func TestTuneAndProbeFindings(t *testing.T) {
	t.Parallel()
	const probeDoc = `{"schema":"ovpnperf/probe/v1","host":"198.51.100.2","time":"2026-11-23T10:00:00Z","path":{
 "pmtu_ipv4":{"value":{"bytes":1400,"blackhole":true},"source":"measured"},
 "loss_percent":{"value":1.5,"source":"measured","note":"ICMP echo, 197 of 200 answered","method":"icmp-echo"},
 "dco_available":{"value":true,"source":"read"}}}`
	docs := load(t, "tune-blackhole.json")
	docs = append(docs, load(t, "tune-lossy.json")...)
	pd, err := Parse("probe.json", []byte(probeDoc))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, pd...)
	type want struct {
		kind      finding.Kind
		direction string
		outcome   verdict.Outcome
	}
	for i, w := range [][]want{
		// advise's variant beat the defaults up in 3 of 3 judged rounds;
		// down was never judged.
		{{finding.TunedFaster, "up", verdict.Confirmed}},
		// Nothing beat the defaults on the lossy path.
		{{finding.NoFasterSetting, "", verdict.Confirmed}},
		{{finding.Loss, "up", verdict.Confirmed}, {finding.PMTUBlackhole, "up", verdict.Confirmed}},
	} {
		var fs []finding.Finding
		if d := docs[i]; d.Tune != nil {
			fs = d.Tune.Findings
		} else {
			fs = d.Probe.Findings
		}
		var got []want
		for _, f := range fs {
			if err := f.Check(); err != nil {
				t.Errorf("%s: %v", docs[i].File, err)
			}
			if f.Kind != finding.AdviseShort {
				got = append(got, want{f.Kind, f.Subject.Direction, f.Outcome})
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s: findings %v, want %v", docs[i].File, got, w)
		}
	}
	if f := docs[2].Probe.Findings[1]; f.Figures["path_mtu_bytes"] != 1400 || f.Subject.Variant != "ipv4" {
		t.Errorf("black hole: %+v", f)
	}
	var buf bytes.Buffer
	if err := Write(&buf, docs, Options{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, d := range docs {
		var fs []finding.Finding
		if d.Tune != nil {
			fs = d.Tune.Findings
		} else {
			fs = d.Probe.Findings
		}
		for _, f := range fs {
			if li := fmt.Sprintf(`<li data-kind="%s" data-outcome="%s" data-key="%s" data-figures="`, f.Kind, f.Outcome, html.EscapeString(f.Key())); !strings.Contains(page, li) {
				t.Errorf("%s: page lacks %s", d.File, li)
			}
			if li := fmt.Sprintf(`">%s</li>`, html.EscapeString(f.Text)); !strings.Contains(page, li) {
				t.Errorf("%s: page lacks %s", d.File, li)
			}
		}
	}
}

// A tune document of today's schema keeps its findings through writing
// and reading; one whose finding is not well formed is refused.
func TestTuneV3Findings(t *testing.T) {
	t.Parallel()
	d := load(t, "tune-blackhole.json")[0]
	b, err := json.Marshal(d.Tune)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("v3.json", b)
	if err != nil || again[0].Schema != tunedoc.Schema || len(again[0].Tune.Findings) != len(d.Tune.Findings) || again[0].Tune.Findings[0].Kind != finding.TunedFaster {
		t.Fatalf("read back: %v %+v", err, again)
	}
	bad := strings.Replace(string(b), `"kind":"tuned-faster"`, `"kind":"faster"`, 1)
	if _, err := Parse("bad.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "faster") {
		t.Errorf("a finding of no known kind: %v", err)
	}
}
