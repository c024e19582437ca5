package pps

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// batchConn reads and writes many datagrams per system call; on Linux the
// x/net packet conns use recvmmsg and sendmmsg.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// batchLen is the number of datagrams per receiving system call.
const batchLen = 64

// sendBatchLen is the most probes per sendmmsg. Sending is what bounds the
// generator (the kernel forwards each probe through a lab's namespaces in
// the sender's system call), so fewer, larger calls send faster
// (docs/measurements.md#the-pps-sender-one-os-thread-256-probes-per-call).
// The receive side keeps batchLen: its buffers are per message.
const sendBatchLen = 256

func newBatchConn(c *net.UDPConn) batchConn {
	if la, ok := c.LocalAddr().(*net.UDPAddr); ok && la.IP.To4() == nil {
		return ipv6.NewPacketConn(c)
	}
	return ipv4.NewPacketConn(c)
}

func newMessages(n, size int) []ipv4.Message {
	ms := make([]ipv4.Message, n)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, size)}
	}
	return ms
}

// writeAll writes every message, retrying after partial batches.
func writeAll(c batchConn, ms []ipv4.Message) (int, error) {
	done := 0
	for done < len(ms) {
		n, err := c.WriteBatch(ms[done:], 0)
		done += max(n, 0)
		if err != nil {
			return done, err
		}
		if n == 0 {
			break
		}
	}
	return done, nil
}

// reusePort sets SO_REUSEPORT, so that several sockets of this process
// share one port and the kernel spreads flows over them by address hash.
func reusePort(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// setBuffers asks for larger socket buffers so that a burst of a batch per
// flow does not overflow them; the kernel caps the values at
// net.core.{r,w}mem_max, which is fine.
func setBuffers(c *net.UDPConn, bytes int) {
	_ = c.SetReadBuffer(bytes)
	_ = c.SetWriteBuffer(bytes)
}

// cpuTime returns the user and system CPU time of this process.
// Equivalent to: getrusage(RUSAGE_SELF).
func cpuTime() (user, system time.Duration) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
