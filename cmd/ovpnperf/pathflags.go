package main

import (
	"github.com/spf13/pflag"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// pathFlags are the link-emulation flags shared by every command that builds
// a lab: symmetric ones (--rate, --rtt, --jitter, --loss) and per-direction
// ones (--up-…, --down-…) that override them. Up is client→server.
type pathFlags struct {
	fs                        *pflag.FlagSet
	rate, upRate, downRate    string
	rtt, upDelay, downDelay   string
	jitter, upJitter, downJit string
	loss, upLoss, downLoss    string
	mtu, queueBytes           int
	icmpBlackhole, noIPv6     bool
}

func (f *pathFlags) bind(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.rate, "rate", "", "rate limit of both directions, in tc units (e.g. 15mbit, 512kbit)")
	fs.StringVar(&f.upRate, "up-rate", "", "rate limit client→server (overrides --rate)")
	fs.StringVar(&f.downRate, "down-rate", "", "rate limit server→client (overrides --rate)")
	fs.StringVar(&f.rtt, "rtt", "", "round-trip delay added by the path, split evenly across the directions (e.g. 150ms)")
	fs.StringVar(&f.upDelay, "up-delay", "", "one-way delay client→server (overrides --rtt for that direction)")
	fs.StringVar(&f.downDelay, "down-delay", "", "one-way delay server→client (overrides --rtt for that direction)")
	fs.StringVar(&f.jitter, "jitter", "", "delay variation of each direction, ± uniformly, packets keep their order (e.g. 5ms)")
	fs.StringVar(&f.upJitter, "up-jitter", "", "jitter client→server (overrides --jitter)")
	fs.StringVar(&f.downJit, "down-jitter", "", "jitter server→client (overrides --jitter)")
	fs.StringVar(&f.loss, "loss", "", "random loss applied to each direction (e.g. 0.5%)")
	fs.StringVar(&f.upLoss, "up-loss", "", "random loss client→server (overrides --loss)")
	fs.StringVar(&f.downLoss, "down-loss", "", "random loss server→client (overrides --loss)")
	fs.IntVar(&f.mtu, "mtu", 0, "MTU of the router–server segment, the path-MTU bottleneck (576–65535; default 1500)")
	fs.IntVar(&f.queueBytes, "queue-bytes", 0, "bottleneck buffer of each rate limiter in bytes (default: one bandwidth-delay product, at least 64 KiB)")
	fs.BoolVar(&f.icmpBlackhole, "icmp-blackhole", false, "drop ICMP \"fragmentation needed\" / ICMPv6 \"packet too big\" at the router (breaks PMTU discovery)")
	fs.BoolVar(&f.noIPv6, "no-ipv6", false, "build an IPv4-only lab (needed for an MTU below 1280)")
}

// pick returns the per-direction value when set, else the symmetric one.
func pick(dir, sym string) string {
	if dir != "" {
		return dir
	}
	return sym
}

// path turns the flags into a validated lab.Path.
func (f *pathFlags) path() (lab.Path, error) {
	var p lab.Path
	p.MTU, p.QueueBytes, p.ICMPBlackhole, p.NoIPv6 = f.mtu, f.queueBytes, f.icmpBlackhole, f.noIPv6
	if f.fs != nil && f.fs.Changed("mtu") && f.mtu <= 0 {
		return p, usage.Errorf("--mtu %d: want %d–%d", f.mtu, lab.MinMTUv4, lab.MaxMTU)
	}
	for _, d := range []struct {
		name                      string
		link                      *lab.Link
		rate, delay, jitter, loss string
	}{
		{"up", &p.Up, pick(f.upRate, f.rate), f.upDelay, pick(f.upJitter, f.jitter), pick(f.upLoss, f.loss)},
		{"down", &p.Down, pick(f.downRate, f.rate), f.downDelay, pick(f.downJit, f.jitter), pick(f.downLoss, f.loss)},
	} {
		var err error
		if d.rate != "" {
			flag := "--rate"
			if (d.name == "up" && f.upRate != "") || (d.name == "down" && f.downRate != "") {
				flag = "--" + d.name + "-rate"
			}
			if d.link.RateBitsPerSec, err = lab.ParseRate(flag, d.rate); err != nil {
				return p, err
			}
		}
		if d.delay != "" {
			if d.link.Delay, err = lab.ParseTime("--"+d.name+"-delay", d.delay); err != nil {
				return p, err
			}
		} else if f.rtt != "" {
			rtt, err := lab.ParseTime("--rtt", f.rtt)
			if err != nil {
				return p, err
			}
			d.link.Delay = rtt / 2
		}
		if d.jitter != "" {
			if d.link.Jitter, err = lab.ParseTime("--jitter", d.jitter); err != nil {
				return p, err
			}
		}
		if d.loss != "" {
			if d.link.LossPercent, err = lab.ParsePercent("--loss", d.loss); err != nil {
				return p, err
			}
		}
	}
	return p, p.Validate()
}
