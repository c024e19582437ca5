package recipe

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// testdata/mtu-snmp.txt is /proc/net/snmp of a lab's server namespace
// (path MTU 1400) after two 3028-byte pings to the client: three fragments
// out per ping, five in for reassembly per reply.
func TestMTUParseSNMP(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/mtu-snmp.txt")
	if err != nil {
		t.Fatal(err)
	}
	st, err := mtuParseSNMP(b)
	if err != nil {
		t.Fatal(err)
	}
	if st["Ip"]["FragCreates"] != 6 || st["Ip"]["ReasmReqds"] != 10 || st["Ip"]["ReasmOKs"] != 2 {
		t.Errorf("Ip counters %v", st["Ip"])
	}
	if _, ok := st["Udp"]["InDatagrams"]; !ok {
		t.Errorf("no Udp InDatagrams in %v", st)
	}
	// Tcp MaxConn is -1: not a counter, left out rather than misread.
	if v, ok := st["Tcp"]["MaxConn"]; ok {
		t.Errorf("Tcp MaxConn read as %d", v)
	}
	for _, bad := range []string{"", "Ip: A B\nIp: 1\n", "no colon here\n"} {
		if _, err := mtuParseSNMP([]byte(bad)); err == nil {
			t.Errorf("mtuParseSNMP(%q) succeeded", bad)
		}
	}
}

// The verdicts follow the figures: made-up results for each outcome.
func TestMTUVerdicts(t *testing.T) {
	t.Parallel()
	tr, err := pmtu.DataChannel{Cipher: "AES-256-GCM"}.Translate(mtuUDP4, 1492, false, true)
	if err != nil {
		t.Fatal(err)
	}
	clean := mtuProbe{Size: 1440, Passed: true, Outcome: "reply", Tries: 1}
	frag := mtuProbe{Size: 1441, Passed: true, Outcome: "reply", Tries: 2, Fragments: 8}
	lost := mtuProbe{Size: 1441, Outcome: "lost", Tries: 3}
	cleanOver := mtuProbe{Size: 1441, Passed: true, Outcome: "reply", Tries: 1}
	tcpOK := mtuTCP{Bps: 100e6}
	tcpFrag := mtuTCP{Bps: 90e6, Fragments: 700}
	tcpStall := mtuTCP{Error: "iperf3: timed out"}
	base := mtuResult{Network: "n", ConfiguredMTU: 1492, CleartextOverhead: 36, Cipher: "AES-256-GCM", Translation: tr, DefaultMSS: 1400}
	for _, c := range []struct {
		name string
		edit func(m *mtuResult)
		want [4]verdict.Outcome
	}{
		{"as computed, PMTUD", func(m *mtuResult) {
			m.Outer, m.Inner = []int{1492, 1492, 1492}, []int{1456, 1456, 1456}
			m.Fit, m.Over, m.Lowered = []mtuProbe{clean, clean, clean}, []mtuProbe{frag, frag, frag}, []mtuProbe{clean, clean, clean}
			m.TCP = []mtuTCP{tcpOK, tcpOK, tcpOK}
		}, [4]verdict.Outcome{Confirmed, Confirmed, Confirmed, Confirmed}},
		{"black hole", func(m *mtuResult) {
			m.Outer, m.Inner = []int{1492, 1492, 1492}, []int{1456, 1456, 1456}
			m.Fit, m.Over, m.Lowered = []mtuProbe{clean, clean, clean}, []mtuProbe{lost, lost, lost}, []mtuProbe{clean, clean, clean}
			m.TCP = []mtuTCP{tcpStall, tcpStall, tcpStall}
		}, [4]verdict.Outcome{Confirmed, Confirmed, Confirmed, Refuted}},
		{"other MTU and overhead", func(m *mtuResult) {
			m.Outer, m.Inner = []int{1500, 1500, 1500}, []int{1460, 1460, 1460}
			m.Fit, m.Over, m.Lowered = []mtuProbe{frag, frag, frag}, []mtuProbe{frag, frag, frag}, []mtuProbe{frag, frag, frag}
			m.TCP = []mtuTCP{tcpFrag, tcpFrag, tcpFrag}
		}, [4]verdict.Outcome{Refuted, Refuted, Refuted, Refuted}},
		{"disagreeing repeats", func(m *mtuResult) {
			m.Outer, m.Inner = []int{1492, 1400, 1492}, []int{1456, 1456, 1456}
			m.Fit, m.Over, m.Lowered = []mtuProbe{clean, clean, clean}, []mtuProbe{frag, cleanOver, frag}, []mtuProbe{clean, clean, clean}
			m.TCP = []mtuTCP{tcpOK, tcpFrag, tcpOK}
		}, [4]verdict.Outcome{Noise, Noise, Noise, Noise}},
		{"failed searches, conservative recommendation", func(m *mtuResult) {
			m.Outer, m.Inner = []int{0, 0, 0}, []int{0, 0, 0}
			m.Fit, m.Over, m.Lowered = []mtuProbe{clean, clean, clean}, []mtuProbe{cleanOver, cleanOver, cleanOver}, []mtuProbe{clean, clean, clean}
		}, [4]verdict.Outcome{Noise, Noise, Changed, Noise}},
		// One successful search of three is one search: before, the
		// failed ones were skipped and [0 0 1492] was "every search found
		// 1492 bytes", confirmed.
		{"one search of three", func(m *mtuResult) {
			m.Outer, m.Inner = []int{0, 0, 1492}, []int{0, 0, 1456}
			m.Fit, m.Over, m.Lowered = []mtuProbe{clean, clean, clean}, []mtuProbe{frag, frag, frag}, []mtuProbe{clean, clean, clean}
			m.TCP = []mtuTCP{tcpOK, tcpOK, tcpOK}
		}, [4]verdict.Outcome{Noise, Noise, Confirmed, Confirmed}},
		// One repeat of everything: nothing rests on it.
		{"one repeat", func(m *mtuResult) {
			m.Outer, m.Inner = []int{1492}, []int{1456}
			m.Fit, m.Over, m.Lowered = []mtuProbe{clean}, []mtuProbe{frag}, []mtuProbe{clean}
			m.TCP = []mtuTCP{tcpOK}
		}, [4]verdict.Outcome{Noise, Noise, Noise, Noise}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := base
			c.edit(&m)
			vs := mtuVerdicts(&m)
			if len(vs) != 4 {
				t.Fatalf("%d verdicts, want 4", len(vs))
			}
			if !strings.Contains(vs[3].Claim, "inner MSS 1400") {
				t.Errorf("mssfix claim %q", vs[3].Claim)
			}
			if c.name == "one search of three" && (vs[0].Basis != measure.VerdictBasisTooFew || vs[0].Figures["samples"] != 1 || vs[0].Figures["samples_needed"] != MinSamples) {
				t.Errorf("verdict does not record how many searches succeeded: %+v", vs[0])
			}
			for i, v := range vs {
				if v.Outcome != c.want[i] || v.Reason == "" || !strings.HasSuffix(v.Claim, "[n]") {
					t.Errorf("verdict %d: %s (%s: %s), want %s", i, v.Outcome, v.Claim, v.Reason, c.want[i])
				}
			}
		})
	}
}

