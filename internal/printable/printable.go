// Package printable keeps text that came from a user's config or document
// from steering the terminal it is printed on. A config line or a variant
// name may hold escape sequences (set the window title, clear the screen,
// move the cursor over earlier output); every text output of ovpnperf
// prints such characters escaped, as Go writes them in a quoted string
// (\x1b, \u009b), and leaves everything else as it is.
package printable

import (
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// isControl reports whether r steers a terminal or the reader: C0
// controls other than newline and tab, DEL, C1 controls (U+0080–U+009F,
// CSI among them), and the bidirectional formatting characters (U+061C,
// U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which reorder the text
// around them on screen and in a browser (U+202E makes "fdp.exe" read
// "exe.pdf").
func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) ||
		r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// escape is one control character as Go would quote it, without quotes.
func escape(r rune) string {
	q := strconv.QuoteRune(r)
	return q[1 : len(q)-1]
}

// String returns s with control characters escaped; newlines and tabs are
// kept.
func String(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			b.WriteString(escape(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Line is String for text that must stay on one line (an error message):
// newlines and tabs are escaped too.
func Line(s string) string {
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(String(s))
}

// Writer returns a writer that escapes control characters in what is
// written to w (a UTF-8 sequence split across writes is held back until
// it is whole).
func Writer(w io.Writer) io.Writer { return &writer{w: w} }

type writer struct {
	w    io.Writer
	held []byte
}

func (e *writer) Write(p []byte) (int, error) {
	buf := append(e.held, p...)
	n := len(buf)
	// Hold back an incomplete UTF-8 sequence at the end.
	for i := max(0, n-utf8.UTFMax+1); i < n; i++ {
		if utf8.RuneStart(buf[i]) && !utf8.FullRune(buf[i:]) {
			n = i
			break
		}
	}
	out := String(string(buf[:n]))
	e.held = append([]byte(nil), buf[n:]...)
	if _, err := io.WriteString(e.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the writer a Writer writes to, and w itself otherwise:
// for a child process that must get the real file (lab exec), not a
// filter.
func Unwrap(w io.Writer) io.Writer {
	if e, ok := w.(*writer); ok {
		return e.w
	}
	return w
}
