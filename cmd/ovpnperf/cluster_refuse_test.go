package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/runner/runnertest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// freeClusterID returns an id no cluster or connect run on this host uses.
func freeClusterID(t *testing.T) string {
	t.Helper()
	for {
		id := fmt.Sprintf("%04x", mrand.IntN(0x10000))
		_, e1 := os.Stat(cluster.Paths{}.Dir(id))
		_, e2 := os.Stat(cluster.Paths{}.ConnectRunDir(id))
		if errors.Is(e1, os.ErrNotExist) && errors.Is(e2, os.ErrNotExist) {
			return id
		}
	}
}

// A damaged or forged cluster state file does not make `cluster clean ID`
// stop a process that is not the cluster's serve: serve_pid without the
// serve entry (no start time), a serve entry whose start time and pid
// are a live process that does not run `cluster serve`, one naming
// another cluster's id, one whose pid differs from serve_pid. Each is
// said in one line and left running; the directory is still removed.
func TestClusterCleanLeavesForgedServe(t *testing.T) {
	testenv.RequireRoot(t)
	sleeper := func() (*exec.Cmd, uint64) { return runnertest.Sleeper(t) }
	// A process whose command line says `cluster serve --id 0000`: a
	// serve of another cluster, as far as its command line goes.
	other := exec.Command("sh", "-c", "sleep 300; : cluster serve", "sh", "cluster", "serve", "--id", "0000")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	otherTicks, err := runner.StartTicks(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// A process whose command line says `cluster serve` without an id.
	noID := exec.Command("sh", "-c", "sleep 300; :", "sh", "cluster", "serve", "--lab", "x")
	if err := noID.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = noID.Process.Kill(); _ = noID.Wait() })
	noIDTicks, err := runner.StartTicks(noID.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		st   func(id string) (cluster.State, *exec.Cmd)
		want string // "": a serve of this cluster, stopped
	}{
		{"serve_pid alone", func(id string) (cluster.State, *exec.Cmd) {
			p, _ := sleeper()
			return cluster.State{ID: id, ServePid: p.Process.Pid}, p
		}, "without its start time"},
		{"serve entry without start time", func(id string) (cluster.State, *exec.Cmd) {
			p, _ := sleeper()
			return cluster.State{ID: id, ServePid: p.Process.Pid, Resources: []cluster.Resource{{Kind: cluster.KindProcess, Name: "serve", Pid: p.Process.Pid}}}, p
		}, "without its start time"},
		{"pid and start time of a sleep", func(id string) (cluster.State, *exec.Cmd) {
			p, ticks := sleeper()
			return cluster.State{ID: id, ServePid: p.Process.Pid, Resources: []cluster.Resource{{Kind: cluster.KindProcess, Name: "serve", Pid: p.Process.Pid, StartTicks: ticks}}}, p
		}, "does not run `ovpnperf cluster serve`"},
		{"another cluster's serve", func(id string) (cluster.State, *exec.Cmd) {
			return cluster.State{ID: id, ServePid: other.Process.Pid, Resources: []cluster.Resource{{Kind: cluster.KindProcess, Name: "serve", Pid: other.Process.Pid, StartTicks: otherTicks}}}, other
		}, "does not run `ovpnperf cluster serve`"},
		{"a serve without --id and without the control socket", func(id string) (cluster.State, *exec.Cmd) {
			return cluster.State{ID: id, ServePid: noID.Process.Pid, Resources: []cluster.Resource{{Kind: cluster.KindProcess, Name: "serve", Pid: noID.Process.Pid, StartTicks: noIDTicks}}}, noID
		}, "does not run `ovpnperf cluster serve`"},
		// The control: a process that looks like this cluster's serve
		// (its command line, its control socket held) is stopped.
		{"a serve without --id holding the control socket", func(id string) (cluster.State, *exec.Cmd) {
			if err := os.MkdirAll(filepath.Dir(cluster.Paths{}.ControlPath(id)), 0o700); err != nil {
				t.Fatal(err)
			}
			p := exec.Command("python3", "-c", "import socket,sys,time\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen()\nprint('ready', flush=True)\ntime.sleep(300)",
				cluster.Paths{}.ControlPath(id), "cluster", "serve", "--lab", "x")
			out, _ := p.StdoutPipe()
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Process.Kill(); _ = p.Wait() })
			buf := make([]byte, 6)
			if _, err := io.ReadFull(out, buf); err != nil {
				t.Fatalf("the fake serve did not listen: %v", err)
			}
			ticks, _ := runner.StartTicks(p.Process.Pid)
			return cluster.State{ID: id, ServePid: p.Process.Pid, Resources: []cluster.Resource{{Kind: cluster.KindProcess, Name: "serve", Pid: p.Process.Pid, StartTicks: ticks}}}, p
		}, ""},
		{"serve entry of another pid", func(id string) (cluster.State, *exec.Cmd) {
			p, ticks := sleeper()
			q, _ := sleeper()
			return cluster.State{ID: id, ServePid: q.Process.Pid, Resources: []cluster.Resource{{Kind: cluster.KindProcess, Name: "serve", Pid: p.Process.Pid, StartTicks: ticks}}}, q
		}, "its serve entry process"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := freeClusterID(t)
			if err := os.MkdirAll(cluster.Paths{}.Dir(id), 0o700); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(cluster.Paths{}.Dir(id)) })
			st, victim := c.st(id)
			b, _ := json.Marshal(st)
			if err := os.WriteFile(filepath.Join(cluster.Paths{}.Dir(id), "state.json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
			r := ovpnperfWithin(t, 30*time.Second, "cluster", "clean", id)
			if c.want == "" {
				r.mustSucceed(t)
				if _, err := runner.StartTicks(victim.Process.Pid); err == nil {
					if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", victim.Process.Pid)); !strings.Contains(string(b), ") Z ") {
						t.Errorf("this cluster's serve (process %d) was not stopped", victim.Process.Pid)
					}
				}
			} else {
				if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "left alone") {
					t.Errorf("exit %d, stderr %q; want one line saying %q and left alone", r.code, r.stderr, c.want)
				}
				time.Sleep(100 * time.Millisecond)
				if _, err := runner.StartTicks(victim.Process.Pid); err != nil || victim.ProcessState != nil {
					t.Errorf("process %d was stopped", victim.Process.Pid)
				}
			}
			if _, err := os.Stat(cluster.Paths{}.Dir(id)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the cluster's directory is left: %v", err)
			}
		})
	}
}

