package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/probe"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// measureBench is a lab standing in for a user's network: a real OpenVPN
// tunnel between client and server and an iperf3 server on the server, as
// an admin would have started it by hand. measure runs in the client
// namespace through `lab exec` and knows nothing of the lab.
type measureBench struct {
	lab *lab.Lab
	tun *tunnel.Tunnel
}

func newMeasureBench(t testing.TB, p labpath.Path, iperfServer bool, configure func(s, c *openvpn.Config)) *measureBench {
	t.Helper()
	testenv.RequirePrograms(t, "openvpn", "iperf3", "tcpdump")
	l := labtest.New(t, p)
	// Not bounded: the tunnel and the server must outlive this function.
	ctx := context.Background()
	pki, err := openvpn.NewPKI(filepath.Join(l.Dir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := openvpn.ParseVariant("default")
	if err != nil {
		t.Fatal(err)
	}
	tun, err := tunnel.Up(ctx, l, tunnel.Options{Variant: v, PKI: pki, Configure: configure})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tun.Down)
	if iperfServer {
		srv, err := iperf.StartServer(ctx, func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, lab.Server, argv...) }, iperf.ServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Stop() })
	}
	return &measureBench{lab: l, tun: tun}
}

// measure runs `ovpnperf measure` in the client namespace.
func (b *measureBench) measure(t *testing.T, args ...string) result {
	t.Helper()
	// A satellite path's samples, sized by its round trip, with their
	// retries take over two minutes.
	return ovpnperfWithin(t, 5*time.Minute, append([]string{"lab", "exec", b.lab.Name(), "client", "--", binary, "measure"}, args...)...)
}

// readRunDoc reads a run document a command wrote to file.
func readRunDoc(t *testing.T, file string) *measure.Report {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := measure.ReadJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return rep
}

