package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// pathFlags are the link-emulation flags shared by every command that builds
// a lab: symmetric ones (--rate, --rtt, --jitter, --loss) and per-direction
// ones (--up-…, --down-…) that override them. Up is client→server. Each is
// parsed as it is read (flagvalues.go), so an error names the flag typed.
type pathFlags struct {
	fs                        *pflag.FlagSet
	rate, upRate, downRate    uint64
	rtt, upDelay, downDelay   time.Duration
	jitter, upJitter, downJit time.Duration
	loss, upLoss, downLoss    float64
	mtu, queueBytes           int
	icmpBlackhole, noIPv6     bool
}

// given reports whether the user gave any flag of pathFlagNames: a path of
// their own instead of the command's built-in networks.
func (f *pathFlags) given() bool {
	for _, n := range pathFlagNames {
		if f.fs.Changed(n) {
			return true
		}
	}
	return false
}

func (f *pathFlags) bind(fs *pflag.FlagSet) {
	f.fs = fs
	rateFlag(fs, &f.rate, "rate", "rate limit of both directions, in tc units (e.g. 15mbit, 512kbit)")
	rateFlag(fs, &f.upRate, "up-rate", "rate limit client→server (overrides --rate)")
	rateFlag(fs, &f.downRate, "down-rate", "rate limit server→client (overrides --rate)")
	timeFlag(fs, &f.rtt, "rtt", "round-trip delay added by the path, split evenly across the directions (e.g. 150ms)")
	timeFlag(fs, &f.upDelay, "up-delay", "one-way delay client→server (overrides --rtt for that direction)")
	timeFlag(fs, &f.downDelay, "down-delay", "one-way delay server→client (overrides --rtt for that direction)")
	timeFlag(fs, &f.jitter, "jitter", "delay variation of each direction, ± uniformly, packets keep their order (e.g. 5ms)")
	timeFlag(fs, &f.upJitter, "up-jitter", "jitter client→server (overrides --jitter)")
	timeFlag(fs, &f.downJit, "down-jitter", "jitter server→client (overrides --jitter)")
	percentFlag(fs, &f.loss, "loss", "random loss applied to each direction (e.g. 0.5%)")
	percentFlag(fs, &f.upLoss, "up-loss", "random loss client→server (overrides --loss)")
	percentFlag(fs, &f.downLoss, "down-loss", "random loss server→client (overrides --loss)")
	intFlag(fs, &f.mtu, "mtu", "", 0, labpath.MinMTUv4, labpath.MaxMTU, fmt.Sprintf("MTU of the router–server segment, the path-MTU bottleneck (%d–%d; default %d)", labpath.MinMTUv4, labpath.MaxMTU, labpath.DefaultMTU))
	intFlag(fs, &f.queueBytes, "queue-bytes", "", 0, 1, labpath.MaxQueueBytes, fmt.Sprintf("bottleneck buffer of each rate limiter in bytes (default: one bandwidth-delay product, at least %s, at most %s)", formatSize(labpath.MinDefaultQueueBytes), formatSize(labpath.MaxQueueBytes)))
	fs.BoolVar(&f.icmpBlackhole, "icmp-blackhole", false, "drop ICMP \"fragmentation needed\" / ICMPv6 \"packet too big\" at the router (breaks PMTU discovery)")
	fs.BoolVar(&f.noIPv6, "no-ipv6", false, "build an IPv4-only lab (needed for an MTU below 1280)")
}

// emulatorHelp is --emulator's help, the same on every command.
const emulatorHelp = "mechanism of delay, jitter and loss: auto (netem where the kernel has it, else nfqueue), nfqueue, netem, afpacket or afxdp (a bump in the wire on the client segment; docs/lab.md); a path with none of them uses none"

// emulatorFlag registers --emulator, checked against the backends' names
// as it is parsed; whether this host has the one named is CheckEmulator's.
func emulatorFlag(fs *pflag.FlagSet, dst *string) {
	*dst = labpath.EmulatorAuto
	addValue(fs, dst, "emulator", "", "string", labpath.EmulatorAuto, func(flag, s string) (string, error) {
		if s == "" {
			return "", usage.Errorf("%s: empty value; want one of %s (or leave the flag out)", flag, strings.Join(labpath.EmulatorNames(), ", "))
		}
		return s, labpath.CheckEmulatorName(s)
	}, emulatorHelp)
}

