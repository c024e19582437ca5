package openvpn

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// Tier 2: real OpenVPN 2.6 in two namespaces joined by a veth pair.
//
//	ovpnperf-ovtID-a (server)          ovpnperf-ovtID-b (client)
//	ovpnperfID 198.51.100.2/24 ---veth--- ovpnperfIDp 198.51.100.3/24
//	tun ovpnperf-s0 203.0.113.1  <== OpenVPN ==>  tun ovpnperf-c0 203.0.113.2
//
// Set OVPNPERF_CAPTURE=1 to copy the logs and management replies into
// testdata/ (how the tier-1 parser tests' inputs were made).

type pair struct {
	server, client string // namespaces
	pki            *PKI
	dir            string
}

var (
	pairServerAddr  = netip.MustParseAddr("198.51.100.2")
	pairServerAddr6 = netip.MustParseAddr("2001:db8:5::2")
	pairTunnel      = netip.MustParsePrefix("203.0.113.0/24")
)

func newPair(t testing.TB) *pair {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "openvpn", "ip", "ping")
	b := make([]byte, 3)
	rand.Read(b)
	id := hex.EncodeToString(b)
	p := &pair{server: "ovpnperf-ovt" + id + "-a", client: "ovpnperf-ovt" + id + "-b", dir: t.TempDir()}
	for _, ns := range []string{p.server, p.client} {
		if err := netns.Create(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := netns.Delete(ns); err != nil {
				t.Error(err)
			}
		})
	}
	ctx := context.Background()
	va, vb := "ovpnperf"+id, "ovpnperf"+id+"p"
	// The pair is created inside the namespaces and never exists in the
	// host's; deleting the namespaces removes it.
	for _, argv := range [][]string{
		{"ip", "-n", p.server, "link", "add", va, "type", "veth", "peer", "name", vb, "netns", p.client},
		{"ip", "-n", p.server, "addr", "add", pairServerAddr.String() + "/24", "dev", va},
		{"ip", "-n", p.client, "addr", "add", "198.51.100.3/24", "dev", vb},
		{"ip", "-n", p.server, "addr", "add", pairServerAddr6.String() + "/64", "dev", va, "nodad"},
		{"ip", "-n", p.client, "addr", "add", "2001:db8:5::3/64", "dev", vb, "nodad"},
		{"ip", "-n", p.server, "link", "set", va, "up"},
		{"ip", "-n", p.client, "link", "set", vb, "up"},
		{"ip", "-n", p.server, "link", "set", "lo", "up"},
		{"ip", "-n", p.client, "link", "set", "lo", "up"},
	} {
		if _, err := runner.Run(ctx, argv...); err != nil {
			t.Fatal(err)
		}
	}
	pki, err := NewPKI(filepath.Join(p.dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	p.pki = pki
	return p
}

func (p *pair) configs(t testing.TB, proto string, v Variant) (srv, cli *Config) {
	return p.configsV6(t, proto, false, v)
}

func (p *pair) configsV6(t testing.TB, proto string, ipv6 bool, v Variant) (srv, cli *Config) {
	t.Helper()
	addr := pairServerAddr
	if ipv6 {
		addr = pairServerAddr6
	}
	srv, err := ServerConfig(ServerParams{Proto: proto, IPv6: ipv6, Local: addr, Tunnel: pairTunnel,
		Credentials: p.pki.Server(), Management: filepath.Join(p.dir, "server.sock")})
	if err != nil {
		t.Fatal(err)
	}
	cli, err = ClientConfig(ClientParams{Proto: proto, IPv6: ipv6, Remote: addr,
		Credentials: p.pki.Client(""), Management: filepath.Join(p.dir, "client.sock")})
	if err != nil {
		t.Fatal(err)
	}
	v.Apply(srv, cli)
	return srv, cli
}

// up starts server and client and waits until both are ready.
// tails returns the last lines of both sides' logs, for failures.
func (p *pair) tails() string {
	var b strings.Builder
	for _, role := range []string{"server", "client"} {
		out, _ := os.ReadFile(filepath.Join(p.dir, role+".log"))
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) > TailLines {
			lines = lines[len(lines)-TailLines:]
		}
		b.WriteString(role + ":\n" + strings.Join(lines, "\n") + "\n")
	}
	return b.String()
}

