package lab_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func TestCheckHostName(t *testing.T) {
	for _, n := range []string{"a", "web1", "etcd", "h123456789ab"} {
		if err := lab.CheckHostName(lab.Node(n)); err != nil {
			t.Errorf("%q refused: %v", n, err)
		}
	}
	for _, n := range []string{"", "1web", "Web", "web-1", "web_1", "h123456789abc", "client", "router", "server", "a b", "é"} {
		err := lab.CheckHostName(lab.Node(n))
		if err == nil || !usage.Is(err) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want a one-line usage error", n, err)
		}
	}
	if err := lab.CheckHostNames("--host", []lab.Node{"a1", "b2", "a1"}); err == nil || !strings.Contains(err.Error(), `--host "a1" given twice`) {
		t.Errorf("duplicate host: got %v", err)
	}
}

// TestHosts adds two hosts to a lab made with one (through Options.Hosts)
// and checks that every host reaches the client, the server and the
// others through the router, that a process started in a host is a lab
// process, and that lab down leaves nothing of them.
func TestHosts(t *testing.T) {
	labtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := "t" + lab.NewName()
	l, err := lab.Up(ctx, lab.Options{Name: name, Ephemeral: true, Hosts: []lab.Node{"web1"}, Env: labtest.Env()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Down(); labtest.CheckGone(t, name) })
	for _, h := range []lab.Node{"web2", "etcd"} {
		if _, err := l.AddHost(ctx, h); err != nil {
			t.Fatalf("AddHost(%s): %v", h, err)
		}
	}
	want := map[lab.Node]string{"web1": "198.18.1.2", "web2": "198.18.2.2", "etcd": "198.18.3.2"}
	for h, a := range want {
		got, ok := l.HostAddr(h)
		if !ok || got.String() != a {
			t.Errorf("HostAddr(%s) = %v, %v; want %s", h, got, ok, a)
		}
	}
	if _, ok := l.HostAddr("nohost"); ok {
		t.Errorf("HostAddr of a host never added reported one")
	}
	// Bad and repeated names are refused, and make nothing.
	for _, h := range []lab.Node{"web1", "client", "Bad-Name"} {
		if _, err := l.AddHost(ctx, h); err == nil || !usage.Is(err) {
			t.Errorf("AddHost(%q): got %v, want a usage error", h, err)
		}
	}
	if got := len(l.Hosts()); got != 3 {
		t.Errorf("%d hosts after refused additions, want 3", got)
	}
	ns := lab.NamespacesOf(name)
	for _, n := range []lab.Node{lab.Client, lab.Router, lab.Server, "web1", "web2", "etcd"} {
		if !slices.Contains(ns, l.Namespace(n)) {
			t.Errorf("namespace %s not found by NamespacesOf: %v", l.Namespace(n), ns)
		}
	}
	if len(ns) != 6 {
		t.Errorf("NamespacesOf(%s) = %v, want 6 namespaces", name, ns)
	}

	ping := func(from lab.Node, to string) {
		t.Helper()
		out, err := runner.Output(l.Command(ctx, from, "ping", "-c", "1", "-W", "2", to))
		if err != nil {
			t.Errorf("ping %s → %s: %v\n%s", from, to, err, out)
		}
	}
	ping(lab.Client, "198.18.1.2")
	ping(lab.Client, "198.18.3.2")
	ping(lab.Server, "198.18.2.2")
	ping("web1", "198.18.2.2")
	ping("web2", "198.18.3.2")
	ping("etcd", "198.18.1.2")
	ping("web1", lab.ClientV4().String())
	ping("web2", lab.ServerV4().String())

	// A process in a host is a lab process: lab down stops it.
	p, err := l.Start(ctx, "web2", "", "sleep", "300")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Down(); err != nil {
		t.Fatalf("lab down: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Errorf("sleep in host web2 (pid %d) still runs after lab down", p.Pid())
		_ = p.Stop()
	}
	labtest.CheckGone(t, name)
}
