package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
)

// hangingPrograms puts an openvpn and an iperf3 that never answer first
// on PATH (each a shell that starts a sleep holding its output open) and
// returns the environment and the sleep's marker argument.
func hangingPrograms(t *testing.T) ([]string, string) {
	t.Helper()
	dir := t.TempDir()
	marker := fmt.Sprintf("%d.%d%d", 600+os.Getpid()%100, time.Now().Nanosecond()%1000, hangingSeq.Add(1))
	for _, p := range []string{"openvpn", "iperf3"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\nsleep "+marker+"\necho never\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	// Whatever the test's end, no fake program or sleep of its outlives it.
	t.Cleanup(func() {
		for _, pid := range sleepsWith(marker) {
			if b, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil {
				var ppid int
				if f := strings.Fields(string(b)); len(f) > 3 {
					fmt.Sscan(f[3], &ppid)
				}
				if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ppid)); strings.Contains(string(c), dir) {
					syscall.Kill(ppid, syscall.SIGKILL)
				}
			}
			exec.Command("kill", pid).Run()
		}
	})
	return append(env, "PATH="+dir+":"+os.Getenv("PATH")), marker
}

// hangingSeq tells apart the markers of one process's calls of
// hangingPrograms.
var hangingSeq atomic.Int64

// sleepsWith lists the processes running `sleep MARKER`.
func sleepsWith(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == "sleep\x00"+marker+"\x00" {
			out = append(out, e.Name())
		}
	}
	return out
}

// An openvpn or iperf3 on PATH that hangs does not hang the commands that
// ask them their version (version, --version, lint's installed version):
// after a few seconds the fact is unknown, said so, and the programs and
// what they started are gone. version waited forever.
func TestVersionDoesNotWaitForHangingPrograms(t *testing.T) {
	// It waits on the commands' 5 s time-outs, bounded at 40 s: it
	// overlaps the other tests that judge no rate.
	t.Parallel()
	conf := filepath.Join(t.TempDir(), "c.conf")
	if err := os.WriteFile(conf, []byte("client\ndev tun\nremote 192.0.2.1 1194\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "openvpn:  unknown (`openvpn --version` did not answer within 5s)"},
		{[]string{"version"}, "iperf3:   unknown (`iperf3 --version` did not answer within 5s)"},
		{[]string{"version", "--json"}, `"openvpn": "unknown (` + "`openvpn --version`" + ` did not answer within 5s)"`},
		{[]string{"--version"}, "openvpn:  unknown"},
		{[]string{"lint", conf}, ""},
	}
	// Each case has its own hanging programs and sleeps, and the cases
	// run at the same time: their 5 s waits overlap (as parallel
	// subtests they waited for the package's few parallel slots).
	type run struct {
		so, se   bytes.Buffer
		err      error
		took     time.Duration
		timedOut bool
		left     []string // the case's sleeps still running 3 s after it ended
	}
	runs := make([]*run, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		env, marker := hangingPrograms(t)
		r := &run{}
		runs[i] = r
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, c.args...)
			cmd.Env = env
			cmd.Stdout, cmd.Stderr = &r.so, &r.se
			start := time.Now()
			r.err = cmd.Run()
			r.took = time.Since(start)
			r.timedOut = ctx.Err() != nil
			// The killed programs' children go with them.
			deadline := time.Now().Add(3 * time.Second)
			for len(sleepsWith(marker)) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if r.left = sleepsWith(marker); len(r.left) > 0 {
				for _, pid := range r.left {
					exec.Command("kill", pid).Run()
				}
			}
		})
	}
	wg.Wait()
	for i, c := range cases {
		r := runs[i]
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			if r.timedOut {
				t.Fatalf("still running after 40 s (stderr %q)", r.se.String())
			}
			var ee *exec.ExitError
			if r.err != nil && !(errors.As(r.err, &ee) && c.args[0] == "lint") {
				t.Fatalf("%v\nstdout %s\nstderr %s", r.err, r.so.String(), r.se.String())
			}
			if !strings.Contains(r.so.String(), c.want) {
				t.Errorf("output does not say %q:\n%s\nstderr %s", c.want, r.so.String(), r.se.String())
			}
			t.Logf("took %v", r.took)
			if len(r.left) > 0 {
				t.Errorf("the hanging programs' sleeps still run: %v", r.left)
			}
		})
	}
}

