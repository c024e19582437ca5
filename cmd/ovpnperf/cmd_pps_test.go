package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/pps"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/syncbuf"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

func TestParsePPS(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "1000": 1000, "100k": 100000, "1.5M": 1500000, "20000pps": 20000, "2.5K": 2500} {
		if got, err := parsePPS("--rate", in); err != nil || got != want {
			t.Errorf("parsePPS(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-1", "1G", "NaN", "2e9", "0.4", "1e-3"} {
		if _, err := parsePPS("--rate", in); err == nil {
			t.Errorf("parsePPS(%q) accepted", in)
		}
	}
}

func TestPPSUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pps", "client"}, "arg"},
		{[]string{"pps", "client", "127.0.0.1", "--size", "17"}, `--size "17"`},
		{[]string{"pps", "client", "127.0.0.1", "--flows", "65"}, `--flows "65"`},
		{[]string{"pps", "client", "127.0.0.1", "--rate", "lots"}, "--rate"},
		{[]string{"pps", "client", "127.0.0.1", "--duration", "301s"}, "--duration"},
		{[]string{"pps", "client", "127.0.0.1", "--timeout", "0s"}, "--timeout"},
		{[]string{"pps", "client", "127.0.0.1", "--port", "0"}, `--port "0"`},
		{[]string{"pps", "server", "--bind", "nowhere"}, "--bind"},
		{[]string{"pps", "server", "--max-duration", "0s"}, "--max-duration"},
	} {
		ovpnperf(t, tc.args...).mustBeUsageError(t, tc.want)
	}
}

// freeUDPPort returns a loopback UDP port nothing listens on right now.
func freeUDPPort(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
}

func TestPPSNoServer(t *testing.T) {
	start := time.Now()
	r := ovpnperf(t, "pps", "client", "127.0.0.1", "--port", freeUDPPort(t), "--duration", "1s")
	if r.code != 1 || !strings.Contains(r.stderr, "no pps server answered") || !strings.Contains(r.stderr, "ovpnperf pps server") {
		t.Errorf("exit %d, stderr %q; want 1 and a sentence saying to start the server", r.code, r.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	if strings.Contains(r.stdout, "Interval") {
		t.Errorf("printed a report without a server:\n%s", r.stdout)
	}
}

// TestPPSClientServer runs `pps server --once` and two clients against it
// as a user would, over loopback: the JSON contract, then the text report.
func TestPPSClientServer(t *testing.T) {
	port := freeUDPPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := runner.Command(ctx, binary, "pps", "server", "--bind", "127.0.0.1", "--port", port)
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = srv.Wait()
	}()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || !strings.Contains(lines.Text(), "listening on udp 127.0.0.1:"+port) {
		t.Fatalf("server said %q", lines.Text())
	}

	r := ovpnperf(t, "pps", "client", "127.0.0.1", "-p", port, "--rate", "2k", "--flows", "2", "--duration", "1500ms", "--json").mustSucceed(t)
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, r.stdout)
	}
	checkReportable(t, r.stdout, "Packets per second (pps)")
	checkSchema(t, "pps client --json", r.stdout, false)
	for _, k := range []string{"sent", "received", "lost", "pps_median", "rtt_p50_us", "rtt_p99_us", "series", "cpu", "server_report", "loss_percent"} {
		if _, ok := res[k]; !ok {
			t.Errorf("JSON lacks key %q", k)
		}
	}
	if res["sent"].(float64) < 1000 || res["lost"].(float64) != 0 {
		t.Errorf("sent %v lost %v", res["sent"], res["lost"])
	}
	if s, _ := res["series"].([]any); len(s) != 2 {
		t.Errorf("series of %d intervals, want 2", len(s))
	}

	r = ovpnperf(t, "pps", "client", "127.0.0.1", "-p", port, "--rate", "500", "--count", "300", "--size", "1400").mustSucceed(t)
	for _, want := range []string{"Interval", "0.00-", "sent 300, received 300, lost 0", "RTT: min", "client CPU", "server: received 300"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, r.stdout)
		}
	}
	r = ovpnperf(t, "pps", "client", "127.0.0.1", "-p", port, "--rate", "1k", "--duration", "1200ms", "--one-way", "--timeout", "200ms").mustSucceed(t)
	for _, want := range []string{"one way:", "At server", "0.00-1.00", "server received", "lost 0 (0.000%)", "RTT: not measured"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("one-way text report lacks %q:\n%s", want, r.stdout)
		}
	}
	var events []string
	for len(events) < 6 && lines.Scan() {
		events = append(events, lines.Text())
	}
	if len(events) != 6 || !strings.Contains(events[0], "accepted") || !strings.Contains(events[1], "finished") ||
		!strings.Contains(events[5], "echoed 0") {
		t.Errorf("server events:\n%s", strings.Join(events, "\n"))
	}
}

