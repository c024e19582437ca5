package recipe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func init() {
	register(Recipe{
		Name:    "buffers",
		Summary: "sndbuf/rcvbuf 64 KiB, OS default and 512 KiB pushed, at 50 and 200 ms RTT on 100 Mbit/s, over UDP and TCP",
		Source: "the socket-buffer rule of thumb: throughput ≤ buffer / RTT, 64 KiB at 200 ms = 2.5 Mbit/s, " +
			"512 KiB at 50 ms = 80 Mbit/s (a TCP-window argument: UDP has no window); OpenVPN forced 64 KiB until 2.3.9/2.4.0",
		Run:     runBuffers,
		Judge:   bufferVerdicts,
		Columns: bufferColumns,
	})
}

// A buffer setting of the recipe: the size requested with sndbuf and
// rcvbuf (0: none, the OS default), and whether the server pushes it to the
// client instead of both configs naming it (OpenVPN's manual suggests
// pushing, so that clients need no change).
type bufferSetting struct {
	name   string
	bytes  int
	pushed bool
}

var bufferSettings = []bufferSetting{
	{name: "buf64k", bytes: 64 << 10},
	{name: "osdefault"},
	{name: "buf512k", bytes: 512 << 10, pushed: true},
}

// bufferVariants returns the six tunnels (three settings × UDP and TCP
// transport) and the transport of each.
func bufferVariants() ([]openvpn.Variant, map[string]string, error) {
	var vs []openvpn.Variant
	protos := map[string]string{}
	for _, proto := range []string{openvpn.UDP, openvpn.TCP} {
		for _, s := range bufferSettings {
			name := s.name + "-" + proto
			var body string
			switch {
			case s.bytes == 0:
			case s.pushed:
				body = fmt.Sprintf("server:sndbuf %d;server:rcvbuf %d;push sndbuf %d;push rcvbuf %d", s.bytes, s.bytes, s.bytes, s.bytes)
			default:
				body = fmt.Sprintf("sndbuf %d;rcvbuf %d", s.bytes, s.bytes)
			}
			v, err := openvpn.ParseVariant(name + "=" + body)
			if err != nil {
				return nil, nil, err
			}
			vs = append(vs, v)
			protos[name] = proto
		}
	}
	return vs, protos, nil
}

// bufferSettingOf returns the setting a variant name stands for.
func bufferSettingOf(variant string) (bufferSetting, bool) {
	for _, s := range bufferSettings {
		if strings.HasPrefix(variant, s.name+"-") {
			return s, true
		}
	}
	return bufferSetting{}, false
}

// bufPathRTT is the round trip the path adds (both one-way delays).
func bufPathRTT(p labpath.Path) time.Duration { return p.Up.Delay + p.Down.Delay }

// bufferRuns are the recipe's networks. At 200 ms RTT iperf3's two sides
// time their windows a few tenths of a second apart, and the iperf package
// refuses a sample 7.5 % off, so the long path gets 3 s samples (a
// receiver that drains OpenVPN's TCP buffers after the sender stopped is
// accepted: Spec.DrainOK). A window-bound flow is at its rate after a few
// round trips, which a 1 s warm-up covers at either RTT; flows nothing
// bounds (UDP transport, OS defaults) are still in slow start towards
// 100 Mbit/s for about 7 RTTs, so at 200 ms their figures are a little
// low, which only strengthens a verdict that they exceed the rule. Three
// samples per row (the framework's minimum for a verdict) keep the default
// run near 3.5 minutes on a 2-core machine.
func bufferRuns(o Options) []networkRun {
	if o.Path != nil {
		omit := 2 * time.Second
		n := experiment.Network{Name: "path", Description: fmt.Sprintf("the given path, %v RTT", bufPathRTT(*o.Path)), Path: *o.Path, Omit: &omit}
		return []networkRun{{net: n, duration: o.duration(3 * time.Second)}}
	}
	mk := func(rtt time.Duration) labpath.Path {
		l := labpath.Link{RateBitsPerSec: 100e6, Delay: rtt / 2}
		return labpath.Path{Up: l, Down: l}
	}
	omit50, omit200 := time.Second, time.Second
	return []networkRun{
		{net: experiment.Network{Name: "50ms", Description: "100 Mbit/s, 50 ms RTT", Path: mk(50 * time.Millisecond), Omit: &omit50}, duration: o.duration(2 * time.Second)},
		{net: experiment.Network{Name: "200ms", Description: "100 Mbit/s, 200 ms RTT", Path: mk(200 * time.Millisecond), Omit: &omit200}, duration: o.duration(3 * time.Second)},
	}
}

