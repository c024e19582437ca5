package watch

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
	"github.com/ovpnperf/ovpnperf/internal/vpnproc"
	"github.com/ovpnperf/ovpnperf/internal/watch/watchdoc"
)

// counters are two reads of a tun device 10 s apart that carried up and
// down bytes between them.
func counters(up, down uint64) (a, b vpnproc.Counters) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	a = vpnproc.Counters{Taken: t0, TunTxBytes: 1e9, TunRxBytes: 2e9}
	b = vpnproc.Counters{Taken: t0.Add(10 * time.Second), TunTxBytes: 1e9 + up, TunRxBytes: 2e9 + down}
	return a, b
}

func TestBusy(t *testing.T) {
	t.Parallel()
	const last = 100e6 // bit/s measured inside the tunnel last time
	for _, c := range []struct {
		name             string
		up, down         uint64 // bytes over 10 s
		lastUp, lastDown float64
		wantLoad         bool
		wantShare        float64
		wantBusy         bool
	}{
		{"idle", 0, 0, last, last, true, 0, false},
		{"below the share up", 24_000_000, 0, last, last, true, 0.192, false},
		{"at the share up", 25_000_000, 0, last, last, true, 0.2, true},
		{"busy down only", 0, 50_000_000, last, last, true, 0.4, true},
		{"down judged by its own last rate", 0, 25_000_000, last, 2 * last, true, 0.1, false},
		{"no round measured yet", 1e9, 1e9, 0, 0, false, 0, false},
		{"only down measured", 1e9, 0, 0, last, true, 0, false},
	} {
		a, b := counters(c.up, c.down)
		load, busy := Busy(a, b, c.lastUp, c.lastDown, DefaultSkipShare)
		if busy != c.wantBusy || (load != nil) != c.wantLoad {
			t.Errorf("%s: busy %v, load %+v; want busy %v, a load %v", c.name, busy, load, c.wantBusy, c.wantLoad)
			continue
		}
		if load != nil && (load.ShareRatio < c.wantShare-1e-9 || load.ShareRatio > c.wantShare+1e-9) {
			t.Errorf("%s: share %.4f, want %.4f", c.name, load.ShareRatio, c.wantShare)
		}
		if load != nil && (load.IntervalSeconds != 10 || load.UpBps != float64(c.up)*8/10 || load.SkipShareRatio != DefaultSkipShare) {
			t.Errorf("%s: figures %+v", c.name, load)
		}
	}
	// A device made again between the reads (counters back to 0): no
	// figure, never a negative or huge rate.
	a, b := counters(0, 0)
	b.TunTxBytes = 10
	if load, busy := Busy(a, b, last, last, DefaultSkipShare); load != nil || busy {
		t.Errorf("counters that went back: %+v %v", load, busy)
	}
}

func round(seq int, pad int) watchdoc.Round {
	return watchdoc.Round{Schema: watchdoc.Schema, Seq: seq, Started: time.Unix(int64(seq), 0).UTC(),
		Result: watchdoc.ResultFailed, Reason: watchdoc.FailNoServer, Detail: strings.Repeat("x", pad)}
}

func TestHistoryRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "watch.jsonl")
	h, err := OpenHistory(path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// Each line is about 300 bytes: three fit in 1000, the fourth
	// rotates.
	for i := 1; i <= 7; i++ {
		if err := h.Append(round(i, 200)); err != nil {
			t.Fatal(err)
		}
	}
	seqs := func(p string) []int {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 1000 {
			t.Errorf("%s: %d bytes, bound 1000", p, len(b))
		}
		rs, cut, err := watchdoc.Read(b)
		if err != nil || cut {
			t.Fatalf("%s: %v (cut %v)", p, err, cut)
		}
		var out []int
		for _, r := range rs {
			out = append(out, r.Seq)
		}
		return out
	}
	cur, old := seqs(path), seqs(path+RotatedSuffix)
	if len(cur) == 0 || len(old) == 0 || old[len(old)-1]+1 != cur[0] || cur[len(cur)-1] != 7 {
		t.Errorf("rotated %v then current %v: want consecutive rounds ending with 7", old, cur)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 2 {
		t.Errorf("files: %v, want the history and one rotated file", m)
	}
	// Opened again, it appends.
	h.Close()
	h2, err := OpenHistory(path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if err := h2.Append(round(8, 10)); err != nil {
		t.Fatal(err)
	}
	if got := seqs(path); got[len(got)-1] != 8 || len(got) != len(cur)+1 {
		t.Errorf("after reopening: %v", got)
	}
}

func TestHistoryRefusesLinksAndDevices(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, nil, 0o644)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenHistory(link, 1<<20); err == nil {
		t.Error("a symbolic link was opened")
	}
	if _, err := OpenHistory("/dev/null", 1<<20); err == nil {
		t.Error("a device was opened")
	}
}

func TestReadCutLastLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "h")
	h, err := OpenHistory(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	h.Append(round(1, 0))
	h.Append(round(2, 0))
	h.Close()
	b, _ := os.ReadFile(path)
	rs, cut, err := watchdoc.Read(b[:len(b)-20])
	if err != nil || !cut || len(rs) != 1 {
		t.Errorf("cut last line: %d rounds, cut %v, %v", len(rs), cut, err)
	}
	if _, _, err := watchdoc.Read(append([]byte("{not json\n"), b...)); err == nil {
		t.Error("a damaged first line was read")
	}
}

func TestFindingSeries(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.setFindings([]finding.Finding{
		{Kind: finding.PathBound, Subject: finding.Subject{Network: measure.NetworkReal, Direction: measure.DirectionUp}, Outcome: verdict.Confirmed},
		{Kind: finding.NotRead, Subject: finding.Subject{Network: measure.NetworkReal}, Outcome: verdict.NotTested},
		{Kind: "made-up", Subject: finding.Subject{Network: measure.NetworkReal}, Outcome: verdict.Confirmed},
	})
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ones, series := map[string]bool{}, 0
	for _, mf := range mfs {
		if mf.GetName() != "ovpnperf_watch_finding" {
			continue
		}
		for _, s := range mf.GetMetric() {
			series++
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if s.GetGauge().GetValue() == 1 {
				ones[l["kind"]+"/"+l["direction"]+"/"+l["outcome"]] = true
			}
		}
	}
	if want := len(finding.Kinds()) * 3 * len(verdict.Outcomes()); series != want {
		t.Errorf("%d finding series, want every kind × direction × outcome: %d", series, want)
	}
	if len(ones) != 2 || !ones["path-bound/up/confirmed"] || !ones["not-read/all/not tested here"] {
		t.Errorf("series at 1: %v", ones)
	}
}

// Every metric the watcher can export, with counters read and a round's
// findings set, passes `promtool check metrics` (Prometheus's naming and
// type conventions). The lab test pipes a real scrape through it too.
func TestMetricsPromtool(t *testing.T) {
	t.Parallel()
	testenv.RequirePrograms(t, "promtool")
	m := newMetrics()
	for _, proto := range []string{"udp", "tcp"} {
		c := &vpnproc.Counters{Taken: time.Now(), CPU: 3 * time.Second, SocketDrops: 7, TCPRetrans: 2, RcvbufBytes: 212992, SndbufBytes: 212992,
			TunTxBytes: 1e6, TunRxBytes: 2e6, TunTxDropped: 1}
		m.setCounters(c, proto, 0.4, true)
		m.setFindings([]finding.Finding{{Kind: finding.CPUBound, Subject: finding.Subject{Network: measure.NetworkReal, Direction: measure.DirectionDown}, Outcome: verdict.Confirmed}})
		m.rate.WithLabelValues(watchdoc.PathInside, measure.DirectionUp).Set(1e6)
		m.rtt.WithLabelValues(watchdoc.PathInside).Observe(0.012)
		rec := httptest.NewRecorder()
		(&Watcher{m: m}).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		text := rec.Body.String()
		for _, name := range []string{"ovpnperf_watch_openvpn_cpu_seconds_total", "ovpnperf_watch_tun_bytes_total", "ovpnperf_watch_echo_rtt_seconds_bucket", "ovpnperf_watch_finding"} {
			if !strings.Contains(text, name) {
				t.Errorf("%s: no %s in the scrape", proto, name)
			}
		}
		cmd := exec.Command("promtool", "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: promtool check metrics: %v\n%s", proto, err, out)
		}
	}
}
