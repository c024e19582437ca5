package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/safchain/ethtool"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/pps"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// ppsServer runs a pps server (with key, if set) in the lab's server
// namespace until the test ends, and returns its port and a function that
// says whether an authenticated session was accepted.
func ppsServer(t *testing.T, l *lab.Lab, key []byte) (port int, authed func() bool) {
	t.Helper()
	var mu sync.Mutex
	signed := false
	s := &pps.Server{Addr: net.JoinHostPort(lab.ServerV4().String(), "0"), Key: key,
		OpenIn: func(open func() error) error { return netns.Do(l.Namespace(lab.Server), open) },
		Events: func(e pps.Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Kind == "accepted" && e.Authenticated {
				signed = true
			}
		}}
	a, stop, err := s.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("pps server: %v", err)
		}
	})
	return a.(*net.UDPAddr).Port, func() bool { mu.Lock(); defer mu.Unlock(); return signed }
}

// runProbe runs `ovpnperf probe` in the lab's client namespace, as a user
// would with `ovpnperf lab exec NAME client -- ovpnperf probe …`.
func runProbe(t *testing.T, l *lab.Lab, args ...string) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append([]string{labtest.Binary(), "probe", lab.ServerV4().String(), "--no-crypto", "--json"}, args...)
	cmd := l.Command(ctx, lab.Client, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	t.Logf("probe took %v:\n%s", time.Since(start).Round(time.Millisecond), stderr.String())
	written := stdout.Bytes()
	rep, err := Decode(&stdout)
	if err != nil {
		t.Fatalf("probe output: %v\n%s", err, written)
	}
	// The findings the command wrote are those its fields give on reading.
	var doc struct{ Findings []finding.Finding }
	if err := json.Unmarshal(written, &doc); err != nil || doc.Findings == nil {
		t.Fatalf("probe wrote no findings: %v\n%s", err, written)
	}
	if w, r := fmt.Sprint(doc.Findings), fmt.Sprint(rep.Findings); w != r {
		t.Errorf("findings written:\n%s\njudged on reading:\n%s", w, r)
	}
	return rep
}

func writeKey(t *testing.T, key string) string {
	p := filepath.Join(t.TempDir(), "pps.key")
	if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// binomialBound is a generous bound (5 standard deviations, at least one
// percentage point) of a loss percentage measured over n probes with true
// loss p percent.
func binomialBound(p float64, n int) float64 {
	q := p / 100
	return max(500*math.Sqrt(q*(1-q)/float64(n)), 1)
}

// With 5 % loss on the way up only and a pps server on the target, probe
// measures over the pps echo (with a signed hello), puts the loss on the way
// up, none on the way back, and the round trip near 5 %.
func TestLabPPSEchoLossOneDirection(t *testing.T) {
	testenv.Exclusive(t)
	l := labtest.New(t, labpath.Path{Up: labpath.Link{LossPercent: 5}})
	const key = "probe-test-key-0123456789abcdef"
	port, authed := ppsServer(t, l, []byte(key))
	const n = 600
	rep := runProbe(t, l, "--pings", strconv.Itoa(n), "--pps-port", strconv.Itoa(port), "--pps-key-file", writeKey(t, key))
	p := rep.Path
	t.Logf("loss %+v\nup %+v\ndown %+v\nrtt %+v\njitter %+v", p.LossPercent, p.LossUpPercent, p.LossDownPercent, p.RTTMillis, p.JitterMs)
	for name, f := range map[string]Field[float64]{"loss_percent": p.LossPercent, "loss_up_percent": p.LossUpPercent,
		"loss_down_percent": p.LossDownPercent, "rtt_ms": p.RTTMillis, "jitter_ms": p.JitterMs} {
		if f.Source != Measured || f.Method != MethodPPSEcho {
			t.Errorf("%s: source %q method %q (%s), want measured by %s", name, f.Source, f.Method, f.Note, MethodPPSEcho)
		}
	}
	if b := binomialBound(5, n); math.Abs(p.LossUpPercent.Value-5) > b {
		t.Errorf("loss up %.2f %%, want 5 ± %.1f %%", p.LossUpPercent.Value, b)
	}
	if b := binomialBound(0, n); p.LossDownPercent.Value > b {
		t.Errorf("loss down %.2f %%, want 0 (+%.1f) on a path without loss back", p.LossDownPercent.Value, b)
	}
	if b := binomialBound(5, n); math.Abs(p.LossPercent.Value-5) > b {
		t.Errorf("round-trip loss %.2f %%, want 5 ± %.1f %%", p.LossPercent.Value, b)
	}
	if p.RTTMillis.Value <= 0 || p.RTTMillis.Value > 1000 {
		t.Errorf("rtt %v ms", p.RTTMillis.Value)
	}
	if !authed() {
		t.Error("the pps server accepted no signed hello: --pps-key-file was not used")
	}
	// The counts behind the percents are in the document, each way's too.
	e := p.LossEchoes
	if e.Source != Measured || e.Method != MethodPPSEcho || e.Value.Sent != n || e.Value.Up == nil || e.Value.Down == nil ||
		math.Abs(100*float64(e.Value.Sent-e.Value.Answered)/float64(e.Value.Sent)-p.LossPercent.Value) > 1e-9 ||
		math.Abs(100*float64(e.Value.Up.Sent-e.Value.Up.Arrived)/float64(e.Value.Up.Sent)-p.LossUpPercent.Value) > 1e-9 {
		t.Errorf("echo counts %+v (up %+v, down %+v), want %d sent and the loss fields' percents", e, e.Value.Up, e.Value.Down, n)
	}
	loss := 0
	for _, f := range rep.Findings {
		if f.Kind == finding.Loss {
			loss++
			if f.Outcome != verdict.Confirmed || f.Figures["loss_up_percent"] != p.LossUpPercent.Value || f.Figures["loss_percent"] != p.LossPercent.Value || f.Settings["method"] != MethodPPSEcho ||
				f.Figures["echoes_sent_packets"] != n || f.Figures["echoes_lost_packets"] != float64(e.Value.Sent-e.Value.Answered) {
				t.Errorf("loss finding %+v", f)
			}
		}
	}
	if loss != 1 {
		t.Errorf("%d loss findings, want 1: %+v", loss, rep.Findings)
	}
}

// Without a pps server on the target, probe falls back to ICMP and says
// why, and claims no loss per direction; a server whose key differs refuses
// the hello, and probe falls back with that reason. The offloads of the
// client's veth are read with the ethtool ioctl, including one this test
// turned off.
func TestLabProbeFallsBackToICMP(t *testing.T) {
	l := labtest.New(t, labpath.Path{})
	dev := clientVeth(t, l)
	if err := netns.Do(l.Namespace(lab.Client), func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		// Equivalent to: ethtool -K DEV tso off
		return e.Change(dev, map[string]bool{"tx-tcp-segmentation": false})
	}); err != nil {
		t.Fatalf("turning TSO off on %s: %v", dev, err)
	}
	rep := runProbe(t, l, "--pings", "100")
	p := rep.Path
	checkICMP(t, p, "no pps server answered")
	checkTooFew(t, rep)
	if p.Interface.Value != dev || !p.Offloads.Known() || p.Offloads.Method != MethodEthtoolIoctl {
		t.Fatalf("interface %+v, offloads %+v: want %s's read by %s", p.Interface, p.Offloads, dev, MethodEthtoolIoctl)
	}
	// A veth checksums in software (NETIF_F_HW_CSUM, RXCSUM) and has
	// GSO on; TSO is what this test turned off.
	want := map[string]bool{"tx-checksum-ip-generic": true, "rx-checksum": true, "tx-generic-segmentation": true, "tx-tcp-segmentation": false}
	for k, v := range want {
		if got, ok := p.Offloads.Value[k]; !ok || got != v {
			t.Errorf("offload %s = %v (present %v), want %v; all: %v", k, got, ok, v, p.Offloads.Value)
		}
	}

	port, _ := ppsServer(t, l, []byte("the-servers-key-0123456789abcdef"))
	rep = runProbe(t, l, "--pings", "100", "--pps-port", strconv.Itoa(port), "--pps-key-file", writeKey(t, "another-key-0123456789abcdefgh"))
	checkICMP(t, rep.Path, "authentication failed")
}

