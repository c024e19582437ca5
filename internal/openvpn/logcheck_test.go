package openvpn

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// TestLintLogsLive makes real OpenVPN 2.6 write the three log situations
// `ovpnperf lint --log` explains, and checks that ScanLog finds them:
//   - sndbuf/rcvbuf 16 MiB, above net.core.{r,w}mem_max: the kernel grants
//     at most twice the cap ("Socket Buffers: R=[…->2*cap]");
//   - comp-lzo on the server: 2.6 warns that compression is enabled for
//     receiving;
//   - a client whose data-ciphers the server does not have: negotiation
//     fails.
//
// With OVPNPERF_CAPTURE=1 the logs are saved as testdata/logs/lint-*.log
// for the tier-1 tests of internal/lint.
func TestLintLogsLive(t *testing.T) {
	p := newPair(t)
	srv, cli := p.configs(t, UDP, Variant{Name: "default"})
	ctx := context.Background()
	out, err := runner.RunIn(ctx, p.server, "cat", "/proc/sys/net/core/rmem_max", "/proc/sys/net/core/wmem_max")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	rmax, _ := strconv.Atoi(f[0])
	wmax, _ := strconv.Atoi(f[1])
	// Ask for well above the cap, whatever the host's cap is (Debian's
	// default is 212992; this machine had 4 MiB).
	req := max(16<<20, 4*rmax, 4*wmax)
	srv.Set(D("sndbuf", strconv.Itoa(req)))
	srv.Set(D("rcvbuf", strconv.Itoa(req)))
	srv.Set(D("comp-lzo", "yes"))
	srv.Set(D("data-ciphers", "AES-256-GCM"))
	cli.Set(D("data-ciphers", "CHACHA20-POLY1305"))
	s := p.start(t, p.server, srv, "server")
	if err := s.WaitReady(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	c := p.start(t, p.client, cli, "client")
	var srep *LogReport
	deadline := time.Now().Add(20 * time.Second)
	for {
		srep, err = ScanLog(bytes.NewReader(s.logBytes()))
		if err != nil {
			t.Fatal(err)
		}
		if srep.Count(EventCipherFail) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Stop()
	c.Stop()
	slog, clog := anonymizeLog(s.logBytes(), p), anonymizeLog(c.logBytes(), p)
	capture(t, "logs/lint-capped-mismatch-server.log", slog)
	capture(t, "logs/lint-capped-mismatch-client.log", clog)

	if srep.Count(EventCipherFail) == 0 {
		t.Fatalf("no cipher negotiation failure in the server log:\n%s\nclient:\n%s", s.Tail(30), c.Tail(30))
	}
	crep, err := ScanLog(bytes.NewReader(clog))
	if err != nil {
		t.Fatal(err)
	}
	if crep.Count(EventCipherFail) == 0 {
		t.Errorf("no cipher negotiation failure in the client log:\n%s", c.Tail(30))
	}
	if srep.Count(EventCompression) == 0 {
		t.Errorf("no compression warning in the server log:\n%s", s.Tail(30))
	}
	if len(srep.SocketBuffers) == 0 {
		t.Fatalf("no Socket Buffers line:\n%s", s.Tail(30))
	}
	sb := srep.SocketBuffers[len(srep.SocketBuffers)-1]
	// Linux doubles the value asked for (bookkeeping overhead) after
	// capping it at the *mem_max sysctl.
	if sb.RecvAfter != 2*min(rmax, req) || sb.SendAfter != 2*min(wmax, req) {
		t.Errorf("socket buffers %+v, want R after %d, S after %d (rmem_max %d, wmem_max %d)", sb, 2*min(rmax, req), 2*min(wmax, req), rmax, wmax)
	}
}
