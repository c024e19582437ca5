// Package usage marks errors that are the user's mistake (a bad flag value, a
// name already taken) as opposed to failures of the environment. The command
// layer prints a usage error as one line and exits with status 2.
package usage

import (
	"errors"
	"fmt"
)

// Error is a mistake in what the user asked for. Its message is one line that
// names what was wrong and the accepted form.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// Errorf builds a usage error. Use %q for user-supplied values so that control
// characters are shown escaped rather than printed.
func Errorf(format string, a ...any) error {
	return &Error{msg: fmt.Sprintf(format, a...)}
}

// Is reports whether err (or anything it wraps) is a usage error.
func Is(err error) bool {
	var u *Error
	return errors.As(err, &u)
}
