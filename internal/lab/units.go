package lab

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Limits on what a lab accepts.
const (
	MaxRTT     = 10 * time.Second
	MinMTUv4   = 576
	MinMTUv6   = 1280
	MaxMTU     = 65535
	maxNameLen = 20
	// MaxNameLen is the longest lab name (namespace names carry it).
	MaxNameLen  = maxNameLen
	maxRateBits = 100e9
	// MaxQueueBytes bounds a rate limiter's queue: tbf takes a 32-bit
	// byte count, and a gigabyte already holds a second at 8 Gbit/s.
	MaxQueueBytes = 1 << 30
)

var rateRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)$`)

// rateUnits are tc's rate units (tc(8) "RATES"): bit units count bits, bps
// units count bytes; k/m/g/t are powers of 1000, ki/mi/gi/ti of 1024.
var rateUnits = map[string]float64{
	"": 1, "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
	"kibit": 1 << 10, "mibit": 1 << 20, "gibit": 1 << 30, "tibit": 1 << 40,
	"bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
	"kibps": 8 << 10, "mibps": 8 << 20, "gibps": 8 << 30, "tibps": 8 << 40,
}

// ParseRate parses a rate as tc writes it ("15mbit", "100kbit", "1gbit",
// "2mbps" = 2 megabytes/s) into bits per second. flag names the option in
// errors.
func ParseRate(flag, s string) (uint64, error) {
	m := rateRe.FindStringSubmatch(strings.TrimSpace(s))
	form := "a positive rate as tc writes it, e.g. 15mbit, 512kbit, 1gbit"
	if m == nil {
		return 0, usage.Errorf("%s %q: not a rate; want %s", flag, s, form)
	}
	mult, ok := rateUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, usage.Errorf("%s %q: unknown unit %q; want %s", flag, s, m[2], form)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, usage.Errorf("%s %q: not a rate; want %s", flag, s, form)
	}
	bits := v * mult
	if bits < 8000 {
		return 0, usage.Errorf("%s %q: rate must be at least 8kbit (omit the flag for an unshaped link)", flag, s)
	}
	if bits > maxRateBits {
		return 0, usage.Errorf("%s %q: rate above 100gbit", flag, s)
	}
	return uint64(math.Round(bits)), nil
}

var timeRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([a-z]*)$`)

var timeUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "us": time.Microsecond, "usec": time.Microsecond,
	"ms": time.Millisecond, "msec": time.Millisecond, "s": time.Second, "sec": time.Second,
}

// ParseTime parses a delay or jitter ("150ms", "1.5s", "800us", "0").
func ParseTime(flag, s string) (time.Duration, error) {
	form := "a duration with a unit, e.g. 150ms, 1.5s, 800us"
	t := strings.TrimSpace(strings.ToLower(s))
	if strings.HasPrefix(t, "-") {
		return 0, usage.Errorf("%s %q: must not be negative; want %s", flag, s, form)
	}
	if t == "0" {
		return 0, nil
	}
	m := timeRe.FindStringSubmatch(t)
	if m == nil {
		return 0, usage.Errorf("%s %q: not a duration; want %s", flag, s, form)
	}
	unit, ok := timeUnits[m[2]]
	if !ok {
		return 0, usage.Errorf("%s %q: unknown or missing unit; want %s", flag, s, form)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, usage.Errorf("%s %q: not a duration; want %s", flag, s, form)
	}
	// Compare before converting: a huge value overflows time.Duration
	// and would come out negative.
	if v*float64(unit) > float64(MaxRTT) {
		return 0, usage.Errorf("%s %q: over the 10s limit; want %s", flag, s, form)
	}
	d := time.Duration(v * float64(unit))
	if v > 0 && d == 0 {
		return 0, usage.Errorf("%s %q: below one nanosecond; want 0 or %s", flag, s, form)
	}
	return d, nil
}

// ParsePercent parses a loss rate ("0.5%", "10%", "3").
func ParsePercent(flag, s string) (float64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, usage.Errorf("%s %q: not a percentage; want e.g. 0.5%% or 10%%", flag, s)
	}
	if v < 0 {
		return 0, usage.Errorf("%s %q: must not be negative", flag, s)
	}
	if v > 100 {
		return 0, usage.Errorf("%s %q: over 100%%", flag, s)
	}
	return v, nil
}

var nameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// ValidateName checks a lab name: lower-case letters, digits and dashes, at
// most 20 characters, so that "ovpnperf-NAME-client" stays a readable
// namespace name.
func ValidateName(name string) error { return CheckName("--name", name) }

// CheckName is ValidateName for a name given as what (a flag, or "lab name"
// for a positional argument), so the error names what the user typed.
func CheckName(what, name string) error {
	if len(name) > maxNameLen || !nameRe.MatchString(name) {
		return usage.Errorf("%s %q: want 1–%d lower-case letters, digits or dashes, starting with a letter or digit", what, name, maxNameLen)
	}
	return nil
}

// QueueBytesFor returns the bottleneck buffer of a rate limiter at
// rateBits: the configured size, or one bandwidth-delay product of the
// whole round trip (at least 5 ms at the rate and 64 KiB), which lets a
// single TCP flow fill the link as it would fill a well-buffered real one.
// clamped is true when that product exceeded MaxQueueBytes and was cut to
// it, rather than wrapping around tbf's 32-bit limit into a tiny queue.
func (p Path) QueueBytesFor(rateBits uint64) (bytes uint32, clamped bool) {
	if p.QueueBytes > 0 {
		return uint32(min(p.QueueBytes, MaxQueueBytes)), p.QueueBytes > MaxQueueBytes
	}
	rtt := p.Up.Delay + p.Down.Delay
	bdp := float64(rateBits) / 8 * rtt.Seconds()
	// The floor: 5 ms at the rate, at least 64 KiB. Veth hands the limiter
	// 64 KiB GSO aggregates, and a queue that holds only one of them cuts
	// TCP short (docs/measurements.md#the-rate-limiters-queue-floor).
	q := max(bdp, float64(rateBits)/8*0.005, 64<<10)
	if q > MaxQueueBytes {
		return MaxQueueBytes, true
	}
	return uint32(q), false
}

