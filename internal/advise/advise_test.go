package advise

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

func has(lines []Line, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l.Directive, prefix) {
			return true
		}
	}
	return false
}

// The four lab paths of the probe → advise → lab run check
// (docs/measurements.md) and what advice must contain on each.
func TestAdvisePaths(t *testing.T) {
	for _, c := range []struct {
		name        string
		in          Input
		want        []string // directive prefixes in the server lines
		notWant     []string
		binding     string
		lo, hi      float64 // bounds of the predicted ceiling, bit/s
		sysctl      bool
		variantHave string
	}{
		{name: "a 20mbit 200ms", in: Input{RateBitsPerSec: 20e6, RTT: 200 * time.Millisecond, PathMTU: 1500, RmemMax: 212992, WmemMax: 212992},
			notWant: []string{"tun-mtu", "mssfix", "sndbuf"},
			binding: "path rate × header efficiency", lo: 17e6, hi: 19e6},
		// Over TCP the kernel autotunes the outer connection's buffers;
		// buffer lines measured no better than the defaults there, and a
		// jumbo tunnel measured faster on every kind of TCP path swept.
		{name: "a over tcp", in: Input{Proto: "tcp", RateBitsPerSec: 20e6, RTT: 200 * time.Millisecond, PathMTU: 1500, RmemMax: 212992, WmemMax: 212992},
			want: []string{"tun-mtu 9000", "mssfix 0"}, notWant: []string{"sndbuf", "rcvbuf", "tcp-nodelay"},
			binding: "path rate × header efficiency", lo: 17e6, hi: 19.5e6, variantHave: "tun-mtu 9000;mssfix 0"},
		{name: "b 100mbit 10ms 1400 blackhole", in: Input{RateBitsPerSec: 100e6, RTT: 10 * time.Millisecond, PathMTU: 1400, Blackhole: true},
			want: []string{"mssfix 1400 mtu", "tun-mtu 1348"}, notWant: []string{"sndbuf", "fragment"},
			binding: "path rate × header efficiency", lo: 85e6, hi: 95e6, variantHave: "mssfix 1400 mtu;tun-mtu 1348"},
		{name: "c LAN", in: Input{RateBitsPerSec: 10e9, RTT: 100 * time.Microsecond, PathMTU: 1500},
			want: []string{"tun-mtu 9000", "mssfix 0", "sndbuf 4194304", "rcvbuf 4194304"}, binding: "packet cost per core", lo: 100e6, hi: 5e9, sysctl: true,
			variantHave: "tun-mtu 9000;mssfix 0;sndbuf 4194304;rcvbuf 4194304"},
		// A jumbo tunnel on a machine whose rmem_max/wmem_max already allow
		// 4 MiB: the buffer lines without sysctl lines.
		{name: "c LAN raised maxima", in: Input{RateBitsPerSec: 10e9, RTT: 100 * time.Microsecond, PathMTU: 1500, RmemMax: 4 << 20, WmemMax: 4 << 20},
			want: []string{"tun-mtu 9000", "sndbuf 4194304", "rcvbuf 4194304"}, binding: "packet cost per core", lo: 100e6, hi: 5e9, variantHave: "rcvbuf 4194304"},
		{name: "d 5mbit 300ms 2% loss", in: Input{RateBitsPerSec: 5e6, RTT: 300 * time.Millisecond, LossPercent: 2, PathMTU: 1500},
			notWant: []string{"tun-mtu", "sndbuf"}, binding: "loss (window/RTT, Mathis)", lo: 0.2e6, hi: 0.6e6},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := Advise(c.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !has(a.Server, w) || !has(a.Client, w) {
					t.Errorf("no %q in server and client lines: %+v", w, a.Server)
				}
			}
			for _, w := range c.notWant {
				if has(a.Server, w) {
					t.Errorf("unexpected %q in %+v", w, a.Server)
				}
			}
			for _, ce := range a.Ceilings {
				if ce.Binding != c.binding || ce.BitsPerSec < c.lo || ce.BitsPerSec > c.hi {
					t.Errorf("%s: ceiling %.2f Mbit/s bound by %q; want %q in [%.1f, %.1f]", ce.Direction, ce.BitsPerSec/1e6, ce.Binding, c.binding, c.lo/1e6, c.hi/1e6)
				}
			}
			if got := len(a.Sysctl) > 0; got != c.sysctl {
				t.Errorf("sysctl lines %v, want some: %v", a.Sysctl, c.sysctl)
			}
			if !strings.Contains(a.Variant, c.variantHave) {
				t.Errorf("variant %q lacks %q", a.Variant, c.variantHave)
			}
			// The variant is what lab run accepts, as it is.
			if _, err := openvpn.ParseVariant(a.Variant); err != nil {
				t.Errorf("lab run would refuse the variant %q: %v", a.Variant, err)
			}
			for _, l := range append(append(a.Server, a.Sysctl...), a.DoNot...) {
				if l.Reason == "" || l.Figure == "" {
					t.Errorf("line without reason or figure: %+v", l)
				}
			}
		})
	}
}

