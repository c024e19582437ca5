package pps

import (
	"errors"
	"syscall"
)

// isTransient reports errors of a UDP socket that concern one earlier
// datagram (an ICMP error queued on the socket, a full buffer), after which
// the socket keeps working.
func isTransient(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.ENOBUFS) ||
		errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EMSGSIZE)
}
