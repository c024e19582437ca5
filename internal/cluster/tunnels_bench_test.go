package cluster_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

var (
	benchTunnels = flag.String("cluster.tunnels", "1,2", "tunnel counts of one client to compare (BenchmarkTunnels)")
	benchFlows   = flag.Int("cluster.flows", 8, "parallel iperf3 TCP flows (BenchmarkTunnels)")
	benchHostNAT = flag.String("cluster.hostnat", "on", "connect's source NAT of the host's own packets: on, off, or both in one run (on,off) (BenchmarkTunnels)")
	benchFrom    = flag.String("cluster.from", "site", "where the flows start: site (a site address on the client, bound), host (the address the kernel picks), or both (site,host) (BenchmarkTunnels)")
)

// BenchmarkTunnels is must-show 3 of multi-tunnel clients: one client
// (`cluster connect --tunnels N --route`, the cluster with --site) through
// 1 and N instances, iperf3 -P flows from the client's site to the
// server's; aggregate Mbit/s, CPU-s/GB of the OpenVPN processes, and the
// CPU split per process (each instance, each client openvpn, iperf3 on both
// ends) that tells whether one process was the limit. Run it with
//
//	go test -run '^$' -bench Tunnels -benchtime 1x ./internal/cluster \
//	    -cluster.tunnels 1,2 -cluster.flows 8 -cluster.seconds 10
//
// It logs the load average before and after: on a shared machine the
// figures say what this machine gave at that moment, no more.
func BenchmarkTunnels(b *testing.B) {
	for _, s := range strings.Split(*benchTunnels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("-cluster.tunnels %q", *benchTunnels)
		}
		for _, nat := range strings.Split(*benchHostNAT, ",") {
			for _, from := range strings.Split(*benchFrom, ",") {
				if (nat != "on" && nat != "off") || (from != "site" && from != "host") {
					b.Fatalf("-cluster.hostnat %q -cluster.from %q", *benchHostNAT, *benchFrom)
				}
				if nat == "off" && from == "host" && n > 1 {
					// Without it, the host's flows that the hash sends
					// down another tunnel than their address's are dropped.
					continue
				}
				b.Run(fmt.Sprintf("tunnels=%d/flows=%d/hostnat=%s/from=%s", n, *benchFlows, nat, from), func(b *testing.B) {
					for range b.N {
						mbit, cpuPerGB := tunnelsOnce(b, n, *benchFlows, *benchSeconds, nat == "on", from == "host")
						b.ReportMetric(mbit, "Mbit/s")
						b.ReportMetric(cpuPerGB, "CPU-s/GB")
					}
				})
			}
		}
	}
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// procCPU is the CPU seconds (user+system) of pid.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100 // USER_HZ
}

// clientOpenVPNs are the pids of connect's openvpn processes, by device.
func clientOpenVPNs() map[string]int {
	out := map[string]int{}
	ps, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range ps {
		b, _ := os.ReadFile(p)
		a := strings.Split(string(b), "\x00")
		if len(a) == 0 || filepath.Base(a[0]) != "openvpn" {
			continue
		}
		if i := slices.Index(a, "--dev"); i >= 0 && i+1 < len(a) && strings.HasPrefix(a[i+1], "ovpnperf") && len(a[i+1]) == 14 && a[i+1][12] == 't' {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out[a[i+1]] = pid
		}
	}
	return out
}

