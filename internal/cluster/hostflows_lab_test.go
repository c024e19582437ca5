package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// hashSeedSysctl fixes the multipath hash (of both families: the kernel
// has no IPv6 key of its own) instead of the random one each boot and
// namespace gets (0). Linux 6.11 and later.
const hashSeedSysctl = "net.ipv4.fib_multipath_hash_seed"

// setHashSeed sets the multipath hash seed of a lab node's namespace. The
// namespace is the test's own and goes with the lab, so nothing is
// restored.
func setHashSeed(t testing.TB, ctx context.Context, l *lab.Lab, n lab.Node, seed uint32) {
	t.Helper()
	if out, err := l.Command(ctx, n, "sysctl", "-n", hashSeedSysctl).CombinedOutput(); err != nil {
		testenv.SkipOrFail(t, "%s not in this kernel (Linux 6.11 or later): %v %s; the test needs a fixed multipath hash", hashSeedSysctl, err, out)
	}
	nsOut(t, ctx, l, n, "sysctl", "-q", "-w", fmt.Sprintf("%s=%d", hashSeedSysctl, seed))
}

// udpEcho answers every datagram to addr in namespace ns with itself,
// until the test ends.
func udpEcho(t *testing.T, ns, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := netns.Do(ns, func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], a)
		}
	}()
}

// udpFlows sends, in parallel, one flow per local port from namespace ns
// to dst, each from src (the unspecified address: the kernel picks) and
// its port, on a connected socket; a flow gets through when its datagram
// is echoed (3 tries, 600 ms each). It returns, per port, whether it got
// through and the source address the socket had.
func udpFlows(t *testing.T, ns string, src netip.Addr, ports []uint16, dst netip.AddrPort) (ok map[uint16]bool, srcs map[uint16]netip.Addr) {
	t.Helper()
	ok, srcs = map[uint16]bool{}, map[uint16]netip.Addr{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c *net.UDPConn
			if err := netns.Do(ns, func() (err error) {
				c, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, p)), net.UDPAddrFromAddrPort(dst))
				return err
			}); err != nil {
				t.Errorf("flow from port %d to %s: %v", p, dst, err)
				return
			}
			defer c.Close()
			msg := []byte(fmt.Sprintf("ovpnperf flow %d", p))
			got := false
			buf := make([]byte, 256)
			for try := 0; try < 3 && !got; try++ {
				_ = c.SetDeadline(time.Now().Add(600 * time.Millisecond))
				if _, err := c.Write(msg); err != nil {
					continue
				}
				n, err := c.Read(buf)
				got = err == nil && bytes.Equal(buf[:n], msg)
			}
			mu.Lock()
			defer mu.Unlock()
			ok[p] = got
			srcs[p] = c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		}()
	}
	wg.Wait()
	return ok, srcs
}

// udpOut reads tun captures and returns, per source port of a UDP
// datagram to port dport (IPv4 or IPv6), the devices that carried it.
func udpOut(t *testing.T, pcaps map[string]string, dport uint16) map[uint16][]string {
	t.Helper()
	got := map[uint16][]string{}
	for dev, p := range pcaps {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pcapgo.NewReader(f)
		if err != nil {
			f.Close()
			t.Fatalf("%s: %v", p, err)
		}
		for {
			data, _, err := r.ReadPacketData()
			if err != nil {
				break
			}
			var l4 []byte
			switch {
			case len(data) >= 28 && data[0]>>4 == 4 && data[9] == 17:
				l4 = data[int(data[0]&0xf)*4:]
			case len(data) >= 48 && data[0]>>4 == 6 && data[6] == 17:
				l4 = data[40:]
			}
			if len(l4) < 4 {
				continue
			}
			sport, dp := uint16(l4[0])<<8|uint16(l4[1]), uint16(l4[2])<<8|uint16(l4[3])
			if dp == dport && !slices.Contains(got[sport], dev) {
				got[sport] = append(got[sport], dev)
			}
		}
		f.Close()
	}
	return got
}

