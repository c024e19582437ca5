package lint

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	shared "github.com/ovpnperf/ovpnperf/internal/rules"
)

// restartStorm is how many restarts in one log lint calls a storm.
const restartStorm = 3

// CheckLog explains a log scanned by openvpn.ScanLog. cfg, when not nil,
// is the config that produced it (to compare requested with granted
// socket buffers). name is the log's file name in findings.
func CheckLog(rep *openvpn.LogReport, name string, cfg *openvpn.ConfigFile, ctx Context) []Finding {
	var out []Finding
	add := func(f Finding, line int) {
		f.File, f.Line = name, line
		out = append(out, f)
	}
	// Socket buffers: Linux reports twice what was granted (the kernel
	// doubles the request after capping it at net.core.{r,w}mem_max).
	if n := len(rep.SocketBuffers); n > 0 {
		sb := rep.SocketBuffers[n-1]
		line := rep.SocketBufferLines[n-1]
		req := map[string]int{}
		// floor: a buffer in force below it caps throughput, by the
		// shared buffer rule (over TCP transport a configured buffer
		// below the BDP; over UDP, and over TCP without sndbuf/rcvbuf,
		// where the kernel autotunes, none). Without the config the
		// transport is not known and nothing is judged.
		floor := 0
		if cfg != nil {
			v := &view{f: cfg, ctx: ctx}
			floor = shared.SocketBuffers(v.path(), v.tunMTU()).Floor
			for _, k := range []string{"sndbuf", "rcvbuf"} {
				if d, ok := v.last(k); ok {
					req[k], _ = strconv.Atoi(arg(d, 0))
				}
			}
		}
		type side struct {
			name, opt, sysctl string
			after, req        int
		}
		for _, s := range []side{{"receive", "rcvbuf", "net.core.rmem_max", sb.RecvAfter, req["rcvbuf"]}, {"send", "sndbuf", "net.core.wmem_max", sb.SendAfter, req["sndbuf"]}} {
			granted := s.after / 2
			switch {
			case s.req > 0 && granted < s.req:
				add(Finding{Rule: "log-buffer-capped", Severity: Warning, Category: Performance,
					Problem: fmt.Sprintf("%s %d was requested but the kernel granted %d bytes (the log shows %d, twice the grant).", s.opt, s.req, granted, s.after),
					Reason:  fmt.Sprintf("OpenVPN sets the buffer with plain SO_%sBUF, which Linux caps at %s (docs/openvpn-facts.md#socket-buffers); the config's value is not in force.", strings.ToUpper(s.opt[:3]), s.sysctl),
					Action:  fmt.Sprintf("sysctl -w %s=%d", s.sysctl, s.req), Decision: true}, line)
			case floor > 0 && s.req > 0 && granted < floor:
				add(Finding{Rule: "log-buffer-small", Severity: Warning, Category: Performance,
					Problem: fmt.Sprintf("the %s buffer in force is %s, below the path's bandwidth-delay product %s.", s.name, fmtBytes(granted), fmtBytes(ctx.BDPBytes())),
					Reason:  fmt.Sprintf("%s at %v RTT caps a TCP-transport tunnel at %.1f Mbit/s (throughput ≤ buffer/RTT, docs/openvpn-facts.md#buffer-size-and-rtt).", fmtBytes(granted), ctx.RTT, float64(granted)*8/ctx.RTT.Seconds()/1e6)}, line)
			}
		}
	}
	if e, ok := rep.First(openvpn.EventCipherFail); ok {
		add(Finding{Rule: "log-cipher-mismatch", Severity: Error, Category: Compatibility,
			Problem:  "the peers found no data cipher in common: " + e.Text,
			Reason:   "the server picks the first of its data-ciphers that the client supports and refuses the client when there is none (docs/openvpn-facts.md#cipher-negotiation); add a cipher both sides have, e.g. 2.6's default " + shared.DefaultDataCiphers + ", to the side missing it.",
			Decision: true}, e.Line)
	}
	if rep.DataCipher != "" {
		e, _ := rep.First(openvpn.EventCipher)
		if weakCipher(rep.DataCipher) || strings.HasSuffix(strings.ToUpper(rep.DataCipher), "-CBC") || rep.DataCipher == "none" {
			sev, why := Warning, "CBC with HMAC costs 45–60 bytes a packet instead of 24 for AEAD and is not offloaded by DCO (docs/openvpn-facts.md#per-packet-overhead, docs/openvpn-facts.md#data-channel-offload-dco)"
			if weakCipher(rep.DataCipher) {
				sev, why = Error, weakReason
			}
			if rep.DataCipher == "none" {
				why = "cipher none sends the data channel in clear text. " + shared.OuterLayer
			}
			add(Finding{Rule: "log-data-cipher", Severity: sev, Category: Security,
				Problem: "the data channel negotiated " + rep.DataCipher + ".", Reason: why + "."}, e.Line)
		}
	}
	if e, ok := rep.First(openvpn.EventCompression); ok {
		add(Finding{Rule: "log-compression", Severity: Warning, Category: Security,
			Problem: "OpenVPN logged compression: " + e.Text,
			Reason:  compressionReason + "."}, e.Line)
	}
	if n := rep.Count(openvpn.EventTooLarge); n > 0 {
		e, _ := rep.First(openvpn.EventTooLarge)
		add(Finding{Rule: "log-packet-too-large", Severity: Warning, Category: Performance,
			Problem: fmt.Sprintf("%d line(s) say a packet was too large; first: %s", n, e.Text),
			Reason:  "packets bigger than the path or tun MTU are dropped or fragmented; measure the path with `ovpnperf pmtu` and set mssfix to it (2.6 `mssfix PMTU mtu` counts the outer headers, docs/openvpn-facts.md#mssfix)."}, e.Line)
	}
	if n := rep.Count(openvpn.EventReplay); n > 0 {
		e, _ := rep.First(openvpn.EventReplay)
		add(Finding{Rule: "log-replay", Severity: Warning, Category: Operations,
			Problem: fmt.Sprintf("%d replay / bad packet ID warning(s); first: %s", n, e.Text),
			Reason:  "over UDP these mostly mean packets arrived reordered or duplicated beyond the replay window (man page --replay-window, default 64 packets / 15 s); real replays are rare. Not tested here which it is."}, e.Line)
	}
	if n := rep.Count(openvpn.EventRestart); n >= restartStorm {
		e, _ := rep.First(openvpn.EventRestart)
		add(Finding{Rule: "log-restarts", Severity: Warning, Category: Operations,
			Problem: fmt.Sprintf("the tunnel restarted %d times in this log (first: %s).", n, e.Text),
			Reason:  "a reconnect storm: every restart renegotiates TLS and drops traffic; look at the line before each restart (ping-restart timeouts, TLS errors, AUTH_FAILED)."}, e.Line)
	}
	if rep.TunMTU > 0 && ctx.PathMTU > 0 {
		line := 0
		for _, e := range rep.Events {
			if e.Kind == openvpn.EventMTU && strings.Contains(e.Text, "mtu_set") {
				line = e.Line
			}
		}
		cipher := rep.DataCipher
		if cipher == "" || cipher == "none" {
			cipher = overhead.DefaultCipher
		}
		dc := pmtu.DataChannel{Cipher: cipher, Auth: rep.DataAuth}
		if over, err := dc.Overhead(pmtu.Transport{Proto: "udp", Family: pmtu.IPv4}, rep.TunMTU); err == nil && rep.TunMTU+over > ctx.PathMTU {
			mss := ""
			if n, ok := rep.MTUParms["mss_fix"]; ok {
				mss = fmt.Sprintf(" (mssfix in force: %d)", n)
			}
			add(Finding{Rule: "log-mtu", Severity: Info, Category: Performance,
				Problem: fmt.Sprintf("the tun MTU in force is %d%s: full-size packets become %d bytes over UDP/IPv4, above the path MTU %d.", rep.TunMTU, mss, rep.TunMTU+over, ctx.PathMTU),
				Reason:  fmt.Sprintf("%s adds %d bytes per packet including outer headers (docs/openvpn-facts.md#per-packet-overhead); mssfix keeps TCP inside within the path, other large packets are fragmented outside.", cipher, over)}, line)
		}
	}
	// DCO: each of OpenVPN's "… data channel offload" notes names the
	// option (or the missing kernel support) that turned it off; that
	// reason is the finding's subject.
	dcoOff := false
	for _, e := range rep.Events {
		if e.Kind != openvpn.EventDCO {
			continue
		}
		r := dco.RuleForLogLine(e.Text)
		if r == "" {
			continue
		}
		dcoOff = true
		rule := dco.Rules()[r]
		var srcs []string
		for _, t := range []string{dco.V26, dco.V27} {
			if s, ok := rule.Sources[t]; ok {
				srcs = append(srcs, s.String())
			}
		}
		why := logDCOWhy[r]
		if why == "" {
			why = "the option " + r
		}
		add(Finding{Rule: "log-dco", Severity: Warning, Category: Performance,
			Problem: "DCO off because " + why + ": " + e.Text,
			Reason:  "OpenVPN logs this line where it decides (" + strings.Join(srcs, "; ") + "), and only for the first reason it finds: `ovpnperf lint --target VERSION CONFIG` lists every option that turns DCO off. Instead: " + rule.Replacement + ". " + dcoCost}, e.Line)
	}
	if e, ok := rep.First(openvpn.EventDCO); ok && !dcoOff && rep.DCOVersion == "N/A" {
		add(Finding{Rule: "log-dco", Severity: Info, Category: Performance,
			Problem: "DCO off because the kernel has no DCO module (DCO version: N/A): the data channel runs in userspace.",
			Reason:  "openvpn --version and the log print \"DCO version: N/A\" when /sys/module/ovpn (2.7) or /sys/module/ovpn_dco_v2 (2.6) is missing (dco_linux.c dco_version_string). Instead: " + dco.Rules()["kernel"].Replacement + ". " + dcoCost}, e.Line)
	}
	if rep.LongLines > 0 {
		add(Finding{Rule: "log-long-lines", Severity: Info, Category: Operations,
			Problem: fmt.Sprintf("%d line(s) longer than %d KiB were read cut short (the first is line %d); the rest of the log was read as usual.", rep.LongLines, openvpn.MaxLogLine>>10, rep.FirstLongLine),
			Reason:  "OpenVPN writes no line that long; such a line is binary data or another program's output in the same journal, and only its beginning can matter to this review."}, rep.FirstLongLine)
	}
	Sort(out)
	return out
}

const dcoCost = "Without DCO one OpenVPN process encrypts in userspace: roughly 0.4–0.7 Gbit/s per core against 1.2–2.3 Gbit/s with DCO in public reports (docs/openvpn-facts.md#throughput-with-and-without-dco)."

// logDCOWhy names what each DCO rule's log line blames.
var logDCOWhy = map[string]string{
	"fragment": "of fragment", "http-proxy": "of http-proxy", "socks-proxy": "of socks-proxy",
	"no-tls": "the config has no TLS (static-key mode)", "dev-type": "the device is not tun (tap)",
	"dev-node-unix": "of dev-node unix:", "dev-null": "of dev null", "user": "of user without CAP_SETPCAP",
	"topology": "the server does not use topology subnet", "management-query-proxy": "of management-query-proxy",
	"data-ciphers-fallback": "of data-ciphers-fallback", "compression": "of compression (allow-compression not no)",
	"data-ciphers": "data-ciphers holds a cipher DCO cannot run",
	"mktun":        "of mktun", "push-compression": "the server pushed compression", "interface-exists": "a non-DCO interface of that name exists",
	"kernel": "the kernel has no DCO support",
}
