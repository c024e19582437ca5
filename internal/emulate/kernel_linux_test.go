package emulate

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

var update = flag.Bool("update", false, "rewrite testdata captured from the kernel")

// TestKernelMessages speaks the protocol by hand over a raw socket: the
// bind message this package encodes must be accepted, a ping must arrive as
// a packet message that parsePacket understands, and a batch verdict must
// let it through. With -update the packet message is saved under testdata
// for the tier-1 decoding tests (packet-ipv4-ping.bin, the same without a
// receive stamp, was captured before the emulator turned stamps on).
func TestKernelMessages(t *testing.T) {
	n := newTestNet(t)
	// Only the up direction is queued here; replies pass.
	if _, err := runner.RunIn(context.Background(), n.R, "iptables", "-D", "FORWARD", "-i", "rb", "-j", "NFQUEUE", "--queue-num", "1"); err != nil {
		t.Fatal(err)
	}
	var fd int
	err := netns.Do(n.R, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	tv := unix.NsecToTimeval(int64(3 * time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	recv := func() []byte {
		t.Helper()
		b := make([]byte, 8192)
		// A socket with a receive timeout is not restarted after a signal
		// handler (signal(7)): any signal the process takes (one CI run
		// got EINTR here) must not fail the test.
		k, _, err := unix.Recvfrom(fd, b, 0)
		for err == unix.EINTR {
			k, _, err = unix.Recvfrom(fd, b, 0)
		}
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		return b[:k]
	}
	expectAck := func(seq uint32) {
		t.Helper()
		m, _, err := nextMessage(recv())
		if err != nil || m.Type != nlmsgError {
			t.Fatalf("want an ack, got type %d err %v", m.Type, err)
		}
		errno, s, err := parseError(m.Payload)
		if err != nil || errno != 0 || s != seq {
			t.Fatalf("ack: errno %d seq %d (want %d) err %v", errno, s, seq, err)
		}
	}

	if _, err := unix.Write(fd, appendBind(nil, queueUp, 7, queueParams{CopyRange: copyRange, MaxLen: 128})); err != nil {
		t.Fatal(err)
	}
	expectAck(7)

	// Receive stamps on, as the emulator does: the packet message must
	// carry NFQA_TIMESTAMP.
	if fd := enableRxTimestamps(); fd >= 0 {
		t.Cleanup(func() { unix.Close(fd) })
	} else {
		t.Fatal("could not enable receive timestamps")
	}
	time.Sleep(50 * time.Millisecond) // the kernel switches them on from a work queue
	done := make(chan pingResult, 1)
	go func() {
		out, _ := runner.RunIn(context.Background(), n.A, "ping", "-n", "-q", "-c", "1", "-s", "100", "-W", "3", testAddrB)
		r, _ := parsePing(string(out))
		done <- r
	}()
	raw := recv()
	m, rest, err := nextMessage(raw)
	if err != nil || len(rest) != 0 {
		t.Fatalf("packet datagram: %v, %d bytes left", err, len(rest))
	}
	if m.Type != nfqType(nfqnlMsgPacket) {
		t.Fatalf("message type %#x, want packet", m.Type)
	}
	p, err := parsePacket(m.Payload)
	if err != nil {
		t.Fatal(err)
	}
	// ping -s 100: 8 bytes ICMP header + 20 bytes IPv4 header.
	if p.Queue != queueUp || p.Len != 128 || p.HWProtocol != 0x0800 || p.Hook != 2 /* NF_INET_FORWARD */ {
		t.Errorf("parsed %+v, want queue 0, 128 bytes, IPv4, forward hook", p)
	}
	if d := time.Since(time.Unix(0, p.Timestamp)); d < 0 || d > 5*time.Second {
		t.Errorf("receive stamp %v is %v from now", time.Unix(0, p.Timestamp), d)
	}
	if *update {
		path := filepath.Join("testdata", "packet-ipv4-ping-stamped.bin")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := unix.Write(fd, appendVerdict(nil, queueUp, 8, true, nfAccept, p.ID)); err != nil {
		t.Fatal(err)
	}
	// The reply comes back through the unqueued direction.
	if r := <-done; r.received != 1 {
		t.Errorf("ping did not come back after the batch verdict: %+v", r)
	}
	if _, err := unix.Write(fd, appendUnbind(nil, queueUp, 9)); err != nil {
		t.Fatal(err)
	}
	expectAck(9)
}
