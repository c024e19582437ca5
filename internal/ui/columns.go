package ui

import (
	"fmt"
	"math"
	"strconv"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// cell renders c for row r: Format, or else Extra[Key] ("-" if absent).
func cell(c measure.Column, r measure.Row) string {
	if c.Format != nil {
		return c.Format(r)
	}
	v, ok := r.Extra[c.Key]
	if !ok {
		return "-"
	}
	return FormatExtra(v)
}

// FormatExtra formats one Row.Extra value for the table: numbers with as
// many decimals as their size calls for ("47000", "12.3", "0.042"), other
// values as fmt prints them.
func FormatExtra(v any) string {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case nil:
		return "-"
	default:
		return fmt.Sprint(v)
	}
	switch a := math.Abs(f); {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return "-"
	case a >= 100 || a == 0:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(f, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(f, 'f', 2, 64)
	}
	return strconv.FormatFloat(f, 'g', 2, 64)
}
