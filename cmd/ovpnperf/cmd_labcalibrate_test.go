package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/emulate"
	"github.com/ovpnperf/ovpnperf/internal/emulate/ceilingdoc"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/syncbuf"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// lab status shows, for each lab with emulation, the ceiling this host's
// record gives its backend, or says it is not measured and how to measure
// it; a lab without emulation has no ceiling. No root: the labs are state
// files in a directory of the test's, the record a file of its own.
func TestLabStatusCeiling(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := lab.Env{Base: filepath.Join(dir, "labs"), Ceiling: filepath.Join(dir, "emulator-ceiling.json")}
	for _, st := range []lab.State{
		{Name: "emu", Backend: labpath.BackendNFQueue, Path: labpath.Path{Up: labpath.Link{Delay: 10 * time.Millisecond}, Down: labpath.Link{Delay: 10 * time.Millisecond}}},
		{Name: "plain", Backend: labpath.BackendNone},
	} {
		b, _ := json.Marshal(st)
		if err := os.MkdirAll(filepath.Join(env.Base, st.Name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(env.Base, st.Name, "state.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	status := func() (string, []labStatus) {
		t.Helper()
		out, err := labStatuses(env, nil)
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		if err := printLabStatus(&text, out); err != nil {
			t.Fatal(err)
		}
		// Through JSON, as --json prints it.
		var js bytes.Buffer
		if err := writeJSON(&js, out); err != nil {
			t.Fatal(err)
		}
		var back []labStatus
		if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back) != 2 {
			t.Fatalf("%v\n%s", err, js.String())
		}
		if back[1].Name != "plain" || back[1].Ceiling != nil || strings.Contains(js.String(), `"emulation_ceiling": null`) {
			t.Errorf("a lab without emulation has a ceiling:\n%s", js.String())
		}
		return text.String(), back
	}

	text, st := status()
	want := "ceiling not measured on this host: `ovpnperf lab calibrate` measures it (up to "
	if c := st[0].Ceiling; c == nil || c.Status != emulate.CeilingNotMeasured || c.Backend != labpath.BackendNFQueue || c.Record != nil || !strings.Contains(c.Summary, want) {
		t.Errorf("no record: %+v", st[0].Ceiling)
	}
	if !strings.Contains(text, "  emulator: nfqueue, "+want) || strings.Count(text, "emulator: ") != 1 {
		t.Errorf("lab status without a record:\n%s", text)
	}

	rec := ceilingdoc.Ceiling{Schema: emulate.CeilingSchema, Backend: labpath.BackendNFQueue, Time: time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC),
		Kernel: hostinfo.KernelRelease(), CPUs: hostinfo.CPUCount(), LoadBefore: [3]float64{0.4, 0.5, 0.6}, LoadAfter: [3]float64{1.5, 0.7, 0.6},
		PacketBytes: 1400, Delay: 20 * time.Millisecond, Tolerance: time.Millisecond, HeldPPS: 25000, CarriedPPS: 50000}
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(env.Ceiling, b, 0o644); err != nil {
		t.Fatal(err)
	}
	text, st = status()
	want = "emulator: nfqueue, held 25 000 pps/direction (1400 B, 20ms), at most 1 % late up to 50 000 pps, measured 2026-11-28 at load 0.40"
	if c := st[0].Ceiling; c == nil || c.Status != emulate.CeilingMeasured || c.Record == nil || c.Record.HeldPPS != 25000 || c.Record.LoadAfter != rec.LoadAfter || c.Summary != want {
		t.Errorf("with a record: %+v", st[0].Ceiling)
	}
	if !strings.Contains(text, "  "+want+"\n") {
		t.Errorf("lab status with a record:\n%s", text)
	}

	// Another kernel's record is not shown as this host's.
	rec.Kernel += "-other"
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(env.Ceiling, b, 0o644); err != nil {
		t.Fatal(err)
	}
	text, st = status()
	if c := st[0].Ceiling; c == nil || c.Status != emulate.CeilingStale || strings.Contains(text, "held 25 000") || !strings.Contains(text, "ceiling record is stale") {
		t.Errorf("stale record: %+v\n%s", st[0].Ceiling, text)
	}
}

// Bad input to lab calibrate is one line, exit 2, and creates nothing: no
// lab, no record.
func TestLabCalibrateBadInput(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "ceiling.json")
	labsBefore := calibrationLabs(t)
	for _, c := range []badCase{
		{[]string{"lab", "calibrate", "--duration", "-1s", "--record", record}, "--duration"},
		{[]string{"lab", "calibrate", "--duration", "0s", "--record", record}, "--duration"},
		{[]string{"lab", "calibrate", "--duration", "2m", "--record", record}, "--duration"},
		{[]string{"lab", "calibrate", "--rates", "5000,1000", "--record", record}, "--rates"},
		{[]string{"lab", "calibrate", "--rates", "0", "--record", record}, "--rates"},
		{[]string{"lab", "calibrate", "--rates", "", "--record", record}, "--rates"},
		{[]string{"lab", "calibrate", "--record", ""}, "--record"},
		{[]string{"lab", "calibrate", "--record", filepath.Join(dir, "missing", "ceiling.json")}, "--record"},
		{[]string{"lab", "calibrate", "--record", dir}, "--record"},
		{[]string{"lab", "calibrate", "now", "--record", record}, "now"},
	} {
		ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
	}
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Errorf("bad input wrote %s", record)
	}
	if after := calibrationLabs(t); after != labsBefore {
		t.Errorf("bad input left labs: namespaces and lab directories before %q, after %q", labsBefore, after)
	}
}

