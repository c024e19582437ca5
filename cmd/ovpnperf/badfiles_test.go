package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// runLimited runs the binary with stdin and a limit; past the limit it is
// killed and the test fails: a command that reads a file must never hang.
// It returns the result and the CPU time the process used.
func runLimited(t *testing.T, limit time.Duration, stdin io.Reader, args ...string) (result, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := runner.Command(ctx, append([]string{binary}, args...)...)
	var so, se bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &so, &se
	err := cmd.Run()
	var took time.Duration
	if cmd.ProcessState != nil {
		took = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	r := result{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("ovpnperf %s: still running after %v (stderr %q)", strings.Join(args, " "), limit, se.String())
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running ovpnperf %s: %v", strings.Join(args, " "), err)
	}
	return r, took
}

// listTree names every file under dir, to see that a refused command
// created nothing there.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// badFileFixtures makes the files the hostile cases name: FIFOs, files
// past their kind's cap, documents with impossible figures, links.
func badFileFixtures(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Sparse files past the caps: 16 MiB for a config, 64 MiB for a
	// document (no disk space used).
	for name, size := range map[string]int64{"huge.conf": 16<<20 + 1, "huge.json": 64<<20 + 1} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(size)
		f.Close()
	}
	// A gzip bomb: 17 MiB of spaces in a few KiB.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte(" "), 17<<20))
	zw.Close()
	write("bomb.conf.gz", gz.String())
	write("client.conf", "client\ndev tun\nremote 192.0.2.1 1194\n")
	write("inc-zero.conf", "client\nconfig /dev/zero\n")
	write("inc-fifo.conf", "client\nconfig fifo\n")
	write("inc-dir.conf", "client\nconfig subdir\n")
	run := func(rows string) string {
		return `{"schema":"ovpnperf/run/v2","scenario":{"command":"recipe mtu","networks":[{"name":"lan"}]},"rows":[` + rows + `]}`
	}
	// samples are in ascending order: min and max are the first and last.
	row := func(variant, proto, samples, median string) string {
		s := strings.Split(samples, ",")
		return `{"network":"lan","variant":"` + variant + `","path":"tunnel","direction":"up","proto":"` + proto + `","samples_bps":[` + samples + `],"median_bps":` + median + `,"min_bps":` + s[0] + `,"max_bps":` + s[len(s)-1] + `,"valid":true}`
	}
	write("good.json", run(row("a", "udp", "1,2,3", "2")))
	write("negative.json", run(row("a", "udp", "1,2,3", "-500e6")))
	write("huge-rate.json", run(row("a", "udp", "1e308,1e308,1e308", "1e308")))
	write("overflow.json", run(row("a", "udp", "1e400", "2")))
	write("neg-interval.json", run(`{"network":"lan","variant":"a","path":"tunnel","direction":"up","proto":"udp","samples_bps":[1],"samples":[{"bps":1,"intervals":[{"start_s":-1,"end_s":1,"bps":1}]}],"median_bps":1,"min_bps":1,"max_bps":1,"valid":true}`))
	write("dup.json", run(row("a", "udp", "1,2,3", "2")+","+row("a", "udp", "4,5,6", "5")))
	write("dup-proto.json", run(row("a", "udp", "1,2,3", "2")+","+row("a", "tcp", "4,5,6", "5")))
	withFinding := func(f string) string {
		return strings.TrimSuffix(run(row("a", "udp", "1,2,3", "2")), "}") + `,"findings":[` + f + `]}`
	}
	write("finding-kind.json", withFinding(`{"kind":"slow","subject":{"network":"lan"},"outcome":"confirmed","text":"x"}`))
	write("finding-row.json", withFinding(`{"kind":"path-bound","subject":{"network":"lan","rows":[5]},"outcome":"confirmed","text":"x"}`))
	write("null-list.json", "[null]")
	write("empty-list.json", "[]")
	write("null.json", "null")
	write("no-schema.json", `{"rows":[]}`)
	write("labrun.json", strings.Replace(run(row("a", "udp", "1,2,3", "2")), "recipe mtu", "lab run", 1))
	write("pmtu-rtt.json", `{"schema":"ovpnperf/pmtu/v1","path_mtu":1500,"blackhole":false,"explanation":"x","rtt_ms":1e308}`)
	write("pmtu-neg.json", `{"schema":"ovpnperf/pmtu/v1","path_mtu":1500,"blackhole":false,"explanation":"x","elapsed_seconds":-3}`)
	write("pps-neg.json", `{"schema":"ovpnperf/pps/v1","pps_median":-1,"series":[],"flows":1}`)
	write("pmtu-mtu.json", `{"schema":"ovpnperf/pmtu/v1","path_mtu":-1400,"blackhole":false,"explanation":"x","elapsed_seconds":3}`)
	write("pps-size.json", `{"schema":"ovpnperf/pps/v1","pps_median":1000,"series":[],"flows":-1,"size_bytes":-18}`)
	write("tune-inf.json", `{"schema":"ovpnperf.tune/2","budget_seconds":1e300}`)
	write("cluster-neg.json", `{"id":"ab12","instances":[{"name":"i0","view_age_seconds":-5}]}`)
	probe := `{"schema":"ovpnperf/probe/v1","host":"198.51.100.2","time":"2026-11-23T10:00:00Z","path":{"rtt_ms":{"value":RTT,"source":"measured"},"path_rate_bps":{"value":RATE,"source":"measured"},"loss_percent":{"value":LOSS,"source":"measured"}}}`
	for name, r := range map[string][]string{"probe-rtt.json": {"RTT", "1e308"}, "probe-rate.json": {"RATE", "-1"}, "probe-loss.json": {"LOSS", "150"}} {
		s := strings.NewReplacer("RTT", "10", "RATE", "1e8", "LOSS", "0").Replace(strings.Replace(probe, r[0], r[1], 1))
		write(name, s)
	}
	return dir
}

