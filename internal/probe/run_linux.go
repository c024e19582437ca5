package probe

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cryptobench"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// Options tune a probe.
type Options struct {
	Host string
	// Pings is the number of ICMP echoes for RTT, jitter and loss
	// (default 300), sent every Interval (default 10 ms).
	Pings    int
	Interval time.Duration
	// IPerf3Port, if not 0, measures one TCP flow's throughput against an
	// iperf3 server there for IPerf3Duration (default 5 s).
	IPerf3Port     int
	IPerf3Duration time.Duration
	// NoCrypto skips the local cryptobench (one second per cipher).
	NoCrypto bool
	// Logf reports progress.
	Logf func(format string, a ...any)
}

// Run probes the host. Resolution failures are errors; a measurement that
// cannot be made becomes a "not available" field with the reason.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Pings == 0 {
		o.Pings = 300
	}
	if o.Interval == 0 {
		o.Interval = 10 * time.Millisecond
	}
	if o.IPerf3Duration == 0 {
		o.IPerf3Duration = 5 * time.Second
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	v4, v6, err := resolve(ctx, o.Host)
	if err != nil {
		return nil, err
	}
	rep := &Report{Schema: Schema, Host: o.Host, Time: time.Now().UTC()}
	p := &rep.Path
	first := v4
	if !first.IsValid() {
		first = v6
	}
	logf("path MTU")
	p.PMTUIPv4 = probePMTU(ctx, v4, "IPv4")
	p.PMTUIPv6 = probePMTU(ctx, v6, "IPv6")
	logf("RTT, jitter and loss: %d ICMP echoes", o.Pings)
	p.RTTMillis, p.JitterMs, p.LossPercent = ping(ctx, first, o.Pings, o.Interval)
	if o.IPerf3Port != 0 {
		logf("throughput: iperf3 for %v", o.IPerf3Duration)
		// The first 2 s (slow start; seconds on a long path) are left out,
		// so the figure is the flow's steady rate.
		res, err := iperf.Run(ctx, iperf.Local, iperf.ClientOptions{Server: first, Port: o.IPerf3Port, Duration: o.IPerf3Duration, Omit: 2 * time.Second})
		if err != nil {
			p.ThroughputBitsPerSec = missing[float64](fmt.Sprintf("iperf3 to %s port %d: %v", first, o.IPerf3Port, oneLine(err)))
		} else {
			p.ThroughputBitsPerSec = measured(res.ReceivedBitsPerSec, fmt.Sprintf("iperf3 TCP, one flow, %v after 2 s warm-up, client→host", o.IPerf3Duration))
		}
	} else {
		p.ThroughputBitsPerSec = missing[float64]("no --iperf3 PORT given")
	}
	switch {
	case !p.ThroughputBitsPerSec.Known():
		p.PathRateBitsPerSec = missing[float64]("needs the iperf3 throughput")
	case !p.LossPercent.Known() || p.LossPercent.Value > 0:
		p.PathRateBitsPerSec = missing[float64]("the path loses packets (or loss is unknown): TCP goodput is loss-bound, not the link rate; give advise --rate")
	default:
		p.PathRateBitsPerSec = measured(p.ThroughputBitsPerSec.Value*1514/1448, "iperf3 goodput × 1514/1448 (Ethernet+IP+TCP headers with timestamps)")
	}
	if o.NoCrypto {
		p.AESGCMBytesPerSec = missing[float64]("--no-crypto")
		p.ChaChaBytesPerSec = missing[float64]("--no-crypto")
	} else {
		logf("crypto speed: openssl speed, 1 s per cipher")
		p.AESGCMBytesPerSec = cryptoSpeed(ctx, "aes-256-gcm")
		p.ChaChaBytesPerSec = cryptoSpeed(ctx, "chacha20-poly1305")
	}
	p.OpenVPNVersion = openvpnVersion(ctx)
	p.DCO = dcoAvailable(ctx)
	p.RmemMax = sysctlInt("/proc/sys/net/core/rmem_max")
	p.WmemMax = sysctlInt("/proc/sys/net/core/wmem_max")
	if r, err := pmtu.RouteTo(first); err != nil {
		p.Interface = missing[string](oneLine(err))
		p.InterfaceMTU = missing[int](oneLine(err))
		p.Offloads = missing[map[string]bool](oneLine(err))
	} else {
		p.Interface = read(r.Dev, "route to "+first.String())
		p.InterfaceMTU = read(r.MTU, "ip link")
		p.Offloads = offloads(ctx, r.Dev)
	}
	return rep, nil
}

