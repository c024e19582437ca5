package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/etcdsrv"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// The lab's life cycle through the command line: up, status, exec, down, and
// nothing left.
func TestLabCommandLifeCycle(t *testing.T) {
	labtest.Require(t)
	name := "c" + lab.NewName()
	t.Cleanup(func() { ovpnperf(t, "lab", "down", name); labtest.CheckGone(t, name) })
	r := ovpnperf(t, "lab", "up", "--name", name, "--rate", "20mbit", "--rtt", "20ms", "--mtu", "1492").mustSucceed(t)
	if !strings.Contains(r.stdout, "lab "+name+" up") {
		t.Errorf("lab up output: %s", r.stdout)
	}
	var st []labStatus
	r = ovpnperf(t, "lab", "status", "--json").mustSucceed(t)
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	checkSchema(t, "lab status --json", r.stdout, false)
	var mine *labStatus
	for i := range st {
		if st[i].Name == name {
			mine = &st[i]
		}
	}
	if mine == nil {
		t.Fatalf("lab %s missing from status: %s", name, r.stdout)
	}
	if !mine.OwnerAlive || mine.Path.MTU != 1492 || mine.Path.Up.RateBitsPerSec != 20e6 || mine.Path.Down.Delay != 10*time.Millisecond || mine.Backend == "" {
		t.Errorf("status does not show the lab's settings: %+v", *mine)
	}
	r = ovpnperf(t, "lab", "exec", name, "client", "--", "ping", "-c", "2", "-i", "0.2", lab.ServerV4().String()).mustSucceed(t)
	if !strings.Contains(r.stdout, "2 received") {
		t.Errorf("ping through the lab: %s", r.stdout)
	}
	// exec passes on the command's exit status.
	if r := ovpnperf(t, "lab", "exec", name, "server", "--", "sh", "-c", "exit 7"); r.code != 7 {
		t.Errorf("exec exit status %d, want 7", r.code)
	}
	ovpnperf(t, "lab", "down", name).mustSucceed(t)
	labtest.CheckGone(t, name)
	// A second down of the same lab is a clear error, not a crash.
	ovpnperf(t, "lab", "down", name).mustBeUsageError(t, name)
}

// Must show 3 through the command line: SIGKILL the owner, then lab clean.
func TestLabCommandCleanAfterKill(t *testing.T) {
	labtest.Require(t)
	name := "c" + lab.NewName()
	t.Cleanup(func() { ovpnperf(t, "lab", "down", name) })
	st := labUpJSON(t, "--name", name, "--rtt", "10ms", "--loss", "1%")
	killOwner(t, st)
	r := ovpnperf(t, "lab", "status", name).mustSucceed(t)
	if !strings.Contains(r.stdout, "DEAD") {
		t.Errorf("status does not show the dead owner:\n%s", r.stdout)
	}
	cleanAfterKill(t, name, st)
}

// labUpJSON runs `ovpnperf lab up ARGS --json` and returns the state it
// printed.
func labUpJSON(t *testing.T, args ...string) lab.State {
	t.Helper()
	r := ovpnperf(t, append(append([]string{"lab", "up"}, args...), "--json")...).mustSucceed(t)
	var st lab.State
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("lab up --json: %v\n%s", err, r.stdout)
	}
	checkSchema(t, "lab up --json", r.stdout, false)
	return st
}

