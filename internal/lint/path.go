package lint

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	shared "github.com/ovpnperf/ovpnperf/internal/rules"
)

// The rules in this file judge a setting against the path, and they ask
// the shared rules (internal/rules) that advise follows too, so lint never
// warns against a line advise gives for the same path, nor fixes towards
// what advise says not to do.

// path is the config and the context as the shared rules take them. Loss,
// black hole and DCO are not known to lint (zero).
func (v *view) path() shared.Path {
	return shared.Path{Proto: v.proto(), OuterIPv6: v.family() == pmtu.IPv6,
		RateBitsPerSec: float64(v.ctx.RateBitsPerSec), RTT: v.ctx.RTT, PathMTU: v.ctx.PathMTU}
}

// frame is the data channel's overhead model for this config, ok false
// when the cipher is not one the model knows.
func (v *view) frame() (overhead.Frame, bool) {
	f, err := overhead.New(overhead.DataChannel{Cipher: v.dataCipher()}, overhead.Transport{Proto: v.proto(), IPv6: v.family() == pmtu.IPv6})
	return f, err == nil
}

// advisedMTU reports whether the config's tun-mtu and mssfix are what the
// shared MTU rule advises for this path (a jumbo tunnel with mssfix 0 is
// meant to exceed the path MTU).
func (v *view) advisedMTU() bool {
	f, ok := v.frame()
	if !ok || v.ctx.PathMTU == 0 {
		return false
	}
	m := shared.TunnelMTU(v.path(), f)
	if len(m.Lines) == 0 || m.TunMTU != v.tunMTU() {
		return false
	}
	for _, l := range m.Lines {
		name, want, _ := strings.Cut(l.Directive, " ")
		d, ok := v.last(name)
		if name == "mssfix" && want == "0" && !ok && v.tunMTU() != 1500 {
			// Without a line 2.6 sets mssfix to the tun-mtu itself
			// (options.c options_postprocess_mutate_ce): no clamp below
			// the tunnel's size, as mssfix 0.
			continue
		}
		if !ok || strings.Join(d.Args, " ") != want {
			return false
		}
	}
	return true
}

