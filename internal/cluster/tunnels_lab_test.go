package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// The two site networks of the tunnels test: the client's (behind the
// client, routed back by the cluster with --site) and the server's (routed
// by connect with --route).
var (
	clientSite = netip.MustParsePrefix("10.97.0.0/24")
	serverSite = netip.MustParsePrefix("10.98.0.0/24")
	clientHost = "10.97.0.1"
	serverHost = "10.98.0.1"
)

// nsOut is what argv prints on its standard output in n's namespace. Its
// standard error is only logged: ip prints the kernel's messages there
// (another test's namespace going away during a link dump), and a snapshot
// that read them as output would differ from the one before.
func nsOut(t testing.TB, ctx context.Context, l *lab.Lab, n lab.Node, argv ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := l.Command(ctx, n, argv...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", strings.Join(argv, " "), err, out, stderr.Bytes())
	}
	if stderr.Len() > 0 {
		t.Logf("%s (stderr): %s", strings.Join(argv, " "), bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(string(out))
}

// tunDevs are connect's tun devices in the client namespace, sorted (t0, t1).
func tunDevs(t testing.TB, ctx context.Context, l *lab.Lab) []string {
	var devs []string
	for _, line := range strings.Split(nsOut(t, ctx, l, lab.Client, "ip", "-o", "link", "show"), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			d, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if strings.HasPrefix(d, "ovpnperf") && len(d) == 14 && d[12] == 't' {
				devs = append(devs, d)
			}
		}
	}
	sort.Strings(devs)
	return devs
}

func devBytes(t testing.TB, ctx context.Context, l *lab.Lab, dev, which string) int64 {
	n, _ := strconv.ParseInt(nsOut(t, ctx, l, lab.Client, "cat", "/sys/class/net/"+dev+"/statistics/"+which), 10, 64)
	return n
}

// routeDevs is the set of devices the client's route to the server's site
// uses now.
func routeDevs(ctx context.Context, l *lab.Lab) []string {
	out, _ := l.Command(ctx, lab.Client, "ip", "route", "show", serverSite.String()).CombinedOutput()
	var devs []string
	f := strings.Fields(string(out))
	for i := range f {
		if f[i] == "dev" && i+1 < len(f) && !slices.Contains(devs, f[i+1]) {
			devs = append(devs, f[i+1])
		}
	}
	sort.Strings(devs)
	return devs
}

// flowTunnels reads the captures of each tunnel and returns, per direction
// ("out" from the client site, "in" to it) and client port, the tunnels
// that carried a tenth or more of the flow's packets; the packets of a
// flow on any other tunnel are logged.
//
// Why not every packet: the client site's address is on the client
// itself, so these are connections the client makes, and the kernel does
// not always route every packet of such a connection as the hash does.
// Seen here, with and without connect's host nat, in some runs of three
// and none in others: every SYN of one run left by the nexthop group's
// first member and the rest of each flow by the tunnel the hash named (ip
// route get with the flow's ports); in another a few hundred of a flow's
// 40 000 packets left by the other tunnel (docs/cluster.md). Why the
// socket's route differs at times was not traced. The claim checked is
// that each flow's traffic follows the hash, not every packet of it.
func flowTunnels(t *testing.T, pcaps map[string]string) map[string]map[uint16][]string {
	type key struct {
		dir  string
		port uint16
	}
	counts := map[key]map[string]int{}
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
			if len(data) < 24 || data[0]>>4 != 4 || data[9] != 6 {
				continue
			}
			ihl := int(data[0]&0xf) * 4
			src, dst := netip.AddrFrom4([4]byte(data[12:16])), netip.AddrFrom4([4]byte(data[16:20]))
			sport, dport := uint16(data[ihl])<<8|uint16(data[ihl+1]), uint16(data[ihl+2])<<8|uint16(data[ihl+3])
			dir, port := "out", sport
			if dst.String() == clientHost {
				dir, port = "in", dport
			} else if src.String() != clientHost {
				continue
			}
			k := key{dir, port}
			if counts[k] == nil {
				counts[k] = map[string]int{}
			}
			counts[k][dev]++
		}
		f.Close()
	}
	got := map[string]map[uint16][]string{"out": {}, "in": {}}
	for k, byDev := range counts {
		total := 0
		for _, n := range byDev {
			total += n
		}
		for dev, n := range byDev {
			if 10*n >= total {
				got[k.dir][k.port] = append(got[k.dir][k.port], dev)
			} else {
				t.Logf("flow of client port %d (%s): %d of its %d packets on %s", k.port, k.dir, n, total, dev)
			}
		}
		sort.Strings(got[k.dir][k.port])
	}
	return got
}