// killOwner SIGKILLs the owner of the lab st describes and waits (10 s at
// most) until the kernel has ended it (a zombie counts as gone).
func killOwner(t *testing.T, st lab.State) {
	t.Helper()
	if err := syscall.Kill(st.Owner.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing owner %d: %v", st.Owner.Pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.OwnerAlive() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// cleanAfterKill runs `lab clean NAME` for a lab whose owner was killed and
// checks that it reports the lab, that nothing of it is left and that the
// owner does not run.
func cleanAfterKill(t *testing.T, name string, st lab.State) {
	t.Helper()
	// By name: other engineers' and tests' orphans are not this test's.
	r := ovpnperf(t, "lab", "clean", name).mustSucceed(t)
	if !strings.Contains(r.stdout, name) {
		t.Errorf("clean did not report %s: %s", name, r.stdout)
	}
	labtest.CheckGone(t, name)
	// The killed owner may linger as a zombie until init reaps it; it must
	// not be running.
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(st.Owner.Pid) + "/stat"); err == nil && !strings.Contains(string(b), ") Z ") {
		t.Errorf("owner pid %d still running: %s", st.Owner.Pid, b)
	}
}

// The owner is `ovpnperf lab owner NAME` in ps, and
// OVPNPERF_LAB_OWNER (which used to turn any ovpnperf into an owner) in the
// environment of a normal command changes nothing.
func TestLabOwnerIsACommand(t *testing.T) {
	labtest.Require(t)
	name := "c" + lab.NewName()
	t.Cleanup(func() { ovpnperf(t, "lab", "down", name); labtest.CheckGone(t, name) })
	st := labUpJSON(t, "--name", name)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(st.Owner.Pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "), binary+" lab owner "+name; got != want {
		t.Errorf("owner's command line %q, want %q", got, want)
	}
	out, err := exec.Command("ps", "-o", "args=", "-p", strconv.Itoa(st.Owner.Pid)).Output()
	if err != nil || !strings.Contains(string(out), "lab owner "+name) {
		t.Errorf("ps shows the owner as %q (%v), want it to name lab %s", out, err, name)
	}
	for _, args := range [][]string{{"lab", "status", name}, {"lab", "status", "--json"}} {
		// A command turned owner would wait for SIGTERM: bound it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := runner.Command(ctx, append([]string{binary}, args...)...)
		cmd.Env = append(cmd.Env, "OVPNPERF_LAB_OWNER="+name)
		out, err := cmd.CombinedOutput()
		cancel()
		// An owner would have printed "ready" and waited; status lists.
		if err != nil || !strings.Contains(string(out), name) || strings.HasPrefix(string(out), "ready") {
			t.Errorf("ovpnperf %s with OVPNPERF_LAB_OWNER set: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if !st.OwnerAlive() {
		t.Errorf("the lab's owner died while commands ran with OVPNPERF_LAB_OWNER=%s", name)
	}
}

// Bad input: one line naming the flag, exit 2, nothing created.
func TestLabCommandBadInput(t *testing.T) {
	testenv.Exclusive(t)
	labtest.Require(t)
	// Only labs of this binary count: others' labs come and go on a
	// shared host.
	before := ownLabs(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "15furlongs"}, "--rate"},
		{[]string{"--rate", "0"}, "--rate"},
		{[]string{"--rtt", "-10ms"}, "--rtt"},
		{[]string{"--rtt", "11s"}, "--rtt"},
		{[]string{"--loss", "101%"}, "--loss"},
		{[]string{"--up-loss", "-1%"}, "--up-loss"},
		{[]string{"--mtu", "500"}, "--mtu"},
		{[]string{"--mtu", "1000"}, "1280"},
		{[]string{"--name", "Bad Name"}, "--name"},
		{[]string{"--jitter", "fast"}, "--jitter"},
		{[]string{"--frobnicate"}, "frobnicate"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ovpnperf(t, append([]string{"lab", "up"}, c.args...)...).mustBeUsageError(t, c.want)
		})
	}
	if after := ownLabs(t); len(after) > len(before) {
		t.Errorf("bad input created a lab: before %v, after %v", before, after)
	}
	// Not root: a usage error, nothing created.
	cmd := runner.Command(context.Background(), binary, "lab", "up")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "root") {
		t.Errorf("lab up as nobody: %v, stderr %q; want exit 2 naming root", err, stderr.String())
	}
	// A name in use.
	l := labtest.New(t, labpath.Path{})
	ovpnperf(t, "lab", "up", "--name", l.Name()).mustBeUsageError(t, "already in use")
	ovpnperf(t, "lab", "exec", l.Name(), "gateway", "--", "true").mustBeUsageError(t, "gateway")
}

// lab up --host --etcd through the command line: the hosts are in status
// and reach each other, etcd outlives `lab up` (it is a persistent lab's
// process) and answers with the serve user's certificate, and lab down
// stops it and leaves nothing.
func TestLabCommandHostsAndEtcd(t *testing.T) {
	labtest.Require(t)
	testenv.RequirePrograms(t, etcdsrv.Program, "etcdctl")
	name := "c" + lab.NewName()
	t.Cleanup(func() { ovpnperf(t, "lab", "down", name); labtest.CheckGone(t, name) })
	r := ovpnperf(t, "lab", "up", "--name", name, "--host", "web1", "--host", "reg", "--etcd", "reg", "--json").mustSucceed(t)
	var up labUpResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatalf("lab up --json: %v\n%s", err, r.stdout)
	}
	checkSchema(t, "lab up --etcd --json", r.stdout, false)
	if up.Etcd == nil || up.Etcd.Endpoint != "https://198.18.2.2:2379" || up.Etcd.Registry != "etcd://198.18.2.2:2379" || len(up.Hosts) != 2 {
		t.Fatalf("lab up --json: %s", r.stdout)
	}
	r = ovpnperf(t, "lab", "status", name).mustSucceed(t)
	if !strings.Contains(r.stdout, "web1 198.18.1.2, reg 198.18.2.2") {
		t.Errorf("status does not list the hosts:\n%s", r.stdout)
	}
	ovpnperf(t, "lab", "exec", name, "web1", "--", "ping", "-c", "1", "-W", "2", "198.18.2.2").mustSucceed(t)
	e := up.Etcd
	etcdctl := []string{"lab", "exec", name, "web1", "--", "etcdctl", "--endpoints", e.Endpoint, "--cacert", e.CA}
	ovpnperf(t, append(etcdctl, "--cert", e.ServeCert, "--key", e.ServeKey, "put", "/ovpnperf/v1/clusters/c/hosts/web1", "up")...).mustSucceed(t)
	r = ovpnperf(t, append(etcdctl, "--cert", e.DispatchCert, "--key", e.DispatchKey, "get", "/ovpnperf/v1/clusters/c/hosts/web1", "--print-value-only")...).mustSucceed(t)
	if strings.TrimSpace(r.stdout) != "up" {
		t.Errorf("etcdctl get as dispatch: %q", r.stdout)
	}
	if r := ovpnperf(t, append(etcdctl, "--cert", e.DispatchCert, "--key", e.DispatchKey, "put", "/ovpnperf/v1/clusters/c/hosts/web1", "forged")...); r.code == 0 || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("etcdctl put as dispatch: exit %d, %s", r.code, r.stderr)
	}
	ovpnperf(t, "lab", "down", name).mustSucceed(t)
	labtest.CheckGone(t, name)
	out, err := exec.Command("ps", "-eo", "args").Output()
	if err != nil {
		t.Fatalf("ps: %v", err)
	}
	if strings.Contains(string(out), "ovpnperf-"+name+"-etcd") {
		t.Errorf("etcd of lab %s runs after lab down", name)
	}
}