func resolve(ctx context.Context, host string) (v4, v6 netip.Addr, err error) {
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		// An address literal names one family; the other is not probed.
		if a.Is4() {
			return a, v6, nil
		}
		return v4, a, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return v4, v6, fmt.Errorf("cannot resolve %q: %w", host, err)
	}
	for _, a := range addrs {
		a = a.Unmap()
		if a.Is4() && !v4.IsValid() {
			v4 = a
		}
		if a.Is6() && !v6.IsValid() {
			v6 = a
		}
	}
	return v4, v6, nil
}

func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " | ")
}

func probePMTU(ctx context.Context, a netip.Addr, fam string) Field[PMTU] {
	if !a.IsValid() {
		return missing[PMTU]("no " + fam + " address for HOST (an address literal names one family; give a host name with both to probe both)")
	}
	pr, err := pmtu.NewProber(a)
	if err != nil {
		return missing[PMTU](oneLine(err))
	}
	defer pr.Close()
	res, err := pmtu.Search(ctx, pr, pmtu.Options{})
	if err != nil {
		return missing[PMTU](oneLine(err))
	}
	note := fmt.Sprintf("ICMP probes to %s, %d rounds", a, res.Rounds)
	if res.LocalLimit {
		note += "; the local interface MTU is the limit"
	}
	return measured(PMTU{Bytes: res.PathMTU, Blackhole: res.Blackhole}, note)
}