type iperfStreams struct {
	Start struct {
		Connected []struct {
			Socket    int `json:"socket"`
			LocalPort int `json:"local_port"`
		} `json:"connected"`
	} `json:"start"`
	Intervals []struct {
		Streams []struct {
			Socket int     `json:"socket"`
			Bits   float64 `json:"bits_per_second"`
			Omit   bool    `json:"omitted"`
		} `json:"streams"`
	} `json:"intervals"`
}

// TestTunnelsMultipath is must-shows 1 and 2 of multi-tunnel clients: a
// cluster of 2 instances with --site for the client's network, one
// `cluster connect --tunnels 2 --route` in the client namespace.
//   - iperf3 -P 8 from the client's site to the server's and back (-R):
//     each tunnel carries ≥ 20 % of the bytes in each direction; each flow's
//     packets of one direction cross one tunnel only, the one the kernel's
//     hash names (captures on both tun devices); ping through each tunnel
//     reaches the server's site.
//   - kill -9 of instance u1 during a run: the flows on the other tunnel
//     have no 1-s interval below half their median; the dead tunnel leaves
//     the client's route within its keepalive timeout (ping-restart 4 s
//     here) and comes back after the instance restarts.
//   - after connect ends and the cluster stops: no tun device, nexthop or
//     route left; the multipath sysctls are as before in both namespaces.
//
// The flows' ports are fixed and each namespace's multipath hash seed is
// chosen (the first from 1 up) so that the kernel's own answer (ip route
// get) puts 4 of the 8 flows of each run on each tunnel; every flow must
// then cross the tunnel the kernel named. Nothing depends on the boot's
// random seed or on ephemeral ports.
func TestTunnelsMultipath(t *testing.T) {
	testenv.Exclusive(t)
	testenv.RequirePrograms(t, "openvpn", "iperf3", "tcpdump")
	l := labtest.New(t, labpath.Path{})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	sysctls := func(n lab.Node) string {
		return nsOut(t, context.Background(), l, n, "sysctl", "-n", cluster.MultipathHashSysctls()[0], cluster.MultipathHashSysctls()[1])
	}
	before := map[lab.Node]string{lab.Client: sysctls(lab.Client), lab.Server: sysctls(lab.Server)}
	// Runs last (after the cluster's and connect's clean-up).
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for n, want := range before {
			if got := sysctls(n); got != want {
				t.Errorf("%s: multipath hash sysctls %q, were %q", n, got, want)
			}
			if out := nsOut(t, cctx, l, n, "ip", "nexthop", "show"); out != "" {
				t.Errorf("%s: nexthops left:\n%s", n, out)
			}
		}
		if d := tunDevs(t, cctx, l); len(d) > 0 {
			t.Errorf("connect's tun devices left: %v", d)
		}
		if d := routeDevs(cctx, l); len(d) > 0 {
			t.Errorf("route to %s left via %v", serverSite, d)
		}
		if out := nsOut(t, cctx, l, lab.Server, "ip", "route", "show", clientSite.String()); out != "" {
			t.Errorf("server: route to %s left: %s", clientSite, out)
		}
		entries, _ := os.ReadDir(cluster.DefaultConnectDir)
		for _, e := range entries {
			t.Logf("note: %s/%s exists (another run's?)", cluster.DefaultConnectDir, e.Name())
		}
	})
	cn := "ovpnperf client"
	tl := addTunnels(t, l, cluster.Options{Instances: 2, Protos: []string{"udp"}, PortBase: 1195, CPUs: []int{0, 1},
		Sites: []cluster.Site{{Prefix: clientSite, CN: cn}}})
	c, dir, conf := tl.c, tl.dir, tl.conf
	nsOut(t, ctx, l, lab.Client, "ip", "addr", "add", clientHost+"/32", "dev", "lo")
	nsOut(t, ctx, l, lab.Server, "ip", "addr", "add", serverHost+"/32", "dev", "lo")
	connArgs := tl.connectArgs()
	// A third tunnel to a 2-instance cluster is refused with the reason.
	if out, err := l.Command(ctx, lab.Client, append(connArgs, "--tunnels", "3", "--route", serverSite.String(), "--", "--config", conf)...).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "only 2 distinct udp instances available") {
		t.Errorf("--tunnels 3 over 2 instances: %v\n%s", err, out)
	}
	keepalive := 4 * time.Second
	logPath := filepath.Join(dir, "connect.log")
	conn, err := l.Start(ctx, lab.Client, logPath, append(connArgs, "--tunnels", "2", "--route", serverSite.String(), "--",
		"--config", conf, "--pull-filter", "ignore", "ping", "--ping", "1", "--ping-restart", strconv.Itoa(int(keepalive.Seconds())))...)
	if err != nil {
		t.Fatal(err)
	}
	connLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	stopped := false
	stopConnect := func() {
		if !stopped {
			stopped = true
			_ = conn.Stop()
		}
	}
	t.Cleanup(stopConnect)
	wait := func(what string, timeout time.Duration, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > timeout || ctx.Err() != nil {
				t.Fatalf("%s: not within %v\nconnect:\n%s", what, timeout, connLog())
			}
			time.Sleep(100 * time.Millisecond)
		}
		return time.Since(start)
	}
	var devs []string
	wait("2 tunnels in the client's route", 40*time.Second, func() bool {
		devs = tunDevs(t, ctx, l)
		return len(devs) == 2 && slices.Equal(routeDevs(ctx, l), devs)
	})
	siteVia := func() []string {
		for _, s := range c.SiteStatus() {
			return s.Via
		}
		return nil
	}
	wait("the server's route to the client's site over both instances", 10*time.Second, func() bool {
		return slices.Equal(siteVia(), []string{"u0", "u1"})
	})
	for _, dev := range devs {
		if out, err := l.Command(ctx, lab.Client, "ping", "-c", "2", "-W", "2", "-I", dev, serverHost).CombinedOutput(); err != nil {
			t.Errorf("ping %s through %s: %v\n%s", serverHost, dev, err, out)
		}
	}
	srv, err := l.Start(ctx, lab.Server, filepath.Join(dir, "iperf3-server.log"), "iperf3", "-s", "-B", serverHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	time.Sleep(300 * time.Millisecond)
	iperf := func(args ...string) iperfStreams {
		t.Helper()
		out, err := l.Command(ctx, lab.Client, append([]string{"iperf3", "-c", serverHost, "-B", clientHost, "-P", "8", "-J"}, args...)...).Output()
		if err != nil {
			t.Fatalf("iperf3 %v: %v\n%s\nconnect:\n%s", args, err, out, connLog())
		}
		var r iperfStreams
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Which tunnel each flow takes is the kernel's hash of its addresses
	// and ports: the flows' ports are fixed (--cport, one port per
	// stream), and each namespace's hash seed is the first from 1 up
	// under which the kernel itself (ip route get) puts half of each
	// run's flows on each tunnel, the client's for the flows to the
	// server, the server's for those back. The split is then the same on
	// every machine and boot, and the test checks that every flow took
	// the tunnel the kernel named.
	const fwdPort, revPort, killPort = 41000, 41100, 41200
	serverDev := map[string]string{} // server tun → client tun of the same instance
	for _, dev := range devs {
		for _, f := range strings.Fields(nsOut(t, ctx, l, lab.Client, "ip", "-o", "-4", "addr", "show", "dev", dev)) {
			if p, err := netip.ParsePrefix(f); err == nil {
				for _, sp := range c.Specs() {
					if sp.Subnet.Contains(p.Addr()) {
						serverDev[sp.Dev] = dev
					}
				}
			}
		}
	}
	if len(serverDev) != 2 {
		t.Fatalf("client tunnels %v on instances %v, want one each", devs, serverDev)
	}
	clientSeed, fwdTun := balancedSeed(t, ctx, l, lab.Client, []int{fwdPort, killPort}, func(port int) string {
		return routeDev(t, ctx, l, lab.Client, clientHost, serverHost, port, 5201)
	})
	serverSeed, revTun := balancedSeed(t, ctx, l, lab.Server, []int{revPort}, func(port int) string {
		return serverDev[routeDev(t, ctx, l, lab.Server, serverHost, clientHost, 5201, port)]
	})
	t.Logf("hash seeds: client %d, server %d; flows to the server by port %v, back %v", clientSeed, serverSeed, fwdTun, revTun)

	t.Run("both-tunnels-both-directions", func(t *testing.T) {
		for _, dir2 := range []struct {
			name, counter, flowDir string
			port                   int
			args                   []string
		}{{"client→server", "tx_bytes", "out", fwdPort, nil}, {"server→client", "rx_bytes", "in", revPort, []string{"-R"}}} {
			// Captures on both tun devices around a 3 s iperf3 -P 8,
			// and the bytes each device carried.
			pcaps := map[string]string{}
			var caps []*lab.Process
			for _, dev := range devs {
				p := filepath.Join(dir, fmt.Sprintf("%s%s.pcap", dev, dir2.counter))
				pcaps[dev] = p
				cp, err := l.Start(ctx, lab.Client, p+".log", "tcpdump", "-i", dev, "-n", "-s", "64", "-U", "-w", p, "tcp", "port", "5201")
				if err != nil {
					t.Fatal(err)
				}
				caps = append(caps, cp)
			}
			time.Sleep(time.Second) // tcpdump opens its socket
			b0 := map[string]int64{}
			for _, dev := range devs {
				b0[dev] = devBytes(t, ctx, l, dev, dir2.counter)
			}
			iperf(append([]string{"-t", "3", "--cport", strconv.Itoa(dir2.port)}, dir2.args...)...)
			var total int64
			per := map[string]int64{}
			for _, dev := range devs {
				per[dev] = devBytes(t, ctx, l, dev, dir2.counter) - b0[dev]
				total += per[dev]
			}
			time.Sleep(300 * time.Millisecond)
			for _, cp := range caps {
				_ = cp.Stop()
			}
			// 4 flows on each tunnel (the seed's choice): each carries
			// a good share unless a tunnel is slow or unused.
			for _, dev := range devs {
				share := float64(per[dev]) / float64(total)
				t.Logf("%s: %s carried %d of %d bytes (%.0f %%)", dir2.name, dev, per[dev], total, 100*share)
				if share < 0.2 {
					t.Errorf("%s: %s carried %.0f %% of the bytes with 4 of the 8 flows hashed onto it, want ≥ 20 %%", dir2.name, dev, 100*share)
				}
			}
			flows := flowTunnels(t, pcaps)
			want := fwdTun
			if dir2.flowDir == "in" {
				want = revTun
			}
			// The 8 data flows: their traffic on the tunnel the hash
			// named, and on no other (iperf3's control connection, a
			// dozen packets, is mostly its first ones: flowTunnels).
			for k := range 8 {
				port := dir2.port + k
				if got := flows[dir2.flowDir][uint16(port)]; !slices.Equal(got, []string{want[port]}) {
					t.Errorf("%s: flow of client port %d (%s) on tunnels %v, the kernel's hash named %s", dir2.name, port, dir2.flowDir, got, want[port])
				}
			}
			if len(flows["out"]) < 9 || len(flows["in"]) < 9 {
				t.Errorf("%s: captured %d flows out and %d in, want the 8 data flows and the control connection each way", dir2.name, len(flows["out"]), len(flows["in"]))
			}
		}
	})

	t.Run("kill-one-instance", func(t *testing.T) {
		// Captures tell which flows t0 carried (t1's move onto t0 once
		// t1 leaves the route, so t0's own flows are those never seen on t1).
		pcaps := map[string]string{}
		for _, dev := range devs {
			p := filepath.Join(dir, dev+"-kill.pcap")
			pcaps[dev] = p
			cp, err := l.Start(ctx, lab.Client, p+".log", "tcpdump", "-i", dev, "-n", "-s", "64", "-U", "-w", p, "tcp", "port", "5201", "and", "src", clientHost)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cp.Stop() })
			defer cp.Stop()
		}
		time.Sleep(time.Second)
		done := make(chan iperfStreams, 1)
		// Paced well below what a tunnel carries here (8 × 4 Mbit/s), so
		// that a dip is the kill's doing, not the shared cores' (the
		// flows of the dead tunnel move onto t0 and must fit beside).
		go func() {
			done <- iperf("-t", "14", "-i", "1", "-b", "4M", "--fq-rate", "4M", "--cport", strconv.Itoa(killPort))
		}()
		time.Sleep(4 * time.Second)
		killedAt := time.Now()
		if _, err := c.Kill("u1"); err != nil {
			t.Fatal(err)
		}
		var gone, back time.Duration
		for ctx.Err() == nil {
			rd := routeDevs(ctx, l)
			if gone == 0 && len(rd) == 1 {
				gone = time.Since(killedAt)
			}
			if gone != 0 && len(rd) == 2 {
				back = time.Since(killedAt)
				break
			}
			if time.Since(killedAt) > 40*time.Second {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		r := <-done
		t.Logf("after kill -9 of u1: t1 out of the route after %v (keepalive timeout %v), back after %v", gone.Round(10*time.Millisecond), keepalive, back.Round(10*time.Millisecond))
		// DefaultTunnelInterval and a management round trip on top of the timeout.
		if gone == 0 || gone > keepalive+1500*time.Millisecond {
			t.Errorf("dead tunnel left the route after %v, want within the keepalive timeout %v (+1.5 s)\nconnect:\n%s", gone, keepalive, connLog())
		}
		if back == 0 {
			t.Errorf("tunnel t1 did not come back into the route within 40 s of the kill\nconnect:\n%s", connLog())
		}
		time.Sleep(300 * time.Millisecond)
		flows := flowTunnels(t, pcaps)["out"]
		onT0 := map[int]bool{}
		for _, cs := range r.Start.Connected {
			if tuns := flows[uint16(cs.LocalPort)]; slices.Equal(tuns, devs[:1]) {
				onT0[cs.Socket] = true
			}
		}
		t.Logf("flows by tunnel: %v; t0's own: %d of %d", flows, len(onT0), len(r.Start.Connected))
		if len(onT0) == 0 {
			t.Fatalf("no flow on t0: nothing to check")
		}
		for sock := range onT0 {
			var bits []float64
			for _, iv := range r.Intervals {
				for _, s := range iv.Streams {
					if s.Socket == sock && !s.Omit {
						bits = append(bits, s.Bits)
					}
				}
			}
			if len(bits) < 10 {
				t.Errorf("stream %d: %d intervals", sock, len(bits))
				continue
			}
			sorted := slices.Clone(bits)
			slices.Sort(sorted)
			med := sorted[len(sorted)/2]
			for i, b := range bits {
				if b < med/2 {
					t.Errorf("flow on t0 (socket %d): interval %d at %.1f Mbit/s, below half its median %.1f Mbit/s: %v", sock, i, b/1e6, med/1e6, mbits(bits))
				}
			}
			t.Logf("flow on t0 (socket %d): %v Mbit/s, median %.1f", sock, mbits(bits), med/1e6)
		}
		wait("the server's route back over both instances", 20*time.Second, func() bool {
			return slices.Equal(siteVia(), []string{"u0", "u1"})
		})
	})

	t.Run("nothing-left", func(t *testing.T) {
		stopConnect()
		if d := tunDevs(t, ctx, l); len(d) > 0 {
			t.Errorf("tun devices after connect ended: %v", d)
		}
		if d := routeDevs(ctx, l); len(d) > 0 {
			t.Errorf("route to %s after connect ended: %v", serverSite, d)
		}
		if got := sysctls(lab.Client); got != before[lab.Client] {
			t.Errorf("client sysctls %q after connect, were %q", got, before[lab.Client])
		}
		if !strings.Contains(connLog(), "route "+serverSite.String()+" via [t0 t1]") {
			t.Errorf("connect did not log its route:\n%s", connLog())
		}
	})
}

func mbits(b []float64) string {
	var s []string
	for _, x := range b {
		s = append(s, fmt.Sprintf("%.0f", x/1e6))
	}
	return strings.Join(s, " ")
}

// routeDev is the device node n's kernel routes a TCP flow from src:sport
// to dst:dport through (src an address of n).
// Equivalent to: ip route get DST from SRC ipproto tcp sport SPORT dport DPORT
func routeDev(t testing.TB, ctx context.Context, l *lab.Lab, n lab.Node, src, dst string, sport, dport int) string {
	t.Helper()
	f := strings.Fields(nsOut(t, ctx, l, n, "ip", "route", "get", dst, "from", src, "ipproto", "tcp", "sport", strconv.Itoa(sport), "dport", strconv.Itoa(dport)))
	for i := range f {
		if f[i] == "dev" && i+1 < len(f) {
			return f[i+1]
		}
	}
	return ""
}

// balancedSeed sets, in node n, the first multipath hash seed from 1 up
// under which tunnel(port) puts 4 of the 8 ports from each base on each of
// two tunnels, and returns it with each port's tunnel (the kernel's hash
// seed is per namespace; a lab's namespace is the test's own).
func balancedSeed(t testing.TB, ctx context.Context, l *lab.Lab, n lab.Node, bases []int, tunnel func(port int) string) (uint32, map[int]string) {
	t.Helper()
	return balancedSeedN(t, ctx, l, n, bases, 8, tunnel)
}

// balancedSeedN is balancedSeed for flows ports from each base.
func balancedSeedN(t testing.TB, ctx context.Context, l *lab.Lab, n lab.Node, bases []int, flows int, tunnel func(port int) string) (uint32, map[int]string) {
	t.Helper()
	for seed := uint32(1); seed <= 200; seed++ {
		setHashSeed(t, ctx, l, n, seed)
		got := map[int]string{}
		ok := true
		for _, b := range bases {
			per := map[string]int{}
			for k := range flows {
				got[b+k] = tunnel(b + k)
				per[got[b+k]]++
			}
			ok = ok && len(per) == 2 && !slices.Contains(slices.Collect(maps.Keys(per)), "") && per[got[b]] == flows/2
		}
		if ok {
			return seed, got
		}
	}
	t.Fatalf("%s: no hash seed in 1-200 splits the flows in halves", n)
	return 0, nil
}