// TestConnectEveryFlow: one client over 2 tunnels (`cluster connect
// --tunnels 2`, a cluster with server-ipv6 and --site), under several
// explicit multipath hash seeds of the client's namespace, changed within
// one run: 32 UDP flows (distinct source ports) that the client host
// sends itself, with the source address the kernel picks, to an echo
// server on the server's IPv4 network and 32 to one on its IPv6 network,
// and 32 from a site address of the client (bound, as a site's packets
// carry it), are every one answered; captures on both tun devices show
// each flow's datagrams on one tunnel and each kind of flow on both
// tunnels (at least 4 of 32 on each); ping and ping -6 from the host get
// through; no instance logs a bad source address. Ctrl-C then leaves the
// client namespace (routes, nexthops, devices, sysctls, nat rules of both
// families) as it was.
//
// The hash decides which tunnel a flow takes and the kernel gives a flow
// of the host the address of one tunnel; an instance drops a source it
// did not give out. The seeds make the hash, and so the outcome, the same
// on every machine and boot.
func TestConnectEveryFlow(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn", "tcpdump", "ping")
	site6 := netip.MustParsePrefix("fd00:98::/64")
	host4, host6 := netip.MustParseAddr(serverHost), netip.MustParseAddr("fd00:98::1")
	tl := newTunnelsLab(t, cluster.Options{Pool6: netip.MustParsePrefix("fd00:8::/63"), Sites: []cluster.Site{{Prefix: clientSite, CN: "ovpnperf client"}}},
		func(c *openvpn.Config) {
			// "bad source address from client" is logged at verb 4.
			c.Remove("verb")
			c.Add("verb", "4")
		})
	l := tl.l
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	nsOut(t, ctx, l, lab.Server, "ip", "addr", "add", host4.String()+"/32", "dev", "lo")
	nsOut(t, ctx, l, lab.Server, "ip", "addr", "add", host6.String()+"/128", "dev", "lo")
	nsOut(t, ctx, l, lab.Client, "ip", "addr", "add", clientHost+"/32", "dev", "lo")
	udpEcho(t, l.Namespace(lab.Server), netip.AddrPortFrom(host4, 7).String())
	udpEcho(t, l.Namespace(lab.Server), netip.AddrPortFrom(host6, 7).String())
	setHashSeed(t, ctx, l, lab.Client, 1)
	before := clientSnapshot(t, l)

	logPath := filepath.Join(tl.dir, "connect.log")
	conn, err := l.Start(ctx, lab.Client, logPath, tl.connectArgs("--tunnels", "2", "--route", serverSite.String(), "--route", site6.String(), "--", "--config", tl.conf)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Stop() })
	connLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	var devs []string
	deadline := time.Now().Add(40 * time.Second)
	for {
		devs = tunDevs(t, ctx, l)
		if len(devs) == 2 && slices.Equal(routeDevs(ctx, l), devs) && len(tl.c.SiteStatus()) == 1 && len(tl.c.SiteStatus()[0].Via) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 tunnels not in the routes within 40 s\nconnect:\n%s", connLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The tunnels' addresses, for the log (which flow carried which).
	for _, dev := range devs {
		t.Logf("%s: %s", dev, nsOut(t, ctx, l, lab.Client, "ip", "-o", "addr", "show", "dev", dev, "scope", "global"))
	}
	pcaps := map[string]string{}
	var caps []*lab.Process
	for _, dev := range devs {
		p := filepath.Join(tl.dir, dev+".pcap")
		pcaps[dev] = p
		cp, err := l.Start(ctx, lab.Client, p+".log", "tcpdump", "-i", dev, "-n", "-s", "96", "--immediate-mode", "-U", "-w", p, "udp", "port", "7")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cp.Stop() })
		caps = append(caps, cp)
	}
	time.Sleep(time.Second) // tcpdump opens its socket

	type kind struct {
		name string
		src  netip.Addr
		dst  netip.Addr
	}
	kinds := []kind{
		{"host ipv4", netip.IPv4Unspecified(), host4},
		{"host ipv6", netip.IPv6Unspecified(), host6},
		{"site ipv4", netip.MustParseAddr(clientHost), host4},
	}
	seeds := []uint32{1, 0x5eed, 0xdeadbeef}
	type batch struct {
		seed  uint32
		kind  kind
		ports []uint16
		ok    map[uint16]bool
		srcs  map[uint16]netip.Addr
	}
	var batches []batch
	for si, seed := range seeds {
		setHashSeed(t, ctx, l, lab.Client, seed)
		for ki, k := range kinds {
			// Ports distinct over the whole run: a flow is new to
			// conntrack and to the captures.
			var ports []uint16
			for i := range 32 {
				ports = append(ports, uint16(20000+si*1000+ki*100+i))
			}
			// What the kernel says of the first flows before they run:
			// the tunnel the hash picks and the source it gives.
			for _, p := range ports[:4] {
				argv := []string{"ip", "route", "get", k.dst.String(), "ipproto", "udp", "sport", strconv.Itoa(int(p)), "dport", "7"}
				if k.src.IsValid() && !k.src.IsUnspecified() {
					argv = append(argv[:4], append([]string{"from", k.src.String()}, argv[4:]...)...)
				}
				out, _ := l.Command(ctx, lab.Client, argv...).CombinedOutput()
				t.Logf("seed %#x, %s, port %d: %s", seed, k.name, p, strings.Join(strings.Fields(string(out)), " "))
			}
			ok, srcs := udpFlows(t, l.Namespace(lab.Client), k.src, ports, netip.AddrPortFrom(k.dst, 7))
			batches = append(batches, batch{seed, k, ports, ok, srcs})
		}
		for _, dst := range []netip.Addr{host4, host6} {
			if out, err := l.Command(ctx, lab.Client, "ping", "-c", "2", "-i", "0.2", "-W", "2", dst.String()).CombinedOutput(); err != nil {
				t.Errorf("seed %#x: ping %s from the client host: %v\n%s", seed, dst, err, out)
			}
		}
	}
	// The last datagrams reach the files before tcpdump stops.
	time.Sleep(1500 * time.Millisecond)
	for _, cp := range caps {
		_ = cp.Stop()
	}
	out := udpOut(t, pcaps, 7)
	for _, b := range batches {
		lost := 0
		per := map[string]int{}
		bySrc := map[string]int{}
		for _, p := range b.ports {
			if !b.ok[p] {
				lost++
			}
			tuns := out[p]
			sort.Strings(tuns)
			if len(tuns) != 1 {
				t.Errorf("seed %#x, %s: flow from port %d crossed tunnels %v, want one", b.seed, b.kind.name, p, tuns)
			}
			for _, d := range tuns {
				per[d]++
			}
			bySrc[b.srcs[p].String()+" via "+strings.Join(tuns, ",")]++
		}
		t.Logf("seed %#x, %s: %d of %d answered; flows per tunnel %v; source and tunnel %v", b.seed, b.kind.name, len(b.ports)-lost, len(b.ports), per, bySrc)
		if lost > 0 {
			t.Errorf("seed %#x, %s: %d of %d flows not answered", b.seed, b.kind.name, lost, len(b.ports))
		}
		for _, d := range devs {
			if per[d] < 4 {
				t.Errorf("seed %#x, %s: %d of %d flows on %s, want at least 4 on each tunnel (%v)", b.seed, b.kind.name, per[d], len(b.ports), d, per)
			}
		}
	}
	// A tun device's own link-local packets (router solicitations) are
	// dropped too and are not the flows'.
	for _, s := range tl.c.Specs() {
		b, _ := os.ReadFile(filepath.Join(tl.c.Dir(), s.Name+".log"))
		var bad []string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "bad source address") && !strings.Contains(line, "[fe80:") {
				bad = append(bad, line)
			}
		}
		if len(bad) > 0 {
			t.Errorf("instance %s logged %d bad source addresses, e.g. %s", s.Name, len(bad), bad[0])
		}
	}
	for _, line := range strings.Split(connLog(), "\n") {
		if strings.HasPrefix(line, "ovpnperf: ") {
			t.Logf("connect: %s", line)
		}
	}
	interruptConnect(t, conn, connLog)
	checkRestored(t, l, before, "SIGINT")
}
