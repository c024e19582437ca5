package lint

import (
	"fmt"
	"github.com/ovpnperf/ovpnperf/internal/outputfile"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// FixSuffix is appended to the config's name for the corrected copy. It
// deliberately does not end in .conf: Debian's openvpn.service starts
// every /etc/openvpn/*.conf, and the copy must not start a second tunnel.
const FixSuffix = ".lint-fixed"

// Fix returns the text of f's top file with the edits of every finding
// that needs no decision applied, and how many findings it applied: a
// finding counts when at least one of its edits went into the copy, not
// when another finding's edit already took its line.
// Every other line (comments, blank lines, inline blocks, order) is kept
// as it was; a changed line is kept above its replacement as a comment
// saying which rule changed it. Edits in included files are not applied
// (lint reports them; fix the included file itself).
func Fix(f *openvpn.ConfigFile, fs []Finding) (string, int) {
	type lineEdit struct {
		rule    string
		delete  bool
		replace []string
		endLine int
	}
	byLine := map[int]lineEdit{}
	var appendLines []string
	seenAppend := map[string]bool{}
	applied := 0
	for _, fd := range fs {
		if fd.Decision || len(fd.Edits) == 0 {
			continue
		}
		used := false
		for _, e := range fd.Edits {
			if e.File != f.Path {
				continue
			}
			switch {
			case len(e.Append) > 0:
				for _, l := range e.Append {
					if !seenAppend[l] {
						seenAppend[l] = true
						appendLines = append(appendLines, l)
						used = true
					}
				}
			case e.Line > 0:
				// The first finding to edit a line takes it; a later
				// edit of the same line is not applied and not counted.
				if _, taken := byLine[e.Line]; taken {
					continue
				}
				byLine[e.Line] = lineEdit{fd.Rule, e.Delete, e.Replace, e.EndLine}
				used = true
			}
		}
		if used {
			applied++
		}
	}
	// New lines go before the first inline block (or at the end), so they
	// are not hidden below pages of key material.
	insertAt := len(f.Lines)
	for _, d := range f.Directives {
		if d.Inline && d.Pos.File == f.Path {
			insertAt = d.Pos.Line - 1
			break
		}
	}
	var b strings.Builder
	eol := "\n"
	writeAppend := func() {
		if len(appendLines) == 0 {
			return
		}
		b.WriteString("# added by ovpnperf lint --fix" + eol)
		for _, l := range appendLines {
			b.WriteString(l + eol)
		}
	}
	skipTo := 0
	for i, l := range f.Lines {
		if i+1 <= skipTo {
			continue
		}
		if i == insertAt {
			writeAppend()
		}
		e, ok := byLine[i+1]
		if !ok {
			b.WriteString(l + "\n")
			continue
		}
		if e.delete && e.endLine > i+1 {
			// An inline block: never copy its text into a comment.
			fmt.Fprintf(&b, "# ovpnperf lint --fix (%s) removed lines %d-%d (an inline block)\n", e.rule, i+1, e.endLine)
			skipTo = e.endLine
			continue
		}
		orig := strings.TrimRight(l, "\r")
		fmt.Fprintf(&b, "# ovpnperf lint --fix (%s) was: %s\n", e.rule, strings.TrimSpace(orig))
		if !e.delete {
			for _, r := range e.replace {
				b.WriteString(r + "\n")
			}
		}
	}
	if insertAt >= len(f.Lines) {
		writeAppend()
	}
	return b.String(), applied
}

// WriteFix writes the corrected copy next to path as path+FixSuffix with
// mode 0600 (the copy holds whatever inline keys the original held) and
// returns its name. It replaces an earlier copy atomically and never
// touches the original.
func WriteFix(path, text string) (string, error) {
	out := path + FixSuffix
	if err := outputfile.WriteBytes(out, 0o600, []byte(text)); err != nil {
		return "", err
	}
	return out, nil
}