// bufferDirections: one direction. Every side of a tunnel carries the same
// buffer setting (named in both configs, or pushed so the client matches
// the server), so both directions test the same bound; measuring one keeps
// the default run near three minutes. Up (client→server) is the one where
// the pushed value matters to the bound: the client's send buffer holds
// the window. iperf3's two sides also time an up test alike; in a long
// down test the sending server measures longer than asked, which the
// iperf package refuses as inconsistent
// (docs/measurements.md#recipe-paths-and-queues).
var bufferDirections = []string{measure.DirectionUp}

// coreSysctls are the net.core limits and defaults that decide what a
// plain SO_SNDBUF/SO_RCVBUF gets.
var coreSysctls = []string{"rmem_max", "wmem_max", "rmem_default", "wmem_default"}

// readCoreSysctls reads net.core.{r,w}mem_{max,default} as seen inside a
// lab node (`ip netns exec NS cat /proc/sys/net/core/…`): /proc/sys/net
// shows the reader's network namespace.
func readCoreSysctls(ctx context.Context, l *lab.Lab, n lab.Node) (map[string]int, error) {
	argv := []string{"cat"}
	for _, s := range coreSysctls {
		argv = append(argv, "/proc/sys/net/core/"+s)
	}
	out, err := l.Command(ctx, n, argv...).Output()
	if err != nil {
		return nil, fmt.Errorf("reading net.core buffer limits in %s: %w", l.Namespace(n), err)
	}
	return parseSysctlValues(string(out))
}

// hostCoreSysctls reads the same values in ovpnperf's own namespace.
func hostCoreSysctls() (map[string]int, error) {
	var b strings.Builder
	for _, s := range coreSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys/net/core", s))
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	return parseSysctlValues(b.String())
}

func parseSysctlValues(out string) (map[string]int, error) {
	f := strings.Fields(out)
	if len(f) != len(coreSysctls) {
		return nil, fmt.Errorf("net.core buffer limits: want %d values, got %q", len(coreSysctls), out)
	}
	m := map[string]int{}
	for i, s := range coreSysctls {
		v, err := strconv.Atoi(f[i])
		if err != nil {
			return nil, fmt.Errorf("net.core.%s: %q is not a number", s, f[i])
		}
		m[s] = v
	}
	return m, nil
}

// bufferInfo is what one tunnel's logs and lab said about its buffers.
type bufferInfo struct {
	server, client []openvpn.SocketBuffers
	sysctl         map[string]map[string]int // node → name → value
}

// last returns the buffers in force on one side (the last line logged).
func lastBuffers(lines []openvpn.SocketBuffers) (openvpn.SocketBuffers, bool) {
	if len(lines) == 0 {
		return openvpn.SocketBuffers{}, false
	}
	return lines[len(lines)-1], true
}

func formatBufferLines(lines []openvpn.SocketBuffers) []string {
	out := []string{}
	for _, b := range lines {
		out = append(out, fmt.Sprintf("R=[%d->%d] S=[%d->%d]", b.RecvBefore, b.RecvAfter, b.SendBefore, b.SendAfter))
	}
	return out
}

