package lab

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Limits on what a lab accepts.
const (
	maxNameLen = 20
	// MaxNameLen is the longest lab name (namespace names carry it).
	MaxNameLen  = maxNameLen
	maxRateBits = 100e9
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
	if v*float64(unit) > float64(labpath.MaxRTT) {
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
