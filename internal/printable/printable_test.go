package printable

import (
	"bytes"
	"testing"
)

func TestString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text, tabs\tand\nnewlines":        "plain text, tabs\tand\nnewlines",
		"\x1b]0;owned\x07title":                  `\x1b]0;owned\atitle`,
		"\x1b[2J\x1b[H":                          `\x1b[2J\x1b[H`,
		"csi \u009b31m":                          `csi \u009b31m`,
		"del \x7f, bell \a, cr \r":               `del \x7f, bell \a, cr \r`,
		"ünïcödé → ok":                           "ünïcödé → ok",
		"exe.\u202efdp":                          `exe.\u202efdp`,
		"\u2066isolate\u2069 \u200e\u200f\u061c": `\u2066isolate\u2069 \u200e\u200f\u061c`,
		"עברית and العربية stay":                 "עברית and العربية stay",
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Line("a\nb\tc\x1b"); got != `a\nb\tc\x1b` {
		t.Errorf("Line: %q", got)
	}
}

// TestWriterSplitRune: a C1 control split across two writes is still
// escaped, and a multi-byte letter split the same way is kept.
func TestWriterSplitRune(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := Writer(&b)
	csi := []byte("\u009b")
	e := []byte("é")
	for _, p := range [][]byte{[]byte("x"), csi[:1], csi[1:], []byte("31m "), e[:1], e[1:], []byte("\x1b\n")} {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.String(), `x\u009b31m é\x1b`+"\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
