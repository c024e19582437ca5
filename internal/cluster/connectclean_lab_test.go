package cluster_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// tunnelsLab is a lab with a 2-instance cluster, a dispatcher in the
// server namespace and a client config: what `cluster connect --tunnels`
// needs.
type tunnelsLab struct {
	l        *lab.Lab
	c        *cluster.Cluster
	pki      *openvpn.PKI
	dispAddr string
	conf     string
	dir      string
}

func newTunnelsLab(t *testing.T, o cluster.Options, edit ...func(*openvpn.Config)) *tunnelsLab {
	t.Helper()
	return addTunnels(t, labtest.New(t, labpath.Path{}), o, edit...)
}

// addTunnels starts on l what newTunnelsLab does: the cluster (2 UDP
// instances unless o says), its dispatcher and the client config.
func addTunnels(t *testing.T, l *lab.Lab, o cluster.Options, edit ...func(*openvpn.Config)) *tunnelsLab {
	t.Helper()
	if o.Instances == 0 {
		o.Instances, o.Protos, o.PortBase, o.CPUs = 2, []string{"udp"}, 1195, []int{0, 1}
	}
	c, pki := startCluster(t, l, o, edit...)
	dl, err := netns.Listen(l.Namespace(lab.Server), "tcp", lab.ServerV4().String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dl.Close() })
	d := &cluster.Dispatcher{Registry: cluster.LocalRegistry{C: c, Host: lab.ServerV4().String()}, Strategy: cluster.LeastLoaded}
	go func() { _ = d.Serve(dl, pki.ServerCert(), pki.ServerKey(), pki.CACert()) }()
	dir := t.TempDir()
	cfg, err := openvpn.ClientConfig(openvpn.ClientParams{Proto: "udp", Remote: lab.ServerV4(), Port: 1195, Credentials: pki.Client("")})
	if err != nil {
		t.Fatal(err)
	}
	text, err := cfg.Render()
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "client.conf")
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return &tunnelsLab{l: l, c: c, pki: pki, dispAddr: dl.Addr().String(), conf: conf, dir: dir}
}

// connectArgs is `cluster connect` to the lab's dispatcher, then more.
func (tl *tunnelsLab) connectArgs(more ...string) []string {
	return append([]string{os.Getenv("OVPNPERF_TEST_BINARY"), "cluster", "connect", tl.dispAddr,
		"--ca", tl.pki.CACert(), "--cert", tl.pki.ClientCert(), "--key", tl.pki.ClientKey()}, more...)
}

