package measure

// Column is a command-specific column of the text table (internal/ui): a figure a recipe
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