// selfSigned writes a CA certificate, and a certificate and key it
// signed, for flags that must name readable files (cluster connect).
func selfSigned(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	ca, cert, key = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "me.crt"), filepath.Join(dir, "me.key")
	for p, b := range map[string][]byte{
		ca:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca, cert, key
}

// A dispatcher or one-port address that names no host (999.1.1.1, a port
// 0 or in hexadecimal, a name no DNS name can be) is a usage error
// before anything starts: connect used to look 999.1.1.1 up as a name,
// print "no such host", fall back to the config's remotes and exec
// openvpn (here `openvpn --version`, which exits 0). An address where no
// dispatcher answers keeps that documented fallback.
func TestClusterConnectMalformedDispatcher(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := selfSigned(t, dir)
	creds := []string{"--ca", ca, "--cert", cert, "--key", key}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"999.1.1.1:8443"}, `"999.1.1.1" is not an IPv4 address`},
		{[]string{"256.0.0.1:8443"}, "not an IPv4 address"},
		{[]string{"10.0.0:8443"}, "not an IPv4 address"},
		{[]string{"1.2.3.4.5:8443"}, "not an IPv4 address"},
		{[]string{"[1:2:3:4:5:6:7:8:9]:8443"}, "not an IPv6 address"},
		{[]string{"x-.example:8443"}, "not a host name"},
		{[]string{"--dispatcher", "-x.example:8443", "192.0.2.1:8443"}, "not a host name"},
		{[]string{"a..example:8443"}, "not a host name"},
		{[]string{"under_score.example:8443"}, "not a host name"},
		{[]string{"ex ample.org:8443"}, "not a host name"},
		{[]string{"example.org:0"}, "not 1–65535"},
		{[]string{"example.org:65536"}, "not 1–65535"},
		{[]string{"example.org:0x20fb"}, "not a decimal number"},
		{[]string{"example.org:08443"}, "not a decimal number"},
		{[]string{"example.org:https"}, "not a decimal number"},
		{[]string{":8443"}, "no host"},
		{[]string{"192.0.2.1:8443,999.1.1.1:8443"}, "999.1.1.1"},
		{[]string{"--dispatcher", "999.1.1.1:8443", "192.0.2.1:8443"}, "999.1.1.1"},
		{[]string{"--one-port", "999.1.1.1:1194"}, "--one-port"},
		{[]string{"--one-port", "vpn.example:0x4aa"}, "--one-port"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := append([]string{"cluster", "connect"}, c.args...)
			if c.args[0] != "--one-port" {
				args = append(args, creds...)
			}
			r := ovpnperfWithin(t, 30*time.Second, append(args, "--", "--version")...)
			r.mustBeUsageError(t, c.want)
			if strings.Contains(r.stdout, "OpenVPN") {
				t.Errorf("openvpn ran: %s", r.stdout)
			}
		})
	}
	// No dispatcher answering at a well-formed address: the fallback.
	// (openvpn --version exits 1 on some releases: its status is not
	// looked at.)
	testenv.RequirePrograms(t, "openvpn")
	r := ovpnperfWithin(t, 30*time.Second, append(append([]string{"cluster", "connect", "127.0.0.1:1"}, creds...), "--", "--version")...)
	if !strings.Contains(r.stderr, "no dispatcher answered; using the config's remotes") || !strings.Contains(r.stdout, "OpenVPN") {
		t.Errorf("no dispatcher at 127.0.0.1:1: exit %d, stdout %q, stderr %q; want the fallback to openvpn", r.code, r.stdout, r.stderr)
	}
}

