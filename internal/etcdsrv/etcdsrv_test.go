package etcdsrv

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func TestMain(m *testing.M) { labtest.Main(m) }

func TestClientCommonNames(t *testing.T) {
	c, err := newCA(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cn := range []string{"", "Root", "../x", "server", "ca", "a b", strings.Repeat("a", 64)} {
		if _, _, err := c.issueClient(cn); err == nil || !usage.Is(err) {
			t.Errorf("issueClient(%q): got %v, want a usage error", cn, err)
		}
	}
	cert1, key1, err := c.issueClient(UserServe)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(cert1)
	cert2, _, err := c.issueClient(UserServe)
	if err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(cert2); string(b1) != string(b2) {
		t.Errorf("a second issueClient(%s) replaced the certificate", UserServe)
	}
	for _, f := range []string{cert1, key1, filepath.Join(c.dir, "ca.key")} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", f, fi.Mode().Perm(), err)
		}
	}
}

// TestEtcdInLab starts etcd in a lab host and checks what the registry
// promises: TLS with client certificates of its own CA only, the serve
// user writes under /ovpnperf/ and nowhere else, the dispatch user only
// reads, an unknown user is refused, data survives a stop and restart,
// and lab down stops etcd and leaves nothing.
func TestEtcdInLab(t *testing.T) {
	labtest.Require(t)
	testenv.RequirePrograms(t, Program)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := "t" + lab.NewName()
	l, err := lab.Up(ctx, lab.Options{Name: name, Ephemeral: true, Hosts: []lab.Node{"etcd", "web1"}, Env: labtest.Env()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Down(); labtest.CheckGone(t, name) })

	t0 := time.Now()
	s, err := Start(ctx, l, "etcd", filepath.Join(l.Dir(), "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start (etcd up, users and auth set up) took %v", time.Since(t0).Round(time.Millisecond))
	if got, want := s.Endpoint(), "https://198.18.1.2:2379"; got != want {
		t.Errorf("Endpoint() = %s, want %s", got, want)
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(s.Pid()) + "/cmdline")
	if !strings.Contains(string(cmdline), "ovpnperf-"+name+"-etcd") {
		t.Errorf("etcd's command line %q does not name the lab", strings.ReplaceAll(string(cmdline), "\x00", " "))
	}

	client := func(from lab.Node, cn string) *clientv3.Client {
		t.Helper()
		c, err := s.Client(from, cn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	op := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 5*time.Second) }

	hostKey := ServePrefix + "default/hosts/web1"
	assigned := DispatchPrefix + "default/web1/i0/1"
	serve := client("web1", UserServe)
	c1, c1cancel := op()
	if _, err := serve.Put(c1, hostKey, "up"); err != nil {
		t.Fatalf("put as %s: %v", UserServe, err)
	}
	for _, k := range []string{"/elsewhere", assigned} {
		if _, err := serve.Put(c1, k, "x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("put %s as %s: got %v, want permission denied", k, UserServe, err)
		}
	}
	c1cancel()

	dispatch := client(lab.Client, UserDispatch)
	c2, c2cancel := op()
	resp, err := dispatch.Get(c2, hostKey)
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "up" {
		t.Errorf("get as %s: %v, %v", UserDispatch, resp, err)
	}
	if _, err := dispatch.Put(c2, hostKey, "forged"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("put as %s: got %v, want permission denied", UserDispatch, err)
	}
	// Dispatchers record assignments under a lease of their own.
	lease, err := dispatch.Grant(c2, 30)
	if err != nil {
		t.Errorf("lease grant as %s: %v", UserDispatch, err)
	} else if _, err := dispatch.Put(c2, assigned, "", clientv3.WithLease(lease.ID)); err != nil {
		t.Errorf("put %s as %s: %v", assigned, UserDispatch, err)
	}
	if resp, err := serve.Get(c2, DispatchPrefix, clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("%s reads %s: %v, %v", UserServe, DispatchPrefix, resp, err)
	}
	c2cancel()

	// Users have no password: certificates are the only way in.
	c7, c7cancel := op()
	if _, err := dispatch.Authenticate(c7, UserServe, ""); err == nil {
		t.Errorf("password authentication as %s with an empty password succeeded", UserServe)
	}
	c7cancel()

	// A certificate of this CA whose name is no etcd user.
	nobody := client(lab.Client, "nobody")
	c3, c3cancel := op()
	_, err = nobody.Put(c3, hostKey, "forged")
	if err == nil {
		t.Errorf("put as an unknown user was accepted")
	}
	t.Logf("put as an unknown user: %v", err)
	c3cancel()

	// No client certificate, and a certificate of another CA: the TLS
	// handshake fails, so every request does.
	refused := func(what string, tlsCfg *tls.Config) {
		t.Helper()
		c, err := clientv3.New(s.ClientConfig(lab.Client, tlsCfg))
		if err != nil {
			return // refused at once
		}
		defer c.Close()
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		defer ccancel()
		_, err = c.Put(cctx, hostKey, "forged")
		if err == nil {
			t.Errorf("put with %s was accepted", what)
		}
		t.Logf("put with %s: %v", what, err)
	}
	noCert, err := s.ClientTLS("")
	if err != nil {
		t.Fatal(err)
	}
	refused("no client certificate", noCert)
	other, err := newCA(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	oc, ok, err := other.issueClient(UserServe)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := tls.LoadX509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}
	otherCfg := noCert.Clone()
	otherCfg.Certificates = []tls.Certificate{foreign}
	refused("a certificate of another CA named "+UserServe, otherCfg)
	// They failed for the reason they should: etcd says why it refused.
	log, _ := os.ReadFile(s.LogFile())
	for _, why := range []string{"client didn't provide a certificate", "certificate signed by unknown authority"} {
		if !strings.Contains(string(log), why) {
			t.Errorf("etcd's log does not say %q", why)
		}
	}

	// Nothing forged got in.
	c4, c4cancel := op()
	if resp, err := dispatch.Get(c4, hostKey); err != nil || string(resp.Kvs[0].Value) != "up" {
		t.Errorf("after refused writes: %v, %v", resp, err)
	}
	c4cancel()

	// Stop and restart: same data, same users and certificates.
	first := s.proc
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Pid() != 0 || !exited(first) {
		t.Errorf("etcd (pid %d) runs after Stop", first.Pid())
	}
	c5, c5cancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := dispatch.Get(c5, hostKey); err == nil {
		t.Errorf("a read succeeded while etcd was stopped")
	}
	c5cancel()
	t0 = time.Now()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Restart took %v", time.Since(t0).Round(time.Millisecond))
	c6, c6cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err = dispatch.Get(c6, hostKey)
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "up" {
		t.Errorf("get after restart: %v, %v", resp, err)
	}
	if _, err := dispatch.Put(c6, hostKey, "forged"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("put as %s after restart: got %v, want permission denied", UserDispatch, err)
	}
	c6cancel()

	// Lab down stops etcd with the lab and leaves nothing.
	labtest.CheckPrivate(t, l)
	second := s.proc
	if second == first || s.Pid() == 0 {
		t.Fatalf("Restart started no new etcd")
	}
	if err := l.Down(); err != nil {
		t.Fatal(err)
	}
	if !exited(second) {
		t.Errorf("etcd (pid %d) runs after lab down", second.Pid())
	}
	labtest.CheckGone(t, name)
}

// exited waits up to 5 s for a lab process to be gone.
func exited(p *lab.Process) bool {
	select {
	case <-p.Done():
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}
