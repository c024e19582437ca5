package iperf

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The files under testdata/ were captured from iperf3 3.12 on loopback:
//
//	iperf3 -c 127.0.0.1 -p P -t 1 -J              tcp.json
//	… -R                                           tcp_reverse.json
//	… -P 2                                         tcp_parallel2.json
//	iperf3 -c ::1 -6 …                             tcp_v6.json
//	… -u -b 50M                                    udp.json
//	… -u -b 50M -R                                 udp_reverse.json
//	… -u -b 0 -l 1400                              udp_unlimited.json (receiver loses ~45 %)
//	… -t 2 -F zeros.bin (1 MB file)                tcp_file.json (ends after 1.3 ms)
//	… -t 2 -O 1                                    tcp_omit.json
//	a second client while a test runs              busy.json
//	server killed after 1.2 s of a 3 s test        killed.json
//	no server on the port                          refused.json
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseTCP(t *testing.T) {
	t.Parallel()
	r, err := Parse(readTestdata(t, "tcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != "iperf 3.12" || r.Protocol != "TCP" || r.Streams != 1 || r.Reverse {
		t.Errorf("header: %+v", r)
	}
	if r.Requested != time.Second || r.Omit != 0 || r.BlockBytes != 131072 {
		t.Errorf("test_start: requested %v omit %v blksize %d", r.Requested, r.Omit, r.BlockBytes)
	}
	if r.SentBytes != 4567859200 || r.ReceivedBytes != 4567859200 {
		t.Errorf("bytes: sent %d received %d", r.SentBytes, r.ReceivedBytes)
	}
	if r.ReceivedBitsPerSec != 36531840984.022827 || r.SentBitsPerSec != 36533228827.589516 {
		t.Errorf("bps: sent %v received %v", r.SentBitsPerSec, r.ReceivedBitsPerSec)
	}
	if r.ReceivedDuration != 1000302*time.Microsecond {
		t.Errorf("received duration %v", r.ReceivedDuration)
	}
	if r.Retransmits != 0 {
		t.Errorf("retransmits %d, want 0", r.Retransmits)
	}
	if r.UDP != nil {
		t.Errorf("UDP stats on a TCP test: %+v", r.UDP)
	}
	if r.CPU.HostTotal != 96.542875465127068 || r.CPU.RemoteTotal != 72.843300047085251 {
		t.Errorf("cpu %+v", r.CPU)
	}
	if r.SenderCongestion != "bbr" || r.ReceiverCongestion != "bbr" {
		t.Errorf("congestion %q %q", r.SenderCongestion, r.ReceiverCongestion)
	}
	if len(r.Intervals) != 1 || r.Intervals[0].Bytes != 4567859200 || !r.Intervals[0].Sender || r.Intervals[0].Retransmits != 0 {
		t.Errorf("intervals %+v", r.Intervals)
	}
	if r.Start != time.Unix(1795313518, 0).UTC() {
		t.Errorf("start %v", r.Start)
	}
	if r.Error != "" {
		t.Errorf("error %q", r.Error)
	}
}

func TestParseTCPReverse(t *testing.T) {
	t.Parallel()
	r, err := Parse(readTestdata(t, "tcp_reverse.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Reverse {
		t.Error("Reverse not set")
	}
	// The client received: its intervals are receiver intervals.
	for _, iv := range r.Intervals {
		if iv.Sender {
			t.Errorf("reverse interval marked sender: %+v", iv)
		}
	}
	if r.ReceivedBytes != 4295098368 || r.SentBytes != 4295229440 {
		t.Errorf("bytes: sent %d received %d", r.SentBytes, r.ReceivedBytes)
	}
}

func TestParseParallel(t *testing.T) {
	t.Parallel()
	r, err := Parse(readTestdata(t, "tcp_parallel2.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Streams != 2 {
		t.Errorf("streams %d", r.Streams)
	}
	if r.ReceivedBitsPerSec <= 0 || r.ReceivedBytes == 0 {
		t.Errorf("received %d bytes at %v", r.ReceivedBytes, r.ReceivedBitsPerSec)
	}
}

func TestParseV6(t *testing.T) {
	t.Parallel()
	r, err := Parse(readTestdata(t, "tcp_v6.json"))
	if err != nil || r.ReceivedBytes == 0 {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestParseUDP(t *testing.T) {
	t.Parallel()
	r, err := Parse(readTestdata(t, "udp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Protocol != "UDP" || r.UDP == nil {
		t.Fatalf("protocol %q udp %+v", r.Protocol, r.UDP)
	}
	if r.Retransmits != -1 {
		t.Errorf("retransmits %d on UDP, want -1", r.Retransmits)
	}
	if r.UDP.Packets != 191 || r.UDP.LostPackets != 0 || r.UDP.JitterMs != 0.0033083758639129257 {
		t.Errorf("udp %+v", r.UDP)
	}
	if r.ReceivedBitsPerSec != 50061844.537785716 {
		t.Errorf("received %v", r.ReceivedBitsPerSec)
	}
}

func TestParseUDPLoss(t *testing.T) {
	t.Parallel()
	r, err := Parse(readTestdata(t, "udp_unlimited.json"))
	if err != nil {
		t.Fatal(err)
	}
	// sum_received counts only what arrived: (packets − lost) × 1400.
	if want := uint64(172650-77307) * 1400; r.ReceivedBytes != want {
		t.Errorf("received %d bytes, want %d", r.ReceivedBytes, want)
	}
	if r.SentBytes != 172650*1400 {
		t.Errorf("sent %d", r.SentBytes)
	}
	if r.UDP.LostPackets != 77307 || r.UDP.Packets != 172650 || r.UDP.LostPercent < 44 || r.UDP.LostPercent > 45 {
		t.Errorf("udp %+v", r.UDP)
	}
	if r.ReceivedBitsPerSec >= r.SentBitsPerSec {
		t.Errorf("received %v ≥ sent %v despite loss", r.ReceivedBitsPerSec, r.SentBitsPerSec)
	}
}

func TestParseUDPReverse(t *testing.T) {
	t.Parallel()
	r, err := Parse(readTestdata(t, "udp_reverse.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Reverse || r.UDP == nil || r.ReceivedBytes == 0 {
		t.Errorf("%+v", r)
	}
}

func TestParseOmit(t *testing.T) {
	t.Parallel()
	r, err := Parse(readTestdata(t, "tcp_omit.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Omit != time.Second || r.Requested != 2*time.Second {
		t.Errorf("omit %v requested %v", r.Omit, r.Requested)
	}
	if len(r.Intervals) != 3 || !r.Intervals[0].Omitted || r.Intervals[1].Omitted {
		t.Errorf("intervals %+v", r.Intervals)
	}
	// The totals leave the warm-up out.
	if r.ReceivedDuration < 1900*time.Millisecond || r.ReceivedDuration > 2100*time.Millisecond {
		t.Errorf("received duration %v", r.ReceivedDuration)
	}
}

func TestBytesWithWarmup(t *testing.T) {
	t.Parallel()
	r, err := Parse(readTestdata(t, "tcp_omit.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := r.ReceivedBytes + 4305715200; r.BytesWithWarmup() != want {
		t.Errorf("BytesWithWarmup = %d, want %d", r.BytesWithWarmup(), want)
	}
	r, _ = Parse(readTestdata(t, "tcp.json"))
	if r.BytesWithWarmup() != r.ReceivedBytes {
		t.Errorf("no warm-up: %d != %d", r.BytesWithWarmup(), r.ReceivedBytes)
	}
}

func TestParseFileRanOut(t *testing.T) {
	t.Parallel()
	r, err := Parse(readTestdata(t, "tcp_file.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.ReceivedBytes != 1000000 || r.ReceivedDuration > 10*time.Millisecond {
		t.Errorf("received %d bytes in %v", r.ReceivedBytes, r.ReceivedDuration)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, msg string
		busy      bool
		partial   bool
	}{
		{"refused.json", "unable to connect to server: Connection refused", false, false},
		{"busy.json", "the server is busy running a test. try again later", true, false},
		{"killed.json", "the server has terminated", false, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r, err := Parse(readTestdata(t, tc.file))
			var te *TestError
			if !errors.As(err, &te) || te.Msg != tc.msg {
				t.Fatalf("err %v, want TestError %q", err, tc.msg)
			}
			if r == nil || r.Error != tc.msg {
				t.Fatalf("result %+v", r)
			}
			if IsServerBusy(err) != tc.busy {
				t.Errorf("IsServerBusy = %v", !tc.busy)
			}
			if tc.partial && r.SentBytes == 0 {
				t.Error("partial result lost the sent bytes")
			}
			if tc.partial && r.ReceivedBytes != 0 {
				t.Errorf("received %d after the server died", r.ReceivedBytes)
			}
		})
	}
}

func TestParseNotJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"iperf3: unrecognized option '--bogus'\nUsage: iperf3 [-s|-c host] [options]\n",
		"",
		`{"foo": 1}`,
		readFileString(t, "server_addrinuse.txt"),
	} {
		r, err := Parse([]byte(in))
		if err == nil || r != nil {
			t.Errorf("Parse(%q) = %+v, %v; want an error", in, r, err)
		}
		var te *TestError
		if errors.As(err, &te) {
			t.Errorf("Parse(%q): TestError for text that is not iperf3 JSON", in)
		}
	}
}

func readFileString(t *testing.T, name string) string { return string(readTestdata(t, name)) }

func TestReadyLine(t *testing.T) {
	t.Parallel()
	// The server's banner, captured from `iperf3 -s --forceflush`.
	found := false
	for _, l := range strings.Split(readFileString(t, "server_listening.txt"), "\n") {
		if strings.HasPrefix(l, readyLine) {
			found = true
		}
	}
	if !found {
		t.Errorf("no %q line in the captured banner", readyLine)
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range []string{"tcp.json", "udp.json", "busy.json", "killed.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if r == nil && err == nil {
			t.Fatal("nil result without error")
		}
	})
}

func TestCheckCaptured(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file         string
		inconsistent bool
	}{
		{"tcp.json", false},
		{"tcp_reverse.json", false},
		{"tcp_parallel2.json", false},
		{"tcp_v6.json", false},
		{"udp.json", false},
		{"udp_reverse.json", false},
		{"udp_unlimited.json", false},
		{"tcp_omit.json", false},
		// 1 MB of payload in a 2 s test: over after 1.3 ms.
		{"tcp_file.json", true},
	} {
		r, err := Parse(readTestdata(t, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Check(0, 0); (err != nil) != tc.inconsistent || (err != nil && !errors.Is(err, ErrInconsistent)) {
			t.Errorf("%s: Check() = %v", tc.file, err)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	// Figures seen in the lab (50 Mbit/s limiter, 1 s samples after -O 1,
	// a busy 2-core VM), and variations around the tolerances.
	for _, tc := range []struct {
		name       string
		r          Result
		slack      time.Duration
		rate       uint64
		wantSubstr string
	}{
		{"good", Result{Requested: 2 * time.Second, SentDuration: 2000 * time.Millisecond, ReceivedDuration: 2034 * time.Millisecond,
			SentBitsPerSec: 46.92e6, ReceivedBitsPerSec: 47.73e6}, 0, 0, ""},
		{"late omit timer", Result{Requested: time.Second, SentDuration: 899857 * time.Microsecond, ReceivedDuration: 915539 * time.Microsecond,
			SentBitsPerSec: 52.56e6, ReceivedBitsPerSec: 55.75e6}, 0, 0, "sender measured over 900ms of the 1s"},
		{"long receiver window", Result{Requested: time.Second, SentDuration: time.Second, ReceivedDuration: 1080 * time.Millisecond,
			SentBitsPerSec: 40e6, ReceivedBitsPerSec: 40e6}, 0, 0, "receiver measured over 1.08s"},
		{"backlog across omit", Result{Requested: time.Second, SentDuration: 1040 * time.Millisecond, ReceivedDuration: 960 * time.Millisecond,
			SentBitsPerSec: 43.94e6, ReceivedBitsPerSec: 51.19e6}, 0, 0, "receiver counted 51.19 Mbit/s (0 bytes in 960ms), 16 % above the sender's 43.94"},
		{"receiver 5.3 % above a low sender", Result{Requested: 2 * time.Second, SentDuration: 2 * time.Second, ReceivedDuration: 2 * time.Second,
			SentBitsPerSec: 45.41e6, ReceivedBitsPerSec: 47.83e6}, 0, 0, ""},
		{"receiver 9 % above", Result{Requested: 2 * time.Second, SentDuration: 2 * time.Second, ReceivedDuration: 2 * time.Second,
			SentBitsPerSec: 28.53e6, ReceivedBitsPerSec: 31.19e6}, 0, 0, "receiver counted 31.19"},
		{"ended early", Result{Requested: 2 * time.Second, SentDuration: 233 * time.Microsecond, ReceivedDuration: 2536 * time.Microsecond,
			SentBitsPerSec: 36e9, ReceivedBitsPerSec: 1.5e9}, 0, 0, "ended early"},
		{"fixed size", Result{SentDuration: 5 * time.Millisecond, ReceivedDuration: 6 * time.Millisecond,
			SentBitsPerSec: 10e9, ReceivedBitsPerSec: 9e9}, 0, 0, ""},
		{"nothing sent", Result{Requested: time.Second, SentDuration: time.Second, ReceivedDuration: time.Second}, 0, 0, ""},
		// Seen through a 20 Mbit/s, 200 ms lab path (one-BDP queue, so
		// up to 400 ms of round trip): the end-of-test message arrives
		// a round trip after the sender stopped. The path explains it.
		{"200 ms path, routed", Result{Requested: 2 * time.Second, SentDuration: 2 * time.Second, ReceivedDuration: 2211 * time.Millisecond,
			SentBitsPerSec: 19.1e6, ReceivedBitsPerSec: 18.6e6}, 400 * time.Millisecond, 0, ""},
		{"200 ms path, tunnel", Result{Requested: 2 * time.Second, SentDuration: 2 * time.Second, ReceivedDuration: 2422 * time.Millisecond,
			SentBitsPerSec: 18.7e6, ReceivedBitsPerSec: 18.2e6}, 400 * time.Millisecond, 0, ""},
		{"600 ms path, reverse: the sender's window", Result{Requested: 3 * time.Second, SentDuration: 3612 * time.Millisecond, ReceivedDuration: 3 * time.Second,
			SentBitsPerSec: 9.1e6, ReceivedBitsPerSec: 9.4e6}, 1200 * time.Millisecond, 0, ""},
		// The sender counts what iperf3 wrote into a send buffer of
		// seconds, the receiver over a window up to a round trip later:
		// on a 10 Mbit/s, 600 ms path (1.8 s with full queues) the bytes
		// in flight explain the excess (seen through a tunnel here).
		{"600 ms path, bytes in flight", Result{Requested: 3 * time.Second, SentDuration: 3 * time.Second, ReceivedDuration: 4224 * time.Millisecond,
			SentBytes: 2621440, ReceivedBytes: 4208416, SentBitsPerSec: 6.99e6, ReceivedBitsPerSec: 7.97e6}, 1800 * time.Millisecond, 10e6, ""},
		// The same counts with no rate known, or a receiver faster than
		// the path: refused.
		{"600 ms path, no rate known", Result{Requested: 3 * time.Second, SentDuration: 3 * time.Second, ReceivedDuration: 4224 * time.Millisecond,
			SentBytes: 2621440, ReceivedBytes: 4208416, SentBitsPerSec: 6.99e6, ReceivedBitsPerSec: 7.97e6}, 1800 * time.Millisecond, 0, "14 % above the sender's 6.99"},
		{"200 ms path, receiver above the link", Result{Requested: 2 * time.Second, SentDuration: 2 * time.Second, ReceivedDuration: 2 * time.Second,
			SentBytes: 4712500, ReceivedBytes: 5542500, SentBitsPerSec: 18.85e6, ReceivedBitsPerSec: 22.17e6}, 600 * time.Millisecond, 20e6, "receiver counted 22.17"},
		// Beyond what the path explains: refused, with the figures.
		{"200 ms path, window beyond the round trip", Result{Requested: 2 * time.Second, SentDuration: 2 * time.Second, ReceivedDuration: 2600 * time.Millisecond,
			SentBitsPerSec: 19.1e6, ReceivedBitsPerSec: 18.6e6}, 400 * time.Millisecond, 0, "receiver measured over 2.6s of the 2s asked, longer than the 2.55s allowed (the path's slack for its round trip with full queues, 400ms, plus 7.5 % for timers)"},
		{"short window whatever the path", Result{Requested: 2 * time.Second, SentDuration: 1800 * time.Millisecond, ReceivedDuration: 2 * time.Second,
			SentBitsPerSec: 19.1e6, ReceivedBitsPerSec: 18.6e6}, 400 * time.Millisecond, 0, "sender measured over 1.8s of the 2s asked, shorter than the 1.85s"},
	} {
		rules := map[string]string{
			"late omit timer": RuleWindowShort, "long receiver window": RuleWindowLong, "backlog across omit": RuleReceiverAboveSender,
			"receiver 9 % above": RuleReceiverAboveSender, "ended early": RuleWindowEndedEarly, "600 ms path, no rate known": RuleReceiverAboveSender,
			"200 ms path, receiver above the link": RuleReceiverAboveSender, "200 ms path, window beyond the round trip": RuleWindowLong,
			"short window whatever the path": RuleWindowShort,
		}
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.Check(tc.slack, tc.rate)
			if err != nil && strings.Contains(err.Error(), "busy") {
				t.Errorf("Check() = %v: blames a busy machine it did not measure", err)
			}
			if tc.wantSubstr == "" {
				if err != nil {
					t.Errorf("Check() = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), tc.wantSubstr) {
				t.Errorf("Check() = %v, want ErrInconsistent with %q", err, tc.wantSubstr)
			}
			// The rule broken, as data: the run document's refusal kind.
			var ie *InconsistentError
			if !errors.As(err, &ie) || ie.Rule != rules[tc.name] {
				t.Errorf("Check() = %#v, want rule %q", err, rules[tc.name])
			}
		})
	}
}

// On a user's own path the rate is unknown: the receiver's own rate stands
// for it, and echoes during the sample can widen the slack. The counts are
// from probe and measure on a 10 Mbit/s, 600 ms lab path with a one-BDP
// queue (1.2 s round trip with the queue full); a deep queue behind a short
// idle round trip passes only with the loaded round trip, and a LAN's slack
// keeps the check strict.
func TestCheckRealPath(t *testing.T) {
	t.Parallel()
	far := Result{Requested: 3 * time.Second, SentDuration: 3 * time.Second, ReceivedDuration: 4224 * time.Millisecond,
		SentBytes: 2621440, ReceivedBytes: 4208416, SentBitsPerSec: 6.99e6, ReceivedBitsPerSec: 7.97e6}
	// 2.75 MB above the sender: more than one round trip's data at
	// 10 Mbit/s (1.5 MB), within two.
	probe := Result{Requested: 5 * time.Second, SentDuration: 5 * time.Second, ReceivedDuration: 5619 * time.Millisecond,
		SentBytes: 5242880, ReceivedBytes: 7994112, SentBitsPerSec: 8.39e6, ReceivedBitsPerSec: 11.38e6}
	// Beyond two round trips: 2.5 round trips' data above the sender.
	beyond := probe
	beyond.ReceivedBytes = uint64(float64(probe.SentBytes)*1.08 + 2.5*11.38e6/8*1.2)
	lan := Result{Requested: 2 * time.Second, SentDuration: 2 * time.Second, ReceivedDuration: 2 * time.Second,
		SentBytes: 7131250, ReceivedBytes: 7797500, SentBitsPerSec: 28.53e6, ReceivedBitsPerSec: 31.19e6}
	loaded := func(d time.Duration) func() time.Duration { return func() time.Duration { return d } }
	for _, tc := range []struct {
		name string
		r    Result
		opts ClientOptions
		ok   bool
	}{
		{"600 ms, idle echoes", far, ClientOptions{PathSlack: 1200 * time.Millisecond, RateUnknown: true}, true},
		{"600 ms, probe's sample", probe, ClientOptions{PathSlack: 1201 * time.Millisecond, RateUnknown: true, LoadedRoundTrip: loaded(1199 * time.Millisecond)}, true},
		{"600 ms, beyond two round trips", beyond, ClientOptions{PathSlack: 1201 * time.Millisecond, RateUnknown: true, LoadedRoundTrip: loaded(1199 * time.Millisecond)}, false},
		{"600 ms, rate not left unknown", far, ClientOptions{PathSlack: 1200 * time.Millisecond, LoadedRoundTrip: loaded(1800 * time.Millisecond)}, false},
		{"deep queue, idle echoes only", probe, ClientOptions{PathSlack: 100 * time.Millisecond, RateUnknown: true}, false},
		{"deep queue, loaded echoes", probe, ClientOptions{PathSlack: 100 * time.Millisecond, RateUnknown: true, LoadedRoundTrip: loaded(1199 * time.Millisecond)}, true},
		{"loaded echoes never narrow", far, ClientOptions{PathSlack: 1800 * time.Millisecond, RateUnknown: true, LoadedRoundTrip: loaded(time.Millisecond)}, true},
		{"LAN, 9 % above", lan, ClientOptions{PathSlack: 2 * time.Millisecond, RateUnknown: true, LoadedRoundTrip: loaded(3 * time.Millisecond)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.Check(tc.opts.checkBounds(&tc.r))
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInconsistent)) {
				t.Errorf("Check() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestIdleLog(t *testing.T) {
	t.Parallel()
	// A real server log (iperf3 -s --forceflush on loopback): six tests,
	// then the banner for test #7 and SIGTERM.
	log := readFileString(t, "server_log.txt")
	lines := strings.SplitAfter(log, "\n")
	upTo := func(prefix string, nth int) string {
		seen := 0
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) {
				seen++
				if seen == nth {
					return strings.Join(lines[:i+1], "")
				}
			}
		}
		t.Fatalf("no %d. %q line", nth, prefix)
		return ""
	}
	for _, tc := range []struct {
		name string
		log  string
		idle bool
	}{
		{"nothing yet", "", false},
		{"first banner", upTo(readyLine, 1), true},
		{"first test", upTo(acceptedLine, 1), false},
		{"between tests", upTo(readyLine, 2), true},
		{"third test running", upTo(acceptedLine, 3), false},
		{"after the last test", log, true},
	} {
		if got := idleLog(tc.log); got != tc.idle {
			t.Errorf("%s: idleLog = %v", tc.name, got)
		}
	}
}

func TestRefusedAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file  string
		retry bool
	}{
		{"refused.json", true},
		{"busy.json", true},
		{"killed.json", false}, // data moved: a real failure
		{"tcp.json", false},
	} {
		r, err := Parse(readTestdata(t, tc.file))
		if got := refusedAtStart(r, err); got != tc.retry {
			t.Errorf("%s: refusedAtStart = %v", tc.file, got)
		}
	}
	// The reset seen between tests through a lab.
	reset := &TestError{Msg: "unable to receive control message: Connection reset by peer"}
	if !refusedAtStart(&Result{Error: reset.Msg}, fmt.Errorf("running x: %w", reset)) {
		t.Error("reset control connection not retried")
	}
}

// Run is the one place that tries a test again when it did not start:
// all attempts refused give an error that is ErrNotStarted and keeps
// iperf3's message; a refusal then a result gives the result; a test that
// moved data and failed is not tried again.
func TestRunRetriesOnlyTestsThatDidNotStart(t *testing.T) {
	t.Parallel()
	abs := func(name string) string {
		p, err := filepath.Abs(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name       string
		outputs    []string // per attempt; the last repeats
		attempts   int
		notStarted bool
		ok         bool
	}{
		{"always refused", []string{"refused.json"}, connectAttempts, true, false},
		{"busy, then a result", []string{"busy.json", "tcp.json"}, 2, false, true},
		{"data moved, then failed", []string{"killed.json"}, 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			fake := func(ctx context.Context, argv ...string) *exec.Cmd {
				out := tc.outputs[min(calls, len(tc.outputs)-1)]
				calls++
				return exec.CommandContext(ctx, "sh", "-c", `cat "$1"; ! grep -q '"error"' "$1"`, "sh", abs(out))
			}
			_, err := Run(context.Background(), fake, ClientOptions{Server: netip.MustParseAddr("192.0.2.1"), Duration: 2 * time.Second})
			if calls != tc.attempts {
				t.Errorf("iperf3 started %d times, want %d", calls, tc.attempts)
			}
			if got := errors.Is(err, ErrNotStarted); got != tc.notStarted {
				t.Errorf("errors.Is(err, ErrNotStarted) = %v, want %v (err %v)", got, tc.notStarted, err)
			}
			if tc.ok && err != nil {
				t.Errorf("err = %v, want a result", err)
			}
			if !tc.ok && err == nil {
				t.Error("no error")
			}
		})
	}
}
