package emulate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// testNet is a three-namespace path of the lab's shape, built by this
// package's tests so they need nothing from package lab:
//
//	  A ns                   R ns                     B ns
//	a0 192.0.2.2 ── ra 192.0.2.1 | rb 198.51.100.1 ── b0 198.51.100.2
//	2001:db8:c::2   2001:db8:c::1  2001:db8:5::1      2001:db8:5::2
//	              FORWARD -i ra → NFQUEUE up   (queue 0), iptables and ip6tables
//	              FORWARD -i rb → NFQUEUE down (queue 1)
type testNet struct {
	A, R, B string
}

const (
	testAddrA  = "192.0.2.2"
	testAddrB  = "198.51.100.2"
	testAddrA6 = "2001:db8:c::2"
	testAddrB6 = "2001:db8:5::2"
	queueUp    = 0
	queueDown  = 1
)

// newNamespaces makes the three namespaces of a test path,
// ovpnperf-KIND<random id>-a, -MID and -b (so that parallel tests and
// other engineers' labs never share a name), and deletes them when the
// test ends: the links, addresses, rules and XDP programs made in them go
// with them.
func newNamespaces(tb testing.TB, kind, mid string) (a, m, b string) {
	tb.Helper()
	var rnd [4]byte
	rand.Read(rnd[:])
	prefix := "ovpnperf-" + kind + hex.EncodeToString(rnd[:]) + "-"
	a, m, b = prefix+"a", prefix+mid, prefix+"b"
	for _, ns := range []string{a, m, b} {
		if err := netns.Create(ns); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			if err := netns.Delete(ns); err != nil {
				tb.Error(err)
			}
		})
	}
	return a, m, b
}

// runCommands runs each command in turn; the first that fails ends the
// test.
func runCommands(tb testing.TB, cmds [][]string) {
	tb.Helper()
	for _, c := range cmds {
		if _, err := runner.Run(context.Background(), c...); err != nil {
			tb.Fatal(err)
		}
	}
}

func newTestNet(tb testing.TB) *testNet {
	tb.Helper()
	// Every test on these namespaces judges delays or rates.
	testenv.Exclusive(tb)
	testenv.RequireRoot(tb)
	testenv.RequirePrograms(tb, "ip", "iptables", "ip6tables", "sysctl")
	n := &testNet{}
	n.A, n.R, n.B = newNamespaces(tb, "emu", "r")
	cmds := [][]string{
		{"ip", "-n", n.R, "link", "add", "ra", "type", "veth", "peer", "name", "a0", "netns", n.A},
		{"ip", "-n", n.R, "link", "add", "rb", "type", "veth", "peer", "name", "b0", "netns", n.B},
		{"ip", "-n", n.R, "addr", "add", "192.0.2.1/24", "dev", "ra"},
		{"ip", "-n", n.R, "addr", "add", "198.51.100.1/24", "dev", "rb"},
		{"ip", "-n", n.A, "addr", "add", testAddrA + "/24", "dev", "a0"},
		{"ip", "-n", n.B, "addr", "add", testAddrB + "/24", "dev", "b0"},
		{"ip", "-n", n.R, "addr", "add", "2001:db8:c::1/64", "dev", "ra", "nodad"},
		{"ip", "-n", n.R, "addr", "add", "2001:db8:5::1/64", "dev", "rb", "nodad"},
		{"ip", "-n", n.A, "addr", "add", testAddrA6 + "/64", "dev", "a0", "nodad"},
		{"ip", "-n", n.B, "addr", "add", testAddrB6 + "/64", "dev", "b0", "nodad"},
	}
	for _, ns := range []string{n.A, n.R, n.B} {
		cmds = append(cmds, []string{"ip", "-n", ns, "link", "set", "lo", "up"})
	}
	cmds = append(cmds,
		[]string{"ip", "-n", n.R, "link", "set", "ra", "up"},
		[]string{"ip", "-n", n.R, "link", "set", "rb", "up"},
		[]string{"ip", "-n", n.A, "link", "set", "a0", "up"},
		[]string{"ip", "-n", n.B, "link", "set", "b0", "up"},
		[]string{"ip", "-n", n.A, "route", "add", "default", "via", "192.0.2.1"},
		[]string{"ip", "-n", n.B, "route", "add", "default", "via", "198.51.100.1"},
		[]string{"ip", "-n", n.A, "-6", "route", "add", "default", "via", "2001:db8:c::1"},
		[]string{"ip", "-n", n.B, "-6", "route", "add", "default", "via", "2001:db8:5::1"},
		[]string{"ip", "netns", "exec", n.R, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
		[]string{"ip", "netns", "exec", n.R, "sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"},
		// No --queue-bypass: without a listener the packets are dropped,
		// never passed undelayed.
		[]string{"ip", "netns", "exec", n.R, "iptables", "-A", "FORWARD", "-i", "ra", "-j", "NFQUEUE", "--queue-num", "0"},
		[]string{"ip", "netns", "exec", n.R, "iptables", "-A", "FORWARD", "-i", "rb", "-j", "NFQUEUE", "--queue-num", "1"},
		[]string{"ip", "netns", "exec", n.R, "ip6tables", "-A", "FORWARD", "-i", "ra", "-j", "NFQUEUE", "--queue-num", "0"},
		[]string{"ip", "netns", "exec", n.R, "ip6tables", "-A", "FORWARD", "-i", "rb", "-j", "NFQUEUE", "--queue-num", "1"},
	)
	runCommands(tb, cmds)
	return n
}

// startEmulator opens the emulator inside the router namespace and runs it
// until the test ends. It returns the emulator and its stats file.
func (n *testNet) startEmulator(tb testing.TB, cfg Config) (*Emulator, string) {
	tb.Helper()
	var e *Emulator
	if err := netns.Do(n.R, func() error {
		var err error
		e, err = Open(cfg)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	statsPath := filepath.Join(tb.TempDir(), "stats.json")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// The test binary is the process: it gives the queues their Ps, as
	// RunProcess does, but keeps its other threads at normal priority.
	undo := reserveProcs(len(cfg.Queues))
	go func() { done <- e.Run(ctx, statsPath) }()
	tb.Cleanup(func() {
		defer undo()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("emulator: %v", err)
			}
		case <-time.After(10 * time.Second):
			tb.Errorf("emulator did not stop within 10 s")
		}
	})
	return e, statsPath
}

// pingStats runs ping from ns to addr and returns loss and the min/avg/max
// round-trip times.
type pingResult struct {
	sent, received int
	min, avg, max  time.Duration
}

func ping(tb testing.TB, ns, addr string, args ...string) pingResult {
	tb.Helper()
	testenv.RequirePrograms(tb, "ping")
	argv := append([]string{"ping", "-n", "-q"}, args...)
	argv = append(argv, addr)
	out, err := runner.RunIn(context.Background(), ns, argv...)
	// ping exits 1 when some replies are missing; that is a result here.
	if err != nil && !strings.Contains(string(out), "packets transmitted") {
		tb.Fatal(err)
	}
	r, perr := parsePing(string(out))
	if perr != nil {
		tb.Fatalf("%v\n%s", perr, out)
	}
	return r
}
