package lab

import (
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	good := map[string]uint64{
		"15mbit": 15e6, "512kbit": 512e3, "1gbit": 1e9, "2mbps": 16e6, "1.5mbit": 1.5e6,
		"100000": 100000, "1mibit": 1 << 20, "10Mbit": 10e6,
	}
	for in, want := range good {
		got, err := ParseRate("--rate", in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "0mbit", "-5mbit", "15furlongs", "fast", "", "1e9", "7bit", "200gbit"} {
		_, err := ParseRate("--rate", in)
		if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), "--rate") {
			t.Errorf("ParseRate(%q): want a usage error naming --rate, got %v", in, err)
		}
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	good := map[string]time.Duration{"150ms": 150 * time.Millisecond, "1.5s": 1500 * time.Millisecond, "800us": 800 * time.Microsecond, "0": 0, "10s": 10 * time.Second}
	for in, want := range good {
		got, err := ParseTime("--rtt", in)
		if err != nil || got != want {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-10ms", "11s", "100", "10 parsecs", "ms", "1h"} {
		if _, err := ParseTime("--rtt", in); err == nil || !usage.Is(err) {
			t.Errorf("ParseTime(%q): want a usage error, got %v", in, err)
		}
	}
}

func TestParsePercent(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]float64{"0.5%": 0.5, "10%": 10, "3": 3, "100%": 100, "0": 0} {
		if got, err := ParsePercent("--loss", in); err != nil || got != want {
			t.Errorf("ParsePercent(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"101%", "-1%", "lots", "NaN"} {
		if _, err := ParsePercent("--loss", in); err == nil || !usage.Is(err) {
			t.Errorf("ParsePercent(%q): want a usage error, got %v", in, err)
		}
	}
}

func TestPathValidate(t *testing.T) {
	t.Parallel()
	bad := map[string]labpath.Path{
		"below 576":          {MTU: 500, NoIPv6: true},
		"below 1280 with v6": {MTU: 1200},
		"above 65535":        {MTU: 70000},
		"rtt over 10s":       {Up: labpath.Link{Delay: 6 * time.Second}, Down: labpath.Link{Delay: 6 * time.Second}},
		"loss over 100":      {Up: labpath.Link{LossPercent: 101}},
		"jitter over delay":  {Down: labpath.Link{Delay: time.Millisecond, Jitter: 2 * time.Millisecond}},
		"negative queue":     {QueueBytes: -1},
	}
	for name, p := range bad {
		if err := p.Validate(); err == nil || !usage.Is(err) {
			t.Errorf("%s: want a usage error, got %v", name, err)
		}
	}
	for name, p := range map[string]labpath.Path{
		"default":        {},
		"ipv4-only 1000": {MTU: 1000, NoIPv6: true},
		"pppoe":          {MTU: 1492, Up: labpath.Link{RateBitsPerSec: 15e6, Delay: 75 * time.Millisecond}},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidateName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"t", "branch-1", "a1b2c3"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", "Upper", "has space", "dot.ted", "a/b", strings.Repeat("x", 21), "new\nline"} {
		if err := ValidateName(bad); err == nil || !usage.Is(err) {
			t.Errorf("%q: want a usage error", bad)
		}
	}
}

func TestQueueSizes(t *testing.T) {
	t.Parallel()
	p := labpath.Path{Up: labpath.Link{RateBitsPerSec: 20e6, Delay: 50 * time.Millisecond}, Down: labpath.Link{Delay: 50 * time.Millisecond}}
	// 20 Mbit/s × 100 ms = 250 000 bytes.
	if got := queueBytes(p, 20e6); got != 250000 {
		t.Errorf("queueBytes = %d, want 250000", got)
	}
	if got := queueBytes(labpath.Path{}, 1e6); got != 64<<10 {
		t.Errorf("queueBytes floor = %d, want 65536", got)
	}
	// A gigabit LAN without delay: 5 ms at the rate.
	if got := queueBytes(labpath.Path{}, 1e9); got != 625000 {
		t.Errorf("queueBytes(1gbit, no delay) = %d, want 625000", got)
	}
	if got := burstBytes(1e9); got != 250000 {
		t.Errorf("burstBytes(1gbit) = %d, want 250000", got)
	}
}

// A default queue (one bandwidth-delay product) that would pass tbf's 32-bit
// limit is clamped to MaxQueueBytes, not wrapped into a tiny queue; a given
// queue must hold two full frames.
func TestQueueBytesClampAndFloor(t *testing.T) {
	t.Parallel()
	big := labpath.Path{Up: labpath.Link{RateBitsPerSec: 100e9, Delay: 5 * time.Second}, Down: labpath.Link{Delay: 5 * time.Second}}
	if q, clamped := big.QueueBytesFor(100e9); q != labpath.MaxQueueBytes || !clamped {
		t.Errorf("100gbit × 10s: queue %d clamped %v, want %d true", q, clamped, labpath.MaxQueueBytes)
	}
	p := labpath.Path{Up: labpath.Link{RateBitsPerSec: 32e9, Delay: 500 * time.Millisecond}, Down: labpath.Link{Delay: 500 * time.Millisecond}}
	if q, clamped := p.QueueBytesFor(32e9); q != labpath.MaxQueueBytes || !clamped {
		t.Errorf("32gbit × 1s: queue %d clamped %v", q, clamped)
	}
	small := labpath.Path{Up: labpath.Link{RateBitsPerSec: 10e6, Delay: 10 * time.Millisecond}}
	if q, clamped := small.QueueBytesFor(10e6); q != 64<<10 || clamped {
		t.Errorf("10mbit × 10ms: queue %d clamped %v, want the 64 KiB floor", q, clamped)
	}
	for _, qb := range []int{1, 3027, labpath.MaxQueueBytes + 1} {
		if err := (labpath.Path{QueueBytes: qb}).Validate(); err == nil || !strings.Contains(err.Error(), "--queue-bytes") {
			t.Errorf("QueueBytes %d: %v", qb, err)
		}
	}
	if err := (labpath.Path{QueueBytes: 3028}).Validate(); err != nil {
		t.Errorf("QueueBytes 3028 (two 1500-byte frames): %v", err)
	}
}