// setting is one direction's value of a path property and the flag it
// came from, for errors that name what the user typed.
type setting[T any] struct {
	v    T
	flag string
	set  bool
}

// pick returns the per-direction flag's value when it was given, else the
// symmetric one's.
func pick[T any](fs *pflag.FlagSet, dirName string, dir T, symName string, sym T) setting[T] {
	if fs.Changed(dirName) {
		return setting[T]{dir, "--" + dirName, true}
	}
	return setting[T]{sym, "--" + symName, fs.Changed(symName)}
}

// pickDelay is pick for a one-way delay, whose symmetric flag is the
// round trip --rtt, split evenly.
func pickDelay(fs *pflag.FlagSet, dirName string, dir, rtt time.Duration) setting[time.Duration] {
	s := pick(fs, dirName, dir, "rtt", rtt/2)
	if !fs.Changed(dirName) && !s.set {
		s.flag = "--" + dirName
	}
	return s
}

// path turns the flags into a validated labpath.Path.
func (f *pathFlags) path() (labpath.Path, error) {
	var p labpath.Path
	p.MTU, p.QueueBytes, p.ICMPBlackhole, p.NoIPv6 = f.mtu, f.queueBytes, f.icmpBlackhole, f.noIPv6
	fs := f.fs
	for _, d := range []struct {
		link   *labpath.Link
		rate   setting[uint64]
		delay  setting[time.Duration]
		jitter setting[time.Duration]
		loss   setting[float64]
	}{
		{&p.Up, pick(fs, "up-rate", f.upRate, "rate", f.rate), pickDelay(fs, "up-delay", f.upDelay, f.rtt),
			pick(fs, "up-jitter", f.upJitter, "jitter", f.jitter), pick(fs, "up-loss", f.upLoss, "loss", f.loss)},
		{&p.Down, pick(fs, "down-rate", f.downRate, "rate", f.rate), pickDelay(fs, "down-delay", f.downDelay, f.rtt),
			pick(fs, "down-jitter", f.downJit, "jitter", f.jitter), pick(fs, "down-loss", f.downLoss, "loss", f.loss)},
	} {
		d.link.RateBitsPerSec, d.link.Delay, d.link.Jitter, d.link.LossPercent = d.rate.v, d.delay.v, d.jitter.v, d.loss.v
		if d.jitter.v > d.delay.v {
			delay := "the one-way delay, which is 0 (no --rtt or " + d.delay.flag + ")"
			if d.delay.set {
				delay = "the one-way delay " + d.delay.v.String() + " (" + d.delay.flag + ")"
			}
			return p, usage.Errorf("%s %v: larger than %s; want a jitter up to the one-way delay", d.jitter.flag, d.jitter.v, delay)
		}
	}
	if f.queueBytes > 0 && f.queueBytes < p.MinQueueBytes() {
		return p, usage.Errorf("--queue-bytes %d: below two full-size frames (%d bytes at MTU %d), every packet would be dropped; want %d–%d", f.queueBytes, p.MinQueueBytes(), p.EffectiveMTU(), p.MinQueueBytes(), labpath.MaxQueueBytes)
	}
	if p.Up.Delay+p.Down.Delay > labpath.MaxRTT {
		return p, usage.Errorf("round trip %v (--rtt, --up-delay, --down-delay): over the %v limit", p.Up.Delay+p.Down.Delay, labpath.MaxRTT)
	}
	return p, p.Validate()
}

// queueWarnings says when a default queue (one bandwidth-delay product) was
// too large for tbf and was clamped.
func queueWarnings(p labpath.Path) []string {
	var out []string
	for _, d := range []struct {
		name string
		l    labpath.Link
	}{{"up", p.Up}, {"down", p.Down}} {
		if d.l.RateBitsPerSec == 0 {
			continue
		}
		if q, clamped := p.QueueBytesFor(d.l.RateBitsPerSec); clamped {
			out = append(out, "warning: "+d.name+": one bandwidth-delay product at "+lab.FormatRate(d.l.RateBitsPerSec)+" over "+(p.Up.Delay+p.Down.Delay).String()+
				" exceeds the "+formatSize(labpath.MaxQueueBytes)+" a rate limiter can queue; using "+formatBytes(q)+" (set --queue-bytes to choose)")
		}
	}
	return out
}

func formatBytes(b uint32) string {
	if b%(1<<20) == 0 {
		return strconv.Itoa(int(b>>20)) + " MiB"
	}
	return strconv.Itoa(int(b)) + " bytes"
}
