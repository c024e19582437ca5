package main

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// dialFrom connects to addr from inside the named namespace; the socket
// stays there.
func dialFrom(ns, addr string) (net.Conn, error) {
	var c net.Conn
	err := netns.Do(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr, 3*time.Second)
		return err
	})
	return c, err
}

// With --lab every listener of cluster serve opens in the lab's server
// namespace: the dispatcher and the metrics answer on the lab server's
// address, from the lab's client. (They used to open in the host's
// namespace, where the lab's address does not exist, so the help's own
// example failed with "cannot assign requested address".)
func TestClusterServeListenersInLab(t *testing.T) {
	testenv.Exclusive(t)
	labtest.Require(t)
	name := "c" + lab.NewName()
	t.Cleanup(func() { ovpnperf(t, "lab", "down", name); labtest.CheckGone(t, name) })
	ovpnperf(t, "lab", "up", "--name", name).mustSucceed(t)
	before, _ := cluster.Paths{}.List()

	srv := lab.ServerV4().String()
	disp, metrics := net.JoinHostPort(srv, "8443"), net.JoinHostPort(srv, "9100")
	r := startBackground(t, "cluster", "serve", "--lab", name, "--instances", "2", "--one-port", "1194",
		"--dispatcher", disp, "--metrics", metrics)
	r.waitFor(t, "metrics on http://"+metrics, 60*time.Second)
	if !strings.Contains(r.output(), "dispatcher on "+disp) {
		t.Errorf("no dispatcher on %s:\n%s", disp, r.output())
	}
	client := lab.NamespaceName(name, lab.Client)

	// The dispatcher: a TCP connection from the lab's client reaches it
	// (the TLS that follows needs a client certificate of the cluster's CA).
	c, err := dialFrom(client, disp)
	if err != nil {
		t.Errorf("dispatcher from the lab's client: %v", err)
	} else {
		c.Close()
	}
	// The metrics: a whole HTTP exchange from the lab's client.
	c, err = dialFrom(client, metrics)
	if err != nil {
		t.Errorf("metrics from the lab's client: %v", err)
	} else {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", metrics)
		sc := bufio.NewScanner(c)
		var body strings.Builder
		for sc.Scan() {
			body.WriteString(sc.Text() + "\n")
		}
		c.Close()
		if !strings.HasPrefix(body.String(), "HTTP/1.0 200") || !strings.Contains(body.String(), "ovpnperf_cluster_instance_clients") {
			t.Errorf("metrics from the lab's client:\n%s", body.String())
		}
	}
	if code := r.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("serve exited %d after SIGTERM:\n%s", code, r.output())
	}
	if after, _ := (cluster.Paths{}).List(); len(after) != len(before) {
		t.Errorf("clusters before %v, after %v", before, after)
	}
}
