package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/tune"
)

// checkGoneTune fails if any lab of a tune run named NAME is left (its
// rounds are NAME-r1, NAME-r2 …) or any process of a lab still runs.
func checkGoneTune(t *testing.T, name string) {
	t.Helper()
	labtest.CheckGonePrefix(t, name+"-r")
	for pid := range labProcesses(name + "-r") {
		t.Errorf("process %d of a lab of this run still runs after tune ended", pid)
	}
}

// Must show 3: with a small budget tune stops on time (within the budget
// plus one sample and the teardown, generously) and reports what it has.
func TestTuneBudget(t *testing.T) {
	testenv.Exclusive(t)
	labtest.Require(t)
	testenv.RequirePrograms(t, "openvpn", "iperf3")
	name := "tb" + lab.NewName()[:6]
	const budget = 30 * time.Second // the least --budget tune takes
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	page := filepath.Join(t.TempDir(), "tune.html")
	cmd := runner.Command(ctx, binary, "tune", "--name", name, "--rate", "20mbit", "--rtt", "10ms",
		"--budget", budget.String(), "--time", "2s", "--omit", "0s", "--json", "--html", page)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("tune: %v\n%s", err, stderr.String())
	}
	// One sample is 2 s plus iperf3's start; the teardown of a lab with a
	// few tunnels takes seconds on a loaded machine: 25 s is generous.
	if took > budget+25*time.Second {
		t.Errorf("tune with --budget %v took %v", budget, took)
	}
	checkSchema(t, "tune --json", stdout.String(), false)
	var res tune.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("JSON: %v\n%s", err, stdout.String())
	}
	if res.Stopped != tune.StoppedBudget || len(res.Steps) == 0 || res.Verdict.Message == "" || res.Best.Variant == "" {
		t.Errorf("stopped %q, %d steps, verdict %q, best %q", res.Stopped, len(res.Steps), res.Verdict.Message, res.Best.Variant)
	}
	if n := len(res.Steps[0].Candidates[0].Samples["up"]); n == 0 {
		t.Errorf("no sample recorded in round 1: %+v", res.Steps[0])
	}
	// The verdict is a record too: tuned-faster in a direction when a
	// best was found, no-faster-setting otherwise.
	verdicts := 0
	for _, f := range res.Findings {
		if err := f.Check(); err != nil {
			t.Error(err)
		}
		if f.Kind == finding.TunedFaster && res.Verdict.Found || f.Kind == finding.NoFasterSetting && !res.Verdict.Found {
			verdicts++
		}
	}
	if verdicts == 0 {
		t.Errorf("found %v, but no finding of the verdict: %+v", res.Verdict.Found, res.Findings)
	}
	// --html wrote the report page of this run: the search path charted,
	// a bar per candidate of round 1.
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatalf("--html: %v", err)
	}
	for _, c := range res.Steps[0].Candidates {
		if want := `data-round="1" data-variant="` + c.Name + `"`; !strings.Contains(string(html), want) {
			t.Errorf("the --html page has no bar for round 1 %s", c.Name)
		}
	}
	if !strings.Contains(string(html), "Search path, up") {
		t.Errorf("the --html page has no search path chart")
	}
	checkGoneTune(t, name)
}

// Must show 4: Ctrl-C stops the search, prints the best so far and leaves
// no lab, process or file.
func TestTuneInterrupted(t *testing.T) {
	// It judges the exit status, the report and what its own run (NAME-r…)
	// left, not a rate: it overlaps the other tests that judge none.
	t.Parallel()
	labtest.Require(t)
	testenv.RequirePrograms(t, "openvpn", "iperf3")
	name := "ti" + lab.NewName()[:6]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// 1-second samples: the interrupt comes after the second, whatever
	// their length.
	cmd := runner.Command(ctx, binary, "tune", "--name", name, "--rate", "20mbit", "--budget", "10m", "--time", "1s", "--omit", "0s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once round 1 has a few samples in (the experiment's
	// progress counts them).
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "(2/3)") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("interrupted tune exited %v, want status 130\n%s", err, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "interrupted") || !strings.Contains(out, "nothing beats the default") && !strings.Contains(out, "best:") {
		t.Errorf("no best-so-far report after the interrupt:\n%s", out)
	}
	checkGoneTune(t, name)
}

func TestTuneRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--budget", "1s"},
		{"--fix", "proto=sctp"},
		{"--fix", "mtu=up /bin/sh"},
		{"--repeat", "2"},
		{"--rate", "-5mbit"},
		{"--probe", "x.json", "--rate", "5mbit"},
		{"--html", "/nonexistent-ovpnperf/tune.html"},
	} {
		r := ovpnperf(t, append([]string{"tune"}, args...)...)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("tune %q: exit %d, stderr %q; want 2 and one line", args, r.code, r.stderr)
		}
	}
}

// The seam to advise: for the four paths of the advise issue, advise's
// variant is one lab run (and so tune) accepts and tune groups it by axis.
func TestTuneAdviceOnIssuePaths(t *testing.T) {
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	sym := func(rate uint64, rtt time.Duration, loss float64) labpath.Path {
		l := labpath.Link{RateBitsPerSec: rate, Delay: rtt / 2, LossPercent: loss}
		return labpath.Path{Up: l, Down: l}
	}
	b := sym(100e6, ms(10), 0)
	b.MTU, b.ICMPBlackhole = 1400, true
	for name, p := range map[string]labpath.Path{"a": sym(20e6, ms(200), 0), "b": b, "c": {}, "d": sym(5e6, ms(300), 2)} {
		a, err := tune.AdviceForPath(p, 4<<20)
		if err != nil || a.Candidate == nil {
			t.Errorf("path %s: %v, %+v", name, err, a)
			continue
		}
		t.Logf("path %s: advise %s → %v", name, a.Variant, a.Candidate.Settings)
	}
}

// The text output when nothing beats the default: it says so with the
// reason, gives no best variant or config lines, and compares nothing
// with itself. A fake twin in which jumbo wins round 1 but loses round 3
// downward beyond the spread.
func TestPrintTuneNothingBeatsDefault(t *testing.T) {
	m := func(ctx context.Context, round int, cands []tune.Named) (map[string]tune.Samples, []string, error) {
		out := map[string]tune.Samples{}
		for _, c := range cands {
			up, down := 50e6, 50e6
			if c.Settings[tune.AxisMTU] == tune.Jumbo {
				up, down = 65e6, 65e6
				if round == 3 {
					down = 35e6
				}
			}
			out[c.Name] = tune.Samples{"up": {0.99 * up, up, 1.01 * up}, "down": {0.99 * down, down, 1.01 * down}}
		}
		return out, nil, nil
	}
	res, err := tune.Run(context.Background(), tune.Options{Budget: time.Minute, Measure: m})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	printTune(&buf, res, "")
	out := buf.String()
	for _, want := range []string{"nothing beats the default: the search's best, c1, did not beat the default in every round", "slower in 1", "up: default 50.0 (49.5–50.5) Mbit/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "best:") || strings.Contains(out, "server.conf") {
		t.Errorf("a best printed although nothing beats the default:\n%s", out)
	}
	// advise's variant is the default here: no gap of the default with
	// itself.
	res, err = tune.Run(context.Background(), tune.Options{Budget: time.Minute, Measure: m,
		Advice: tune.Advice{Candidate: &tune.Candidate{Proto: "udp", Settings: map[string]string{}}, Variant: "advised=", Note: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	printTune(&buf, res, "")
	if out := buf.String(); !strings.Contains(out, "advise's variant is the best reported") || strings.Contains(out, "gap") {
		t.Errorf("advise = default:\n%s", out)
	}
}