// Every input the tool reads is refused, not read forever, when it is
// not a regular file or is larger than its kind allows; documents with
// impossible figures, duplicate rows or the wrong schema are refused;
// output paths are checked before anything is read. Each case exits 2
// with one line naming the problem, creates nothing, and uses under 2 s
// of CPU (most of these hung or ran out of memory before). A hang is
// caught by a 10 s wall-clock limit: the machines tests run on are
// shared, and a start of the binary alone has taken over 2 s there.
func TestBadFilesRefused(t *testing.T) {
	testenv.Exclusive(t)
	dir := badFileFixtures(t)
	in := func(name string) string { return filepath.Join(dir, name) }
	good := in("good.json")
	cases := []struct {
		args []string
		want string
	}{
		// Files that never end.
		{[]string{"lint", "/dev/zero"}, "character device"},
		{[]string{"lint", "/dev/urandom"}, "character device"},
		{[]string{"lint", in("inc-zero.conf")}, "config /dev/zero"},
		{[]string{"lint", "--log", "/dev/zero"}, "--log"},
		{[]string{"lint", in("client.conf"), "--log", "/dev/zero"}, "character device"},
		{[]string{"report", "/dev/zero"}, "character device"},
		{[]string{"report", good, "/dev/zero"}, "character device"},
		{[]string{"compare", "/dev/zero", "/dev/zero"}, "character device"},
		{[]string{"compare", good, "/dev/zero"}, "character device"},
		{[]string{"recipe", "judge", "/dev/zero"}, "character device"},
		{[]string{"advise", "--probe", "/dev/zero"}, "character device"},
		{[]string{"schema", "check", good, "/dev/zero"}, "character device"},
		{[]string{"cluster", "client-config", "abcd", "--host", "h", "--base", "/dev/zero"}, "--base"},
		{[]string{"lint", in("huge.conf")}, "larger than 16 MiB"},
		{[]string{"lint", in("bomb.conf.gz")}, "larger than 16 MiB"},
		{[]string{"report", in("huge.json")}, "larger than 64 MiB"},
		{[]string{"recipe", "judge", in("huge.json")}, "larger than 64 MiB"},
		{[]string{"compare", in("huge.json"), good}, "larger than 64 MiB"},
		{[]string{"advise", "--probe", in("huge.json")}, "larger than 64 MiB"},
		{[]string{"schema", "check", in("huge.json")}, "larger than 64 MiB"},
		// Files that never answer, and other non-regular files.
		{[]string{"lint", in("fifo")}, "FIFO"},
		{[]string{"lint", in("inc-fifo.conf")}, "FIFO"},
		{[]string{"lint", in("inc-dir.conf")}, "directory"},
		{[]string{"lint", "--log", in("fifo")}, "FIFO"},
		{[]string{"lint", "--log", in("subdir")}, "directory"},
		{[]string{"report", in("fifo")}, "FIFO"},
		{[]string{"report", in("subdir")}, "directory"},
		{[]string{"compare", in("fifo"), good}, "FIFO"},
		{[]string{"recipe", "judge", in("fifo")}, "FIFO"},
		{[]string{"advise", "--probe", in("fifo")}, "FIFO"},
		{[]string{"advise", "--probe", in("subdir")}, "directory"},
		{[]string{"schema", "check", in("fifo")}, "FIFO"},
		{[]string{"cluster", "client-config", "abcd", "--host", "h", "--base", in("fifo")}, "FIFO"},
		{[]string{"pps", "server", "--key-file", in("fifo")}, "--key-file"},
		// Output paths checked before any work.
		{[]string{"compare", "--html", "/nonexistent/x.html", good, good}, "--html"},
		{[]string{"compare", "--html", dir, good, good}, "is a directory"},
		{[]string{"compare", "--html", in("fifo") + "/x.html", good, good}, "--html"},
		{[]string{"report", "-o", "/tmp", good}, "is a directory"},
		{[]string{"report", "-o", "/nonexistent/x.html", good}, "-o/--out"},
		{[]string{"report", "-o", "/proc/version/x.html", good}, "-o/--out"},
		{[]string{"tune", "--out", "/nonexistent/x.json"}, "--out"},
		{[]string{"tune", "--out", "/tmp"}, "is a directory"},
		{[]string{"cluster", "client-config", "abcd", "--host", "h", "--base", in("client.conf"), "-o", "/nonexistent/x"}, "-o/--output"},
		{[]string{"cluster", "client-config", "abcd", "--host", "h", "--base", in("client.conf"), "-o", dir}, "is a directory"},
		{[]string{"lab", "run", "--html", "/tmp"}, "is a directory"},
		{[]string{"recipe", "mtu", "--out", dir}, "is a directory"},
		// Documents with figures no measurement gives.
		{[]string{"report", in("negative.json")}, "median_bps = -500e6"},
		{[]string{"report", in("huge-rate.json")}, "1e308"},
		{[]string{"report", in("overflow.json")}, "not a finite number"},
		{[]string{"report", in("neg-interval.json")}, "start_s = -1"},
		{[]string{"report", in("pmtu-rtt.json")}, "rtt_ms = 1e308"},
		{[]string{"report", in("pmtu-neg.json")}, "elapsed_seconds = -3"},
		{[]string{"report", in("pps-neg.json")}, "pps_median = -1"},
		{[]string{"report", in("pmtu-mtu.json")}, "path_mtu = -1400"},
		{[]string{"report", in("pps-size.json")}, "want a"},
		{[]string{"report", in("tune-inf.json")}, "budget_seconds = 1e300"},
		{[]string{"report", in("cluster-neg.json")}, "view_age_seconds = -5"},
		{[]string{"compare", in("negative.json"), good}, "median_bps = -500e6"},
		{[]string{"compare", good, in("huge-rate.json")}, "1e308"},
		{[]string{"recipe", "judge", in("negative.json")}, "median_bps = -500e6"},
		{[]string{"advise", "--probe", in("probe-rtt.json")}, "rtt_ms.value = 1e308"},
		{[]string{"advise", "--probe", in("probe-rate.json")}, "path_rate_bps.value = -1"},
		{[]string{"advise", "--probe", in("probe-loss.json")}, "loss_percent.value = 150"},
		// Findings that are not well formed.
		{[]string{"report", in("finding-kind.json")}, `findings[0]: finding kind "slow" is not one of`},
		{[]string{"compare", good, in("finding-row.json")}, "findings[0] (path-bound): row 5: the document has 1 rows"},
		// Duplicate rows, wrong or no schema, missing arguments.
		{[]string{"report", in("dup.json")}, "a second row for lan/a/up/udp"},
		{[]string{"compare", in("dup.json"), good}, "a second row"},
		{[]string{"compare", in("dup-proto.json"), good}, "a second row for network \"lan\", variant \"a\""},
		{[]string{"recipe", "judge", in("dup.json")}, "a second row"},
		{[]string{"recipe", "judge", in("null-list.json")}, "no \"schema\" key"},
		{[]string{"recipe", "judge", in("empty-list.json")}, "empty list"},
		{[]string{"recipe", "judge", in("null.json")}, "no \"schema\" key"},
		{[]string{"recipe", "judge", in("no-schema.json")}, "no \"schema\" key"},
		{[]string{"recipe", "judge", in("pmtu-neg.json")}, "elapsed_seconds"},
		{[]string{"recipe", "judge", in("labrun.json")}, "not a recipe's"},
		{[]string{"recipe", "judge"}, "give the FILE.json"},
		{[]string{"recipe", "judge", good, good}, "give one FILE.json"},
		{[]string{"recipe"}, "name a recipe"},
		{[]string{"report", in("null-list.json")}, "no \"schema\" key"},
	}
	before := listTree(t, dir)
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r, cpu := runLimited(t, 10*time.Second, nil, c.args...)
			r.mustBeUsageError(t, c.want)
			if cpu >= 2*time.Second {
				t.Errorf("used %v of CPU, want under 2 s", cpu)
			}
			if p := ownProcesses(); len(p) > 0 {
				t.Errorf("processes of ovpnperf left running: %v", p)
			}
		})
	}
	if after := listTree(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("files changed by the refused commands:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := os.Stat("/nonexistent"); err == nil {
		t.Error("/nonexistent created")
	}
}