// measureDoc runs measure with --json and reads the document.
func (b *measureBench) measureDoc(t *testing.T, args ...string) (*measure.Report, result) {
	t.Helper()
	r := b.measure(t, append(args, "--json")...)
	if r.code != 0 {
		t.Fatalf("measure: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checkSchema(t, "measure --json", r.stdout, false)
	rep, err := measure.ReadJSON(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	// The paced echoes are sent exactly when an outside row raises the
	// loss question.
	raised := false
	for i := range rep.Rows {
		if rep.Rows[i].Variant == measure.VariantOutside {
			_, q := measure.LossQuestion(&rep.Rows[i])
			raised = raised || q
		}
	}
	if rp := rep.Scenario.Real; rp == nil {
		t.Fatalf("measure document without scenario.real:\n%s", r.stdout)
	} else if (rp.LossEchoes != nil) != raised {
		t.Errorf("loss question raised %v, paced echoes %+v", raised, rp.LossEchoes)
	}
	return rep, r
}

// Must show 1: on a 50 Mbit/s, 40 ms path the tunnel carries the outside
// rate times the overhead model's prediction, ±5 %, and the finding is
// path-bound. On this shared 2-core machine at load 15–24 it fails: the
// tunnel got ×0.56–0.78 of the outside rate, and measure named why
// (OpenVPN's socket and its tun device dropped packets while it waited for
// a CPU, at 10–13 % of a core); the assertion is the claim, not loosened.
func TestMeasurePathBound(t *testing.T) {
	testenv.Exclusive(t)
	b := newMeasureBench(t, labpath.Path{
		Up:   labpath.Link{RateBitsPerSec: 50e6, Delay: 20 * time.Millisecond},
		Down: labpath.Link{RateBitsPerSec: 50e6, Delay: 20 * time.Millisecond},
	}, true, nil)
	// 4 s samples: the bytes a full queue holds at the -O boundary are
	// counted by the receiver, not the sender; over 2 s they made a
	// receiver 10 % above its sender once on an idle machine (refused).
	rep, _ := b.measureDoc(t, lab.ServerV4().String(), "--tunnel", b.tun.ServerAddr.String(), "--time", "4s")
	rp := rep.Scenario.Real
	if rp == nil || rep.Scenario.Command != "measure" || rep.Scenario.Networks[0].Name != "real" {
		t.Fatalf("not a measure document: %+v", rep.Scenario)
	}
	if rp.Pid != b.tun.Client.Pid() {
		t.Errorf("found OpenVPN pid %d, the tunnel's client is %d", rp.Pid, b.tun.Client.Pid())
	}
	if rp.PredictedRatio < 0.9 || rp.PredictedRatio > 1 {
		t.Errorf("predicted ratio %.3f", rp.PredictedRatio)
	}
	for _, dir := range []string{"up", "down"} {
		var tr, or *measure.Row
		for i := range rep.Rows {
			r := &rep.Rows[i]
			if r.Direction == dir && r.Variant == "tunnel" {
				tr = r
			}
			if r.Direction == dir && r.Variant == "outside" {
				or = r
			}
		}
		if tr == nil || or == nil || !tr.Valid || !or.Valid {
			t.Fatalf("%s: rows missing or invalid: %+v %+v", dir, tr, or)
		}
		ratio := tr.MedianBps / or.MedianBps
		if ratio < rp.PredictedRatio*0.95 || ratio > rp.PredictedRatio*1.05 {
			t.Errorf("%s: tunnel/outside %.3f, model %.3f ± 5 %%", dir, ratio, rp.PredictedRatio)
		}
		if len(tr.OpenVPN) != len(tr.SamplesBps) || tr.OpenVPN[0].RcvbufBytes == 0 || tr.OpenVPN[0].CPUSeconds <= 0 {
			t.Errorf("%s: OpenVPN counters not read: %+v", dir, tr.OpenVPN)
		}
		for _, c := range tr.OpenVPN {
			if len(c.Unread) > 0 {
				t.Errorf("%s: unread: %v", dir, c.Unread)
			}
		}
	}
	pb := findingsOf(t, rep, finding.PathBound)
	if len(pb) != 2 || pb[0].Subject.Direction == pb[1].Subject.Direction {
		t.Errorf("want path-bound in both directions, findings:\n%s", findingKeys(rep.Findings))
	}
	for _, f := range pb {
		if f.Outcome != verdict.Confirmed || f.Figures[measure.FigPredictedRatio] != rp.PredictedRatio || f.Figures[measure.FigPairs] < 3 {
			t.Errorf("path-bound %s: %+v", f.Subject.Direction, f)
		}
	}
	t.Logf("findings:\n%s", findingKeys(rep.Findings))
	b.checkNothingLeft(t)
}

// checkNothingLeft fails if an iperf3 client or tcpdump still runs in the
// lab's client namespace (where measure ran; other labs on the machine are
// not this test's), or a temporary capture remains.
func (b *measureBench) checkNothingLeft(t *testing.T) {
	t.Helper()
	b.checkNoProcessLeft(t)
	if m, _ := filepath.Glob(filepath.Join(os.TempDir(), "ovpnperf-capture-*")); len(m) > 0 {
		t.Errorf("left behind: %v", m)
	}
}

// checkNoProcessLeft fails if an iperf3 client or tcpdump still runs in
// the bench's client namespace: the part of checkNothingLeft a test that
// runs beside others can check (their captures are theirs).
func (b *measureBench) checkNoProcessLeft(t *testing.T) {
	t.Helper()
	var ns syscall.Stat_t
	if err := syscall.Stat(filepath.Join(netns.Dir, b.lab.Namespace(lab.Client)), &ns); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("pgrep", "-x", "iperf3|tcpdump").Output()
	for _, pid := range strings.Fields(string(out)) {
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+pid+"/ns/net", &st) == nil && st.Ino == ns.Ino && st.Dev == ns.Dev {
			cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			t.Errorf("left running in the client namespace: %s", strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
}

// tunnelRow returns the tunnel row of direction dir.
func tunnelRow(t *testing.T, rep *measure.Report, dir string) *measure.Row {
	t.Helper()
	for i := range rep.Rows {
		if r := &rep.Rows[i]; r.Variant == "tunnel" && r.Direction == dir {
			return r
		}
	}
	t.Fatalf("no tunnel %s row", dir)
	return nil
}

func socketDrops(r *measure.Row) (drops uint64, rcvbuf uint32) {
	for _, c := range r.OpenVPN {
		drops += c.SocketDrops
		rcvbuf = max(rcvbuf, c.RcvbufBytes)
	}
	return drops, rcvbuf
}

// TestMeasureLAN runs the measure tests of an unshaped path in turn in one
// lab with one PKI (separately they built three identical labs): bad input
// first, without an iperf3 server answering through the tunnel, then with
// one; each brings up the tunnel it needs (the first two use the bench's,
// OpenVPN's defaults) and checks that measure left nothing running.
func TestMeasureLAN(t *testing.T) {
	testenv.Exclusive(t)
	b := newMeasureBench(t, labpath.Path{}, false, nil)
	t.Run("BadInput", func(t *testing.T) { measureBadInput(t, b) })
	srv, err := iperf.StartServer(context.Background(), func(ctx context.Context, argv ...string) *exec.Cmd { return b.lab.Command(ctx, lab.Server, argv...) }, iperf.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	t.Run("BeforeAfterCompare", func(t *testing.T) { measureBeforeAfterCompare(t, b) })
	t.Run("SocketDrops", func(t *testing.T) { measureSocketDrops(t, b) })
}

// A satellite path (600 ms, 10 Mbit/s) with measure's default flags: every
// sample valid, sized by the echoes' round trip. Fixed 5 s samples after 1 s
// and no slack had every sample refused: the receiver's window runs a round
// trip (600 ms) past the 5 s asked, beyond the 7.5 % check. And without the
// echoes during each sample and an in-flight allowance, a full queue's bytes
// at the warm-up boundary put a receiver 24 % above its sender.
//
// It is a tolerant test (testenv.Tolerant): scripts/test.sh runs it beside
// the measuring tests, in parallel with the other long-path test
// (TestLabRunLongPaths). A 10 Mbit/s path loads a CPU little, and its
// 300 ms one-way delay tolerates 30 ms of lateness per release, far above
// what another test's load does (docs/testing.md, "How long it takes").
func TestMeasureSatellitePath(t *testing.T) {
	testenv.Tolerant(t)
	t.Parallel()
	b := newMeasureBench(t, labpath.Path{
		Up:   labpath.Link{RateBitsPerSec: 10e6, Delay: 300 * time.Millisecond},
		Down: labpath.Link{RateBitsPerSec: 10e6, Delay: 300 * time.Millisecond},
	}, true, nil)
	rep, _ := b.measureDoc(t, lab.ServerV4().String(), "--tunnel", b.tun.ServerAddr.String(), "--repeat", "1")
	timing, _ := rep.Scenario.Extra["sample_timing"].(string)
	if !strings.Contains(timing, "sized by the path") || !strings.Contains(timing, "window check allows") {
		t.Errorf("samples not sized by the path: %q", timing)
	}
	if len(rep.Rows) != 4 {
		t.Fatalf("%d rows, want outside and tunnel, up and down", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if len(r.Samples) != 1 {
			t.Errorf("%s %s: %d samples with intervals and echoes, want 1", r.Variant, r.Direction, len(r.Samples))
		}
		if !r.Valid || len(r.SamplesBps) != 1 {
			t.Errorf("%s %s: valid %v, %d samples: %s (%s)", r.Variant, r.Direction, r.Valid, len(r.SamplesBps), r.Error, timing)
		}
		for _, s := range r.Samples {
			// Echoes during the sample crossed the 600 ms path.
			if rtt := time.Duration(s.LoadedMaxRTTMicros) * time.Microsecond; rtt < 600*time.Millisecond {
				t.Errorf("%s %s: largest echo round trip during the sample %v, below the path's 600 ms", r.Variant, r.Direction, rtt)
			}
			t.Logf("%s %s: %.2f Mbit/s, echoes during the sample up to %v", r.Variant, r.Direction, s.Bps/1e6, time.Duration(s.LoadedMaxRTTMicros)*time.Microsecond)
		}
	}
	// probe --iperf3 on the same path, its sample sized by its own echoes
	// and allowed what the echoes during it see.
	pr := ovpnperfWithin(t, 3*time.Minute, "lab", "exec", b.lab.Name(), "client", "--", binary, "probe", lab.ServerV4().String(),
		"--iperf3", "5201", "--pings", "10", "--no-crypto", "--json")
	if pr.code != 0 {
		t.Fatalf("probe: exit %d\n%s\n%s", pr.code, pr.stdout, pr.stderr)
	}
	var doc probe.Report
	if err := json.Unmarshal([]byte(pr.stdout), &doc); err != nil {
		t.Fatalf("probe --json: %v\n%s", err, pr.stdout)
	}
	tp := doc.Path.ThroughputBitsPerSec
	// Its one sample lasts ten loaded round trips, so its window edges
	// carry at most ±10 % (docs/evidence.md) around TCP's 9.57 Mbit/s of
	// goodput through the 10 Mbit/s limiter (1448 of every 1514 bytes);
	// 5 s samples here once counted 11.38 Mbit/s, twice in a row.
	goodput := 10e6 * 1448 / 1514
	if !tp.Known() || tp.Value < 0.85*goodput || tp.Value > 1.1*goodput || !strings.Contains(tp.Note, "echo round trip") || !strings.Contains(tp.Note, "window edges can carry") {
		t.Errorf("probe on a 600 ms path: throughput %+v, want %.2f Mbit/s -15 %% +10 %%", tp, goodput/1e6)
	}
	t.Logf("probe: %.2f Mbit/s (%s)", tp.Value/1e6, tp.Note)
}

// Must show 2: a client with rcvbuf 16384 on an unshaped path drops
// datagrams at its socket, and the finding names the receive buffer and a
// size; with the buffer it names the drops are gone.
func measureSocketDrops(t *testing.T, b *measureBench) {
	// OpenVPN's defaults but the client's buffer (the test before may
	// have left another variant up).
	v, err := openvpn.ParseVariant("default")
	if err != nil {
		t.Fatal(err)
	}
	b.restartVariant(t, v, func(s, c *openvpn.Config) { c.Add("rcvbuf", "16384") })
	// One sample per row: the socket drops finding needs no three (unlike
	// path-bound and CPU-bound), and drops are counted in every sample.
	args := []string{lab.ServerV4().String(), "--tunnel", b.tun.ServerAddr.String(), "--time", "2s", "--omit", "0s", "--direction", "down", "--repeat", "1"}
	rep, _ := b.measureDoc(t, args...)
	r := tunnelRow(t, rep, "down")
	drops, rcv := socketDrops(r)
	if drops == 0 {
		t.Fatalf("no socket drops with rcvbuf 16384: %+v", r.OpenVPN)
	}
	if rcv != 2*16384 {
		t.Errorf("the kernel gave %d bytes, want 2 × 16384", rcv)
	}
	f := findingsOf(t, rep, finding.SocketDrops)
	// The advice is the config line to set, as the document carries it.
	if len(f) != 1 || f[0].Figures[measure.FigRcvbufBytes] != 32768 || f[0].Figures[measure.FigDroppedDatagrams] != float64(drops) ||
		f[0].Advice != rep.Scenario.Real.BufferAdvice || !strings.Contains(f[0].Advice, "rcvbuf 4194304") {
		t.Fatalf("finding does not name the buffer and what to set:\n%+v", rep.Findings)
	}
	t.Logf("before: %s", f[0].Text)
	// The change the finding advises.
	b.restart(t, func(s, c *openvpn.Config) { c.Add("rcvbuf", "4194304") })
	rep2, _ := b.measureDoc(t, args...)
	r2 := tunnelRow(t, rep2, "down")
	if drops2, rcv2 := socketDrops(r2); drops2 != 0 || len(findingsOf(t, rep2, finding.SocketDrops)) != 0 {
		t.Errorf("with rcvbuf 4194304 (kernel: %d) still %d drops:\n%s", rcv2, drops2, findingKeys(rep2.Findings))
	}
	t.Logf("tunnel down before %v, after %v bit/s", r.SamplesBps, r2.SamplesBps)
	b.checkNothingLeft(t)
}

// restart replaces the bench's tunnel by one with another client config.
func (b *measureBench) restart(t *testing.T, configure func(s, c *openvpn.Config)) {
	t.Helper()
	b.restartVariant(t, b.tun.Variant, configure)
}

// restartVariant brings the tunnel up again as variant v.
func (b *measureBench) restartVariant(t *testing.T, v openvpn.Variant, configure func(s, c *openvpn.Config)) {
	t.Helper()
	b.tun.Down()
	tun, err := tunnel.Up(context.Background(), b.lab, tunnel.Options{Variant: v, PKI: b.tun.PKI, Configure: configure})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tun.Down)
	b.tun = tun
}

// Must show 3: before/after of a real change on a CPU-bound LAN: OpenVPN's
// defaults, then the variant advise gives for such a path (a jumbo tunnel:
// one OpenVPN packet carries six full-size ones, so the per-packet cost
// that binds here falls; this project measured it at about 3× the default
// on this lab). compare calls the tunnel row better (and exits 0 unless
// another row got worse); the other way round it is worse and compare
// exits 1. (A receive buffer of a few
// datagrams, tried first, hurt only while the machine was loaded: on a
// quiet one both buffers gave the same rate, so it made no test.)
// It starts on the bench's tunnel with OpenVPN's defaults.
func measureBeforeAfterCompare(t *testing.T, b *measureBench) {
	if b.tun.Variant.Name != "default" {
		t.Fatalf("the bench's tunnel is %s, want OpenVPN's defaults", b.tun.Variant.Name)
	}
	adv := ovpnperf(t, "advise", "--rate", "10gbit", "--rtt", "1ms", "--pmtu", "1500", "--json").mustSucceed(t)
	var advice struct{ Variant string }
	if err := json.Unmarshal([]byte(adv.stdout), &advice); err != nil || !strings.Contains(advice.Variant, "tun-mtu 9000") {
		t.Fatalf("advise gave no jumbo variant for a CPU-bound LAN (%v): %s", err, adv.stdout)
	}
	v, err := openvpn.ParseVariant(advice.Variant)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before.json"), filepath.Join(dir, "after.json")
	// 1 s samples without a warm-up: on this LAN slow start ends within
	// milliseconds, and the jumbo tunnel is about 3× the default (three
	// samples a side, as compare's evidence rule wants).
	args := []string{lab.ServerV4().String(), "--tunnel", b.tun.ServerAddr.String(), "--time", "1s", "--omit", "0s", "--direction", "down"}
	rep, _ := b.measureDoc(t, append(args, "--out", before)...)
	b.restartVariant(t, v, nil)
	rep2, _ := b.measureDoc(t, append(args, "--out", after)...)
	t.Logf("tunnel down before %v, after (%s) %v bit/s", tunnelRow(t, rep, "down").SamplesBps, advice.Variant, tunnelRow(t, rep2, "down").SamplesBps)
	cmp := ovpnperf(t, "compare", before, after, "--json")
	var doc struct {
		Changes        []struct{ Variant, Direction, Verdict string }
		FindingChanges []struct {
			Change  string       `json:"change"`
			Kind    finding.Kind `json:"kind"`
			Verdict string       `json:"verdict"`
		} `json:"finding_changes"`
	}
	if err := json.Unmarshal([]byte(cmp.stdout), &doc); err != nil {
		t.Fatalf("compare: exit %d: %v\n%s%s", cmp.code, err, cmp.stdout, cmp.stderr)
	}
	verdicts := map[string]string{}
	for _, c := range doc.Changes {
		verdicts[c.Variant+"/"+c.Direction] = c.Verdict
	}
	// compare exits 1 when any row or finding got worse. The outside
	// row of this CPU-bound LAN is not what changed, but its rate moves
	// with the machine (once "worse" beyond 5 % here between two idle
	// runs), and the advised jumbo tunnel may bring a fragmentation
	// finding that compare counts as worse, so the exit status is checked
	// against the verdicts, not assumed 0.
	wantCode := 0
	for _, v := range verdicts {
		if v == "worse" {
			wantCode = 1
		}
	}
	for _, fc := range doc.FindingChanges {
		t.Logf("finding %s: %s, %s", fc.Kind, fc.Change, fc.Verdict)
		if fc.Verdict == "worse" {
			wantCode = 1
		}
	}
	if verdicts["tunnel/down"] != "better" || cmp.code != wantCode {
		t.Errorf("compare: exit %d, verdicts %v; want tunnel/down better, exit %d", cmp.code, verdicts, wantCode)
	}
	if back := ovpnperf(t, "compare", after, before); back.code != 1 {
		t.Errorf("compare after before: exit %d, want 1\n%s", back.code, back.stdout)
	}
	// report draws both documents, with their findings.
	if len(rep.Findings)+len(rep2.Findings) == 0 {
		t.Errorf("no finding in either document: the page has nothing to show")
	}
	checkFindingsShown(t, rep, "", reportPage(t, before))
	checkFindingsShown(t, rep2, "", reportPage(t, after))
	b.checkNothingLeft(t)
}

// Must show 2 (fragmentation) and 4: tun-mtu 1500 over a path MTU of 1400
// (ICMP passes): the finding names fragmentation, the capture shows outer
// fragments, and analyze reads the kept capture alike. A symbolic link
// placed where the capture goes (frag.pcap) is replaced, not followed:
// tcpdump wrote through it, over a root-owned 0600 file it then gave to
// its own user.
func TestMeasureFragmentation(t *testing.T) {
	// It judges counts of fragments, not a rate: it overlaps the other
	// tests that judge none.
	t.Parallel()
	b := newMeasureBench(t, labpath.Path{MTU: 1400}, true, nil)
	dir := t.TempDir()
	out := filepath.Join(dir, "frag.json")
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "frag.pcap")); err != nil {
		t.Fatal(err)
	}
	// Text on stdout, the document in --out: one run gives both.
	mr := b.measure(t, lab.ServerV4().String(), "--tunnel", b.tun.ServerAddr.String(), "--time", "1s", "--omit", "0s", "--direction", "up", "--capture", "--out", out)
	if mr.code != 0 {
		t.Fatalf("measure: exit %d\nstdout:\n%s\nstderr:\n%s", mr.code, mr.stdout, mr.stderr)
	}
	text := mr.stdout
	rep := readRunDoc(t, out)
	if b, err := os.ReadFile(out); err == nil {
		checkSchema(t, "measure --out", string(b), false)
	}
	var vst syscall.Stat_t
	if got, err := os.ReadFile(victim); err != nil || string(got) != "precious\n" || syscall.Stat(victim, &vst) != nil || vst.Uid != 0 || vst.Mode&0o777 != 0o600 {
		t.Errorf("the capture went through the link: victim %q (%v), owner %d, mode %o", got, err, vst.Uid, vst.Mode&0o777)
	}
	if li, err := os.Lstat(filepath.Join(dir, "frag.pcap")); err != nil || !li.Mode().IsRegular() {
		t.Errorf("frag.pcap is not a regular file: %v %v", li, err)
	}
	f := findingsOf(t, rep, finding.Fragmentation)
	// The advice is the config line to set, as the document carries it.
	if len(f) != 1 || f[0].Outcome != verdict.Confirmed || f[0].Figures[measure.FigPathMTUBytes] != 1400 || f[0].Figures[measure.FigFragmentsMadePackets]+f[0].Figures[measure.FigFragmentsReassembledPackets] == 0 ||
		!strings.Contains(f[0].Advice, "mssfix 1400 mtu") {
		t.Fatalf("no fragmentation finding with the MTU advice:\n%+v", rep.Findings)
	}
	t.Logf("%s", f[0].Text)
	// The limit finding of the direction measured: its kind is one of
	// the three the path-bound rule gives, with the tunnel's rate and the
	// model's prediction it rests on.
	var limits []finding.Finding
	for _, k := range []finding.Kind{finding.PathBound, finding.BelowPath, finding.LimitUnknown} {
		limits = append(limits, findingsOf(t, rep, k)...)
	}
	tr := tunnelRow(t, rep, "up")
	if len(limits) != 1 || limits[0].Subject.Direction != "up" || !limits[0].Outcome.Valid() ||
		limits[0].Figures[measure.FigTunnelMedianBps] != tr.MedianBps || limits[0].Figures[measure.FigPredictedRatio] != rep.Scenario.Real.PredictedRatio {
		t.Errorf("want one limit finding for up with the tunnel's rate and the prediction:\n%+v", limits)
	}
	// The text output and report's page show the document's findings,
	// each the renderer's sentence for its record.
	checkFindingsShown(t, rep, text, reportPage(t, out))
	c := rep.Scenario.Real.Capture
	if c == nil || c.Fragments == 0 || c.FragmentedDatagrams == 0 || c.File == "" {
		t.Fatalf("capture shows no outer fragments: %+v", c)
	}
	if c.MaxIPBytes > 1400 {
		t.Errorf("an outer packet of %d bytes crossed a 1400-byte path", c.MaxIPBytes)
	}
	an := ovpnperf(t, "analyze", c.File, "--json").mustSucceed(t)
	var a struct {
		Fragments           int         `json:"fragments"`
		FragmentedDatagrams int         `json:"fragmented_datagrams"`
		Sizes               map[int]int `json:"sizes"`
	}
	if err := json.Unmarshal([]byte(an.stdout), &a); err != nil {
		t.Fatal(err)
	}
	if a.Fragments != c.Fragments || a.FragmentedDatagrams != c.FragmentedDatagrams {
		t.Errorf("analyze %d fragments of %d datagrams, measure %d of %d", a.Fragments, a.FragmentedDatagrams, c.Fragments, c.FragmentedDatagrams)
	}
	b.checkNothingLeft(t)
}

// Must show 5: bad inputs get one clear line and the documented status,
// and leave nothing behind: no --out file, no process, no capture. It
// needs a bench without an iperf3 server.
func measureBadInput(t *testing.T, b *measureBench) {
	// An iperf3 server that answers outside the tunnel only, as when the
	// far end's firewall lets the tunnel's port through on one address.
	srv, err := iperf.StartServer(context.Background(), func(ctx context.Context, argv ...string) *exec.Cmd { return b.lab.Command(ctx, lab.Server, argv...) },
		iperf.ServerOptions{Bind: lab.ServerV4()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	dir := t.TempDir()
	out := filepath.Join(dir, "never.json")
	server, tun := lab.ServerV4().String(), b.tun.ServerAddr.String()
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"TUNNEL_ADDR not through a tun", []string{server, "--tunnel", server}, 2, "both"},
		{"TUNNEL_ADDR outside", []string{server, "--tunnel", lab.RouterServerV4().String()}, 2, "not routed through a tun device"},
		{"HOST through the tunnel", []string{tun, "--tunnel", b.tun.ServerAddr.Next().String()}, 2, "reached through the tun device"},
		{"unreachable HOST", []string{"198.51.100.99", "--tunnel", tun}, 1, "no iperf3 server answers at 198.51.100.99:5201"},
		{"no iperf3 server", []string{server, "--tunnel", tun, "--port", "5999"}, 1, "`iperf3 -s -p 5999`"},
		{"no iperf3 server inside", []string{server, "--tunnel", tun}, 1, "no iperf3 server answers at " + tun + ":5201"},
	} {
		r := b.measure(t, append(c.args, "--time", "1s", "--repeat", "1", "--out", out, "--capture")...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%s: exit %d (want %d), stderr %q (want one line with %q)", c.name, r.code, c.code, r.stderr, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: --out file written", c.name)
		}
	}
	b.checkNothingLeft(t)
}

// Usage errors need no lab: they are refused before anything runs.
func TestMeasureUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"measure", "198.51.100.2"}, "--tunnel is required"},
		{[]string{"measure", "198.51.100.2", "--tunnel", "vpn.example"}, "want an IP address"},
		{[]string{"measure", "999.1.1.1", "--tunnel", "10.8.0.1"}, "not an IPv4 address"},
		{[]string{"measure", "198.51.100.2", "--tunnel", "10.8.0.1", "--direction", "sideways"}, "--direction"},
		{[]string{"measure", "198.51.100.2", "--tunnel", "10.8.0.1", "--cipher", "ROT13"}, "unknown data cipher"},
		{[]string{"measure", "198.51.100.2", "--tunnel", "10.8.0.1", "--repeat", "0"}, "--repeat"},
		{[]string{"measure", "198.51.100.2", "--tunnel", "10.8.0.1", "--out", "/nonexistent/x.json"}, "does not exist"},
		{[]string{"analyze", "/nonexistent.pcap"}, "no such file"},
	} {
		ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
	}
}

