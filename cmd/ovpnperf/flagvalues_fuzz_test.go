package main

import (
	"math"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// checkFlagError holds a flag parser to the contract for bad input: a
// usage error, one line, naming the flag.
func checkFlagError(t *testing.T, flag, in string, err error) {
	t.Helper()
	if bad := usage.CheckFlagError(flag, err); bad != nil {
		t.Fatalf("%q: %v", in, bad)
	}
}

func FuzzParsePPS(f *testing.F) {
	for _, s := range []string{"0", "1000", "100k", "1.5M", "20000pps", "2.5K", "0.4", "1e-3", "", "-1", "NaN", "Inf", "2e9", "1/s", "0.5k", "0k", "0e5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parsePPS("-b/--rate", s)
		if err != nil {
			checkFlagError(t, "-b/--rate", s, err)
			return
		}
		if v > 1e9 {
			t.Fatalf("%q accepted as %d pps, above 1e9", s, v)
		}
		if v == 0 {
			// 0 means "as fast as possible": only a typed zero may mean it.
			m := strings.TrimSpace(s)
			m = strings.TrimSuffix(strings.TrimSuffix(m, "pps"), "/s")
			m = strings.TrimRight(m, "kKM")
			if x, err := strconv.ParseFloat(m, 64); err != nil || x != 0 {
				t.Fatalf("%q became 0 (as fast as possible)", s)
			}
		}
	})
}

func FuzzParseInt(f *testing.F) {
	f.Add("1500", int64(576), int64(65535))
	f.Add("abc", int64(576), int64(65535))
	f.Add("4294967396", int64(1), int64(1<<30))
	f.Add("99999999999999999999", int64(0), int64(math.MaxInt64))
	f.Add("", int64(1), int64(50))
	f.Add(" -1 ", int64(1), int64(50))
	f.Add("+5", int64(1), int64(50))
	f.Fuzz(func(t *testing.T, s string, lo, hi int64) {
		n, err := parseInt("--queue-bytes", s, lo, hi)
		if err != nil {
			checkFlagError(t, "--queue-bytes", s, err)
			return
		}
		if n < lo || n > hi {
			t.Fatalf("%q accepted as %d outside %d–%d", s, n, lo, hi)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"2s", "5", "", "0", "1.5s", "300s", "301s", "-1s", "1h", "9999999999999h", "1ms", "0.5s", "1e3s", "NaN"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, whole bool) {
		lo, hi := time.Second, 300*time.Second
		d, err := parseDuration("--time", s, lo, hi, whole)
		if err != nil {
			checkFlagError(t, "--time", s, err)
			return
		}
		if d < lo || d > hi || (whole && d%time.Second != 0) {
			t.Fatalf("%q accepted as %v", s, d)
		}
	})
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "0.0.0.0", "255.255.255.255", "224.0.0.1", "999.1.1.1", "1.2.3", "::", "ff02::1",
		"[2001:db8::1]", "::ffff:0.0.0.0", "vpn.example.net", "", "a b", "1.2.3.4.5", "0x7f.1", "fe80::1%eth0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, literal, err := parseTarget("HOST", s)
		if err != nil {
			checkFlagError(t, "HOST", s, err)
			return
		}
		if literal {
			if a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || a.Is4In6() {
				t.Fatalf("%q accepted as probe target %v", s, a)
			}
			return
		}
		if looksNumeric(strings.Trim(s, "[]")) {
			t.Fatalf("%q, digits and dots but no IPv4 address, would be looked up as a name", s)
		}
	})
}

func FuzzIntList(f *testing.F) {
	for _, s := range []string{"256,1024", "", ",", "8", "16,65536", "x", "1,,2", " 256 , 1024 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs := newFlagSetForFuzz()
		var dst []int
		intListFlag(fs, &dst, "sizes", nil, 16, 65536, "")
		err := fs.Set("sizes", s)
		if err != nil {
			checkFlagError(t, "--sizes", s, flagError(err))
			return
		}
		if len(dst) == 0 {
			t.Fatalf("%q accepted as an empty list", s)
		}
		for _, n := range dst {
			if n < 16 || n > 65536 {
				t.Fatalf("%q accepted with %d", s, n)
			}
		}
	})
}

func newFlagSetForFuzz() *pflag.FlagSet { return pflag.NewFlagSet("fuzz", pflag.ContinueOnError) }