// start starts OpenVPN with cfg in namespace ns, stopped when the test
// ends.
func (p *pair) start(t testing.TB, ns string, cfg *Config, role string) *Process {
	t.Helper()
	proc, err := Start(context.Background(), ns, cfg, p.dir, role)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Stop() })
	return proc
}

func (p *pair) up(t testing.TB, srv, cli *Config) (*Process, *Process) {
	t.Helper()
	ctx := context.Background()
	s := p.start(t, p.server, srv, "server")
	if err := s.WaitReady(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	c := p.start(t, p.client, cli, "client")
	if err := c.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return s, c
}

func capture(t *testing.T, name string, data []byte) {
	if os.Getenv("OVPNPERF_CAPTURE") == "" {
		return
	}
	path := filepath.Join("testdata", name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTunnelVariants proves that each built-in variant's directives bring
// up a working tunnel with OpenVPN 2.6 and negotiate what they claim.
func TestTunnelVariants(t *testing.T) {
	want := map[string]struct {
		cipher, auth string
		tunMTU       int
		pingSize     int
	}{
		"default":   {"AES-256-GCM", "", 1500, 56},
		"aes256gcm": {"AES-256-GCM", "", 1500, 56},
		"aes128gcm": {"AES-128-GCM", "", 1500, 56},
		"chacha20":  {"CHACHA20-POLY1305", "", 1500, 56},
		"aes256cbc": {"AES-256-CBC", "SHA256", 1500, 56},
		"none":      {"none", "none", 1500, 56},
		// 8000 bytes of ICMP payload with DF set only pass a 9000-byte tun.
		"jumbo": {"AES-256-GCM", "", 9000, 8000},
	}
	for _, v := range BuiltinVariants() {
		t.Run(v.Name, func(t *testing.T) {
			// Each pair has its own namespaces; most of a case is waiting
			// for OpenVPN's handshake and the pings, so two run at once.
			t.Parallel()
			w, ok := want[v.Name]
			if !ok {
				t.Fatalf("no expectation for built-in variant %s", v.Name)
			}
			p := newPair(t)
			srv, cli := p.configs(t, UDP, v)
			s, c := p.up(t, srv, cli)
			ctx := context.Background()
			out, err := runner.RunIn(ctx, p.client, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", "-M", "do", "-s", strconv.Itoa(w.pingSize), "203.0.113.1")
			if err != nil {
				t.Fatalf("ping through the tunnel: %v", err)
			}
			t.Logf("%s", lastLine(string(out)))
			// The server logs the data channel a moment after the
			// client's ready line.
			if err := s.WaitLogged(ctx, 10*time.Second, DataChannelLine); err != nil {
				t.Fatal(err)
			}
			for _, proc := range []*Process{s, c} {
				l, err := proc.Log()
				if err != nil {
					t.Fatal(err)
				}
				if l.DataCipher != w.cipher || l.DataAuth != w.auth {
					t.Errorf("%s: data channel %q/%q, want %q/%q", proc.Role, l.DataCipher, l.DataAuth, w.cipher, w.auth)
				}
				if l.TunMTU != w.tunMTU {
					t.Errorf("%s: tun MTU %d, want %d", proc.Role, l.TunMTU, w.tunMTU)
				}
				if !l.Ready || l.Version == "" || len(l.SocketBuffers) == 0 {
					t.Errorf("%s: log summary incomplete: %+v", proc.Role, l)
				}
				if len(l.Errors) > 0 {
					t.Errorf("%s: errors in log: %q", proc.Role, l.Errors)
				}
			}
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
			if err := s.Stop(); err != nil {
				t.Error(err)
			}
			for _, proc := range []*Process{s, c} {
				b, _ := os.ReadFile(proc.LogPath)
				capture(t, filepath.Join("logs", v.Name+"-"+proc.Role+".log"), anonymizeLog(b, p))
			}
		})
	}
}

// TestManagement drives both sides' management interfaces over a real
// tunnel and ends the client with `signal SIGTERM`.
func TestManagement(t *testing.T) {
	p := newPair(t)
	srv, cli := p.configs(t, UDP, Variant{Name: "default"})
	s, c := p.up(t, srv, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := runner.RunIn(ctx, p.client, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", "203.0.113.1"); err != nil {
		t.Fatal(err)
	}

	cm, err := DialManagement(ctx, filepath.Join(p.dir, "client.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	if !strings.Contains(cm.Banner, "OpenVPN Management Interface") {
		t.Errorf("banner %q", cm.Banner)
	}
	st, err := cm.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "CONNECTED" || st.TunIPv4 != "203.0.113.2" || st.Remote != pairServerAddr.String() {
		t.Errorf("client state %+v", st)
	}
	cls, err := cm.LoadStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cls.BytesIn == 0 || cls.BytesOut == 0 {
		t.Errorf("client load-stats %+v: no traffic counted after a ping", cls)
	}
	cstat, err := cm.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cstat.Counters["TUN/TAP read bytes"] == 0 || cstat.Counters["TCP/UDP write bytes"] == 0 {
		t.Errorf("client status counters %v", cstat.Counters)
	}
	if _, err := cm.Command(ctx, "no-such-command"); err == nil {
		t.Error("unknown command: want an ERROR reply")
	}

	sm, err := DialManagement(ctx, filepath.Join(p.dir, "server.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	sls, err := sm.LoadStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sls.Clients != 1 {
		t.Errorf("server load-stats %+v, want 1 client", sls)
	}
	sstat, err := sm.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sstat.Clients) != 1 || sstat.Clients[0]["Common Name"] != "ovpnperf client" || sstat.Clients[0]["Virtual Address"] != "203.0.113.2" {
		t.Errorf("server status clients %v", sstat.Clients)
	}
	sst, err := sm.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sst.Name != "CONNECTED" {
		t.Errorf("server state %+v", sst)
	}

	if err := cm.Signal(ctx, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("client still running after signal SIGTERM")
	}
	if os.Getenv("OVPNPERF_CAPTURE") != "" {
		// Raw replies for the parser tests.
		for _, cmd := range []string{"state", "status 3", "load-stats", "version"} {
			lines, err := sm.Command(ctx, cmd)
			if err != nil {
				t.Fatal(err)
			}
			capture(t, filepath.Join("mgmt", "server-"+strings.ReplaceAll(cmd, " ", "")+".txt"), []byte(strings.Join(lines, "\n")+"\n"))
		}
		capture(t, filepath.Join("mgmt", "client-status3.txt"), []byte(strings.Join(cstat.Lines, "\n")+"\n"))
	}
	_ = s
}

// TestWaitReadyReportsFailure: a config OpenVPN refuses makes WaitReady
// fail at once with the log's last lines, not after the timeout.
func TestWaitReadyReportsFailure(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	srv, _ := p.configs(t, UDP, Variant{})
	srv.Set(D("data-ciphers", "BF-CBC")) // needs the legacy provider
	ctx := context.Background()
	s := p.start(t, p.server, srv, "server")
	err := s.WaitReady(ctx, 60*time.Second)
	if err == nil {
		t.Fatal("WaitReady succeeded with an unsupported cipher")
	}
	if !strings.Contains(err.Error(), "exited before logging") || !strings.Contains(err.Error(), "BF-CBC") {
		t.Errorf("error does not carry the log: %v", err)
	}
	b, _ := os.ReadFile(s.LogPath)
	capture(t, filepath.Join("logs", "bfcbc-nolegacy-server.log"), anonymizeLog(b, p))
}

// TestTunnelTransports brings a tunnel up over TCP and over IPv6, started
// through a caller-supplied Launcher as the lab will do.
func TestTunnelTransports(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		proto string
		ipv6  bool
		link  string // what the client's log says about its transport
	}{
		{"tcp", TCP, false, "TCP connection established with [AF_INET]198.51.100.2:1194"},
		{"udp6", UDP, true, "UDPv6 link remote: [AF_INET6]2001:db8:5::2"},
		{"tcp6", TCP, true, "TCP connection established with [AF_INET6]2001:db8:5::2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPair(t)
			srv, cli := p.configsV6(t, tt.proto, tt.ipv6, Variant{})
			ctx := context.Background()
			var launched [][]string
			launch := func(ns string) Launcher {
				return func(ctx context.Context, logPath string, argv ...string) (Proc, error) {
					launched = append(launched, append([]string{ns, logPath}, argv...))
					return NetnsLauncher(ns)(ctx, logPath, argv...)
				}
			}
			s, err := StartWith(ctx, launch(p.server), srv, p.dir, "server")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Stop() })
			if err := s.WaitReady(ctx, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			c, err := StartWith(ctx, launch(p.client), cli, p.dir, "client")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Stop() })
			if err := c.WaitReady(ctx, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if _, err := runner.RunIn(ctx, p.client, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", "203.0.113.1"); err != nil {
				t.Fatalf("ping through the tunnel: %v", err)
			}
			b, _ := os.ReadFile(c.LogPath)
			if !strings.Contains(string(b), tt.link) {
				t.Errorf("client log lacks %q:\n%s", tt.link, c.Tail(TailLines))
			}
			want := []string{p.client, filepath.Join(p.dir, "client.log"), "openvpn", "--config", filepath.Join(p.dir, "client.conf")}
			if len(launched) != 2 || strings.Join(launched[1], " ") != strings.Join(want, " ") {
				t.Errorf("launched %q, want second %q", launched, want)
			}
			st, err := os.Stat(c.ConfigPath)
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("config file %v %v, want mode 0600", st, err)
			}
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
			select {
			case <-c.Done():
			default:
				t.Error("Stop returned before the client exited")
			}
		})
	}
}

// TestTwoClients connects a second client with a certificate from
// IssueClient to the same server, as multi-client runs will.
func TestTwoClients(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	srv, cli := p.configs(t, UDP, Variant{})
	p.up(t, srv, cli)
	if _, _, err := p.pki.IssueClient("c2"); err != nil {
		t.Fatal(err)
	}
	cli2, err := ClientConfig(ClientParams{Dev: "ovpnperf-c1", Remote: pairServerAddr, Credentials: p.pki.Client("c2")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c2 := p.start(t, p.client, cli2, "client-c2")
	if err := c2.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	l, err := c2.Log()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(l.PushReply, "ifconfig 203.0.113.3 ") {
		t.Errorf("second client got %q, want the pool's second address", l.PushReply)
	}
	// Each client's tun is its own; ping the server through the second.
	if _, err := runner.RunIn(ctx, p.client, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", "-I", "ovpnperf-c1", "203.0.113.1"); err != nil {
		t.Fatalf("ping through the second client: %v", err)
	}
}

// anonymizeLog replaces the per-run temporary paths in a captured log so
// that testdata does not change with every capture.
func anonymizeLog(b []byte, p *pair) []byte {
	return []byte(strings.ReplaceAll(string(b), p.dir, "/run/ovpnperf/LAB"))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestTunnelVariantDirectives brings a tunnel up with each directive of
// the variant table at least once, proving OpenVPN 2.6 accepts what
// ParseVariant lets through.
func TestTunnelVariantDirectives(t *testing.T) {
	tests := []struct {
		variant string
		proto   string
		check   func(t *testing.T, srv, cli *Log)
	}{
		{"buf=sndbuf 524288;rcvbuf 524288;push sndbuf 393216;push rcvbuf 393216", UDP, func(t *testing.T, srv, cli *Log) {
			// Linux caps SO_SNDBUF/SO_RCVBUF at {w,r}mem_max and doubles
			// them; the pushed values replace the client's own.
			want := func(v int, sysctl string) int {
				b, err := os.ReadFile("/proc/sys/net/core/" + sysctl)
				if err != nil {
					t.Fatal(err)
				}
				max, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				return 2 * min(v, max)
			}
			s, c := srv.SocketBuffers[len(srv.SocketBuffers)-1], cli.SocketBuffers[len(cli.SocketBuffers)-1]
			t.Logf("server %+v client %+v", s, c)
			if s.SendAfter != want(524288, "wmem_max") || s.RecvAfter != want(524288, "rmem_max") {
				t.Errorf("server socket buffers %+v", s)
			}
			if len(cli.SocketBuffers) < 2 || c.SendAfter != want(393216, "wmem_max") || c.RecvAfter != want(393216, "rmem_max") {
				t.Errorf("client socket buffers after the push %+v", cli.SocketBuffers)
			}
		}},
		{"lz4=allow-compression yes;compress lz4-v2", UDP, func(t *testing.T, srv, cli *Log) {
			if len(cli.Compression) == 0 {
				t.Error("client logged nothing about compression")
			}
		}},
		{"lzo=allow-compression yes;comp-lzo adaptive", UDP, nil},
		{"stub=compress stub-v2", UDP, nil},
		{"frag=fragment 1300 mtu;mssfix 1300 mtu", UDP, nil},
		{"fio=fast-io;txqueuelen 1000;tun-mtu 1400;mssfix 1360 fixed", UDP, func(t *testing.T, srv, cli *Log) {
			if cli.TunMTU != 1400 {
				t.Errorf("client tun MTU %d", cli.TunMTU)
			}
		}},
		{"nodelay=tcp-nodelay", TCP, nil},
		{"shape=shaper 1000000", UDP, nil},
		{"tmm=tun-mtu-max 9000;server:tun-mtu 9000", UDP, func(t *testing.T, srv, cli *Log) {
			if cli.TunMTU != 9000 {
				t.Errorf("client took tun MTU %d from the push, want 9000", cli.TunMTU)
			}
		}},
		{"pmtu=push tun-mtu 1400;server:tun-mtu 1400", UDP, nil},
		{"bf=providers legacy default;data-ciphers BF-CBC;auth SHA1", UDP, func(t *testing.T, srv, cli *Log) {
			if cli.DataCipher != "BF-CBC" {
				t.Errorf("cipher %q", cli.DataCipher)
			}
		}},
		{"list=data-ciphers CHACHA20-POLY1305:AES-128-GCM;data-ciphers-fallback AES-128-GCM;cipher AES-128-GCM;reneg-bytes 1000000000", UDP, func(t *testing.T, srv, cli *Log) {
			if cli.DataCipher != "CHACHA20-POLY1305" {
				t.Errorf("cipher %q", cli.DataCipher)
			}
		}},
	}
	for _, tt := range tests {
		v, err := ParseVariant(tt.variant)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel() // as in TestTunnelVariants
			p := newPair(t)
			srv, cli := p.configs(t, tt.proto, v)
			s, c := p.up(t, srv, cli)
			ctx := context.Background()
			if _, err := runner.RunIn(ctx, p.client, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", "-s", "1300", "203.0.113.1"); err != nil {
				t.Fatalf("ping through the tunnel: %v", err)
			}
			if err := s.WaitLogged(ctx, 10*time.Second, DataChannelLine); err != nil {
				t.Fatal(err)
			}
			sl, _ := s.Log()
			cl, _ := c.Log()
			for _, l := range []*Log{sl, cl} {
				if len(l.Errors) > 0 {
					t.Errorf("errors: %q", l.Errors)
				}
			}
			if tt.check != nil {
				tt.check(t, sl, cl)
			}
			t.Logf("warnings: %q %q", sl.Warnings, cl.Warnings)
		})
	}
}

// BenchmarkTunnelVariants measures TCP throughput through each built-in
// variant's tunnel between two namespaces joined by a veth pair (no
// emulated path: the limit is OpenVPN's CPU cost). Run with
//
//	go test ./internal/openvpn -run '^$' -bench TunnelVariants -benchtime 5x
//
// Each iteration is a 2-second iperf3 run; it reports the median and the
// spread (min, max) over the iterations.
func BenchmarkTunnelVariants(b *testing.B) {
	testenv.RequirePrograms(b, "iperf3")
	for _, v := range BuiltinVariants() {
		b.Run(v.Name, func(b *testing.B) {
			p := newPair(b)
			srv, cli := p.configs(b, UDP, v)
			p.up(b, srv, cli)
			var rates []float64
			for i := 0; i < b.N; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				// The server's output goes to a file that is polled for its
				// listening line, so the client never races its start.
				srvLog := filepath.Join(p.dir, "iperf3-server-"+strconv.Itoa(i)+".log")
				f, err := os.Create(srvLog)
				if err != nil {
					b.Fatal(err)
				}
				iperfSrv := runner.InNetns(ctx, p.server, "iperf3", "-s", "-1", "--forceflush", "-B", "203.0.113.1")
				iperfSrv.Stdout, iperfSrv.Stderr = f, f
				if err := iperfSrv.Start(); err != nil {
					b.Fatal(err)
				}
				f.Close()
				for try := 0; try < 100; try++ {
					if out, _ := os.ReadFile(srvLog); bytes.Contains(out, []byte("Server listening")) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				out, err := runner.RunIn(ctx, p.client, "iperf3", "-c", "203.0.113.1", "-t", "2", "-J")
				iperfSrv.Wait()
				cancel()
				if err != nil {
					srvOut, _ := os.ReadFile(srvLog)
					b.Fatalf("iteration %d: %v\niperf3 server:\n%s\n%s", i, err, srvOut, p.tails())
				}
				var res struct {
					Error string `json:"error"`
					End   struct {
						SumReceived struct {
							BitsPerSecond float64 `json:"bits_per_second"`
						} `json:"sum_received"`
					} `json:"end"`
				}
				if err := json.Unmarshal(out, &res); err != nil {
					b.Fatal(err)
				}
				if res.Error != "" || res.End.SumReceived.BitsPerSecond == 0 {
					b.Fatalf("iteration %d: iperf3 measured nothing: %q\n%s", i, res.Error, p.tails())
				}
				rates = append(rates, res.End.SumReceived.BitsPerSecond/1e6)
			}
			sort.Float64s(rates)
			b.ReportMetric(rates[len(rates)/2], "Mbit/s-median")
			b.ReportMetric(rates[0], "Mbit/s-min")
			b.ReportMetric(rates[len(rates)-1], "Mbit/s-max")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestCipherNoneAlone backs ParseVariant's refusal of `cipher none`: in
// OpenVPN 2.6 TLS mode it leaves the negotiated AES-256-GCM in place.
func TestCipherNoneAlone(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	srv, cli := p.configs(t, UDP, Variant{})
	srv.Set(D("cipher", "none"))
	cli.Set(D("cipher", "none"))
	s, c := p.up(t, srv, cli)
	if err := s.WaitLogged(context.Background(), 10*time.Second, DataChannelLine); err != nil {
		t.Fatal(err)
	}
	for _, proc := range []*Process{s, c} {
		l, err := proc.Log()
		if err != nil {
			t.Fatal(err)
		}
		if l.DataCipher != "AES-256-GCM" {
			t.Errorf("%s: cipher none alone gave data channel %q", proc.Role, l.DataCipher)
		}
	}
}
