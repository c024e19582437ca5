package realnet

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/iperf"
)

// noServer reads the typed errors of the probe's dial and of iperf.Run,
// not their messages.
func TestNoServer(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{os.NewSyscallError("connect", syscall.ECONNREFUSED), true},
		{fmt.Errorf("probe: %w", os.NewSyscallError("connect", syscall.EHOSTUNREACH)), true},
		{fmt.Errorf("sample: %w", iperf.ErrNotStarted), true},
		{fmt.Errorf("sample: %w", iperf.ErrInconsistent), false},
		{fmt.Errorf("unable to connect to server: Connection refused"), false}, // a sentence is not a kind
	} {
		if got := noServer(tc.err); got != tc.want {
			t.Errorf("noServer(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
