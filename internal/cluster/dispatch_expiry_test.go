package cluster

import (
	"fmt"
	"testing"
	"time"
)

// A source's rate limit holds however many other sources come and go: the
// per-source buckets are forgotten by age, never all at once. (The map used
// to be wiped past 100 000 sources, which gave every source a full bucket
// again, the limited one included.)
func TestRateLimitSurvivesManySources(t *testing.T) {
	d := &Dispatcher{RatePerSec: 1, Burst: 2}
	now := time.Unix(1_700_000_000, 0)
	if !d.allow("192.0.2.1", now) || !d.allow("192.0.2.1", now) {
		t.Fatal("a burst of 2 refused")
	}
	if d.allow("192.0.2.1", now) {
		t.Fatal("a third request within the burst allowed")
	}
	for i := 0; i < 100_010; i++ {
		d.allow(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), now)
	}
	if d.allow("192.0.2.1", now) {
		t.Error("after 100 010 other sources the limited source has a full bucket again")
	}
	// The refill is unchanged: one token after one second.
	if !d.allow("192.0.2.1", now.Add(time.Second)) || d.allow("192.0.2.1", now.Add(time.Second)) {
		t.Error("the bucket does not refill at 1/s")
	}
	// Buckets idle for longer than a full refill are forgotten (they
	// would be full): only the sources of the last two periods remain.
	later := now.Add(10 * time.Second)
	d.allow("192.0.2.9", later)
	if n := d.buckets.len(); n != 1 {
		t.Errorf("%d buckets held after every other source was idle 10 s (a full refill takes 2 s), want 1", n)
	}
}

// Nonces stay refused for as long as a request carrying them can be
// accepted (2 × ReplayWindow: its time may be ReplayWindow behind the
// clock at first use and ReplayWindow ahead at the replay), and are
// forgotten in bulk after that, with no per-request scan of all of them.
func TestNonceExpiry(t *testing.T) {
	d := &Dispatcher{}
	now := time.Unix(1_700_000_000, 0)
	first := "00112233445566778899aabbccddeeff"
	if err := d.claimNonce(first, now); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if err := d.claimNonce(fmt.Sprintf("%032x", i), now.Add(time.Duration(i)*100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	for _, after := range []time.Duration{time.Second, ReplayWindow, 2*ReplayWindow - time.Second} {
		if err := d.claimNonce(first, now.Add(after)); err == nil {
			t.Errorf("the nonce replayed %v later was accepted", after)
		}
	}
	// Long after, the old nonces are gone from memory.
	d.claimNonce("ffeeddccbbaa99887766554433221100", now.Add(10*ReplayWindow))
	if n := d.seen.len(); n != 1 {
		t.Errorf("%d nonces held 10 replay windows later, want 1", n)
	}
}

// BenchmarkAssignBusyReplayWindow measures one assignment with 10 000
// nonces already held (a busy replay window). Run on the old per-request
// scan of every nonce and on the generations for comparison:
//
//	go test ./internal/cluster -run '^$' -bench BenchmarkAssignBusyReplayWindow
func BenchmarkAssignBusyReplayWindow(b *testing.B) {
	d := &Dispatcher{Registry: &fakeRegistry{es: []Endpoint{{Name: "u0", Host: "198.51.100.2", Port: 1195, Proto: "udp", State: StateUp}}}, Strategy: RoundRobin}
	now := time.Unix(1_700_000_000, 0)
	for i := 0; i < 10_000; i++ {
		if _, err := d.Assign(Request{V: 1, Proto: "udp", Nonce: fmt.Sprintf("a%031x", i)}, now); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := d.Assign(Request{V: 1, Proto: "udp", Nonce: fmt.Sprintf("b%031x", i)}, now); err != nil {
			b.Fatal(err)
		}
	}
}
