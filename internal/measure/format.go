package measure

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// FormatMbps formats a rate in bits per second as Mbit/s with three
// significant digits where they mean something: "0.953", "47.3", "912",
// "2350". NaN and ±Inf print as "-".
func FormatMbps(bps float64) string {
	if math.IsNaN(bps) || math.IsInf(bps, 0) {
		return "-"
	}
	m := bps / 1e6
	switch a := math.Abs(m); {
	case a == 0:
		return "0"
	case a < 1:
		return fmt.Sprintf("%.3f", m)
	case a < 10:
		return fmt.Sprintf("%.2f", m)
	case a < 100:
		return fmt.Sprintf("%.1f", m)
	default:
		return fmt.Sprintf("%.0f", m)
	}
}

// FormatRate is FormatMbps with its unit: "47.3 Mbit/s".
func FormatRate(bps float64) string { return FormatMbps(bps) + " Mbit/s" }

// FormatMbpsSpread formats a median with its range in Mbit/s:
// "47.3 (46.1–48.0)"; a single sample prints alone.
func FormatMbpsSpread(s verdict.Spread) string {
	if s.N == 0 {
		return "-"
	}
	if s.N == 1 || s.Min == s.Max {
		return FormatMbps(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", FormatMbps(s.Median), FormatMbps(s.Min), FormatMbps(s.Max))
}

// FormatRatio formats a ratio to a baseline: "0.96"; 0 prints as "-".
func FormatRatio(r float64) string {
	if r == 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

// FormatCPUPerGB formats CPU-seconds per GB by side, the openvpn sides
// first: "server 1.31 client 1.20 iperf3 0.42".
func FormatCPUPerGB(m map[string]float64) string {
	if len(m) == 0 {
		return "-"
	}
	rank := func(k string) int {
		switch k {
		case "server":
			return 0
		case "client":
			return 1
		}
		return 2
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, rj := rank(keys[i]), rank(keys[j])
		if ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + formatSeconds(m[k])
	}
	return strings.Join(parts, " ")
}

func formatSeconds(s float64) string {
	switch a := math.Abs(s); {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return "-"
	case a >= 100:
		return fmt.Sprintf("%.0f", s)
	case a >= 10:
		return fmt.Sprintf("%.1f", s)
	default:
		return fmt.Sprintf("%.2f", s)
	}
}