func checkICMP(t *testing.T, p Path, why string) {
	t.Helper()
	if p.LossPercent.Source != Measured || p.LossPercent.Method != MethodICMPEcho || p.RTTMillis.Method != MethodICMPEcho {
		t.Errorf("loss %+v rtt %+v: want measured by %s", p.LossPercent, p.RTTMillis, MethodICMPEcho)
	}
	if !strings.Contains(p.LossPercent.Note, why) {
		t.Errorf("loss note %q does not say %q", p.LossPercent.Note, why)
	}
	if p.LossPercent.Value != 0 {
		t.Errorf("ICMP loss %v %% on a lossless lab path", p.LossPercent.Value)
	}
	if p.LossUpPercent.Known() || p.LossDownPercent.Known() || !strings.Contains(p.LossUpPercent.Note, "round trips only") {
		t.Errorf("per-direction loss claimed over ICMP: up %+v down %+v", p.LossUpPercent, p.LossDownPercent)
	}
	if e := p.LossEchoes; e.Source != Measured || e.Method != MethodICMPEcho || e.Value.Sent != 100 || e.Value.Answered != 100 || e.Value.Up != nil || e.Value.Down != nil {
		t.Errorf("ICMP echo counts %+v, want 100 of 100 answered and no one-way counts", e)
	}
}

// checkTooFew: 100 echoes, none lost, are too few to refute loss (the
// rule needs 150): the loss finding is noise, and says what would decide.
func checkTooFew(t *testing.T, rep *Report) {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Kind == finding.Loss && (f.Outcome != verdict.Noise || f.Figures["echoes_sent_packets"] != 100 || f.Decide == "") {
			t.Errorf("loss finding of 100 echoes none lost: %+v", f)
		}
	}
}

// clientVeth is the name of the client's one link besides loopback.
func clientVeth(t *testing.T, l *lab.Lab) string {
	t.Helper()
	var name string
	err := netns.Do(l.Namespace(lab.Client), func() error {
		ifs, err := net.Interfaces()
		for _, i := range ifs {
			if i.Flags&net.FlagLoopback == 0 {
				name = i.Name
			}
		}
		return err
	})
	if err != nil || name == "" {
		t.Fatalf("client link: %q %v", name, err)
	}
	return name
}
