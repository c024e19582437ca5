package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/syncbuf"
)

// measure interrupted after its first sample prints the rows it never
// sampled as invalid, with the reason, not as "ok" (they were), and ends
// with status 130. A real tunnel and iperf3 server in a lab; SIGINT to
// the binary (ip netns exec runs it in place).
func TestMeasureInterrupted(t *testing.T) {
	// It judges the exit status and the rows' table, not a rate, and its
	// lab is its own: it overlaps the other tests that judge none.
	t.Parallel()
	b := newMeasureBench(t, labpath.Path{}, true, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := b.lab.Command(ctx, lab.Client, binary, "measure", lab.ServerV4().String(), "--tunnel", b.tun.ServerAddr.String(),
		"--time", "2s", "--omit", "0s", "--repeat", "2")
	var so bytes.Buffer
	var se syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The progress line of the second sample: the first is done.
	for !strings.Contains(se.String(), "[2/") {
		select {
		case err := <-done:
			t.Fatalf("ended before the second sample: %v\n%s", err, se.String())
		case <-ctx.Done():
			t.Fatalf("no second sample after 3 minutes:\n%s", se.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := <-done
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("after SIGINT: %v, want exit 130\n%s", err, se.String())
	}
	var tunnelRows int
	for _, line := range strings.Split(so.String(), "\n") {
		if !strings.Contains(line, " tunnel ") {
			continue
		}
		tunnelRows++
		if !strings.Contains(line, "INVALID: no sample") || strings.Contains(line, " ok ") {
			t.Errorf("a tunnel row the run never sampled: %s", line)
		}
	}
	if tunnelRows != 2 {
		t.Errorf("%d tunnel rows in the table, want 2:\n%s", tunnelRows, so.String())
	}
}