// largeRunDocument writes a run document of about size bytes (many rows
// with many samples) that reads, checks and renders slowly.
func largeRunDocument(t *testing.T, path string, size int) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(`{"schema":"ovpnperf/run/v2","scenario":{"command":"lab run","networks":[{"name":"lan"}]},"rows":[`)
	samples := strings.TrimSuffix(strings.Repeat("123456789.5,", 2000), ",")
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"network":"lan","variant":"v%d","path":"tunnel","direction":"up","proto":"udp","samples_bps":[%s],"median_bps":123456789.5,"min_bps":123456789.5,"max_bps":123456789.5,"valid":true}`, i, samples)
	}
	b.WriteString("]}")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// SIGTERM and SIGINT end report and compare promptly while they read,
// check or render a large document, with the documented status (130,
// "ovpnperf: interrupted") and no output file or temporary file left:
// they ran to the end and exited 0. The signal is sent once the process
// has used a second of CPU, so it lands in the work; a document read
// before that makes the test fail, not pass.
func TestSignalEndsLargeReport(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "big.json")
	largeRunDocument(t, doc, 60<<20)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		for _, args := range [][]string{
			{"report", doc, "-o", filepath.Join(dir, "out.html")},
			{"report", doc},
			{"compare", doc, doc, "--html", filepath.Join(dir, "cmp.html")},
		} {
			t.Run(sig.String()+"/"+strings.Join(args[:1], " ")+fmt.Sprint(len(args)), func(t *testing.T) {
				before := listTree(t, dir)
				cmd := exec.Command(binary, args...)
				var se bytes.Buffer
				cmd.Stderr = &se
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				busy := time.After(60 * time.Second)
			wait:
				for {
					select {
					case err := <-done:
						t.Fatalf("ended before the signal (%v, stderr %q): make the document larger", err, se.String())
					case <-busy:
						cmd.Process.Kill()
						t.Fatal("used no second of CPU in 60 s")
					case <-time.After(20 * time.Millisecond):
						if cpu, err := cpuacct.Read(cmd.Process.Pid); err == nil && cpu.Total() >= time.Second {
							break wait
						}
					}
				}
				sent := time.Now()
				cmd.Process.Signal(sig)
				select {
				case err := <-done:
					var ee *exec.ExitError
					if !errors.As(err, &ee) || ee.ExitCode() != 130 || strings.TrimSpace(se.String()) != "ovpnperf: interrupted" {
						t.Errorf("after %v: %v, stderr %q; want exit 130 and ovpnperf: interrupted", sig, err, se.String())
					}
					t.Logf("ended %v after the signal", time.Since(sent))
				case <-time.After(2 * time.Second):
					cmd.Process.Kill()
					<-done
					t.Errorf("still running 2 s after %v", sig)
				}
				if after := listTree(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
					t.Errorf("files left:\nbefore %v\nafter  %v", before, after)
				}
			})
		}
	}
}

// The services stop cleanly on SIGTERM and SIGINT and exit 0, as README
// says (systemd expects it of a service): pps server here, cluster serve
// in TestClusterServeListenersInLab. The port is a random high one, tried again
// when taken.
func TestPPSServerStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			for try := 0; ; try++ {
				port := 20000 + (os.Getpid()*7+try*131+int(sig)*17)%40000
				r := startBackground(t, "pps", "server", "--bind", "127.0.0.1", "--port", fmt.Sprint(port))
				deadline := time.Now().Add(20 * time.Second)
				for !strings.Contains(r.output(), "listening on") && time.Now().Before(deadline) {
					if strings.Contains(r.output(), "address already in use") {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if strings.Contains(r.output(), "address already in use") && try < 5 {
					r.stop(t, syscall.SIGKILL)
					continue
				}
				r.waitFor(t, "listening on", time.Second)
				if code := r.stop(t, sig); code != 0 || strings.Contains(r.output(), "interrupted") {
					t.Errorf("pps server after %v: exit %d, output %q; want 0 (README)", sig, code, r.output())
				}
				return
			}
		})
	}
}
