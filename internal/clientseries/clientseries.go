// Package clientseries bounds the per-client series of a metrics endpoint.
// OpenVPN lists one row per connected client; a scrape that turned each row
// into series as it is would fail on two rows with the same common name
// (duplicate-cn, or clients not yet authenticated, which OpenVPN names
// UNDEF) and would grow with every client. Here rows with the same group
// and name are summed into one, and only the busiest Max keys are kept; the
// caller exports how many were left out.
package clientseries

import (
	"sort"
)

// Undef is the name OpenVPN gives a client without a common name yet; an
// empty name is counted under it too (an empty label value is no label in
// Prometheus).
const Undef = "UNDEF"

// The cap on the keys a scrape exports, the same for the exporter's
// --max-clients and cluster serve's --per-client-max.
const (
	// DefaultMax keeps the series of a scrape in the hundreds.
	DefaultMax = 100
	// LargestMax is the largest cap a user may set: beyond it a scrape
	// would carry more series than a Prometheus target should.
	LargestMax = 100000
)

// Row is one client row: Group is what the series are per (an instance, a
// process), Name its common name.
type Row struct {
	Group, Name    string
	Received, Sent float64
}

// Result is what to export.
type Result struct {
	// Rows has one row per (Group, Name), the busiest first (received +
	// sent), ties by group and name.
	Rows []Row
	// Dropped counts the (Group, Name) keys left out by the cap.
	Dropped int
}

// Aggregate sums rows with the same (Group, Name) and keeps at most max of
// them (max ≤ 0 keeps none).
func Aggregate(rows []Row, max int) Result {
	type key struct{ g, n string }
	sum := map[key]*Row{}
	var order []*Row
	for _, r := range rows {
		if r.Name == "" {
			r.Name = Undef
		}
		k := key{r.Group, r.Name}
		if s, ok := sum[k]; ok {
			s.Received += r.Received
			s.Sent += r.Sent
			continue
		}
		c := r
		sum[k] = &c
		order = append(order, &c)
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if ta, tb := a.Received+a.Sent, b.Received+b.Sent; ta != tb {
			return ta > tb
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Name < b.Name
	})
	if max < 0 {
		max = 0
	}
	var res Result
	for i, r := range order {
		if i >= max {
			res.Dropped = len(order) - max
			break
		}
		res.Rows = append(res.Rows, *r)
	}
	return res
}