// systemd-unit refuses what serve refuses, with serve's own words: the
// unit's flags go through the same guard and the same checks (toOptions).
// A control character in --config (escape, newline) was written into a
// unit while serve refused it.
func TestSystemdUnitRefusesWhatServeRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"--config", "/etc/a\x1bb"},
		{"--config", "/etc/a\nb"},
		{"--config", "/etc/a\rb"},
		{"--config", "/etc/a\x7fb"},
		{"--config", "/etc/a\u0085b"},
		{"--config", "/etc/x.conf", "--public", "vpn\x1b.example"},
		{"--config", "/etc/x.conf", "--cpus", "0\n1"},
		{"--config", "/etc/x.conf", "--pool", ""},
		{"--config", "/etc/x.conf", "--port-base", "0"},
		{"--config", "/etc/x.conf", "--port-base", "0x4ab"},
		{"--config", "/etc/x.conf", "--port-base", "01195"},
		{"--config", "/etc/x.conf", "--one-port", "0"},
		{"--config", "/etc/x.conf", "--instances", "0x2"},
		{"--config", "/etc/x.conf", "--instances", "02"},
		{"--config", "/etc/x.conf", "--nice", "0x1"},
		{"--config", "/etc/x.conf", "--rate", "0x1p4"},
		{"--config", "/etc/x.conf", "--dispatcher", "192.0.2.1:8443"},
		{"--config", "/etc/x.conf", "--registry", "etcd://192.0.2.1:2379"},
	} {
		t.Run(fmt.Sprintf("%q", args), func(t *testing.T) {
			serve := ovpnperf(t, append([]string{"cluster", "serve"}, args...)...)
			unit := ovpnperf(t, append([]string{"cluster", "systemd-unit", "--id", "ab12", "--"}, args...)...)
			serve.mustBeUsageError(t, "")
			unit.mustBeUsageError(t, "serve flags after --")
			msg := strings.TrimPrefix(strings.TrimSpace(serve.stderr), "ovpnperf: ")
			if !strings.Contains(unit.stderr, msg) {
				t.Errorf("systemd-unit says %q, serve %q", unit.stderr, serve.stderr)
			}
			if unit.stdout != "" {
				t.Errorf("printed a unit:\n%s", unit.stdout)
			}
		})
	}
}