// MinQueueBytes is the smallest --queue-bytes a path accepts: two
// full-size frames (MTU plus Ethernet header), since tbf drops every packet
// larger than its queue and a one-packet queue drops all but the first of
// every burst.
func (p Path) MinQueueBytes() int { return 2 * (p.EffectiveMTU() + 14) }

// Validate checks a path's settings and returns a usage error naming the
// offending setting.
func (p Path) Validate() error {
	for _, d := range []struct {
		dir string
		l   Link
	}{{"up", p.Up}, {"down", p.Down}} {
		if d.l.Delay < 0 || d.l.Jitter < 0 {
			return usage.Errorf("--%s-delay/--%s-jitter: must not be negative", d.dir, d.dir)
		}
		if d.l.Jitter > d.l.Delay && d.l.Jitter > 0 {
			return usage.Errorf("--%s-jitter %v: larger than the delay %v it varies", d.dir, d.l.Jitter, d.l.Delay)
		}
		if d.l.LossPercent < 0 || d.l.LossPercent > 100 {
			return usage.Errorf("--%s-loss %v%%: want 0–100%%", d.dir, d.l.LossPercent)
		}
	}
	if p.Up.Delay+p.Down.Delay > MaxRTT {
		return usage.Errorf("--up-delay %v + --down-delay %v: round trip over the 10s limit", p.Up.Delay, p.Down.Delay)
	}
	if p.MTU != 0 {
		switch {
		case p.MTU < MinMTUv4:
			return usage.Errorf("--mtu %d: below %d, the IPv4 minimum", p.MTU, MinMTUv4)
		case p.MTU < MinMTUv6 && !p.NoIPv6:
			return usage.Errorf("--mtu %d: below %d, the IPv6 minimum; add --no-ipv6 for an IPv4-only lab", p.MTU, MinMTUv6)
		case p.MTU > MaxMTU:
			return usage.Errorf("--mtu %d: above %d", p.MTU, MaxMTU)
		}
	}
	if p.LateTolerance < 0 {
		return usage.Errorf("late tolerance %v: must not be negative", p.LateTolerance)
	}
	if err := CheckEmulatorName(p.Emulator); err != nil {
		return err
	}
	switch {
	case p.QueueBytes < 0:
		return usage.Errorf("--queue-bytes %d: must not be negative", p.QueueBytes)
	case p.QueueBytes > MaxQueueBytes:
		return usage.Errorf("--queue-bytes %d: above %d (1 GiB); want %d–%d bytes", p.QueueBytes, MaxQueueBytes, p.MinQueueBytes(), MaxQueueBytes)
	case p.QueueBytes > 0 && p.QueueBytes < p.MinQueueBytes():
		return usage.Errorf("--queue-bytes %d: below two full-size frames, every larger packet would be dropped; want %d–%d bytes", p.QueueBytes, p.MinQueueBytes(), MaxQueueBytes)
	}
	return nil
}

// String describes a rate the way tc prints it.
func FormatRate(bits uint64) string {
	switch {
	case bits == 0:
		return "unshaped"
	case bits%1e9 == 0:
		return fmt.Sprintf("%dgbit", bits/1e9)
	case bits%1e6 == 0:
		return fmt.Sprintf("%dmbit", bits/1e6)
	case bits%1e3 == 0:
		return fmt.Sprintf("%dkbit", bits/1e3)
	}
	return fmt.Sprintf("%dbit", bits)
}

// RTT is the round trip the path adds with empty queues: both directions'
// delays.
func (p Path) RTT() time.Duration { return p.Up.Delay + p.Down.Delay }

// LoadedRoundTrip is the round trip one flow sees once it fills its
// bottleneck: the delays and jitter of both directions and the drain time
// of the fuller of the two queues (a flow's data fills one direction's
// queue; its acknowledgements leave the other nearly empty).
func (p Path) LoadedRoundTrip() time.Duration {
	var q time.Duration
	for _, l := range []Link{p.Up, p.Down} {
		if l.RateBitsPerSec > 0 {
			b, _ := p.QueueBytesFor(l.RateBitsPerSec)
			q = max(q, time.Duration(float64(b)*8/float64(l.RateBitsPerSec)*float64(time.Second)))
		}
	}
	return p.RTT() + p.Up.Jitter + p.Down.Jitter + q
}

// MaxRoundTrip is the longest round trip the path gives a packet: both
// directions' delays, their jitter, and the time each rate limiter's queue
// takes to drain when full (QueueBytesFor at the direction's rate). A
// message sent after a flow of data arrives up to this much later than
// with an idle path; iperf3's end-of-test message is one.
func (p Path) MaxRoundTrip() time.Duration {
	d := p.RTT() + p.Up.Jitter + p.Down.Jitter
	for _, l := range []Link{p.Up, p.Down} {
		if l.RateBitsPerSec > 0 {
			q, _ := p.QueueBytesFor(l.RateBitsPerSec)
			d += time.Duration(float64(q) * 8 / float64(l.RateBitsPerSec) * float64(time.Second))
		}
	}
	return d
}