// Output files are written without following a link at their name: the
// file the link points to keeps its content and mode (report -o, compare
// --html, lint --fix; cluster client-config -o and every other writer use
// the same outputfile.Write).
func TestOutputDoesNotFollowLinks(t *testing.T) {
	dir := badFileFixtures(t)
	good := filepath.Join(dir, "good.json")
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		link string
		args []string
	}{
		{"r.html", []string{"report", good, "-o", filepath.Join(dir, "r.html")}},
		{"c.html", []string{"compare", good, good, "--html", filepath.Join(dir, "c.html")}},
		{"client.conf.lint-fixed", []string{"lint", "--fix", filepath.Join(dir, "client.conf")}},
	} {
		link := filepath.Join(dir, c.link)
		os.Remove(link)
		if err := os.Symlink(victim, link); err != nil {
			t.Fatal(err)
		}
		r, _ := runLimited(t, time.Minute, nil, c.args...)
		if r.code == 2 {
			t.Fatalf("%v: %s", c.args, r.stderr)
		}
		b, _ := os.ReadFile(victim)
		fi, _ := os.Stat(victim)
		if string(b) != "precious\n" || fi.Mode().Perm() != 0o644 {
			t.Errorf("%v wrote through the link: victim now %q, mode %v", c.args, b, fi.Mode().Perm())
		}
		if li, err := os.Lstat(link); err != nil || !li.Mode().IsRegular() {
			t.Errorf("%v: %s is not a regular file now: %v", c.args, c.link, err)
		}
	}
}

