// Package shellquote writes commands that a user can paste into a POSIX
// shell (sh, bash, zsh) and get back exactly the arguments that were meant:
// the one quoting rule for every command ovpnperf prints for people to run
// (chmod lines, `lab run --variant …`, the command line of a report).
package shellquote

import "strings"

// special are the characters after which a shell word needs quotes: word
// splitting, quoting, expansion, globbing, redirection and control
// operators, comments and home-directory expansion.
const special = " \t\n'\"\\$;&|<>*?()[]{}!#~`"

// Arg returns s as one shell word: unchanged when it holds nothing a
// shell would interpret, else in single quotes, with each single quote
// written as the four characters ' \ ' ' (close, escaped quote, reopen).
func Arg(s string) string {
	if s != "" && !strings.ContainsAny(s, special) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each argument and joins them with spaces.
func Join(args ...string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = Arg(a)
	}
	return strings.Join(out, " ")
}