// tunnelsOnce runs one client over tunnels tunnels; hostNAT is connect's
// --host-nat, fromHost makes the flows the host's own (no -B). The flows'
// ports are fixed (--cport) and the client's hash seed is one that puts
// as many of the site's flows on each tunnel (balancedSeed), so that runs
// compare the same split.
func tunnelsOnce(b *testing.B, tunnels, flows, seconds int, hostNAT, fromHost bool) (mbit, cpuPerGB float64) {
	b.Logf("load average before: %s", loadavg())
	l := labtest.New(b, labpath.Path{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds+120)*time.Second)
	defer cancel()
	var cpus []int
	for i := range tunnels {
		cpus = append(cpus, i%2)
	}
	c, pki := startCluster(b, l, cluster.Options{Instances: tunnels, Protos: []string{"udp"}, PortBase: 1195, CPUs: cpus,
		Sites: []cluster.Site{{Prefix: clientSite, CN: "ovpnperf client"}}})
	nsOut(b, ctx, l, lab.Client, "ip", "addr", "add", clientHost+"/32", "dev", "lo")
	nsOut(b, ctx, l, lab.Server, "ip", "addr", "add", serverHost+"/32", "dev", "lo")
	dl, err := netns.Listen(l.Namespace(lab.Server), "tcp", lab.ServerV4().String()+":0")
	if err != nil {
		b.Fatal(err)
	}
	defer dl.Close()
	d := &cluster.Dispatcher{Registry: cluster.LocalRegistry{C: c, Host: lab.ServerV4().String()}, Strategy: cluster.LeastLoaded}
	go func() { _ = d.Serve(dl, pki.ServerCert(), pki.ServerKey(), pki.CACert()) }()
	dir := b.TempDir()
	cfg, err := openvpn.ClientConfig(openvpn.ClientParams{Proto: "udp", Remote: lab.ServerV4(), Port: 1195, Credentials: pki.Client("")})
	if err != nil {
		b.Fatal(err)
	}
	text, _ := cfg.Render()
	conf := filepath.Join(dir, "client.conf")
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		b.Fatal(err)
	}
	conn, err := l.Start(ctx, lab.Client, filepath.Join(dir, "connect.log"), os.Getenv("OVPNPERF_TEST_BINARY"), "cluster", "connect", dl.Addr().String(),
		"--ca", pki.CACert(), "--cert", pki.ClientCert(), "--key", pki.ClientKey(), "--tunnels", strconv.Itoa(tunnels), "--route", serverSite.String(),
		"--host-nat="+strconv.FormatBool(hostNAT), "--", "--config", conf)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Stop() })
	for {
		devs := tunDevs(b, ctx, l)
		if len(devs) == tunnels && slices.Equal(routeDevs(ctx, l), devs) && len(c.SiteStatus()) == 1 && len(c.SiteStatus()[0].Via) == tunnels {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("%d tunnels not up", tunnels)
		}
		time.Sleep(100 * time.Millisecond)
	}
	const cport = 42000
	if tunnels == 2 && flows%2 == 0 {
		seed, _ := balancedSeedN(b, ctx, l, lab.Client, []int{cport}, flows, func(port int) string {
			return routeDev(b, ctx, l, lab.Client, clientHost, serverHost, port, 5201)
		})
		b.Logf("client hash seed %d: the site's flows %d/%d over the tunnels", seed, flows/2, flows/2)
	}
	srv, err := l.Start(ctx, lab.Server, "", "iperf3", "-s", "-1", "-B", serverHost)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	time.Sleep(500 * time.Millisecond)
	clients := clientOpenVPNs()
	cpu0 := map[string]float64{}
	for _, s := range c.Status() {
		cpu0[s.Name] = s.CPUSeconds
	}
	for dev, pid := range clients {
		cpu0[dev] = procCPU(pid)
	}
	argv := []string{"iperf3", "-c", serverHost, "-P", strconv.Itoa(flows), "-t", strconv.Itoa(seconds), "--cport", strconv.Itoa(cport), "-J"}
	if !fromHost {
		argv = append(argv, "-B", clientHost)
	}
	devs := tunDevs(b, ctx, l)
	tx0 := map[string]int64{}
	for _, dev := range devs {
		tx0[dev] = devBytes(b, ctx, l, dev, "tx_bytes")
	}
	out, err := l.Command(ctx, lab.Client, argv...).Output()
	if err != nil {
		b.Fatalf("iperf3: %v\n%s", err, out)
	}
	var j struct {
		End struct {
			SumReceived struct {
				Bytes float64 `json:"bytes"`
			} `json:"sum_received"`
			CPU struct {
				Host   float64 `json:"host_total"`
				Remote float64 `json:"remote_total"`
			} `json:"cpu_utilization_percent"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &j); err != nil {
		b.Fatal(err)
	}
	var txSplit []string
	for _, dev := range devs {
		txSplit = append(txSplit, fmt.Sprintf("%s %d MB", dev[len(dev)-2:], (devBytes(b, ctx, l, dev, "tx_bytes")-tx0[dev])/1e6))
	}
	b.Logf("bytes sent per tunnel: %s", strings.Join(txSplit, ", "))
	time.Sleep(2 * cluster.DefaultTiming().PollInterval)
	var split []string
	total := 0.0
	for _, s := range c.Status() {
		v := s.CPUSeconds - cpu0[s.Name]
		total += v
		split = append(split, fmt.Sprintf("server %s %.1f s", s.Name, v))
	}
	for dev, pid := range clients {
		v := procCPU(pid) - cpu0[dev]
		total += v
		split = append(split, fmt.Sprintf("client %s %.1f s", dev[len(dev)-2:], v))
	}
	slices.Sort(split)
	split = append(split, fmt.Sprintf("iperf3 client %.1f s", j.End.CPU.Host/100*float64(seconds)),
		fmt.Sprintf("iperf3 server %.1f s", j.End.CPU.Remote/100*float64(seconds)))
	bytes := j.End.SumReceived.Bytes
	mbit = bytes * 8 / float64(seconds) / 1e6
	cpuPerGB = total / (bytes / 1e9)
	b.Logf("host nat %v, flows from the host %v: %d tunnels, %d flows, %d s: %.0f Mbit/s aggregate, %.1f CPU-s/GB of the OpenVPN processes (%.1f s); CPU split over %d s on %s CPUs: %s",
		hostNAT, fromHost, tunnels, flows, seconds, mbit, cpuPerGB, total, seconds, strings.TrimSpace(readFile("/sys/devices/system/cpu/online")), strings.Join(split, ", "))
	b.Logf("load average after: %s", loadavg())
	return mbit, cpuPerGB
}

func readFile(p string) string { b, _ := os.ReadFile(p); return string(b) }