// boundWindow returns the window that limits a TCP flow in direction dir:
// the sender's send buffer or the receiver's receive buffer, whichever is
// smaller, halved because Linux doubles a requested SO_SNDBUF/SO_RCVBUF
// (for its bookkeeping) and reports the doubled size, which OpenVPN logs.
// The half is the size the user asked for, the buffer of the rule.
func boundWindow(dir string, srv, cli openvpn.SocketBuffers) int {
	snd, rcv := srv.SendAfter, cli.RecvAfter
	if dir == measure.DirectionUp {
		snd, rcv = cli.SendAfter, srv.RecvAfter
	}
	return min(snd, rcv) / 2
}

// boundBps is buffer / RTT in bits per second.
func boundBps(windowBytes int, rtt time.Duration) float64 {
	if rtt <= 0 {
		return 0
	}
	return float64(windowBytes) * 8 / rtt.Seconds()
}

func runBuffers(ctx context.Context, o Options) (*measure.Report, error) {
	vs, protos, err := bufferVariants()
	if err != nil {
		return nil, err
	}
	runs := bufferRuns(o)
	sysctls := map[string]map[string]map[string]int{} // network → node → values
	infos := map[[2]string]bufferInfo{}               // network, variant
	ready := func(net string) readyHook {
		return func(ctx context.Context, l *lab.Lab, variant string, t *tunnel.Tunnel) error {
			if sysctls[net] == nil {
				sc := map[string]map[string]int{}
				for _, n := range []lab.Node{lab.Client, lab.Server} {
					v, err := readCoreSysctls(ctx, l, n)
					if err != nil {
						return err
					}
					sc[string(n)] = v
				}
				sysctls[net] = sc
			}
			info := bufferInfo{sysctl: sysctls[net]}
			if t.ServerLog != nil {
				info.server = t.ServerLog.SocketBuffers
			}
			if t.ClientLog != nil {
				info.client = t.ClientLog.SocketBuffers
			}
			infos[[2]string{net, variant}] = info
			return nil
		}
	}
	host, herr := hostCoreSysctls()
	rep, err := runEachNetwork(ctx, experiment.Spec{
		Command: "recipe buffers", Variants: vs, Protos: protos, Proto: openvpn.UDP,
		Directions: bufferDirections, Repeat: o.repeat(), Retries: 1, DrainOK: true,
		Progress: o.Progress, PKIDir: o.PKIDir, LabName: o.LabName, Lab: o.Lab,
	}, runs, ready)
	if rep == nil {
		return nil, err
	}
	rtts := map[string]time.Duration{}
	rates := map[string]float64{} // the measured direction's rate limit
	for _, r := range runs {
		rtts[r.net.Name] = bufPathRTT(r.net.Path)
		rates[r.net.Name] = float64(r.net.Path.Up.RateBitsPerSec)
		if bufferDirections[0] == measure.DirectionDown {
			rates[r.net.Name] = float64(r.net.Path.Down.RateBitsPerSec)
		}
	}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		info, ok := infos[[2]string{r.Network, r.Variant}]
		if !ok {
			continue
		}
		s, _ := bufferSettingOf(r.Variant)
		x := rowExtra(r)
		x["buffer_setting"] = s.name
		x["requested_buffer_bytes"] = s.bytes
		x["pushed"] = s.pushed
		x["rtt_ms"] = float64(rtts[r.Network]) / float64(time.Millisecond)
		x["socket_buffers_logged"] = map[string][]string{"server": formatBufferLines(info.server), "client": formatBufferLines(info.client)}
		x["net_core"] = info.sysctl
		srv, okS := lastBuffers(info.server)
		cli, okC := lastBuffers(info.client)
		if okS && okC {
			x["effective_bytes"] = map[string]map[string]int{
				"server": {"rcvbuf": srv.RecvAfter, "sndbuf": srv.SendAfter},
				"client": {"rcvbuf": cli.RecvAfter, "sndbuf": cli.SendAfter},
			}
			if s.bytes > 0 {
				w := boundWindow(r.Direction, srv, cli)
				b := boundBps(w, rtts[r.Network])
				x["bound_window_bytes"] = w
				x["bound_bps"] = b
				if b > 0 && len(r.SamplesBps) > 0 {
					x["ratio_to_bound"] = r.MedianBps / b
				}
			}
		}
	}
	rep.Scenario.Extra["directions"] = bufferDirections
	rep.Scenario.Extra["net_core_in_labs"] = sysctls
	if herr == nil {
		rep.Scenario.Extra["net_core_host"] = host
	}
	rep.Columns = bufferColumns
	if jerr := judgeSaved(rep, bufferVerdicts); jerr != nil && err == nil {
		err = jerr
	}
	return rep, err
}

