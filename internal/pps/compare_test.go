package pps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

var sockperfRate = regexp.MustCompile(`Summary: Message Rate is ([0-9.]+) \[msg/sec\]`)

// parseSockperfRate reads the send rate from `sockperf throughput` output.
func parseSockperfRate(out []byte) (float64, error) {
	m := sockperfRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no \"Message Rate\" line in sockperf output:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func TestParseSockperfRate(t *testing.T) {
	t.Parallel()
	out, err := readTestdata("sockperf-3.7-throughput.txt")
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseSockperfRate(out)
	if err != nil || r != 37676 {
		t.Errorf("rate %v, %v; want 37676 as in the capture", r, err)
	}
	if _, err := parseSockperfRate([]byte("sockperf: ERROR: connection refused\n")); err == nil {
		t.Error("accepted output without a rate")
	}
}

// spread is the median, minimum and maximum of some samples.
type spread struct{ med, min, max float64 }

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	return spread{verdict.Median(v), slices.Min(v), slices.Max(v)}
}

func (s spread) String() string {
	return fmt.Sprintf("%9.0f pps (min %9.0f, max %9.0f)", s.med, s.min, s.max)
}

// BenchmarkGeneratorRates compares the packet rate of the three generators
// against the same unshaped lab path (client → router → server, kernel
// forwarding, 18-byte UDP payloads, one flow each), in three interleaved
// repetitions of 3 s, and logs each one's median, minimum and maximum:
//
//   - sockperf throughput -m 18: the rate sockperf sent (it does not count
//     what arrived);
//   - iperf3 -u -l 18 -b 0: the rate iperf3 sent, and what its server
//     received;
//   - ovpnperf pps --rate 0 --one-way: the rate sent and what the server
//     received (mean over the send time): like for like with the two
//     above, with one flow and with two (-P 2);
//   - ovpnperf pps --rate 0: the rate sent, what the server received, and
//     the echoes back (each echo crosses the path twice); once with one
//     flow as the others, once with two (-P 2).
//
// Everything shares the host's cores, so the figures say how the
// generators compare here, not what the path could forward. Run it with
//
//	go test -run XXX -bench GeneratorRates -benchtime 1x -v ./internal/pps
func BenchmarkGeneratorRates(b *testing.B) {
	testenv.RequirePrograms(b, "sockperf", "iperf3")
	l := labtest.New(b, labpath.Path{})
	ctx := context.Background()
	const (
		reps    = 3
		seconds = 3
		spPort  = 11111
	)
	sp, err := l.Start(ctx, lab.Server, filepath.Join(l.Dir(), "sockperf-server.log"),
		"sockperf", "server", "-i", lab.ServerV4().String(), "-p", strconv.Itoa(spPort))
	if err != nil {
		b.Fatal(err)
	}
	defer sp.Stop()
	labCmd := func(n lab.Node) iperf.CommandFunc {
		return func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, n, argv...) }
	}
	ip, err := iperf.StartServer(ctx, labCmd(lab.Server), iperf.ServerOptions{Bind: lab.ServerV4()})
	if err != nil {
		b.Fatal(err)
	}
	defer ip.Stop()
	// ovpnperf runs as users run it: the built command, server and client
	// each its own process, like sockperf's and iperf3's.
	bin := filepath.Join(b.TempDir(), "ovpnperf")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ovpnperf/ovpnperf/cmd/ovpnperf").CombinedOutput(); err != nil {
		b.Fatalf("building ovpnperf: %v\n%s", err, out)
	}
	const port = 7007
	ps, err := l.Start(ctx, lab.Server, filepath.Join(l.Dir(), "pps-server.log"),
		bin, "pps", "server", "--bind", lab.ServerV4().String(), "--port", strconv.Itoa(port))
	if err != nil {
		b.Fatal(err)
	}
	defer ps.Stop()
	time.Sleep(500 * time.Millisecond) // sockperf and pps servers give no ready signal
	ovpnperfRun := func(flows int, oneWay bool) *Result {
		argv := []string{bin, "pps", "client", lab.ServerV4().String(),
			"--port", strconv.Itoa(port), "--rate", "0", "--flows", strconv.Itoa(flows),
			"--duration", strconv.Itoa(seconds) + "s", "--json"}
		if oneWay {
			argv = append(argv, "--one-way", "--timeout", "500ms")
		}
		out, err := runner.Output(l.Command(ctx, lab.Client, argv...))
		if err != nil {
			b.Fatal(err)
		}
		var r Result
		if err := json.Unmarshal(out, &r); err != nil {
			b.Fatalf("ovpnperf pps client --json: %v\n%s", err, out)
		}
		return &r
	}

	var spSent, ipSent, ipRecv, oSent, oRecvd, oEcho, oCPU, o2Sent, o2Echo []float64
	var owSent, owRecv, owCPU, ow2Sent, ow2Recv []float64
	for range b.N {
		for rep := range reps {
			out, err := runner.Output(l.Command(ctx, lab.Client, "sockperf", "throughput",
				"-i", lab.ServerV4().String(), "-p", strconv.Itoa(spPort), "-m", "18", "-t", strconv.Itoa(seconds)))
			if err != nil {
				b.Fatal(err)
			}
			r, err := parseSockperfRate(out)
			if err != nil {
				b.Fatal(err)
			}
			spSent = append(spSent, r)

			ir, err := iperf.Run(ctx, labCmd(lab.Client), iperf.ClientOptions{
				Server: lab.ServerV4(), Port: ip.Port(), UDP: true, LengthBytes: 18, BitrateBps: 0,
				Duration: seconds * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			ipSent = append(ipSent, float64(ir.SentBytes)/18/ir.SentDuration.Seconds())
			if ir.UDP != nil {
				ipRecv = append(ipRecv, float64(ir.UDP.Packets-ir.UDP.LostPackets)/ir.ReceivedDuration.Seconds())
			}

			ow := ovpnperfRun(1, true)
			owSent = append(owSent, ow.SentPPSMean)
			owRecv = append(owRecv, ow.PPSMean)
			owCPU = append(owCPU, ow.CPU.Percent)

			ow2 := ovpnperfRun(2, true)
			ow2Sent = append(ow2Sent, ow2.SentPPSMean)
			ow2Recv = append(ow2Recv, ow2.PPSMean)

			res2 := ovpnperfRun(2, false)
			o2Sent = append(o2Sent, res2.SentPPSMean)
			o2Echo = append(o2Echo, res2.PPSMedian)

			res := ovpnperfRun(1, false)
			oSent = append(oSent, res.SentPPSMean)
			oEcho = append(oEcho, res.PPSMedian)
			oCPU = append(oCPU, res.CPU.Percent)
			if res.ServerReport != nil {
				oRecvd = append(oRecvd, float64(res.ServerReport.Received)/res.SendSeconds)
			}
			b.Logf("rep %d: sockperf sent %.0f; iperf3 sent %.0f; ovpnperf one-way sent %.0f, server rx %.0f, -P 2 sent %.0f, rx %.0f; echo sent %.0f, echoed %.0f pps; -P 2 sent %.0f, echoed %.0f",
				rep+1, r, ipSent[len(ipSent)-1], ow.SentPPSMean, ow.PPSMean, ow2.SentPPSMean, ow2.PPSMean, res.SentPPSMean, res.PPSMedian, res2.SentPPSMean, res2.PPSMedian)
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "packet rates, 18-byte UDP payload, unshaped lab path, %d × %d s, median (min, max):\n", reps*b.N, seconds)
	fmt.Fprintf(&sb, "  sockperf throughput sent      %v\n", spreadOf(spSent))
	fmt.Fprintf(&sb, "  iperf3 -u -b 0      sent      %v\n", spreadOf(ipSent))
	fmt.Fprintf(&sb, "  iperf3              received  %v\n", spreadOf(ipRecv))
	fmt.Fprintf(&sb, "  ovpnperf pps --one-way sent   %v (client CPU median %.0f%% of a core)\n", spreadOf(owSent), verdict.Median(owCPU))
	fmt.Fprintf(&sb, "  ovpnperf pps --one-way srv rx %v\n", spreadOf(owRecv))
	fmt.Fprintf(&sb, "  ovpnperf pps -1w -P 2  sent   %v\n", spreadOf(ow2Sent))
	fmt.Fprintf(&sb, "  ovpnperf pps -1w -P 2  srv rx %v\n", spreadOf(ow2Recv))
	fmt.Fprintf(&sb, "  ovpnperf pps        sent      %v\n", spreadOf(oSent))
	fmt.Fprintf(&sb, "  ovpnperf pps        server rx %v\n", spreadOf(oRecvd))
	fmt.Fprintf(&sb, "  ovpnperf pps        echoed    %v (client CPU median %.0f%% of a core)\n", spreadOf(oEcho), verdict.Median(oCPU))
	fmt.Fprintf(&sb, "  ovpnperf pps -P 2    sent      %v\n", spreadOf(o2Sent))
	fmt.Fprintf(&sb, "  ovpnperf pps -P 2    echoed    %v\n", spreadOf(o2Echo))
	best := max(verdict.Median(spSent), verdict.Median(ipSent))
	fmt.Fprintf(&sb, "one-way sent / better of sockperf and iperf3 (medians): %.2f; -P 2: %.2f\n", verdict.Median(owSent)/best, verdict.Median(ow2Sent)/best)
	b.Log("\n" + sb.String())
	b.ReportMetric(verdict.Median(spSent), "sockperf-sent-pps")
	b.ReportMetric(verdict.Median(ipSent), "iperf3-sent-pps")
	b.ReportMetric(verdict.Median(owSent), "ovpnperf-oneway-sent-pps")
	b.ReportMetric(verdict.Median(owRecv), "ovpnperf-oneway-rx-pps")
	b.ReportMetric(verdict.Median(oSent), "ovpnperf-sent-pps")
	b.ReportMetric(verdict.Median(oEcho), "ovpnperf-echo-pps")
}

func readTestdata(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", name))
}