func (v *view) buffers() {
	snd, hasS := v.last("sndbuf")
	rcv, hasR := v.last("rcvbuf")
	if !hasS && !hasR {
		return
	}
	val := func(d openvpn.PosDirective, ok bool) int {
		if !ok {
			return -1
		}
		n, err := strconv.Atoi(arg(d, 0))
		if err != nil {
			return -1
		}
		return n
	}
	s, r := val(snd, hasS), val(rcv, hasR)
	rule := shared.SocketBuffers(v.path(), v.tunMTU())
	// setBoth sets both lines to n (replacing or appending); n 0 deletes
	// both, leaving the OS default.
	setBoth := func(n int) []Edit {
		var e []Edit
		for _, x := range []struct {
			name string
			d    openvpn.PosDirective
			ok   bool
		}{{"sndbuf", snd, hasS}, {"rcvbuf", rcv, hasR}} {
			switch {
			case n == 0 && x.ok:
				e = append(e, del(x.d)...)
			case n > 0 && x.ok:
				e = append(e, repl(x.d, fmt.Sprintf("%s %d", x.name, n))...)
			case n > 0:
				e = append(e, Edit{File: v.f.Path, Append: []string{fmt.Sprintf("%s %d", x.name, n)}})
			}
		}
		return e
	}
	udp := v.proto() == "udp"
	reported := false
	for _, x := range []struct {
		name string
		d    openvpn.PosDirective
		n    int
	}{{"sndbuf", snd, s}, {"rcvbuf", rcv, r}} {
		if x.n < 0 {
			continue
		}
		f := Finding{Rule: "socket-buffer", Category: Performance}
		switch {
		case x.n == 0:
			f.Edits = del(x.d)
			f.Severity = Info
			f.Problem = x.name + " 0 has no effect: OpenVPN 2.4+ leaves the OS default in place."
			f.Reason = "the forced 64 KiB default that `sndbuf 0` used to undo was removed in 2.3.9/2.4.0 (docs/openvpn-facts.md#socket-buffers)."
		case rule.Size > 0 && x.n < rule.Size:
			f.Severity = Info
			f.Problem = fmt.Sprintf("%s %s is below the %s that measured faster with a jumbo tunnel (tun-mtu %d).", x.name, fmtBytes(x.n), fmtBytes(rule.Size), v.tunMTU())
			f.Reason = rule.Why + " (" + rule.Figure + ")."
			f.Edits = setBoth(rule.Size)
			f.Action = fmt.Sprintf("sysctl -w net.core.rmem_max=%d net.core.wmem_max=%d (the kernel caps SO_SNDBUF/SO_RCVBUF there)", rule.Size, rule.Size)
		case rule.Size > 0:
			continue
		case rule.Floor > 0 && x.n < rule.Floor:
			f.Severity = Warning
			f.Problem = fmt.Sprintf("%s %s is below the path's bandwidth-delay product (%s at %v and %s).", x.name, fmtBytes(x.n), fmtBytes(rule.Floor), v.ctx.RTT, rateStr(v.ctx.RateBitsPerSec))
			f.Reason = fmt.Sprintf("%s: %s at %v RTT caps this TCP-transport tunnel at %.1f Mbit/s (docs/openvpn-facts.md#socket-buffers-over-tcp-transport). Without the lines, %s.", rule.FloorWhy, fmtBytes(x.n), v.ctx.RTT, float64(x.n)*8/v.ctx.RTT.Seconds()/1e6, rule.Why)
			f.Edits = setBoth(0)
		case !udp && rule.Floor == 0 && x.n < shared.LinuxDefaultSockBuf:
			f.Severity = Warning
			f.Problem = fmt.Sprintf("%s %s is smaller than Linux's default socket buffer (%d bytes).", x.name, fmtBytes(x.n), shared.LinuxDefaultSockBuf)
			f.Reason = "a fixed small buffer was OpenVPN's old default and was removed in 2.3.9/2.4.0 because it limits throughput: 64 KiB at 200 ms RTT caps TCP transport at 2.6 Mbit/s (docs/openvpn-facts.md#buffer-size-and-rtt). Without the lines, " + rule.Why + ". Pass --rtt and --rate to compare it with the bandwidth-delay product."
			f.Edits = setBoth(0)
		case udp && x.n < shared.LinuxDefaultSockBuf:
			f.Severity = Info
			f.Problem = fmt.Sprintf("%s %s is smaller than Linux's default socket buffer (%d bytes).", x.name, fmtBytes(x.n), shared.LinuxDefaultSockBuf)
			f.Reason = "not tested here whether a small UDP buffer drops bursts on your path; without the lines the OS default applies, which is what advise leaves over UDP: " + rule.Why + "."
			f.Edits = setBoth(0)
		case udp && x.n > shared.LinuxDefaultSockBuf:
			f.Severity = Info
			f.Problem = fmt.Sprintf("%s %s raises the socket buffer over UDP, where larger buffers measured no gain.", x.name, fmtBytes(x.n))
			f.Reason = rule.Why + "; not tested here on your path, so removing the lines (the OS default) is yours to decide."
			f.Edits, f.Decision = setBoth(0), true
		default:
			continue
		}
		reported = true
		v.add(f, x.d)
	}
	if !reported && s != r && rule.Floor == 0 && rule.Size == 0 {
		// Both large enough but set differently (or only one set).
		d := snd
		if !hasS {
			d = rcv
		}
		v.add(Finding{Rule: "socket-buffer-asymmetric", Severity: Info, Category: Performance,
			Problem: fmt.Sprintf("sndbuf and rcvbuf differ (%s / %s).", bufStr(s), bufStr(r)),
			Reason:  "a tunnel carries traffic both ways through the same socket; the multi-instance write-up sets both equal (docs/openvpn-facts.md#how-others-spread-clients-across-cores). Not tested here: the faster direction is limited by the smaller one only when it is below the bandwidth-delay product.",
			Edits:   setBoth(max(s, r))}, d)
	}
}

func (v *view) tcpNodelay() {
	if !v.server() || v.proto() != "tcp" || v.has("tcp-nodelay") {
		return
	}
	p, _ := v.last("proto")
	v.add(Finding{Rule: "tcp-nodelay", Severity: Info, Category: Performance,
		Problem: "this TCP server does not set tcp-nodelay, so Nagle's algorithm may delay small tunnel packets.",
		Reason:  shared.TCPNodelayEvidence + " (docs/openvpn-facts.md#tcp-nodelay); on a server it also pushes the setting to clients. " + shared.TCPNodelay().Measure + " measures it on your kind of path.",
		Edits:   []Edit{{File: v.f.Path, Append: []string{"tcp-nodelay"}}}, Decision: true}, p)
}