// Margins of the bound verdicts. A flow at buffer/RTT measures a little
// below it (headers, the queue's added delay); Linux lets a window reach up
// to the doubled allocation when its skbs are compact (tcp_rmem scaling
// ratio since 6.x), so a rate between 1.15× and 2.1× the rule is the
// kernel's doing, and beyond 2.1× no window limited the flow at all.
var boundMargins = verdict.Margins{Over: 1.15, Under: 0.5, Free: 2.1}

// bufferClaimBound returns the bound a claim about a buffer of bytes
// makes for row r: bytes over the RTT of the row's saved path, and that
// path's rate in the row's direction (0: unlimited). The bound is the
// claim's buffer, not the one the logs show: when the kernel granted a
// smaller window (net.core.*mem_max caps the request), the row does not
// test the claim, and why says so.
func bufferClaimBound(rep *measure.Report, r *measure.Row, bytes int) (bound, pathBps float64, why string) {
	p, ok := networkPath(rep, r.Network)
	if !ok {
		return 0, 0, "the report does not say the network's path"
	}
	pathBps = float64(p.Up.RateBitsPerSec)
	if r.Direction == measure.DirectionDown {
		pathBps = float64(p.Down.RateBitsPerSec)
	}
	bound = boundBps(bytes, bufPathRTT(p))
	if w, ok := extraAs[int](r.Extra["bound_window_bytes"]); ok && w < bytes {
		why = fmt.Sprintf("the kernel granted a %d-byte window, not the %d bytes the claim names (net.core.*mem_max caps the request)", w, bytes)
	}
	return bound, pathBps, why
}

// judgeBound judges "throughput ≤ buffer / RTT" on one row by
// verdict.LimitedTo: pathBps is the path's rate in the row's direction (0:
// unlimited); a bound at 80 % of it or above cannot tell the buffer's
// limit from the path's and is not tested here.
func judgeBound(r *measure.Row, bound, pathBps float64) (verdict.Outcome, string) {
	if r == nil || bound <= 0 {
		return Noise, "no valid sample or no bound"
	}
	f := fmt.Sprintf("%s against buffer/RTT %s Mbit/s (×%.2f)", mbps(r), measure.FormatMbps(bound), r.MedianBps/bound)
	o, why := verdict.LimitedTo(r.SamplesBps, bound, pathBps, boundMargins)
	s := verdict.Of(r.SamplesBps)
	switch {
	case o == Refuted:
		why = "even the slowest sample exceeds twice the bound, so no window limits this transport"
	case o == Confirmed:
		why = "the buffer is what limits the flow"
	case o == Changed && s.Max <= boundMargins.Over*bound:
		why = "well below the bound, something else limits the flow (path, CPU, loss)"
	case o == Changed:
		why = "above the rule but within the kernel's doubled allocation (Linux doubles SO_SNDBUF/SO_RCVBUF)"
	}
	return o, f + ": " + why
}