// A buffer above rmem_max is pointless without the sysctl: advise says so
// only when the maximum is too low.
func TestSysctlFollowsRmemMax(t *testing.T) {
	t.Parallel()
	in := Input{RateBitsPerSec: 10e9, RTT: 100 * time.Microsecond, PathMTU: 1500, RmemMax: 8 << 20, WmemMax: 8 << 20}
	a, _ := Advise(in)
	if len(a.Sysctl) != 0 {
		t.Fatalf("rmem_max 8 MiB already allows 4 MiB, got %v", a.Sysctl)
	}
	in.RmemMax = 212992
	a, _ = Advise(in)
	if len(a.Sysctl) != 1 || !strings.HasPrefix(a.Sysctl[0].Directive, "net.core.rmem_max = 4194304") {
		t.Fatalf("want the rmem_max line only, got %v", a.Sysctl)
	}
}

// On a lossy path a measured plain TCP flow, not Mathis's Reno formula,
// bounds the prediction (the lab's 2 % path carried 4.7 Mbit/s of 5).
func TestLossUsesMeasuredFlow(t *testing.T) {
	t.Parallel()
	in := Input{RTT: 300 * time.Millisecond, LossPercent: 3, PathMTU: 1500, TCPGoodputBitsPerSec: 4.7e6}
	a, _ := Advise(in)
	c := a.Ceilings[0]
	if c.Binding != "loss (window/RTT, measured TCP flow)" || c.BitsPerSec < 4.4e6 || c.BitsPerSec > 4.7e6 {
		t.Fatalf("ceiling %+v", c)
	}
	in.TCPGoodputBitsPerSec = 0
	if a, _ = Advise(in); a.Ceilings[0].Binding != "loss (window/RTT, Mathis)" {
		t.Fatalf("without a measured flow: %+v", a.Ceilings[0])
	}
}

