package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/safchain/ethtool"

	"github.com/ovpnperf/ovpnperf/internal/cryptobench"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/overhead"
	"github.com/ovpnperf/ovpnperf/internal/pmtu"
	"github.com/ovpnperf/ovpnperf/internal/pps"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Options tune a probe.
type Options struct {
	Host string
	// Pings is the number of echoes for RTT, jitter and loss
	// (PingsRange; 0: DefaultPings), sent every Interval (0:
	// DefaultInterval): UDP probes to a pps server when one answers on
	// PPSPort, ICMP echoes otherwise.
	Pings    int
	Interval time.Duration
	// PPSPort is the UDP port of an `ovpnperf pps server` on HOST; 0 does
	// not try one (ICMP only). PPSKey, if set, signs the hello for a
	// server started with --key-file.
	PPSPort int
	PPSKey  []byte
	// IPerf3Port, if not 0, measures one TCP flow's throughput against an
	// iperf3 server there for IPerf3Duration (IPerf3DurationRange; 0:
	// DefaultIPerf3Duration).
	IPerf3Port     int
	IPerf3Duration time.Duration
	// Config, if set, is an OpenVPN config: the probe says whether DCO
	// would be used for it here, and every reason it would not.
	Config string
	// NoCrypto skips the local cryptobench (one second per cipher).
	NoCrypto bool
	// Logf reports progress.
	Logf func(format string, a ...any)
}