// lint --fix in a directory the user cannot write is refused before the
// config is read, and leaves the directory as it was. Run as nobody (root
// may write anywhere).
func TestLintFixUnwritableDir(t *testing.T) {
	testenv.RequireRoot(t) // to run the binary as nobody
	dir, err := os.MkdirTemp("", "ovpnperf-fixro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700); os.RemoveAll(dir) })
	conf := filepath.Join(dir, "c.conf")
	if err := os.WriteFile(conf, []byte("client\ndev tun\nremote 192.0.2.1 1194\ncomp-lzo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "lint", "--fix", conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var se bytes.Buffer
	cmd.Stderr = &se
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("lint --fix as nobody: %v", err)
	}
	result{stderr: se.String(), code: ee.ExitCode()}.mustBeUsageError(t, "cannot write in "+dir)
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files made: %v", ents)
	}
}

// readingStdin reports whether a thread of pid is in read(0, …) (syscall
// 0 on amd64, fd 0), i.e. blocked on standard input.
func readingStdin(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", pid))
	for _, p := range tasks {
		b, _ := os.ReadFile(p)
		if strings.HasPrefix(string(b), "0 0x0 ") {
			return true
		}
	}
	return false
}

// SIGINT and SIGTERM end a command blocked reading standard input (a pipe
// and a named FIFO that no one writes) or a socket that never answers,
// with "ovpnperf: interrupted" and status 130, within 2 s.
func TestSignalsEndBlockedReads(t *testing.T) {
	dir := badFileFixtures(t)
	// A control socket that accepts and never answers, as a hung
	// cluster serve would.
	var id string
	for {
		id = fmt.Sprintf("%04x", rand.IntN(0x10000))
		if _, err := os.Stat(cluster.Paths{}.Dir(id)); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	ctl := cluster.Paths{}.ControlPath(id)
	if err := os.MkdirAll(filepath.Dir(ctl), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cluster.Paths{}.Dir(id)) })
	l, err := net.Listen("unix", ctl)
	if err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	asked := make(chan struct{}, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-hang
	})}
	go srv.Serve(l)
	t.Cleanup(func() { close(hang); srv.Close() })

	fifo := filepath.Join(dir, "fifo")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, c := range []struct {
			name  string
			stdin string // "pipe", "fifo" or ""
			args  []string
		}{
			{"lint --log - from a pipe", "pipe", []string{"lint", "--log", "-"}},
			{"lint --log - from a FIFO", "fifo", []string{"lint", filepath.Join(dir, "client.conf"), "--log", "-"}},
			{"cluster status", "", []string{"cluster", "status", id}},
			{"cluster status --json", "", []string{"cluster", "status", id, "--json"}},
			{"cluster client-config", "", []string{"cluster", "client-config", id, "--host", "h", "--base", filepath.Join(dir, "client.conf")}},
		} {
			t.Run(sig.String()+"/"+c.name, func(t *testing.T) {
				cmd := exec.Command(binary, c.args...)
				var se bytes.Buffer
				cmd.Stderr = &se
				switch c.stdin {
				case "pipe":
					pr, pw, err := os.Pipe()
					if err != nil {
						t.Fatal(err)
					}
					defer pw.Close()
					defer pr.Close()
					cmd.Stdin = pr
				case "fifo":
					// Read-write, so that opening it does not wait
					// for a writer; nothing is ever written.
					f, err := os.OpenFile(fifo, os.O_RDWR, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					cmd.Stdin = f
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				// Wait until it blocks: in read(0, …) for standard
				// input, or with its request at the socket.
				select {
				case <-asked:
				default:
				}
				ready := time.After(10 * time.Second)
			wait:
				for {
					if c.stdin != "" && readingStdin(cmd.Process.Pid) {
						break
					}
					select {
					case err := <-done:
						t.Fatalf("ended before the signal: %v, %s", err, se.String())
					case <-asked:
						break wait
					case <-ready:
						t.Fatalf("not blocked in a read after 10 s")
					case <-time.After(20 * time.Millisecond):
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
					t.Errorf("still running 2 s after %v (stderr %q)", sig, se.String())
				}
			})
		}
	}
}
