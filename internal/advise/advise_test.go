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

// The four lab paths of issue 10 and what advice must contain on each.
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
		{name: "a over tcp", in: Input{Proto: "tcp", RateBitsPerSec: 20e6, RTT: 200 * time.Millisecond, PathMTU: 1500, RmemMax: 212992, WmemMax: 212992},
			want: []string{"sndbuf 1048576", "rcvbuf 1048576"}, notWant: []string{"tun-mtu"},
			binding: "path rate × header efficiency", lo: 17e6, hi: 19e6, sysctl: true, variantHave: "push sndbuf 1048576"},
		{name: "b 100mbit 10ms 1400 blackhole", in: Input{RateBitsPerSec: 100e6, RTT: 10 * time.Millisecond, PathMTU: 1400, Blackhole: true},
			want: []string{"mssfix 1400 mtu", "tun-mtu 1348"}, notWant: []string{"sndbuf", "fragment"},
			binding: "path rate × header efficiency", lo: 85e6, hi: 95e6, variantHave: "mssfix 1400 mtu;tun-mtu 1348"},
		{name: "c LAN", in: Input{RTT: 100 * time.Microsecond, PathMTU: 1500},
			want: []string{"tun-mtu 9000", "mssfix 0", "sndbuf 4194304", "rcvbuf 4194304"}, binding: "packet cost per core", lo: 100e6, hi: 5e9, sysctl: true,
			variantHave: "tun-mtu 9000;mssfix 0;sndbuf 4194304;rcvbuf 4194304"},
		// A jumbo tunnel on a machine whose rmem_max/wmem_max already allow
		// 4 MiB: the buffer lines without sysctl lines.
		{name: "c LAN raised maxima", in: Input{RTT: 100 * time.Microsecond, PathMTU: 1500, RmemMax: 4 << 20, WmemMax: 4 << 20},
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
	in := Input{Proto: "tcp", RateBitsPerSec: 20e6, RTT: 200 * time.Millisecond, RmemMax: 8 << 20, WmemMax: 8 << 20}
	a, _ := Advise(in)
	if len(a.Sysctl) != 0 {
		t.Fatalf("rmem_max 8 MiB already allows 1 MiB, got %v", a.Sysctl)
	}
	in.RmemMax = 212992
	a, _ = Advise(in)
	if len(a.Sysctl) != 1 || !strings.HasPrefix(a.Sysctl[0].Directive, "net.core.rmem_max = 1048576") {
		t.Fatalf("want the rmem_max line only, got %v", a.Sysctl)
	}
}

// On a lossy path a measured plain TCP flow, not Mathis's Reno formula,
// bounds the prediction (the lab's 2 % path carried 4.7 Mbit/s of 5).
func TestLossUsesMeasuredFlow(t *testing.T) {
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
	a, err := Advise(Input{PathMTU: 1400, DCO: true, RateBitsPerSec: 100e6, RTT: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if has(a.Server, "mssfix") || !has(a.Server, "tun-mtu 1348") || !has(a.DoNot, "fragment") {
		t.Fatalf("DCO: want tun-mtu 1348, no mssfix, no fragment: %+v / %+v", a.Server, a.DoNot)
	}
}

func TestTCPTransportAndLoss(t *testing.T) {
	a, _ := Advise(Input{Proto: "tcp", LossPercent: 1, RTT: 50 * time.Millisecond})
	if !has(a.DoNot, "proto tcp") || !has(a.DoNot, "tun-mtu 9000") {
		t.Fatalf("lossy path: want TCP transport and jumbo warnings: %+v", a.DoNot)
	}
}

func TestWindowsNotes(t *testing.T) {
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
	lan := Input{RTT: 100 * time.Microsecond, PathMTU: 1500}
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

func TestBufferAfterDrops(t *testing.T) {
	for _, c := range []struct {
		got  int
		want string
	}{
		{32768, "rcvbuf 4194304"},   // rcvbuf 16384, doubled by the kernel
		{425984, "rcvbuf 4194304"},  // the stock 212992, doubled
		{8388608, "rcvbuf 8388608"}, // 4 MiB asked: twice that
		{0, "rcvbuf 4194304"},
	} {
		d, s := BufferAfterDrops(c.got)
		if d != c.want || !strings.HasSuffix(s, strings.TrimPrefix(d, "rcvbuf ")) {
			t.Errorf("BufferAfterDrops(%d) = %q, %q; want %q", c.got, d, s, c.want)
		}
	}
}
