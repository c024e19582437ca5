package capture

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// Tcpdump is a running capture.
type Tcpdump struct {
	cmd  *exec.Cmd
	File string
	done chan struct{}
	err  error
	mu   sync.Mutex
	log  bytes.Buffer
}

// lockedWriter lets tcpdump's stderr be read while it runs.
type lockedWriter struct{ t *Tcpdump }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	return w.t.log.Write(p)
}

func (t *Tcpdump) output() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(t.log.String())
}

// Start captures the first 128 bytes of every packet on dev that matches
// filter (a pcap-filter expression) into out, and returns once tcpdump
// listens. tcpdump writes to its standard output, which is out: it opens
// no file by name, so it follows no link and changes no file's owner
// (it drops root for its own user); the caller makes out where it chooses
// (realnet: in a private directory). Immediate mode hands each packet to
// tcpdump at once: without it libpcap holds packets until a block fills,
// and a capture of a few seconds may end up empty. Stop ends it.
//
// Equivalent to: tcpdump -i DEV -n -s 128 --immediate-mode -U -w - FILTER >FILE
func Start(ctx context.Context, dev string, out *os.File, filter string) (*Tcpdump, error) {
	if err := runner.Require("tcpdump"); err != nil {
		return nil, err
	}
	argv := append([]string{"tcpdump", "-i", dev, "-n", "-s", "128", "--immediate-mode", "-U", "-w", "-"}, strings.Fields(filter)...)
	t := &Tcpdump{File: out.Name(), done: make(chan struct{})}
	// Not bound to ctx: Stop ends it with SIGTERM so that it flushes.
	t.cmd = runner.Command(context.Background(), argv...)
	t.cmd.Stdout = out
	t.cmd.Stderr = lockedWriter{t}
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("running %q: %w", strings.Join(argv, " "), err)
	}
	go func() { t.err = t.cmd.Wait(); close(t.done) }()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(t.output(), "listening on") {
		select {
		case <-t.done:
			return nil, fmt.Errorf("running %q: tcpdump exited: %s (capturing needs root or CAP_NET_RAW)", strings.Join(argv, " "), t.output())
		case <-deadline.C:
			t.Stop()
			return nil, fmt.Errorf("running %q: tcpdump did not start listening within 10 s: %s", strings.Join(argv, " "), t.output())
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	return t, nil
}

// Stop ends the capture (SIGTERM, then SIGKILL after 5 s) and waits for it.
// tcpdump ends on SIGTERM with status 0; the file written so far (-U:
// packet by packet) is valid either way.
func (t *Tcpdump) Stop() {
	runner.Stop(t.cmd.Process, t.done, 5*time.Second)
}
