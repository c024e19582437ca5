package emulate

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/safchain/ethtool"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// wireNet is a transparent layer-2 path for the "bump in the wire"
// emulators: a namespace W with two ports and no addresses sits between A
// and B, which share one subnet. Nothing crosses W unless a forwarder in W
// carries frames from one port to the other (W has no bridge and does not
// route), so a test sees at once whether its forwarder ran.
//
//	  A ns                         W ns                          B ns
//	a0 192.0.2.2/24    ── wa  [forwarder: wa ⇄ wb]  wb ──    b0 192.0.2.3/24
//	   2001:db8:e::2/64                                          2001:db8:e::3/64
//	            up: frames arriving on wa leave by wb; down: wb → wa
//
// a0 and b0 compute their checksums in software (tx checksum offload off):
// a frame copied through a forwarder's user-space buffer leaves with the
// checksum bytes it came with, and a veth peer's offloaded checksum is only
// a pseudo-header sum. W has IPv6 off, so it sends nothing of its own
// (router solicitations, neighbour discovery). A and B know each other's
// hardware address (permanent neighbour entries): a measurement's first
// packets do not wait for ARP across a delayed wire, where a fast sender
// overflows the neighbour queue. A test that wants ARP to cross deletes
// the entry.
type wireNet struct {
	A, W, B string
}

const (
	wireAddrA  = "192.0.2.2"
	wireAddrB  = "192.0.2.3"
	wireAddrA6 = "2001:db8:e::2"
	wireAddrB6 = "2001:db8:e::3"
	// wirePortA and wirePortB are W's ports: toward A and toward B.
	wirePortA = "wa"
	wirePortB = "wb"
)

func newWireNet(tb testing.TB) *wireNet {
	tb.Helper()
	// Every test on these namespaces judges delays or rates.
	testenv.Exclusive(tb)
	testenv.RequireRoot(tb)
	testenv.RequirePrograms(tb, "ip", "sysctl")
	n := &wireNet{}
	n.A, n.W, n.B = newNamespaces(tb, "wire", "w")
	cmds := [][]string{
		// Before the ports exist, so that they never get an IPv6 address.
		{"ip", "netns", "exec", n.W, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"},
		// Forwarding off, as the lab sets it in its wire namespace: a new
		// namespace takes the host's IPv4 settings (ip_forward on a
		// router host), and the emulator refuses a wire that forwards.
		{"ip", "netns", "exec", n.W, "sysctl", "-q", "-w", "net.ipv4.ip_forward=0"},
		{"ip", "-n", n.W, "link", "add", wirePortA, "type", "veth", "peer", "name", "a0", "netns", n.A},
		{"ip", "-n", n.W, "link", "add", wirePortB, "type", "veth", "peer", "name", "b0", "netns", n.B},
		{"ip", "-n", n.A, "addr", "add", wireAddrA + "/24", "dev", "a0"},
		{"ip", "-n", n.B, "addr", "add", wireAddrB + "/24", "dev", "b0"},
		{"ip", "-n", n.A, "addr", "add", wireAddrA6 + "/64", "dev", "a0", "nodad"},
		{"ip", "-n", n.B, "addr", "add", wireAddrB6 + "/64", "dev", "b0", "nodad"},
	}
	for _, ns := range []string{n.A, n.W, n.B} {
		cmds = append(cmds, []string{"ip", "-n", ns, "link", "set", "lo", "up"})
	}
	cmds = append(cmds,
		[]string{"ip", "-n", n.W, "link", "set", wirePortA, "up"},
		[]string{"ip", "-n", n.W, "link", "set", wirePortB, "up"},
		[]string{"ip", "-n", n.A, "link", "set", "a0", "up"},
		[]string{"ip", "-n", n.B, "link", "set", "b0", "up"},
	)
	runCommands(tb, cmds)
	mac := map[string]string{}
	for _, e := range []struct{ ns, dev string }{{n.A, "a0"}, {n.B, "b0"}} {
		if err := netns.Do(e.ns, func() error {
			ifc, err := net.InterfaceByName(e.dev)
			if err != nil {
				return err
			}
			mac[e.dev] = ifc.HardwareAddr.String()
			return softwareChecksums(e.dev)
		}); err != nil {
			tb.Fatal(err)
		}
	}
	runCommands(tb, [][]string{
		{"ip", "-n", n.A, "neigh", "replace", wireAddrB, "lladdr", mac["b0"], "dev", "a0", "nud", "permanent"},
		{"ip", "-n", n.A, "neigh", "replace", wireAddrB6, "lladdr", mac["b0"], "dev", "a0", "nud", "permanent"},
		{"ip", "-n", n.B, "neigh", "replace", wireAddrA, "lladdr", mac["a0"], "dev", "b0", "nud", "permanent"},
		{"ip", "-n", n.B, "neigh", "replace", wireAddrA6, "lladdr", mac["a0"], "dev", "b0", "nud", "permanent"},
	})
	return n
}

// softwareChecksums turns transmit checksum offload off on dev, in the
// calling thread's namespace; the offloads that depend on it (TSO and
// friends) go with it.
//
// Equivalent to: ethtool -K DEV tx off
func softwareChecksums(dev string) error {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("ethtool socket: %w", err)
	}
	defer e.Close()
	if err := e.Change(dev, map[string]bool{"tx-checksum-ip-generic": false}); err != nil {
		return fmt.Errorf("turning tx checksum offload off on %s: %w", dev, err)
	}
	f, err := e.Features(dev)
	if err != nil {
		return fmt.Errorf("reading features of %s: %w", dev, err)
	}
	if f["tx-checksum-ip-generic"] {
		return fmt.Errorf("tx checksum offload of %s is still on", dev)
	}
	return nil
}

// bridge makes the kernel's bridge W's forwarder: A and B then reach each
// other with no emulator (no delay, no loss).
func (n *wireNet) bridge(tb testing.TB) {
	tb.Helper()
	runCommands(tb, [][]string{
		{"ip", "-n", n.W, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", n.W, "link", "set", wirePortA, "master", "br0"},
		{"ip", "-n", n.W, "link", "set", wirePortB, "master", "br0"},
		{"ip", "-n", n.W, "link", "set", "br0", "up"},
	})
}

// TestWireClosed checks the topology itself: without a forwarder in W
// nothing crosses it, and with the kernel's bridge as the forwarder A and B
// reach each other (so the first half is not passing by accident).
func TestWireClosed(t *testing.T) {
	n := newWireNet(t)
	if r := ping(t, n.A, wireAddrB, "-c", "2", "-i", "0.2", "-W", "1"); r.received != 0 {
		t.Fatalf("ping crossed an empty wire namespace: %+v", r)
	}
	n.bridge(t)
	if r := ping(t, n.A, wireAddrB, "-c", "2", "-i", "0.2", "-W", "2"); r.received != r.sent {
		t.Fatalf("ping across a bridged wire namespace: %+v", r)
	}
	if r := ping(t, n.A, wireAddrB6, "-c", "2", "-i", "0.2", "-W", "2"); r.received != r.sent {
		t.Fatalf("ping -6 across a bridged wire namespace: %+v", r)
	}
	// And ARP crosses too.
	if _, err := runner.Run(context.Background(), "ip", "-n", n.A, "neigh", "del", wireAddrB, "dev", "a0"); err != nil {
		t.Fatal(err)
	}
	if r := ping(t, n.A, wireAddrB, "-c", "2", "-i", "0.2", "-W", "2"); r.received != r.sent {
		t.Fatalf("ping with ARP across a bridged wire namespace: %+v", r)
	}
}