// TestPPSServerOnce: with --once the server exits by itself after the
// session, leaving nothing behind.
func TestPPSServerOnce(t *testing.T) {
	// The host lock before the server starts: the clients below take it
	// (ovpnperf), and a wait for another checkout's measuring test must
	// not use up the server's minute.
	testenv.Shared(t)
	port := freeUDPPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := runner.Command(ctx, binary, "pps", "server", "--bind", "127.0.0.1", "--port", port, "--once", "--json")
	var srvErr syncbuf.Buffer
	srv.Stderr = &srvErr
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := bufio.NewScanner(out)
	var events []map[string]any
	var raw strings.Builder
	go func() {
		for lines.Scan() {
			raw.WriteString(lines.Text() + "\n")
			var e map[string]any
			if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
				t.Errorf("server line %q is not JSON", lines.Text())
			}
			events = append(events, e)
		}
		done <- srv.Wait()
	}()
	var r result
	for range 50 { // the server may take a moment to listen
		r = ovpnperf(t, "pps", "client", "127.0.0.1", "-p", port, "--count", "100", "--rate", "1000")
		if r.code == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.code != 0 {
		t.Fatalf("client: exit %d\n%s\nserver's stderr:\n%s", r.code, r.stderr, srvErr.String())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("server: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pps server --once still running after its session")
	}
	if len(events) != 2 || events[0]["event"] != "accepted" || events[1]["event"] != "finished" {
		t.Errorf("events %v", events)
	}
	if ids := checkSchema(t, "pps server --json", raw.String(), true); len(ids) != 2 {
		t.Errorf("pps server --json: %d lines follow their schema, want 2", len(ids))
	}
}

func TestPPSSummaryText(t *testing.T) {
	r := &pps.Result{
		Counters:    pps.Counters{Sent: 20000, Received: 19000, Lost: 1000, Late: 3, Duplicates: 1, Reordered: 2},
		LossPercent: 5, SendSeconds: 10, PPSMedian: 1900, PPSMin: 1850, PPSMax: 1950, PPSMean: 1900, SentPPSMean: 2000,
		RTTMinUs: 20100, RTTP50Us: 20250.5, RTTP90Us: 20400, RTTP99Us: 21000, RTTMaxUs: 30000,
		CPU:          pps.CPU{UserS: 0.1, SystemS: 0.2, Percent: 3},
		ServerReport: &pps.ServerReport{Received: 19500, Echoed: 19500},
		ServerCPU:    &pps.CPU{UserS: 0.05, SystemS: 0.1, Percent: 1.5},
		Warnings:     []string{"the server caps the duration at 5m0s"},
	}
	var b strings.Builder
	b.WriteString(formatInterval(pps.Interval{StartS: 1, EndS: 2, Sent: 2000, Received: 1900, Lost: 100, LossPercent: 5, SentPPS: 2000, PPS: 1900, RTTMinUs: 20100, RTTMeanUs: 20250, RTTMaxUs: 30000}) + "\n")
	writePPSSummary(&b, r)
	want := `  1.00-2.00   s       2000       1900      100 ( 5.00%)         2000         1900  20100.0/20250.0/30000.0
- - - - - - - - - - - - - - - - - - - - - - - - -
sent 20000, received 19000, lost 1000 (5.000%) in 10.00 s; late 3, duplicates 1, reordered 2
echo rate: median 1900 pps over whole seconds (min 1850, max 1950), mean 1900 pps; sent 2000 pps
RTT: min 20100.0 us, p50 20250.5 us, p90 20400.0 us, p99 21000.0 us, max 30000.0 us
client CPU: 0.10 s user, 0.20 s system (3% of a core)
server: received 19500, echoed 19500; CPU 0.05 s user, 0.10 s system (2% of a core)
warning: the server caps the duration at 5m0s
`
	if b.String() != want {
		t.Errorf("text report:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestPPSOneWaySummaryText(t *testing.T) {
	r := &pps.Result{
		Params:      pps.Params{OneWay: true},
		Counters:    pps.Counters{Sent: 20000, Received: 19000, Lost: 1000},
		LossPercent: 5, SendSeconds: 10, PPSMedian: 1900, PPSMin: 1850, PPSMax: 1950, PPSMean: 1900, SentPPSMean: 2000,
		CPU:          pps.CPU{UserS: 0.1, SystemS: 0.2, Percent: 3},
		ServerReport: &pps.ServerReport{Received: 19000},
		ServerCPU:    &pps.CPU{UserS: 0.05, SystemS: 0.1, Percent: 1.5},
	}
	var b strings.Builder
	b.WriteString(formatOneWayInterval(pps.Interval{StartS: 1, EndS: 2, Sent: 2000, Received: 1900, Lost: 100, LossPercent: 5, SentPPS: 2000, PPS: 1900}) + "\n")
	writePPSSummary(&b, r)
	want := `  1.00-2.00   s       2000       1900      100 ( 5.00%)         2000         1900
- - - - - - - - - - - - - - - - - - - - - - - - -
one way: sent 20000, server received 19000, lost 1000 (5.000%) in 10.00 s; duplicates 0
server rate: median 1900 pps over whole seconds (min 1850, max 1950), mean 1900 pps; sent 2000 pps
RTT: not measured (one-way test)
client CPU: 0.10 s user, 0.20 s system (3% of a core)
server CPU: 0.05 s user, 0.10 s system (2% of a core)
`
	if b.String() != want {
		t.Errorf("text report:\n%s\nwant:\n%s", b.String(), want)
	}
}