// Must show 4: analyze on a capture the test makes counts exactly what the
// lab sent: pings of 1450 bytes across a 1400-byte path, split into a
// 1396-byte and a 74-byte fragment each way; a cut or foreign file is
// refused with exit status 2.
func TestAnalyzeLabCapture(t *testing.T) {
	testenv.RequirePrograms(t, "tcpdump", "ping")
	l := labtest.New(t, labpath.Path{MTU: 1400, NoIPv6: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	file := filepath.Join(dir, "frag.pcap")
	// The server's link: requests arrive fragmented by the router,
	// replies leave fragmented by the server.
	td := l.Command(ctx, lab.Server, "tcpdump", "-i", "s0", "-n", "-s", "128", "--immediate-mode", "-U", "-w", file, "icmp")
	var stderr strings.Builder
	td.Stderr = &stderr
	if err := td.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; !strings.Contains(stderr.String(), "listening on") && i < 200; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	const pings = 5
	if out, err := l.Command(ctx, lab.Client, "ping", "-c", "5", "-i", "0.2", "-M", "dont", "-s", "1422", lab.ServerV4().String()).CombinedOutput(); err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	time.Sleep(200 * time.Millisecond)
	_ = td.Process.Signal(syscall.SIGTERM)
	_ = td.Wait()
	r := ovpnperf(t, "analyze", file, "--json").mustSucceed(t)
	var a struct {
		Packets             int         `json:"packets"`
		Fragments           int         `json:"fragments"`
		FragmentedDatagrams int         `json:"fragmented_datagrams"`
		Sizes               map[int]int `json:"sizes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatal(err)
	}
	if a.Packets != 4*pings || a.Fragments != 4*pings || a.FragmentedDatagrams != 2*pings || a.Sizes[1396] != 2*pings || a.Sizes[74] != 2*pings {
		t.Errorf("analyze: %+v; want %d fragments of %d datagrams, %d × 1396 and %d × 74 bytes", a, 4*pings, 2*pings, 2*pings, 2*pings)
	}
	if !strings.Contains(ovpnperf(t, "analyze", file, "--port", "1194").mustSucceed(t).stdout, "IP fragments: 20, of 10 datagrams") {
		t.Error("text output does not say the fragments")
	}
	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.pcap")
	if err := os.WriteFile(cut, whole[:len(whole)-30], 0o600); err != nil {
		t.Fatal(err)
	}
	ovpnperf(t, "analyze", cut).mustBeUsageError(t, "truncated")
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a capture\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ovpnperf(t, "analyze", text).mustBeUsageError(t, "not a pcap or pcapng capture")
}