// interruptConnect ends conn with SIGINT, as Ctrl-C would, and checks that
// it exits 0.
func interruptConnect(t *testing.T, conn *lab.Process, connLog func() string) {
	t.Helper()
	if err := syscall.Kill(conn.Pid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := conn.Wait(); err != nil {
		t.Errorf("connect after SIGINT: %v\n%s", err, connLog())
	}
}

// checkRestored checks that the client namespace is as clientSnapshot
// found it before connect ran, now that it ended by how.
func checkRestored(t *testing.T, l *lab.Lab, before map[string]string, how string) {
	t.Helper()
	now := clientSnapshot(t, l)
	for k, want := range before {
		if got := now[k]; got != want {
			t.Errorf("after %s: %s\n%s\nwant (before connect)\n%s", how, k, got, want)
		}
	}
}

// clientSnapshot is what of the client namespace connect may change: its
// routes (both families, every table), nexthops, devices, the multipath
// hash sysctls and the nat rules of both families.
func clientSnapshot(t *testing.T, l *lab.Lab) map[string]string {
	ctx := context.Background()
	links := strings.Split(nsOut(t, ctx, l, lab.Client, "ip", "-o", "link", "show"), "\n")
	var names []string
	for _, line := range links {
		if f := strings.Fields(line); len(f) > 1 {
			names = append(names, strings.TrimSuffix(f[1], ":"))
		}
	}
	sort.Strings(names)
	return map[string]string{
		"routes":   nsOut(t, ctx, l, lab.Client, "ip", "route", "show", "table", "all"),
		"routes6":  nsOut(t, ctx, l, lab.Client, "ip", "-6", "route", "show", "table", "all"),
		"nexthops": nsOut(t, ctx, l, lab.Client, "ip", "nexthop", "show"),
		"links":    strings.Join(names, " "),
		"sysctls":  nsOut(t, ctx, l, lab.Client, "sysctl", "-n", cluster.MultipathHashSysctls()[0], cluster.MultipathHashSysctls()[1]),
		"nat":      nsOut(t, ctx, l, lab.Client, "iptables", "-w", "-t", "nat", "-S"),
		"nat6":     nsOut(t, ctx, l, lab.Client, "ip6tables", "-w", "-t", "nat", "-S"),
	}
}

// TestConnectKilledClean: a `cluster connect --tunnels 2` that is killed
// (SIGKILL) leaves what it made; `cluster clean ID` undoes exactly that.
//
// Connect's openvpns get SIGTERM when connect dies (Pdeathsig) and then
// close their tun devices, which takes the nexthops and routes with them.
// To leave what a crash leaves when they cannot act on it (a stuck openvpn),
// the test stops both openvpns (SIGSTOP) before the kill: then processes,
// tun devices, nexthops, routes and sysctls all remain, and clean must
// remove each. (The test is their subreaper meanwhile: orphaned to pid 1,
// stopped processes of a group whose leader died get SIGHUP and SIGCONT
// from the kernel, and would act on the SIGTERM at once.) Before the kill the admin-side of the test adds a route and
// a nexthop of its own, and after it replaces one of connect's two routes
// with its own: clean must leave those alone.
func TestConnectKilledClean(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn")
	tl := newTunnelsLab(t, cluster.Options{})
	l := tl.l
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// A non-default IPv6 value shows that clean writes back the recorded
	// value, not a default.
	if _, err := l.Command(ctx, lab.Client, "sysctl", "-q", "-w", cluster.MultipathHashSysctls()[1]+"=2").CombinedOutput(); err != nil {
		t.Logf("note: %s=2 not accepted here; the test restores the default instead", cluster.MultipathHashSysctls()[1])
	}
	// The admin's own route and nexthop, present before and after.
	nsOut(t, ctx, l, lab.Client, "ip", "nexthop", "add", "id", "77", "blackhole")
	nsOut(t, ctx, l, lab.Client, "ip", "route", "add", "10.95.0.0/24", "nhid", "77")
	before := clientSnapshot(t, l)

	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("prctl PR_SET_CHILD_SUBREAPER: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	second := "10.96.0.0/24"
	logPath := filepath.Join(tl.dir, "connect.log")
	conn, err := l.Start(ctx, lab.Client, logPath, tl.connectArgs("--tunnels", "2", "--route", serverSite.String(), "--route", second, "--", "--config", tl.conf)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Stop() })
	connLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	deadline := time.Now().Add(40 * time.Second)
	for !(len(tunDevs(t, ctx, l)) == 2 && len(routeDevs(ctx, l)) == 2) {
		if time.Now().After(deadline) {
			t.Fatalf("2 tunnels not in the route within 40 s\nconnect:\n%s", connLog())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The run's state file: 0600, owned by the connect process, listing
	// both openvpns with their start times.
	var st cluster.ConnectState
	ids, _ := cluster.Paths{}.ListConnects()
	for _, id := range ids {
		if s, err := (cluster.Paths{}).ReadConnectState(id); err == nil && s.Pid == conn.Pid() {
			st = s
		}
	}
	if st.ID == "" {
		t.Fatalf("no state file of connect (pid %d) in %s (runs %v)\nconnect:\n%s", conn.Pid(), cluster.DefaultConnectDir, ids, connLog())
	}
	t.Cleanup(func() { _ = cluster.Paths{}.CleanConnect(context.Background(), st.ID) })
	statePath := filepath.Join(cluster.Paths{}.ConnectRunDir(st.ID), "journal.jsonl")
	if fi, err := os.Stat(statePath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file %s: %v, mode %v, want 0600", statePath, err, fi.Mode().Perm())
	}
	if st.Netns != l.Namespace(lab.Client) {
		t.Errorf("state file: netns %q, want %q", st.Netns, l.Namespace(lab.Client))
	}
	var ovpns []cluster.Resource
	kinds := map[string]int{}
	for _, r := range st.Resources {
		kinds[r.Kind]++
		if r.Kind == cluster.KindProcess {
			ovpns = append(ovpns, r)
		}
	}
	if len(ovpns) != 2 || kinds[cluster.KindLink] != 2 || kinds[cluster.KindMultipath] != 1 || kinds[cluster.KindSysctl] != 2 || kinds[cluster.KindNATChain] != 2 {
		t.Fatalf("state file lists %v, want 2 processes, 2 links, 1 multipath, 2 sysctls, 2 nat chains: %+v", kinds, st.Resources)
	}
	for _, r := range ovpns {
		if !runner.Alive(r.Pid, r.StartTicks) {
			t.Fatalf("recorded openvpn %d (start %d) does not run", r.Pid, r.StartTicks)
		}
		if err := syscall.Kill(r.Pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(conn.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-conn.Done()
	nsOut(t, ctx, l, lab.Client, "ip", "route", "replace", "blackhole", second)
	time.Sleep(500 * time.Millisecond)

	// What the killed run left.
	left := clientSnapshot(t, l)
	if d := tunDevs(t, ctx, l); len(d) != 2 {
		t.Errorf("after SIGKILL: tun devices %v, want connect's 2 (the test's premise)", d)
	}
	if d := routeDevs(ctx, l); len(d) != 2 {
		t.Errorf("after SIGKILL: route to %s via %v, want both tunnels", serverSite, d)
	}
	if left["nexthops"] == before["nexthops"] {
		t.Errorf("after SIGKILL: no nexthop of connect's left:\n%s", left["nexthops"])
	}
	for _, k := range []string{"nat", "nat6"} {
		if !strings.Contains(left[k], "-j ovpnperf-"+st.ID+"-hostnat") {
			t.Errorf("after SIGKILL: %s: no jump to connect's chain left:\n%s", k, left[k])
		}
	}
	if left["sysctls"] == before["sysctls"] || left["sysctls"] != "1\n1" {
		t.Errorf("after SIGKILL: sysctls %q, want 1 and 1 (were %q)", left["sysctls"], before["sysctls"])
	}
	for _, r := range ovpns {
		if !runner.Alive(r.Pid, r.StartTicks) {
			t.Errorf("after SIGKILL: openvpn %d already gone (the test's premise)", r.Pid)
		}
	}
	if _, err := os.Stat(statePath); err != nil {
		t.Errorf("after SIGKILL: %v", err)
	}

	out, err := exec.CommandContext(ctx, os.Getenv("OVPNPERF_TEST_BINARY"), "cluster", "clean", st.ID).CombinedOutput()
	if err != nil {
		t.Fatalf("cluster clean %s: %v\n%s", st.ID, err, out)
	}
	after := clientSnapshot(t, l)
	// The admin's route replaced connect's: it stays, and only it differs.
	if !strings.Contains(after["routes"], "blackhole "+second) {
		t.Errorf("clean removed the admin's route to %s:\n%s", second, after["routes"])
	}
	after["routes"] = strings.Join(slices.DeleteFunc(strings.Split(after["routes"], "\n"), func(s string) bool { return strings.HasPrefix(s, "blackhole "+second) }), "\n")
	for k, want := range before {
		if after[k] != want {
			t.Errorf("after clean: %s\n%s\nwant (before connect)\n%s", k, after[k], want)
		}
	}
	for _, r := range ovpns {
		if runner.Alive(r.Pid, r.StartTicks) {
			t.Errorf("after clean: openvpn %d still runs", r.Pid)
		}
	}
	if _, err := os.Stat(cluster.Paths{}.ConnectRunDir(st.ID)); !os.IsNotExist(err) {
		t.Errorf("after clean: %s: %v", cluster.Paths{}.ConnectRunDir(st.ID), err)
	}
	// The openvpns were the test's (subreaper) children at the end.
	for _, r := range ovpns {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(r.Pid, &ws, syscall.WNOHANG, nil)
	}
	// Clean again: nothing left, nothing to do, no error.
	if out, err := exec.CommandContext(ctx, os.Getenv("OVPNPERF_TEST_BINARY"), "cluster", "clean", st.ID).CombinedOutput(); err != nil {
		t.Errorf("second cluster clean %s: %v\n%s", st.ID, err, out)
	}
	nsOut(t, ctx, l, lab.Client, "ip", "route", "del", "blackhole", second)

	// SIGINT (Ctrl-C): connect undoes everything itself.
	conn, err = l.Start(ctx, lab.Client, logPath, tl.connectArgs("--tunnels", "2", "--route", serverSite.String(), "--", "--config", tl.conf)...)
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(40 * time.Second)
	for len(routeDevs(ctx, l)) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("2 tunnels not in the route within 40 s\nconnect:\n%s", connLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
	ids2, _ := cluster.Paths{}.ListConnects()
	id2 := ""
	for _, id := range ids2 {
		if s, err := (cluster.Paths{}).ReadConnectState(id); err == nil && s.Pid == conn.Pid() {
			id2 = id
		}
	}
	if id2 == "" {
		t.Errorf("second connect (pid %d): no state file", conn.Pid())
	}
	interruptConnect(t, conn, connLog)
	checkRestored(t, l, before, "SIGINT")
	if _, err := os.Stat(cluster.Paths{}.ConnectRunDir(id2)); id2 != "" && !os.IsNotExist(err) {
		t.Errorf("after SIGINT: connect's directory %s: %v", cluster.Paths{}.ConnectRunDir(id2), err)
	}
	nsOut(t, ctx, l, lab.Client, "ip", "route", "del", "10.95.0.0/24")
	nsOut(t, ctx, l, lab.Client, "ip", "nexthop", "del", "id", "77")
}

// TestConnectPushedRoutes: without --route, `cluster connect --tunnels 2`
// spreads the networks the server pushes (an IPv4 route and an IPv6 one)
// over both tunnels; pings from the client host to the server's site reach
// it in both families under three explicit multipath hash seeds; Ctrl-C
// leaves the client namespace as it was.
func TestConnectPushedRoutes(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn")
	site6 := netip.MustParsePrefix("fd00:98::/64")
	host6 := "fd00:98::1"
	tl := newTunnelsLab(t, cluster.Options{Pool6: netip.MustParsePrefix("fd00:8::/63")}, func(c *openvpn.Config) {
		c.Add("push", "route "+serverSite.Addr().String()+" 255.255.255.0")
		c.Add("push", "route-ipv6 "+site6.String())
	})
	l := tl.l
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nsOut(t, ctx, l, lab.Server, "ip", "addr", "add", serverHost+"/32", "dev", "lo")
	nsOut(t, ctx, l, lab.Server, "ip", "addr", "add", host6+"/128", "dev", "lo")
	before := clientSnapshot(t, l)

	logPath := filepath.Join(tl.dir, "connect.log")
	conn, err := l.Start(ctx, lab.Client, logPath, tl.connectArgs("--tunnels", "2", "--", "--config", tl.conf)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Stop() })
	connLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	route6Devs := func() []string {
		out, _ := l.Command(ctx, lab.Client, "ip", "-6", "route", "show", site6.String()).CombinedOutput()
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
	deadline := time.Now().Add(40 * time.Second)
	for {
		devs := tunDevs(t, ctx, l)
		if len(devs) == 2 && slices.Equal(routeDevs(ctx, l), devs) && slices.Equal(route6Devs(), devs) {
			break
		}
		if time.Now().After(deadline) {
			out, _ := l.Command(ctx, lab.Client, "ip", "route").CombinedOutput()
			out6, _ := l.Command(ctx, lab.Client, "ip", "-6", "route").CombinedOutput()
			t.Fatalf("pushed routes not over 2 tunnels within 40 s:\n%s\n%s\nconnect:\n%s", out, out6, connLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, line := range strings.Split(connLog(), "\n") {
		if strings.HasPrefix(line, "ovpnperf: route") {
			t.Logf("connect: %s", line)
		}
	}
	t.Logf("client: %s; %s", nsOut(t, ctx, l, lab.Client, "ip", "route", "show", serverSite.String()), nsOut(t, ctx, l, lab.Client, "ip", "-6", "route", "show", site6.String()))
	if !strings.Contains(connLog(), "routes pushed to t") {
		t.Errorf("connect did not say which routes were pushed:\n%s", connLog())
	}
	// Under several explicit hash seeds (the boot's own one is random),
	// so that the tunnel a ping takes differs from the one whose address
	// it carries at least once, whatever this machine's hash.
	for _, seed := range []uint32{1, 0x5eed, 0xdeadbeef} {
		setHashSeed(t, ctx, l, lab.Client, seed)
		for _, dst := range []string{serverHost, host6} {
			rg, _ := l.Command(ctx, lab.Client, "ip", "route", "get", dst).CombinedOutput()
			if out, err := l.Command(ctx, lab.Client, "ping", "-c", "2", "-i", "0.2", "-W", "2", dst).CombinedOutput(); err != nil {
				t.Errorf("seed %#x: ping %s over the pushed route (%s): %v\n%s", seed, dst, strings.TrimSpace(string(rg)), err, out)
			}
		}
	}
	interruptConnect(t, conn, connLog)
	checkRestored(t, l, before, "SIGINT")
}

// TestConnectOnePortTunnels: `cluster connect --tunnels 2 --one-port
// SERVER:1194` to a cluster of 2 instances behind one port (counter
// spreading): both tunnels reach distinct instances (distinct pool slices
// on their devices), the route goes over both, a ping through each reaches
// the server's site, and SIGTERM leaves the client namespace as it was.
//
// Not here: hash spreading (--spread hash), where two source ports land on
// one instance in about half the runs and connect reconnects a tunnel from
// another port. Whether they collide depends on random source ports and a
// random HMARK seed, so no test can make it happen on demand. In 10 runs
// by hand it happened 5 times: twice connect reconnected the older tunnel
// and both then worked; once both tunnels were seen up in the same check,
// connect ended the session the instance had kept, and a ping through the
// other tunnel failed (both are reconnected now; in 8 more runs no ping
// failed); twice the instance dropped one tunnel's session before that
// tunnel was CONNECTED, and it waited for a push reply until OpenVPN gave
// up (60 s), which still happens (docs/cluster.md).
func TestConnectOnePortTunnels(t *testing.T) {
	testenv.RequirePrograms(t, "openvpn")
	tl := newTunnelsLab(t, cluster.Options{Instances: 2, Protos: []string{"udp"}, PortBase: 1195, CPUs: []int{0, 1}, OnePort: 1194})
	l := tl.l
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nsOut(t, ctx, l, lab.Server, "ip", "addr", "add", serverHost+"/32", "dev", "lo")
	before := clientSnapshot(t, l)
	logPath := filepath.Join(tl.dir, "connect.log")
	argv := []string{os.Getenv("OVPNPERF_TEST_BINARY"), "cluster", "connect", "--one-port", lab.ServerV4().String() + ":1194",
		"--tunnels", "2", "--route", serverSite.String(), "--", "--config", tl.conf}
	conn, err := l.Start(ctx, lab.Client, logPath, argv...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Stop() })
	connLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	var devs []string
	deadline := time.Now().Add(40 * time.Second)
	for {
		devs = tunDevs(t, ctx, l)
		if len(devs) == 2 && slices.Equal(routeDevs(ctx, l), devs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 tunnels not in the route within 40 s\nconnect:\n%s", connLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var subnets []string
	for _, dev := range devs {
		out := nsOut(t, ctx, l, lab.Client, "ip", "-o", "-4", "addr", "show", "dev", dev)
		f := strings.Fields(out)
		for i := range f {
			if f[i] == "inet" && i+1 < len(f) {
				subnets = append(subnets, netip.MustParsePrefix(f[i+1]).Masked().String())
			}
		}
		if out, err := l.Command(ctx, lab.Client, "ping", "-c", "2", "-W", "2", "-I", dev, serverHost).CombinedOutput(); err != nil {
			t.Errorf("ping %s through %s: %v\n%s\nconnect:\n%s", serverHost, dev, err, out, grepOvpnperf(connLog()))
		}
	}
	// Pings from the client host that the multipath route sends, under
	// explicit hash seeds: whichever tunnel the hash picks, they get
	// through (connect rewrites the other tunnel's source address).
	for _, seed := range []uint32{1, 0x5eed, 0xdeadbeef} {
		setHashSeed(t, ctx, l, lab.Client, seed)
		if out, err := l.Command(ctx, lab.Client, "ping", "-c", "2", "-i", "0.2", "-W", "2", serverHost).CombinedOutput(); err != nil {
			t.Errorf("seed %#x: ping %s over the route: %v\n%s\nconnect:\n%s", seed, serverHost, err, out, grepOvpnperf(connLog()))
		}
	}
	t.Logf("tunnels %v on pool slices %v", devs, subnets)
	if len(subnets) != 2 || subnets[0] == subnets[1] {
		t.Errorf("tunnels on pool slices %v, want two distinct instances\nconnect:\n%s", subnets, connLog())
	}
	var insts []string
	for _, s := range tl.c.Status() {
		if s.Clients > 0 {
			insts = append(insts, s.Name)
		}
	}
	t.Logf("instances with a client: %v; connect reconnected a tunnel that reached a taken instance: %v", insts, strings.Contains(connLog(), "reached one instance"))
	if err := conn.Stop(); err != nil {
		t.Error(err)
	}
	<-conn.Done()
	checkRestored(t, l, before, "SIGTERM")
}

func grepOvpnperf(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "ovpnperf:") || strings.Contains(l, "Initialization") || strings.Contains(l, "SIGTERM") || strings.Contains(l, "restart") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
