package measure

import (
	"fmt"
	"math"
	"strconv"
)

// Column is a command-specific column of the text table: a figure a recipe
// keeps in Row.Extra (a packet rate, a loss, an RTT) that the standard
// columns do not show. Columns are presentation only: the figures themselves
// are in Row.Extra, which is the JSON contract.
type Column struct {
	// Header is the column's title.
	Header string
	// Key names the Row.Extra entry shown when Format is nil.
	Key string
	// Format, if set, renders the cell from the whole row (a median with
	// its spread, say); it must not fail on rows that lack its figures.
	Format func(Row) string
}

// cell renders c for row r: Format, or else Extra[Key] ("-" if absent).
func (c Column) cell(r Row) string {
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