// bufferVerdicts judges the saved report: rows with their Extra
// (bound_window_bytes, effective_bytes, net_core), the networks' paths,
// and Scenario.Extra["net_core_host"].
func bufferVerdicts(rep *measure.Report) []measure.Verdict {
	var out []measure.Verdict
	host, _ := extraAs[map[string]int](rep.Scenario.Extra["net_core_host"])
	rowOf := func(net, variant string) *measure.Row {
		return row(rep, net, variant, bufferDirections[0])
	}
	var nets []string
	for _, n := range rep.Scenario.Networks {
		nets = append(nets, n.Name)
	}
	has := func(net string) bool { return slices.Contains(nets, net) }
	named := func(claim string, r *measure.Row, bytes int) measure.Verdict {
		if r == nil {
			return newVerdict(claim, Noise, "no valid sample")
		}
		bound, pathBps, why := bufferClaimBound(rep, r, bytes)
		if why != "" {
			return newVerdict(claim, NotTested, "%s: %s", mbps(r), why)
		}
		o, why := judgeBound(r, bound, pathBps)
		return newVerdict(claim, o, "%s", why)
	}
	for _, proto := range []string{openvpn.UDP, openvpn.TCP} {
		tag := fmt.Sprintf(" [%s transport]", proto)
		if has("200ms") {
			out = append(out, named("64 KiB buffers at 200 ms RTT cap throughput at 2.5 Mbit/s"+tag, rowOf("200ms", "buf64k-"+proto), 64<<10))
		}
		if has("50ms") {
			out = append(out, named("512 KiB buffers at 50 ms RTT allow at most 80 Mbit/s"+tag, rowOf("50ms", "buf512k-"+proto), 512<<10))
		}
		// The rule over every row with set buffers on which the buffer,
		// not the path, can bind.
		var held, broke, binding, n int
		var cells, untested []string
		for _, net := range nets {
			for _, s := range bufferSettings {
				if s.bytes == 0 {
					continue
				}
				r := rowOf(net, s.name+"-"+proto)
				if r == nil || len(r.SamplesBps) < MinSamples {
					continue
				}
				b, pathBps, why := bufferClaimBound(rep, r, s.bytes)
				cell := fmt.Sprintf("%s %s %s/%s", net, s.name, measure.FormatMbps(r.MedianBps), measure.FormatMbps(b))
				o, _ := verdict.LimitedTo(r.SamplesBps, b, pathBps, boundMargins)
				if why != "" || o == NotTested {
					untested = append(untested, cell)
					continue
				}
				n++
				cells = append(cells, cell)
				st := verdict.Of(r.SamplesBps)
				switch {
				case st.Min > boundMargins.Over*b:
					broke++
				case st.Max <= boundMargins.Over*b:
					held++
					if o == Confirmed {
						binding++
					}
				}
			}
		}
		claim := "throughput ≤ buffer / RTT wherever sndbuf/rcvbuf are set" + tag
		list := strings.Join(cells, ", ")
		if len(untested) > 0 {
			list += fmt.Sprintf("; left out, the path's rate as low as the bound or the kernel capping the buffer: %s", strings.Join(untested, ", "))
		}
		switch {
		case n == 0 && len(untested) > 0:
			out = append(out, newVerdict(claim, NotTested, "no row on which the buffer rather than the path could bind (median/bound Mbit/s%s)", list))
		case n == 0:
			out = append(out, newVerdict(claim, Noise, "no valid rows with %d samples", MinSamples))
		case held == n && binding > 0:
			out = append(out, newVerdict(claim, Confirmed, "held in %d of %d cases, binding in %d (median/bound Mbit/s: %s)", held, n, binding, list))
		case held == n:
			out = append(out, newVerdict(claim, Changed, "held in all %d cases but never bound the flow (median/bound Mbit/s: %s)", n, list))
		case broke > 0:
			out = append(out, newVerdict(claim, Refuted, "exceeded beyond the spread in %d of %d cases (median/bound Mbit/s: %s)", broke, n, list))
		default:
			out = append(out, newVerdict(claim, Noise, "held in %d of %d cases, the rest straddle the bound (median/bound Mbit/s: %s)", held, n, list))
		}
		// 2.6's default against the old forced 64 KiB, where it matters most.
		if has("200ms") {
			def, small := rowOf("200ms", "osdefault-"+proto), rowOf("200ms", "buf64k-"+proto)
			o, ratio := compareRates(def, small, 1.5)
			out = append(out, newVerdict("OpenVPN 2.6's OS-default buffers beat the 64 KiB that 2.3 forced, at 200 ms RTT"+tag, o,
				"OS default %s vs 64 KiB %s: %s", mbps(def), mbps(small), ratioText(ratio, small)))
		}
	}
	out = append(out, pushVerdict(rep, host))
	return out
}

