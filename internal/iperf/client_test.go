package iperf

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func TestClientArgs(t *testing.T) {
	t.Parallel()
	v4 := netip.MustParseAddr("198.51.100.2")
	v6 := netip.MustParseAddr("2001:db8:5::2")
	for _, tc := range []struct {
		name string
		opts ClientOptions
		want string
	}{
		{"defaults", ClientOptions{Server: v4},
			"iperf3 -c 198.51.100.2 -p 5201 -4 -J -t 10 --connect-timeout 5000 -b 0"},
		{"down v6 parallel", ClientOptions{Server: v6, Port: 5300, Duration: 5 * time.Second, Omit: time.Second, Parallel: 2, Reverse: true},
			"iperf3 -c 2001:db8:5::2 -p 5300 -6 -J -t 5 --connect-timeout 5000 -O 1 -P 2 -R -b 0"},
		{"udp pps", ClientOptions{Server: v4, UDP: true, BitrateBps: 50e6, LengthBytes: 18, Bind: netip.MustParseAddr("192.0.2.2")},
			"iperf3 -c 198.51.100.2 -p 5201 -4 -J -t 10 --connect-timeout 5000 -u -b 50000000 -l 18 -B 192.0.2.2"},
		{"payload mss window extra", ClientOptions{Server: v4, FilePath: "/run/ovpnperf/x/zeros", MSS: 1360, WindowBytes: 65536,
			ConnectTimeout: 2 * time.Second, ExtraArgs: []string{"-C", "cubic"}},
			"iperf3 -c 198.51.100.2 -p 5201 -4 -J -t 10 --connect-timeout 2000 -b 0 -F /run/ovpnperf/x/zeros -M 1360 -w 65536 -C cubic"},
		{"mapped v4", ClientOptions{Server: netip.MustParseAddr("::ffff:198.51.100.2")},
			"iperf3 -c 198.51.100.2 -p 5201 -4 -J -t 10 --connect-timeout 5000 -b 0"},
		{"bytes instead of time", ClientOptions{Server: v4, Bytes: 256 << 20, FilePath: "/tmp/r", Duration: 3 * time.Second},
			"iperf3 -c 198.51.100.2 -p 5201 -4 -J -n 268435456 --connect-timeout 5000 -b 0 -F /tmp/r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv, err := tc.opts.Args()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(argv, " "); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestClientArgsRefused(t *testing.T) {
	t.Parallel()
	v4 := netip.MustParseAddr("198.51.100.2")
	for _, tc := range []struct {
		name  string
		opts  ClientOptions
		usage bool
	}{
		{"no server", ClientOptions{}, false},
		{"fractional duration", ClientOptions{Server: v4, Duration: 1500 * time.Millisecond}, true},
		{"fractional omit", ClientOptions{Server: v4, Omit: 100 * time.Millisecond}, true},
		{"payload with reverse", ClientOptions{Server: v4, Reverse: true, FilePath: "/tmp/p"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.opts.Args()
			if err == nil {
				t.Fatal("no error")
			}
			if usage.Is(err) != tc.usage {
				t.Errorf("usage.Is(%v) = %v", err, !tc.usage)
			}
		})
	}
}

func TestServerArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opts ServerOptions
		want string
	}{
		{ServerOptions{}, "iperf3 -s -p 5201 --forceflush"},
		{ServerOptions{Port: 5300, Bind: netip.MustParseAddr("198.51.100.2"), OneOff: true, FilePath: "/tmp/z"},
			"iperf3 -s -p 5300 --forceflush -B 198.51.100.2 -1 -F /tmp/z"},
	} {
		if got := strings.Join(tc.opts.Args(), " "); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestWritePayload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	z := filepath.Join(dir, "zeros")
	if err := WritePayload(z, PayloadZeros, 3<<20+5); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(z)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 3<<20+5 || bytes.Count(b, []byte{0}) != len(b) {
		t.Errorf("zeros: %d bytes, %d zero", len(b), bytes.Count(b, []byte{0}))
	}
	fi, _ := os.Stat(z)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}

	r := filepath.Join(dir, "random")
	if err := WritePayload(r, PayloadRandom, 1<<20); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(r)
	if len(b) != 1<<20 {
		t.Fatalf("random: %d bytes", len(b))
	}
	// Random bytes: every byte value occurs, none dominates.
	var hist [256]int
	for _, c := range b {
		hist[c]++
	}
	for v, n := range hist {
		if n == 0 || n > 3*len(b)/256 {
			t.Fatalf("byte %d occurs %d times in 1 MiB of random payload", v, n)
		}
	}

	// Rewriting shrinks the file: no stale tail.
	if err := WritePayload(r, PayloadZeros, 10); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(r); fi.Size() != 10 {
		t.Errorf("rewritten size %d", fi.Size())
	}

	if err := WritePayload(filepath.Join(dir, "x"), "text", 10); !usage.Is(err) {
		t.Errorf("unknown kind: %v, want a usage error", err)
	}
}

func TestPayloadSize(t *testing.T) {
	t.Parallel()
	if got := PayloadSize(50e6, 10*time.Second); got != 78125000 {
		t.Errorf("50 Mbit/s × 10 s: %d", got)
	}
	if got := PayloadSize(0, time.Second); got != 1<<20 {
		t.Errorf("minimum: %d", got)
	}
}