// calibrationLabs lists the namespaces and lab directories of calibration
// labs (cal-ID) on this host.
func calibrationLabs(t *testing.T) string {
	var out []string
	for _, d := range []struct{ dir, prefix string }{{netns.Dir, "ovpnperf-cal-"}, {lab.DefaultBaseDir, "cal-"}} {
		entries, _ := os.ReadDir(d.dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), d.prefix) {
				out = append(out, e.Name())
			}
		}
	}
	return strings.Join(out, " ")
}

// The command measures, prints the record it wrote (0644) and leaves no
// lab; interrupted (Ctrl-C), it exits 130, takes its lab down and writes
// no record.
func TestLabCalibrateCommand(t *testing.T) {
	testenv.Exclusive(t)
	labtest.Require(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "ceiling.json")
	labsBefore := calibrationLabs(t)
	r := ovpnperf(t, "lab", "calibrate", "--duration", "1s", "--rates", "1000", "--record", record, "--json").mustSucceed(t)
	var c ceilingdoc.Ceiling
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil || c.Schema != emulate.CeilingSchema || len(c.Steps) != 1 || c.Steps[0].RatePPS != 1000 {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	checkSchema(t, "lab calibrate --json", r.stdout, false)
	b, err := os.ReadFile(record)
	if err != nil || string(b) != r.stdout {
		t.Errorf("record %v:\n%s\nprinted:\n%s", err, b, r.stdout)
	}
	if fi, err := os.Stat(record); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("record mode: %v %v", fi, err)
	}
	if !strings.Contains(r.stderr, "1000 pps/direction, try 1: ") {
		t.Errorf("progress: %s", r.stderr)
	}

	os.Remove(record)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := runner.Command(ctx, binary, "lab", "calibrate", "--duration", "30s", "--rates", "1000", "--record", record)
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	name := ""
	for deadline := time.Now().Add(20 * time.Second); name == "" && time.Now().Before(deadline); {
		if m := calibrationName.FindStringSubmatch(stderr.String()); m != nil {
			name = m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Into the step: its lab is up.
	for deadline := time.Now().Add(20 * time.Second); len(lab.NamespacesOf(name)) < 3 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second)
	_ = cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "ovpnperf: interrupted") {
		t.Errorf("interrupted calibration: %v\n%s", err, stderr.String())
	}
	if name == "" {
		t.Fatalf("no lab name in %q", stderr.String())
	}
	labtest.CheckGone(t, name)
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Errorf("an interrupted calibration wrote %s", record)
	}
	if after := calibrationLabs(t); after != labsBefore {
		t.Errorf("labs before %q, after %q", labsBefore, after)
	}
}

var calibrationName = regexp.MustCompile(`in lab (cal-[0-9a-f]+):`)