func TestDCO(t *testing.T) {
	t.Parallel()
	a, err := Advise(Input{PathMTU: 1400, DCO: true, RateBitsPerSec: 100e6, RTT: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if has(a.Server, "mssfix") || !has(a.Server, "tun-mtu 1348") || !has(a.DoNot, "fragment") {
		t.Fatalf("DCO: want tun-mtu 1348, no mssfix, no fragment: %+v / %+v", a.Server, a.DoNot)
	}
}

func TestTCPTransportAndLoss(t *testing.T) {
	t.Parallel()
	a, _ := Advise(Input{Proto: "tcp", LossPercent: 1, RTT: 50 * time.Millisecond})
	if !has(a.DoNot, "proto tcp") || !has(a.DoNot, "tun-mtu 9000") {
		t.Fatalf("lossy path: want TCP transport and jumbo warnings: %+v", a.DoNot)
	}
}

func TestWindowsNotes(t *testing.T) {
	t.Parallel()
	a, _ := Advise(Input{ClientOS: "windows", RTT: 100 * time.Millisecond})
	all := strings.Join(a.Notes, "\n")
	for _, w := range []string{"mssfix 1500 mtu", "mssfix 1480 mtu", "wintun", "ovpn-dco-win", "Push routes", "5.2 Mbit/s"} {
		if !strings.Contains(all, w) {
			t.Errorf("Windows notes lack %q:\n%s", w, all)
		}
	}
	if b, _ := Advise(Input{}); len(b.Notes) != 0 {
		t.Errorf("Linux client got Windows notes")
	}
}

func TestChaChaWithoutAESNI(t *testing.T) {
	t.Parallel()
	a, _ := Advise(Input{CryptoBytesPerSec: 100e6, ChaChaBytesPerSec: 300e6})
	if a.Cipher != "CHACHA20-POLY1305" || !strings.Contains(a.Variant, "data-ciphers CHACHA20-POLY1305") {
		t.Fatalf("cipher %s variant %s", a.Cipher, a.Variant)
	}
	a, _ = Advise(Input{CryptoBytesPerSec: 3000e6, ChaChaBytesPerSec: 1500e6})
	if a.Cipher != "AES-256-GCM" || has(a.Server, "data-ciphers") {
		t.Fatalf("AES-NI machine: want the default cipher, got %s %+v", a.Cipher, a.Server)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	for _, in := range []Input{
		{RTT: -time.Millisecond},
		{LossPercent: 101},
		{LossPercent: -1},
		{RateBitsPerSec: math.NaN()},
		{PathMTU: 100},
		{Proto: "sctp"},
		{OpenVPN: "2.4"},
		{ClientOS: "plan9"},
		{DCO: true, OpenVPN: "2.5"},
	} {
		_, err := Advise(in)
		var ie *InputError
		if !errors.As(err, &ie) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: want one-line InputError, got %v", in, err)
		}
	}
}

// The packet cost per core is not measured by probe: every prediction says
// that it rests on an assumption, with its source, unless the user gave a
// measured rate; then the term is the user's figure and not marked.
func TestPacketCostIsMarkedAssumed(t *testing.T) {
	t.Parallel()
	lan := Input{RateBitsPerSec: 10e9, RTT: 100 * time.Microsecond, PathMTU: 1500}
	a, _ := Advise(lan)
	c := a.Ceilings[0]
	if c.Binding != "packet cost per core" || !c.BindingAssumed {
		t.Fatalf("LAN: %+v", c)
	}
	var pc Term
	for _, tm := range c.Terms {
		if tm.Name == "packet cost per core" {
			pc = tm
		}
	}
	if !strings.Contains(pc.Assumed, "not measured") || !strings.Contains(pc.Assumed, "45 000") || !strings.Contains(pc.Assumed, "--packet-rate") {
		t.Errorf("packet cost term: %+v", pc)
	}
	if !strings.Contains(a.Server[0].Figure, "assumed") {
		t.Errorf("tun-mtu 9000 rests on the packet cost without saying it is assumed: %+v", a.Server[0])
	}
	// A measured rate replaces the assumption.
	lan.PacketsPerSecPerCore = 2600
	a, _ = Advise(lan)
	for _, tm := range a.Ceilings[0].Terms {
		if tm.Name == "packet cost per core" && (tm.Assumed != "" || !strings.Contains(tm.Figure, "2600 packets/s")) {
			t.Errorf("given rate: %+v", tm)
		}
	}
	if a.Ceilings[0].BindingAssumed {
		t.Errorf("bound by a given rate, marked assumed: %+v", a.Ceilings[0])
	}
	// Path (a): the path rate binds (measured), the packet cost is still
	// listed as assumed.
	a, _ = Advise(Input{RateBitsPerSec: 20e6, RTT: 200 * time.Millisecond, PathMTU: 1500})
	if c := a.Ceilings[0]; c.BindingAssumed || c.Binding != "path rate × header efficiency" {
		t.Errorf("path (a): %+v", c)
	}
}

func undecided(a Advice, setting string) *Undecided {
	for i := range a.Undecided {
		if strings.HasPrefix(a.Undecided[i].Setting, setting) {
			return &a.Undecided[i]
		}
	}
	return nil
}

// Without a rate advise does not know whether the packet cost binds: it
// recommends no jumbo tunnel and says what decides it. The same holds
// without a path MTU. With both, a fast clean path gets it.
func TestJumboNeedsRateAndPathMTU(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		in      Input
		missing string
	}{
		{"no rate", Input{RTT: 100 * time.Microsecond, PathMTU: 1500}, "the path rate"},
		{"no pmtu", Input{RateBitsPerSec: 10e9, RTT: time.Millisecond}, "the path MTU"},
		{"neither", Input{RTT: time.Millisecond}, "the path MTU and the path rate"},
	} {
		a, err := Advise(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if has(a.Server, "tun-mtu") || has(a.Server, "mssfix 0") {
			t.Errorf("%s: jumbo recommended: %+v", c.name, a.Server)
		}
		u := undecided(a, "tun-mtu 9000")
		if u == nil || u.Missing != c.missing || !strings.Contains(u.Measure, "ovpnperf pmtu") || !strings.Contains(u.Changes, "tun-mtu stays 1500") {
			t.Errorf("%s: undecided %+v", c.name, u)
		}
	}
	a, _ := Advise(Input{RateBitsPerSec: 10e9, RTT: time.Millisecond, PathMTU: 1500})
	if !has(a.Server, "tun-mtu 9000") || undecided(a, "tun-mtu 9000") != nil {
		t.Errorf("fast clean path: %+v / %+v", a.Server, a.Undecided)
	}
	// Loss not given: the figure says it was taken as none.
	if !strings.Contains(a.Server[0].Figure, "loss not given") {
		t.Errorf("jumbo figure hides the loss assumption: %s", a.Server[0].Figure)
	}
}

// One rate, RTT and loss describe both directions: one ceiling, not two
// copies of it.
func TestOneCeiling(t *testing.T) {
	t.Parallel()
	a, _ := Advise(Input{RateBitsPerSec: 20e6, RTT: 200 * time.Millisecond, PathMTU: 1500})
	if len(a.Ceilings) != 1 || a.Ceilings[0].Direction != "each direction" {
		t.Fatalf("ceilings %+v", a.Ceilings)
	}
}

// advise --rate 10gbit --rtt 1ms: no line it can add, but the ceiling is a
// twentieth of the line: it says which measurements decide (path MTU for
// a jumbo tunnel, the packet cost), not that the defaults suit.
func TestUndecidedWhenTheCeilingWastesTheLine(t *testing.T) {
	t.Parallel()
	a, _ := Advise(Input{RateBitsPerSec: 10e9, RTT: time.Millisecond})
	if len(a.Server) != 0 {
		t.Fatalf("lines %+v", a.Server)
	}
	if u := undecided(a, "tun-mtu 9000"); u == nil || !strings.Contains(u.Missing, "path MTU") {
		t.Errorf("no jumbo item naming the path MTU: %+v", a.Undecided)
	}
	if u := undecided(a, "the predicted ceiling"); u == nil || !strings.Contains(u.Measure, "--packet-rate") {
		t.Errorf("no packet-cost item: %+v", a.Undecided)
	}
	if u := undecided(a, "mssfix / tun-mtu"); u == nil || !strings.Contains(u.Measure, "ovpnperf pmtu") {
		t.Errorf("no path-MTU item: %+v", a.Undecided)
	}
}

// Over a TCP transport advise claims only what the TCP sweep measured
// (docs/measurements.md#tcp-transport-sweep): a jumbo tunnel on a path not
// known to be lossy, no buffer lines (the kernel autotunes), tcp-nodelay
// left to the user's path (it helped on one path and hurt on another);
// on a lossy path, which the sweep did not cover, the jumbo tunnel is not
// tested here; beyond what autotuning reaches, larger buffers are
// undecided too.
func TestTCPTransportClaimsOnlyWhatTheSweepMeasured(t *testing.T) {
	t.Parallel()
	for _, rtt := range []time.Duration{time.Millisecond, 50 * time.Millisecond, 600 * time.Millisecond} {
		for _, pmtu := range []int{0, 1500} {
			a, _ := Advise(Input{Proto: "tcp", RateBitsPerSec: 100e6, RTT: rtt, PathMTU: pmtu})
			for _, l := range append(a.Server, a.Sysctl...) {
				if strings.HasPrefix(l.Directive, "sndbuf") || strings.HasPrefix(l.Directive, "rcvbuf") || strings.Contains(l.Directive, "tcp_rmem") || l.Directive == "tcp-nodelay" {
					t.Errorf("rtt %v pmtu %d: unmeasured line %+v", rtt, pmtu, l)
				}
			}
			if !has(a.Server, "tun-mtu 9000") || !has(a.Server, "mssfix 0") || !has(a.Client, "tun-mtu 9000") {
				t.Errorf("rtt %v pmtu %d: no jumbo tunnel over TCP: server %+v client %+v", rtt, pmtu, a.Server, a.Client)
			}
			for _, l := range a.Server {
				if l.Directive == "tun-mtu 9000" && !strings.Contains(l.Figure, "docs/measurements.md#tcp-transport-sweep") {
					t.Errorf("rtt %v pmtu %d: jumbo line without the sweep it rests on: %+v", rtt, pmtu, l)
				}
			}
			if u := undecided(a, "tcp-nodelay"); u == nil || !strings.Contains(u.Changes, "slower") || !strings.Contains(u.Measure, "advise-sweep.sh") {
				t.Errorf("rtt %v pmtu %d: tcp-nodelay not left to the user's path: %+v", rtt, pmtu, u)
			}
			big := undecided(a, "sndbuf/rcvbuf")
			if (rtt == 600*time.Millisecond) != (big != nil) {
				t.Errorf("rtt %v (BDP %d): large-buffer item %+v", rtt, int(100e6/8*rtt.Seconds()), big)
			}
		}
		lossy, _ := Advise(Input{Proto: "tcp", RateBitsPerSec: 100e6, RTT: rtt, PathMTU: 1500, LossPercent: 1, LossGiven: true})
		if has(lossy.Server, "tun-mtu 9000") {
			t.Errorf("rtt %v, 1%% loss: jumbo tunnel over a lossy TCP path the sweep did not cover: %+v", rtt, lossy.Server)
		}
		if u := undecided(lossy, "tun-mtu 9000"); u == nil || !strings.Contains(u.Changes, "not tested here") {
			t.Errorf("rtt %v, 1%% loss: jumbo tunnel not listed as untested: %+v", rtt, u)
		}
	}
}

// A long fat path bound by the assumed window of the endpoints: no line,
// and advise says what decides it rather than that the defaults suit.
func TestWindowBoundIsUndecided(t *testing.T) {
	t.Parallel()
	a, _ := Advise(Input{RateBitsPerSec: 1e9, RTT: 300 * time.Millisecond, PathMTU: 1500})
	// The window, not the packet cost, binds: no jumbo tunnel for it.
	if has(a.Server, "tun-mtu 9000") {
		t.Errorf("jumbo tunnel where the window binds: %+v", a.Server)
	}
	if c := a.Ceilings[0]; c.Binding != "window/RTT" || !c.BindingAssumed {
		t.Fatalf("ceiling %+v", c)
	}
	if u := undecided(a, "the endpoints' TCP receive window"); u == nil || !strings.Contains(u.Measure, "net.ipv4.tcp_rmem") {
		t.Errorf("undecided %+v", a.Undecided)
	}
}
