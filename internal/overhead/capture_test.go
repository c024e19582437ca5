package overhead

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// pingSizes are ICMP payloads; the inner IPv4 packet is 28 bytes more
// (128, 1028, 1231, 1244). 1231 and 1244 put CBC padding at 13 and at a
// whole extra block (4-byte packet-id + 1244 = 1248, a multiple of 16).
var pingSizes = []int{100, 1000, 1203, 1216}

type captureCase struct {
	name   string
	dc     DataChannel
	tr     Transport
	spec   string // variant directives
	slot   int
	tunnel *tunnel.Tunnel
}

// TestCapturedOuterSizes starts real OpenVPN 2.6 tunnels for five data
// channels × UDP/IPv4, UDP/IPv6, TCP/IPv4 × with and without fragment (UDP
// only), pings through each with four sizes, captures the outer packets on
// the router and checks that every data packet of each tunnel has exactly
// the size the model gives (IP total length for UDP, the TCP payload for
// TCP, whose header carries options the model does not count), in both
// directions. Tunnels share one lab in two rounds of at most 16 slots.
func TestCapturedOuterSizes(t *testing.T) {
	labtest.Require(t)
	testenv.RequirePrograms(t, "openvpn", "tcpdump", "ping")
	l := labtest.New(t, labpath.Path{})
	pki, err := openvpn.NewPKI(filepath.Join(l.Dir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	ciphers := []struct {
		name string
		dc   DataChannel
		spec string
	}{
		{"aes256gcm", DataChannel{Cipher: "AES-256-GCM"}, "data-ciphers AES-256-GCM"},
		{"aes128gcm", DataChannel{Cipher: "AES-128-GCM"}, "data-ciphers AES-128-GCM"},
		{"chacha", DataChannel{Cipher: "CHACHA20-POLY1305"}, "data-ciphers CHACHA20-POLY1305"},
		{"cbc", DataChannel{Cipher: "AES-256-CBC", Auth: "SHA256"}, "data-ciphers AES-256-CBC;auth SHA256"},
		{"none", DataChannel{Cipher: "none", Auth: "none"}, "data-ciphers none;auth none;reneg-bytes 0"},
	}
	transports := []struct {
		name string
		tr   Transport
	}{{"udp4", Transport{Proto: "udp"}}, {"udp6", Transport{Proto: "udp", IPv6: true}}, {"tcp4", Transport{Proto: "tcp"}}}
	var rounds [2][]*captureCase
	for _, c := range ciphers {
		for _, tr := range transports {
			rounds[0] = append(rounds[0], &captureCase{name: c.name + "-" + tr.name, dc: c.dc, tr: tr.tr, spec: c.spec})
			if tr.tr.Proto == "udp" {
				dc := c.dc
				dc.Fragment = true
				rounds[1] = append(rounds[1], &captureCase{name: c.name + "-" + tr.name + "-frag", dc: dc, tr: tr.tr, spec: c.spec + ";fragment 1400"})
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	checked := 0
	for r, cases := range rounds {
		// The round's tunnels start at once (each has its own slot):
		// one at a time they took about 1.5 s each.
		errs := make([]error, len(cases))
		var wg sync.WaitGroup
		for i, c := range cases {
			c.slot = i
			v, err := openvpn.ParseVariant(c.name + "=" + c.spec)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.tunnel, errs[i] = tunnel.Up(ctx, l, tunnel.Options{Variant: v, Slot: i, Proto: c.tr.Proto, IPv6Transport: c.tr.IPv6, PKI: pki})
			}()
		}
		wg.Wait()
		for i, c := range cases {
			if errs[i] != nil {
				t.Errorf("%s: %v", c.name, errs[i])
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		file := filepath.Join(l.Dir(), fmt.Sprintf("overhead-round%d.pcap", r))
		sizes := captureRound(ctx, t, l, file, cases)
		for _, c := range cases {
			c.tunnel.Down()
			checked += compareSizes(t, c, sizes[uint16(tunnel.BasePort+c.slot)])
		}
	}
	t.Logf("compared %d data packets with the model", checked)
	// 25 tunnels × 4 sizes × 3 pings × 2 directions.
	if want := 25 * len(pingSizes) * 3 * 2; checked < want {
		t.Fatalf("compared %d data packets, want at least %d", checked, want)
	}
}

// captureRound captures on the router's server-side port while each
// tunnel carries three pings of each size, and returns the data-packet
// sizes seen per server port.
//
// Equivalent to: ip netns exec ROUTER tcpdump -Z root -i rs -n -s 160 --immediate-mode -U -w FILE portrange 1194-1209
func captureRound(ctx context.Context, t *testing.T, l *lab.Lab, file string, cases []*captureCase) map[uint16][]pktSize {
	t.Helper()
	logPath := file + ".log"
	// -Z root: tcpdump would otherwise write the file as user tcpdump,
	// mode 0644; lab files are root's and 0600 (chmod after the stop).
	proc, err := l.Start(ctx, lab.Router, logPath, "tcpdump", "-Z", "root", "-i", "rs", "-n", "-s", "160", "--immediate-mode", "-U", "-w", file,
		fmt.Sprintf("portrange %d-%d", tunnel.BasePort, tunnel.BasePort+tunnel.MaxSlots-1))
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Stop()
	waitListening(t, logPath, proc.Done())
	for _, c := range cases {
		for _, s := range pingSizes {
			cmd := l.Command(ctx, lab.Client, "ping", "-n", "-c", "3", "-i", "0.05", "-W", "2", "-s", strconv.Itoa(s), c.tunnel.ServerAddr.String())
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: running %q: %v\n%s", c.name, cmd.String(), err, out)
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	_ = proc.Stop()
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sizes, err := readSizes(f)
	if err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	return sizes
}

func waitListening(t *testing.T, logPath string, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), "listening on") {
			return
		}
		select {
		case <-exited:
			t.Fatalf("tcpdump exited: %s", b)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("tcpdump did not start listening within 10 s")
}

// pktSize is one captured packet of a tunnel: IP packet length and
// transport payload length, and whether it went to the server.
type pktSize struct {
	ip, payload int
	toServer    bool
}

// readSizes groups the captured TCP/UDP packets by the server port.
func readSizes(r io.Reader) (map[uint16][]pktSize, error) {
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		return nil, err
	}
	out := map[uint16][]pktSize{}
	for {
		data, _, err := pr.ReadPacketData()
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		p := gopacket.NewPacket(data, pr.LinkType(), gopacket.Default)
		var ipLen int
		switch ip := p.NetworkLayer().(type) {
		case *layers.IPv4:
			ipLen = int(ip.Length)
		case *layers.IPv6:
			ipLen = 40 + int(ip.Length)
		default:
			continue
		}
		var src, dst uint16
		var payload int
		switch l4 := p.TransportLayer().(type) {
		case *layers.UDP:
			src, dst, payload = uint16(l4.SrcPort), uint16(l4.DstPort), int(l4.Length)-8
		case *layers.TCP:
			src, dst = uint16(l4.SrcPort), uint16(l4.DstPort)
			payload = ipLen - int(l4.DataOffset)*4
			if _, ok := p.NetworkLayer().(*layers.IPv4); ok {
				payload -= 20
			} else {
				payload -= 40
			}
		default:
			continue
		}
		port, toServer := dst, true
		if src >= tunnel.BasePort && src < tunnel.BasePort+tunnel.MaxSlots {
			port, toServer = src, false
		}
		out[port] = append(out[port], pktSize{ip: ipLen, payload: payload, toServer: toServer})
	}
}

// compareSizes checks that the tunnel's packets carrying pings are exactly
// the model's sizes: every size expected appears at least three times in
// each direction, and no packet large enough to be a ping (≥ 100 bytes of
// transport payload; OpenVPN's keepalives and ACKs are smaller) has any
// other size. It returns the number of packets that matched.
func compareSizes(t *testing.T, c *captureCase, got []pktSize) int {
	t.Helper()
	f, err := New(c.dc, c.tr)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	want := map[int]int{} // transport payload → inner size
	for _, s := range pingSizes {
		inner := s + 28
		want[f.OuterSize(inner)-f.Encap] = inner
	}
	seen := map[[2]int]int{} // payload, direction → count
	matched := 0
	for _, p := range got {
		if p.payload < 100 {
			continue
		}
		inner, ok := want[p.payload]
		if !ok {
			t.Errorf("%s: a %d-byte packet (transport payload %d) matches no ping size; the model expects payloads %v", c.name, p.ip, p.payload, keys(want))
			continue
		}
		if c.tr.Proto == "udp" && p.ip != f.OuterSize(inner) {
			t.Errorf("%s: inner %d: outer IP packet %d bytes, model %d", c.name, inner, p.ip, f.OuterSize(inner))
			continue
		}
		dir := 0
		if p.toServer {
			dir = 1
		}
		seen[[2]int{p.payload, dir}]++
		matched++
	}
	for payload, inner := range want {
		for dir := 0; dir < 2; dir++ {
			if n := seen[[2]int{payload, dir}]; n < 3 {
				t.Errorf("%s: inner %d: %d packets of the model's size %d (payload %d) towards the %s, want 3",
					c.name, inner, n, f.OuterSize(inner), payload, map[int]string{0: "client", 1: "server"}[dir])
			}
		}
	}
	return matched
}

func keys(m map[int]int) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}