// Run probes the host. Resolution failures are errors; a measurement that
// cannot be made becomes a "not available" field with the reason.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Pings == 0 {
		o.Pings = DefaultPings
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.IPerf3Duration == 0 {
		o.IPerf3Duration = DefaultIPerf3Duration
	}
	if r := PingsRange(); !r.Contains(o.Pings) {
		return nil, usage.Errorf("--pings %d: want %s", o.Pings, r)
	}
	if r := IPerf3DurationRange(); !r.Contains(o.IPerf3Duration) {
		return nil, usage.Errorf("--iperf3-time %v: want %s", o.IPerf3Duration, r)
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
	p.RTTMillis, p.JitterMs, p.LossPercent, p.LossUpPercent, p.LossDownPercent, p.LossEchoes = echoes(ctx, first, o, logf)
	if o.IPerf3Port != 0 {
		logf("throughput: iperf3 for %v", o.IPerf3Duration)
		opts, timing := iperfTiming(p.RTTMillis, p.JitterMs, o.IPerf3Duration)
		opts.Server, opts.Port, opts.RateUnknown = first, o.IPerf3Port, true
		sample := func() (*iperf.Result, error) {
			// Where the path answered echoes (of 0 ms too, with no
			// slack), the ones during the sample see the queue it fills.
			if p.RTTMillis.Known() {
				opts.LoadedRoundTrip = EchoDuring(ctx, first, opts.Omit+opts.Duration+opts.PathSlack)
			}
			return iperf.Run(ctx, iperf.Local, opts)
		}
		res, err := sample()
		for try := 0; try < iperf.Retries && err != nil && ctx.Err() == nil && errors.Is(err, iperf.ErrInconsistent); try++ {
			logf("throughput: %v; measuring again", oneLine(err))
			res, err = sample()
		}
		if err != nil {
			p.ThroughputBitsPerSec = missing[float64](fmt.Sprintf("iperf3 to %s port %d (%s): %v", first, o.IPerf3Port, timing, oneLine(err)))
		} else {
			p.ThroughputBitsPerSec = measured(res.ReceivedBitsPerSec, fmt.Sprintf("iperf3 TCP, one flow, client→host, %s%s", timing, edgeError(opts, res)))
		}
	} else {
		p.ThroughputBitsPerSec = missing[float64]("no --iperf3 PORT given")
	}
	switch {
	case !p.ThroughputBitsPerSec.Known():
		p.PathRateBitsPerSec = missing[float64]("needs the iperf3 throughput")
	case !p.LossPercent.Known() || p.LossPercent.Value > 0:
		// Any lost echo, not the loss rule's 1 %: a share of a percent
		// already holds one TCP flow below the link on a long path.
		p.PathRateBitsPerSec = missing[float64]("echoes were lost (or loss is unknown): one TCP flow's goodput may be held by loss, not by the link rate; give advise --rate")
	default:
		p.PathRateBitsPerSec = measured(p.ThroughputBitsPerSec.Value/overhead.TCPGoodputShare, fmt.Sprintf("iperf3 goodput × %d/%d (Ethernet+IP+TCP headers with timestamps)", overhead.TCPFrameBytes, overhead.TCPSegmentBytes))
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
	if err := dcoFields(ctx, p, o.Config); err != nil {
		return nil, err
	}
	p.RmemMax = sysctlInt("/proc/sys/net/core/rmem_max")
	p.WmemMax = sysctlInt("/proc/sys/net/core/wmem_max")
	if r, err := pmtu.RouteTo(first); err != nil {
		p.Interface = missing[string](oneLine(err))
		p.InterfaceMTU = missing[int](oneLine(err))
		p.Offloads = missing[map[string]bool](oneLine(err))
	} else {
		p.Interface = read(r.Dev, "route to "+first.String())
		p.InterfaceMTU = read(r.MTU, "ip link")
		p.Offloads = offloads(r.Dev)
	}
	rep.Findings = Findings(rep)
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

// iperfTiming sizes the throughput sample to the path the echoes measured,
// by the rule measure uses too (iperf.RealPathTiming), at the path's
// largest round trip, taken as the echo round trip plus four mean
// deviations; never shorter than asked. Without an echo round trip (not
// one of 0 ms, which is a round trip) the sample is as asked, with no
// slack.
func iperfTiming(rttMs, jitterMs Field[float64], asked time.Duration) (iperf.ClientOptions, string) {
	var largest time.Duration
	echoed := rttMs.Known()
	if echoed {
		largest = time.Duration(rttMs.Value * float64(time.Millisecond))
		if jitterMs.Known() {
			largest += time.Duration(4 * jitterMs.Value * float64(time.Millisecond))
		}
	}
	d, w, slack := iperf.RealPathTiming(largest, echoed)
	o := iperf.ClientOptions{Duration: max(asked, d), Omit: w, PathSlack: slack}
	if !echoed {
		return o, fmt.Sprintf("%v after a %v warm-up (no echo round trip to size it by)", o.Duration, o.Omit)
	}
	return o, fmt.Sprintf("%v after a %v warm-up (sized by the %.0f ms echo round trip; window check allows %v more, or the largest round trip of echoes during the sample)", o.Duration, o.Omit, rttMs.Value, o.PathSlack.Round(time.Millisecond))
}

// edgeError states the error one sample's window edges can carry: up to
// one loaded round trip of data either way (docs/evidence.md), the largest
// round trip of the echoes during the sample where there were any, else
// the slack; empty where that is under 1 %.
func edgeError(opts iperf.ClientOptions, res *iperf.Result) string {
	rt := opts.PathSlack
	if opts.LoadedRoundTrip != nil {
		rt = max(rt, opts.LoadedRoundTrip())
	}
	if res.Requested <= 0 || rt*100 < res.Requested {
		return ""
	}
	return fmt.Sprintf("; its window edges can carry up to ±%.0f %% (one loaded round trip, %v, of data in %v: docs/evidence.md)",
		100*rt.Seconds()/res.Requested.Seconds(), rt.Round(time.Millisecond), res.Requested)
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

// echoes measures RTT, jitter and loss: over a pps echo when a pps server
// answers on o.PPSPort, with loss per direction from the server's counts;
// otherwise (or when the pps test fails) over ICMP echoes, round trip only,
// with the reason the pps echo was not used in the notes. counts are the
// echoes sent and answered (and one way, from a pps server's report).
func echoes(ctx context.Context, a netip.Addr, o Options, logf func(string, ...any)) (rtt, jitter, loss, up, down Field[float64], counts Field[Echoes]) {
	why := "no --pps-port given"
	if o.PPSPort != 0 {
		logf("RTT, jitter and loss: %d pps echoes to udp port %d", o.Pings, o.PPSPort)
		res, err := pps.Run(ctx, pps.Config{
			Server: net.JoinHostPort(a.String(), strconv.Itoa(o.PPSPort)),
			// A gentle rate, one flow, ping's payload size; Count ends
			// the test, Duration only bounds it. The 2 s timeout is
			// ping -W 2's: a slower echo counts as lost in both.
			Params:           pps.Params{RatePPS: uint64(time.Second / o.Interval), Size: 56, Duration: time.Duration(o.Pings)*o.Interval + 5*time.Second, Flows: 1, Timeout: 2 * time.Second},
			Count:            uint64(o.Pings),
			Window:           1 << 12,
			HandshakeTimeout: 2 * time.Second,
			Key:              o.PPSKey,
		})
		if err == nil {
			rtt, jitter, loss, up, down = PPSFields(res)
			return rtt, jitter, loss, up, down, PPSEchoes(res)
		}
		if ctx.Err() != nil {
			why = ctx.Err().Error()
		} else {
			why = oneLine(err)
		}
		logf("pps echo not used (%s): ICMP echoes instead", why)
	}
	logf("RTT, jitter and loss: %d ICMP echoes", o.Pings)
	rtt, jitter, loss, counts = ping(ctx, a, o.Pings, o.Interval)
	fallback := "pps echo at udp port " + strconv.Itoa(o.PPSPort) + " not used: " + why
	if o.PPSPort == 0 {
		fallback = "pps echo not tried (--pps-port 0)"
	}
	for _, f := range []*Field[float64]{&rtt, &jitter, &loss} {
		*f = f.by(MethodICMPEcho)
		f.Note += "; " + fallback
	}
	counts = counts.by(MethodICMPEcho)
	noDir := missing[float64]("ICMP echo counts round trips only: it cannot tell a lost request from a lost reply (" + fallback + ")").by(MethodICMPEcho)
	return rtt, jitter, loss, noDir, noDir, counts
}

// PPSFields turns a pps echo run into the probe's fields. The round-trip
// loss is the client's (a probe or its echo lost, or later than the
// timeout); the way up is what the server did not receive of what was
// sent, the way back what the client did not receive (in time or late) of
// what the server echoed. Without the server's report only the round trip
// is known.
func PPSFields(r *pps.Result) (rtt, jitter, loss, up, down Field[float64]) {
	at := "pps echo to " + r.Server
	loss = measured(r.LossPercent, fmt.Sprintf("%s, %d of %d probes echoed in time (round trip)", at, r.Received, r.Sent)).by(MethodPPSEcho)
	if len(r.Warnings) > 0 {
		// E.g. a client too busy to keep the rate: the figures stand,
		// but the reader should know.
		loss.Note += "; pps client: " + strings.Join(r.Warnings, "; ")
	}
	if r.Received > 0 {
		rtt = measured(r.RTTMinUs/1e3, fmt.Sprintf("%s, minimum of %d (median %.3f ms)", at, r.Received, r.RTTP50Us/1e3)).by(MethodPPSEcho)
		jitter = measured(r.RTTStdDevUs/1e3, fmt.Sprintf("%s, standard deviation of %d RTTs (as ping's mdev)", at, r.Received)).by(MethodPPSEcho)
	} else {
		rtt = missing[float64](at + ": no echo came back").by(MethodPPSEcho)
		jitter = rtt
	}
	if sr := r.ServerReport; sr != nil && r.Sent > 0 {
		upLost := r.Sent - min(sr.Received, r.Sent)
		up = measured(100*float64(upLost)/float64(r.Sent), fmt.Sprintf("%s: the server received %d of %d probes", at, sr.Received, r.Sent)).by(MethodPPSEcho)
		if sr.Echoed > 0 {
			back := min(r.Received+r.Late, sr.Echoed)
			down = measured(100*float64(sr.Echoed-back)/float64(sr.Echoed), fmt.Sprintf("%s: %d of %d echoes came back (%d of them late)", at, back, sr.Echoed, r.Late)).by(MethodPPSEcho)
		} else {
			down = missing[float64](at + ": the server echoed nothing").by(MethodPPSEcho)
		}
	} else {
		why := at + ": the server did not report its counts, so only the round trip is known"
		up, down = missing[float64](why).by(MethodPPSEcho), missing[float64](why).by(MethodPPSEcho)
	}
	return rtt, jitter, loss, up, down
}

// PPSEchoes are the counts of a pps echo run: the probes sent and echoed
// in time, and with the server's report the counts of each way (as
// PPSFields takes its per-direction loss from).
func PPSEchoes(r *pps.Result) Field[Echoes] {
	e := Echoes{Sent: int(r.Sent), Answered: int(min(r.Received, r.Sent))}
	note := fmt.Sprintf("pps echo to %s: %d of %d probes echoed in time", r.Server, e.Answered, e.Sent)
	if sr := r.ServerReport; sr != nil && r.Sent > 0 {
		e.Up = &OneWay{Sent: int(r.Sent), Arrived: int(min(sr.Received, r.Sent))}
		if sr.Echoed > 0 {
			e.Down = &OneWay{Sent: int(sr.Echoed), Arrived: int(min(r.Received+r.Late, sr.Echoed))}
		}
	}
	return measured(e, note).by(MethodPPSEcho)
}

var (
	lossRE = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received.*?([\d.]+)% packet loss`)
	rttRE  = regexp.MustCompile(`rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms`)
)

// ping sends ICMP echoes with iputils ping; counts are the echoes sent
// and answered, read from the same summary as loss. The summary is read
// from stdout alone; stderr goes into the reason of a failure.
//
// Equivalent to: ping -n -q -c N -i 0.01 -W 2 ADDR
func ping(ctx context.Context, a netip.Addr, n int, interval time.Duration) (rtt, jitter, loss Field[float64], counts Field[Echoes]) {
	cmd := runner.Command(ctx, "ping", "-n", "-q", "-c", strconv.Itoa(n), "-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64), "-W", "2", a.String())
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	rtt, jitter, loss, perr := ParsePing(out, n)
	if perr != nil {
		why := perr.Error()
		if err != nil {
			why = fmt.Sprintf("running %q: %v: %s", cmd.String(), err, strings.TrimSpace(stderr.String()+" "+out))
		}
		return missing[float64](why), missing[float64](why), missing[float64](why), missing[Echoes](why)
	}
	sent, answered, cerr := ParseEchoCount(out)
	if cerr != nil {
		return rtt, jitter, loss, missing[Echoes](cerr.Error())
	}
	return rtt, jitter, loss, measured(Echoes{Sent: sent, Answered: answered}, loss.Note)
}

// RoundTrips sends n ICMP echoes to a and returns the smallest and the
// largest round trip: what measure sizes its samples by.
//
// Equivalent to: ping -n -q -c N -i INTERVAL -W 2 ADDR
func RoundTrips(ctx context.Context, a netip.Addr, n int, interval time.Duration) (lo, hi time.Duration, err error) {
	return RoundTripsWithin(ctx, a, n, interval, 0)
}

// RoundTripsWithin is RoundTrips ending after deadline (whole seconds; 0:
// none) even if fewer than n echoes were sent.
//
// Equivalent to: ping -n -q -c N -i INTERVAL -W 2 -w DEADLINE ADDR
func RoundTripsWithin(ctx context.Context, a netip.Addr, n int, interval, deadline time.Duration) (lo, hi time.Duration, err error) {
	args := []string{"ping", "-n", "-q", "-c", strconv.Itoa(n), "-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64), "-W", "2"}
	if deadline > 0 {
		args = append(args, "-w", strconv.Itoa(int(math.Ceil(deadline.Seconds()))))
	}
	cmd := runner.Command(ctx, append(args, a.String())...)
	out, rerr := cmd.CombinedOutput()
	lo, hi, err = ParsePingRange(string(out))
	if err != nil && rerr != nil {
		err = fmt.Errorf("running %q: %v: %s", cmd.String(), rerr, strings.TrimSpace(string(out)))
	}
	return lo, hi, err
}

// EchoCount sends n ICMP echoes to a, one every interval, and counts
// those answered: a paced probe whose loss is the path's own, without the
// queue a flow that fills the path builds (measure's loss finding rests
// on it). It reads ping's standard output only; an error when ping wrote
// no summary (no such host, no permission for the interval).
//
// Equivalent to: ping -n -q -c N -i INTERVAL -W 2 ADDR
func EchoCount(ctx context.Context, a netip.Addr, n int, interval time.Duration) (sent, answered int, err error) {
	cmd := runner.Command(ctx, "ping", "-n", "-q", "-c", strconv.Itoa(n), "-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64), "-W", "2", a.String())
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	rerr := cmd.Run()
	sent, answered, err = ParseEchoCount(stdout.String())
	if err != nil && rerr != nil {
		err = fmt.Errorf("running %q: %v: %s", cmd.String(), rerr, strings.TrimSpace(stderr.String()))
	}
	return sent, answered, err
}

// ParseEchoCount reads the echoes sent and answered from iputils ping's
// summary line.
func ParseEchoCount(out string) (sent, answered int, err error) {
	m := lossRE.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("no ping summary in %q", strings.TrimSpace(lastLine(out)))
	}
	sent, _ = strconv.Atoi(m[1])
	answered, _ = strconv.Atoi(m[2])
	return sent, answered, nil
}

// echoInterval is how often EchoDuring sends an ICMP echo: 5 a second,
// 84-byte packets, nothing a sample notices.
const echoInterval = 200 * time.Millisecond

// EchoDuring sends ICMP echoes to a for up to d in the background and
// returns a function that waits for them and gives the largest round trip
// seen (0 when none came back). A sample's measuring window runs about one
// round trip, queues included, past what was asked; the echoes measure
// that round trip on the path as the sample loaded it.
//
// Equivalent to: ping -n -q -i 0.2 -w SECONDS ADDR
func EchoDuring(ctx context.Context, a netip.Addr, d time.Duration) func() time.Duration {
	secs := int(math.Ceil(d.Seconds()))
	n := int(d/echoInterval) + 1
	var hi time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, hi, _ = RoundTripsWithin(ctx, a, n, echoInterval, time.Duration(secs)*time.Second)
	}()
	return func() time.Duration {
		<-done
		return hi
	}
}

// ParsePingRange reads the smallest and largest round trip of iputils
// ping's summary; an error when no echo came back.
func ParsePingRange(out string) (lo, hi time.Duration, err error) {
	r := rttRE.FindStringSubmatch(out)
	if r == nil {
		return 0, 0, fmt.Errorf("no echo came back (%s)", strings.TrimSpace(lastLine(out)))
	}
	ms := func(s string) time.Duration {
		v, _ := strconv.ParseFloat(s, 64)
		return time.Duration(v * float64(time.Millisecond))
	}
	return ms(r[1]), ms(r[3]), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
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
	out, err := runner.RunBounded(ctx, runner.VersionTimeout, "openvpn", "--version")
	f := strings.Fields(string(out))
	if len(f) >= 2 && f[0] == "OpenVPN" {
		return read(f[1], "openvpn --version")
	}
	if err != nil {
		line, _, _ := strings.Cut(err.Error(), "\n")
		return missing[string](line + " (Debian package openvpn)")
	}
	return missing[string]("openvpn --version printed no version")
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

// offloadFeatures are the kernel's names (as `ethtool -k` lists them) of
// the offloads that matter for a tunnel: segmentation on send (TSO, GSO,
// UDP GSO), aggregation on receive (GRO, UDP GRO forwarding) and checksums.
var offloadFeatures = []string{
	"tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-generic-segmentation", "tx-udp-segmentation",
	"rx-gro", "rx-udp-gro-forwarding",
	"rx-checksum", "tx-checksum-ipv4", "tx-checksum-ipv6", "tx-checksum-ip-generic",
}

// offloads reads the interface's offload features with the
// ETHTOOL_GFEATURES ioctl, so that no ethtool program is needed.
//
// Equivalent to: ethtool -k DEV
func offloads(dev string) Field[map[string]bool] {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return missing[map[string]bool](fmt.Sprintf("ethtool socket: %v", err)).by(MethodEthtoolIoctl)
	}
	defer e.Close()
	all, err := e.Features(dev)
	if err != nil {
		return missing[map[string]bool](fmt.Sprintf("ETHTOOL_GFEATURES on %s: %v", dev, err)).by(MethodEthtoolIoctl)
	}
	m := PickOffloads(all)
	if len(m) == 0 {
		return missing[map[string]bool](fmt.Sprintf("%s reports none of the offload features %s", dev, strings.Join(offloadFeatures, ", "))).by(MethodEthtoolIoctl)
	}
	return read(m, "ETHTOOL_GFEATURES on "+dev+": active kernel features (as ethtool -k lists them)").by(MethodEthtoolIoctl)
}

// PickOffloads keeps the offload features of offloadFeatures that the
// device has.
func PickOffloads(all map[string]bool) map[string]bool {
	m := map[string]bool{}
	for _, k := range offloadFeatures {
		if v, ok := all[k]; ok {
			m[k] = v
		}
	}
	return m
}
