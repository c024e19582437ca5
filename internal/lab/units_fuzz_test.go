package lab

import (
	"math"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// checkFlagError holds every parser of a flag value to the contract for bad
// input: a usage error, one line, naming the flag.
func checkFlagError(t *testing.T, flag, in string, err error) {
	t.Helper()
	if bad := usage.CheckFlagError(flag, err); bad != nil {
		t.Fatalf("%q: %v", in, bad)
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"15mbit", "512kbit", "1gbit", "2mbps", "0", "", "8kbit", "7999bit", "100gbit", "101gbit",
		"32gbit", "1e9bit", "99999999999999999999tbit", "1.5Mibit", " 3mbit ", "-1mbit", "NaN", "Inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRate("--up-rate", s)
		if err != nil {
			checkFlagError(t, "--up-rate", s, err)
			return
		}
		if v < 8000 || v > maxRateBits {
			t.Fatalf("%q accepted as %d bit/s, outside 8kbit–100gbit", s, v)
		}
	})
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"150ms", "1.5s", "800us", "0", "", "10s", "10.000001s", "99999999999999999999s", "-1ms",
		"5x", "1e400s", "0.0000001ns", "5", "1msec", "NaNs", "Infs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTime("--down-delay", s)
		if err != nil {
			checkFlagError(t, "--down-delay", s, err)
			return
		}
		if d < 0 || d > labpath.MaxRTT {
			t.Fatalf("%q accepted as %v, outside 0–%v", s, d, labpath.MaxRTT)
		}
	})
}

func FuzzParsePercent(f *testing.F) {
	for _, s := range []string{"0.5%", "10%", "3", "", "%", "200", "-1%", "NaN%", "Inf", "1e2", "100.0000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParsePercent("--up-loss", s)
		if err != nil {
			checkFlagError(t, "--up-loss", s, err)
			return
		}
		if math.IsNaN(v) || v < 0 || v > 100 {
			t.Fatalf("%q accepted as %v%%", s, v)
		}
	})
}

func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"branch", "", "Bad_Name", "a-", "-a", "abcdefghijklmnopqrstu", "x\n", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckName("lab name", s)
		if err != nil {
			checkFlagError(t, "lab name", s, err)
			return
		}
		if len(s) > maxNameLen || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || s[0] == '-' {
			t.Fatalf("%q accepted as a lab name", s)
		}
	})
}