var (
	lossRE = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received.*?([\d.]+)% packet loss`)
	rttRE  = regexp.MustCompile(`rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms`)
)

// ping sends ICMP echoes with iputils ping.
//
// Equivalent to: ping -n -q -c N -i 0.01 -W 2 ADDR
func ping(ctx context.Context, a netip.Addr, n int, interval time.Duration) (rtt, jitter, loss Field[float64]) {
	cmd := runner.Command(ctx, "ping", "-n", "-q", "-c", strconv.Itoa(n), "-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64), "-W", "2", a.String())
	out, err := cmd.CombinedOutput()
	rtt, jitter, loss, perr := ParsePing(string(out), n)
	if perr != nil {
		why := perr.Error()
		if err != nil {
			why = fmt.Sprintf("running %q: %v: %s", cmd.String(), err, strings.TrimSpace(string(out)))
		}
		return missing[float64](why), missing[float64](why), missing[float64](why)
	}
	return rtt, jitter, loss
}

// ParsePing reads iputils ping's summary: loss always, RTT and jitter
// (mdev) when any echo came back.
func ParsePing(out string, n int) (rtt, jitter, loss Field[float64], err error) {
	m := lossRE.FindStringSubmatch(out)
	if m == nil {
		return rtt, jitter, loss, fmt.Errorf("no ping summary in %q", strings.TrimSpace(out))
	}
	l, _ := strconv.ParseFloat(m[3], 64)
	loss = measured(l, fmt.Sprintf("ICMP echo, %s of %s answered", m[2], m[1]))
	r := rttRE.FindStringSubmatch(out)
	if r == nil {
		why := "no echo came back"
		return missing[float64](why), missing[float64](why), loss, nil
	}
	avg, _ := strconv.ParseFloat(r[2], 64)
	min, _ := strconv.ParseFloat(r[1], 64)
	mdev, _ := strconv.ParseFloat(r[4], 64)
	rtt = measured(min, fmt.Sprintf("ICMP echo minimum of %d (average %.3f ms)", n, avg))
	jitter = measured(mdev, "ICMP echo mean deviation (ping's mdev)")
	return rtt, jitter, loss, nil
}

// cryptoSpeed is a one-second openssl speed of one AEAD at 1408-byte
// buffers (a full tunnel packet).
//
// Equivalent to: openssl speed -seconds 1 -bytes 1408 -mr -evp CIPHER
func cryptoSpeed(ctx context.Context, cipher string) Field[float64] {
	cmd := runner.Command(ctx, "openssl", "speed", "-seconds", "1", "-bytes", "1408", "-mr", "-evp", cipher)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return missing[float64](fmt.Sprintf("running %q: %v: %s", cmd.String(), err, strings.TrimSpace(stderr.String())))
	}
	r, err := cryptobench.ParseSpeed([]byte(stdout.String()), []byte(stderr.String()))
	if err != nil {
		return missing[float64](oneLine(err))
	}
	return measured(r.Rate(), "openssl speed, 1 s, 1408-byte buffers, one core (noisy on a loaded machine)")
}

func openvpnVersion(ctx context.Context) Field[string] {
	out, err := runner.Command(ctx, "openvpn", "--version").CombinedOutput()
	f := strings.Fields(string(out))
	if len(f) >= 2 && f[0] == "OpenVPN" {
		return read(f[1], "openvpn --version")
	}
	if err != nil {
		return missing[string](fmt.Sprintf("openvpn --version: %v (Debian package openvpn)", err))
	}
	return missing[string]("openvpn --version printed no version")
}

// dcoAvailable reads whether the ovpn kernel module (Linux 6.16+ "ovpn",
// or the out-of-tree "ovpn_dco_v2") is loaded or installed.
func dcoAvailable(ctx context.Context) Field[bool] {
	for _, m := range []string{"ovpn", "ovpn_dco_v2"} {
		if _, err := os.Stat("/sys/module/" + m); err == nil {
			return read(true, "kernel module "+m+" loaded")
		}
	}
	for _, m := range []string{"ovpn", "ovpn-dco-v2"} {
		if err := runner.Command(ctx, "modinfo", "-F", "name", m).Run(); err == nil {
			return read(true, "kernel module "+m+" installed, not loaded")
		}
	}
	return read(false, "no ovpn or ovpn_dco_v2 kernel module (modinfo)")
}

func sysctlInt(path string) Field[int] {
	b, err := os.ReadFile(path)
	if err != nil {
		return missing[int](oneLine(err))
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return missing[int](fmt.Sprintf("%s: %v", path, err))
	}
	return read(n, path)
}

// offloads reads the NIC's main offloads.
//
// Equivalent to: ethtool -k DEV
func offloads(ctx context.Context, dev string) Field[map[string]bool] {
	if _, err := exec.LookPath("ethtool"); err != nil {
		return missing[map[string]bool]("ethtool not installed (Debian package ethtool)")
	}
	out, err := runner.Command(ctx, "ethtool", "-k", dev).Output()
	if err != nil {
		return missing[map[string]bool](fmt.Sprintf("ethtool -k %s: %v", dev, err))
	}
	return read(ParseOffloads(string(out)), "ethtool -k "+dev)
}

// ParseOffloads picks the offloads that matter for a tunnel from
// `ethtool -k` output.
func ParseOffloads(out string) map[string]bool {
	want := map[string]bool{"tcp-segmentation-offload": true, "generic-segmentation-offload": true,
		"generic-receive-offload": true, "rx-udp-gro-forwarding": true, "tx-udp-segmentation": true, "rx-checksumming": true, "tx-checksumming": true}
	m := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || !want[k] {
			continue
		}
		m[k] = strings.HasPrefix(strings.TrimSpace(v), "on")
	}
	return m
}