// pushVerdict checks from the logs that a pushed 512 KiB took effect on both
// sides, and says what net.core.{r,w}mem_max did to the request.
func pushVerdict(rep *measure.Report, host map[string]int) measure.Verdict {
	claim := "sndbuf/rcvbuf 524288, set on the server and pushed, give both sides 512 KiB buffers"
	req := 512 << 10
	var seen, full, capped, unpushed int
	var details []string
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if s, ok := bufferSettingOf(r.Variant); !ok || s.name != "buf512k" {
			continue
		}
		eff, ok := extraAs[map[string]map[string]int](r.Extra["effective_bytes"])
		if !ok {
			continue
		}
		seen++
		limits, _ := extraAs[map[string]map[string]int](r.Extra["net_core"])
		side := func(node string) string {
			var parts []string
			for _, k := range []string{"rcvbuf", "sndbuf"} {
				got := eff[node][k]
				maxName := "rmem_max"
				if k == "sndbuf" {
					maxName = "wmem_max"
				}
				lim := limits[node][maxName]
				switch {
				case got >= 2*req:
					full++
					parts = append(parts, fmt.Sprintf("%s %d", k, got))
				case lim > 0 && lim < req && got == 2*lim:
					capped++
					parts = append(parts, fmt.Sprintf("%s %d (capped: %s %d)", k, got, maxName, lim))
				default:
					unpushed++
					parts = append(parts, fmt.Sprintf("%s %d (not the request)", k, got))
				}
			}
			return node + " " + strings.Join(parts, ", ")
		}
		details = append(details, fmt.Sprintf("%s/%s: %s; %s", r.Network, r.Variant, side("server"), side("client")))
	}
	limits := ""
	if host != nil {
		limits = fmt.Sprintf("; host net.core.rmem_max %d, wmem_max %d", host["rmem_max"], host["wmem_max"])
		// Mainline Linux keeps these two global (struct netns_core has
		// no such fields up to 6.18): a namespace shows the host's.
		same, labs := true, 0
		for i := range rep.Rows {
			nc, _ := extraAs[map[string]map[string]int](rep.Rows[i].Extra["net_core"])
			for _, v := range nc {
				labs++
				same = same && v["rmem_max"] == host["rmem_max"] && v["wmem_max"] == host["wmem_max"]
			}
		}
		switch {
		case labs > 0 && same:
			limits += ", the same inside every lab namespace"
		case labs > 0:
			limits += ", but the lab namespaces show other values (namespaced limits)"
		}
	}
	switch {
	case seen == 0:
		return newVerdict(claim, Noise, "no 512 KiB tunnel reported its buffers")
	case unpushed > 0:
		return newVerdict(claim, Refuted, "some sockets did not get the requested size: %s%s", strings.Join(details, " | "), limits)
	case capped > 0:
		v := newVerdict(claim, Changed, "the kernel capped the request at net.core.{r,w}mem_max (and doubled it): %s%s", strings.Join(details, " | "), limits)
		v.Basis = measure.VerdictBasisKernelCapped
		return v
	}
	return newVerdict(claim, Confirmed, "every socket reports 2 × 524288 (Linux doubles the request; the limits allow it): %s%s", strings.Join(details, " | "), limits)
}

// bufferColumns are the recipe's columns of the text table.
var bufferColumns = []measure.Column{
	{Header: "REQUESTED", Format: func(r measure.Row) string {
		s, ok := bufferSettingOf(r.Variant)
		switch {
		case !ok:
			return ""
		case s.bytes == 0:
			return "OS default"
		case s.pushed:
			return fmt.Sprintf("%dK pushed", s.bytes>>10)
		}
		return fmt.Sprintf("%dK", s.bytes>>10)
	}},
	{Header: "BUFFER/RTT Mbit/s", Format: func(r measure.Row) string {
		if b, ok := extraAs[float64](r.Extra["bound_bps"]); ok {
			return measure.FormatMbps(b)
		}
		return "-"
	}},
}