func TestMTURecipe(t *testing.T) {
	testenv.Exclusive(t)
	rep := runForTest(t, runMTU, Options{Repeat: 1, Duration: time.Second}, "iperf3")
	if len(rep.Rows) != 8 {
		t.Fatalf("%d rows, want 4 per network", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if !r.Valid || len(r.Extra) == 0 {
			t.Errorf("row %s: valid %v (%s), extra %v", r.Key(), r.Valid, r.Error, r.Extra)
		}
		if r.Variant == mtuOuter && r.Extra["path_mtu"] != 1492 {
			// The lab's MTU is exact; a search that misses it is a bug.
			t.Errorf("%s: outer path MTU %v, want 1492", r.Key(), r.Extra["path_mtu"])
		}
		if r.Variant == mtuCleartext && r.Extra["inner_mtu"].(int) <= 0 {
			t.Errorf("%s: no inner MTU", r.Key())
		}
		if r.Variant == mtuDefault && len(r.SamplesBps) != 1 {
			t.Errorf("%s: TCP samples %v", r.Key(), r.SamplesBps)
		}
	}
	if len(rep.Verdicts) != 8 {
		t.Errorf("%d verdicts, want 4 per network", len(rep.Verdicts))
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s", v.Outcome, v.Claim, v.Reason)
		if !v.Outcome.Valid() || v.Reason == "" {
			t.Errorf("verdict %+v", v)
		}
	}
}
