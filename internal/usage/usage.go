// Package usage marks errors that are the user's mistake (a bad flag value, a
// name already taken) as opposed to failures of the environment. The command
// layer prints a usage error as one line and exits with status 2.
package usage

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a mistake in what the user asked for. Its message is one line that
// names what was wrong and the accepted form.
type Error struct {
	msg string
	err error
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the error Wrap marked, if any.
func (e *Error) Unwrap() error { return e.err }

// Wrap marks err as a usage error, keeping it in the chain (errors.Is
// still finds what it wraps). Packages below the commands use it for
// refusals that are always the user's mistake (a FIFO named as a config).
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{msg: err.Error(), err: err}
}

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

// CheckFlagError reports how err breaks the contract every parser of a flag
// value keeps for bad input: a usage error, one line, starting with the flag
// as typed. It returns nil when err keeps it; fuzz targets of every package
// that parses flag values call it.
func CheckFlagError(flag string, err error) error {
	if !Is(err) {
		return fmt.Errorf("error is not a usage error: %v", err)
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, flag) {
		return fmt.Errorf("error %q is not one line starting with %s", msg, flag)
	}
	return nil
}
