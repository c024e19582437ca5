package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// fakeRegistry is a Registry whose instances the test sets.
type fakeRegistry struct {
	mu sync.Mutex
	es []Endpoint
}

func (f *fakeRegistry) Instances() []Endpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Endpoint(nil), f.es...)
}

func (f *fakeRegistry) set(name, state string, clients int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.es {
		if f.es[i].Name == name {
			f.es[i].State, f.es[i].Clients = state, clients
		}
	}
}

func twoInstances() *fakeRegistry {
	return &fakeRegistry{es: []Endpoint{
		{Name: "u0", Host: "198.51.100.2", Port: 1195, Proto: "udp", State: StateUp},
		{Name: "u1", Host: "198.51.100.2", Port: 1196, Proto: "udp", State: StateUp},
	}}
}

// TestLeastLoaded is must-show 2 over the registry interface: with u0
// carrying 4 clients the next 4 requests all go to u1; round-robin
// alternates. The real-cluster version is TestDispatcherOverCluster.
func TestLeastLoaded(t *testing.T) {
	reg := twoInstances()
	reg.set("u0", StateUp, 4)
	d := &Dispatcher{Registry: reg, Strategy: LeastLoaded}
	now := time.Now()
	for i := range 4 {
		r, err := d.Assign(NewRequest("udp"), now)
		if err != nil || r.Instance != "u1" {
			t.Fatalf("request %d: %+v %v, want u1", i, r, err)
		}
	}
	// Now both carry 4: the fifth may go either way, but an instance that
	// is down is never named.
	reg.set("u1", StateRestarting, 0)
	for i := range 10 {
		if r, err := d.Assign(NewRequest("udp"), now); err != nil || r.Instance != "u0" {
			t.Fatalf("with u1 restarting, request %d: %+v %v", i, r, err)
		}
	}
	reg.set("u0", StateDraining, 0)
	if r, err := d.Assign(NewRequest("udp"), now); err == nil {
		t.Fatalf("nothing up, got %+v", r)
	}
}

func TestRoundRobin(t *testing.T) {
	d := &Dispatcher{Registry: twoInstances(), Strategy: RoundRobin}
	var got []string
	for range 6 {
		r, err := d.Assign(NewRequest(""), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Instance)
	}
	if s := strings.Join(got, ","); s != "u0,u1,u0,u1,u0,u1" {
		t.Errorf("round-robin gave %s", s)
	}
}

func TestParseRequest(t *testing.T) {
	now := time.Now()
	good := NewRequest("udp")
	b, _ := json.Marshal(good)
	if _, err := ParseRequest(b, now); err != nil {
		t.Fatalf("good request refused: %v", err)
	}
	for _, bad := range []string{
		"", "{", "null", "[]", `{"v":2}`, `{"v":1,"proto":"icmp","nonce":"00000000000000000000000000000000","time":%d}`,
		`{"v":1,"proto":"udp","nonce":"zz000000000000000000000000000000","time":%d}`,
		`{"v":1,"proto":"udp","nonce":"00","time":%d}`,
		`{"v":1,"proto":"udp","nonce":"00000000000000000000000000000000","time":1}`,
		`{"v":1,"proto":"udp","nonce":"00000000000000000000000000000000","time":%d,"x":1}`,
		`{"v":1,"proto":"udp","nonce":"00000000000000000000000000000000","time":%d}{}`,
		strings.Repeat("a", 600),
	} {
		in := bad
		if strings.Contains(bad, "%d") {
			in = fmt.Sprintf(bad, now.Unix())
		}
		if r, err := ParseRequest([]byte(in), now); err == nil {
			t.Errorf("ParseRequest(%q) = %+v, want an error", in, r)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	b, _ := json.Marshal(Request{V: 1, Proto: "udp", Nonce: strings.Repeat("ab", 16), Time: 1700000000})
	f.Add(b)
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte("\x00\xff{"))
	now := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ParseRequest(in, now)
		if err == nil && (r.V != 1 || len(r.Nonce) != 32) {
			t.Fatalf("accepted %q as %+v", in, r)
		}
	})
}

// TestDispatcherHostile is must-show 4: 10 000 malformed, unauthenticated
// or replayed requests over real TLS: no crash, no assignment, memory
// flat; a good request still works afterwards.
func TestDispatcherHostile(t *testing.T) {
	dir := t.TempDir()
	pki, err := openvpn.NewPKI(dir + "/pki")
	if err != nil {
		t.Fatal(err)
	}
	// A second CA: its client certificate must be refused.
	other, err := openvpn.NewPKI(dir + "/other")
	if err != nil {
		t.Fatal(err)
	}
	d := &Dispatcher{Registry: twoInstances(), Strategy: LeastLoaded}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { _ = d.Serve(l, pki.ServerCert(), pki.ServerKey(), pki.CACert()) }()
	addr := l.Addr().String()
	good, err := ClientTLS(pki.ClientCert(), pki.ClientKey(), pki.CACert())
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := ClientTLS(other.ClientCert(), other.ClientKey(), pki.CACert())
	if err != nil {
		t.Fatal(err)
	}
	noCert := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	ctx := context.Background()
	replayed := NewRequest("udp")
	if _, err := Ask(ctx, addr, good, replayed); err != nil {
		t.Fatalf("first request: %v", err)
	}
	base := d.Assigned.Load()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	// 9 000 malformed and replayed requests over authenticated
	// connections (256 per connection at most), 1 000 that fail
	// authentication: no certificate, another CA's, not TLS at all.
	const n = 10000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var mu sync.Mutex
	sent := 0
	lines := func(i int) string {
		switch i % 3 {
		case 0:
			b, _ := json.Marshal(replayed)
			return string(b)
		case 1:
			return strings.Repeat("\x01{", i%200)
		}
		return fmt.Sprintf(`{"v":1,"proto":"udp","nonce":"%032x","time":%d}`, i, 1+i) // outside the window
	}
	for conn := 0; conn < 9000/250; conn++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := tls.Dial("tcp", addr, good)
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for k := range 250 {
				fmt.Fprintf(c, "%s\n", lines(conn*250+k))
				resp, err := br.ReadString('\n')
				if err != nil {
					t.Errorf("reply %d: %v", k, err)
					return
				}
				if strings.Contains(resp, `"instance"`) {
					t.Errorf("hostile line assigned: %s", resp)
				}
			}
			mu.Lock()
			sent += 250
			mu.Unlock()
		}()
	}
	for i := range 1000 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			switch i % 4 {
			case 0, 1: // no client certificate
				if r, err := Ask(ctx, addr, noCert, NewRequest("udp")); err == nil {
					t.Errorf("no certificate, assigned %+v", r)
				}
			case 2: // certificate of another CA
				if r, err := Ask(ctx, addr, wrong, NewRequest("udp")); err == nil {
					t.Errorf("foreign certificate, assigned %+v", r)
				}
			case 3: // raw bytes, not even TLS
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				buf := make([]byte, 64)
				c.Read(buf)
				c.Close()
			}
			mu.Lock()
			sent++
			mu.Unlock()
		}()
	}
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if got := d.Assigned.Load() - base; got != 0 {
		t.Errorf("%d hostile requests were assigned an instance", got)
	}
	if sent != n {
		t.Errorf("sent %d hostile requests, want %d", sent, n)
	}
	t.Logf("heap in use: %d KiB before, %d KiB after %d hostile requests; refused %d", m0.HeapInuse>>10, m1.HeapInuse>>10, n, d.Refused.Load())
	// Flat: the replay cache holds one nonce; allow generous slack for
	// the runtime, never growth proportional to the requests (10 000 × a
	// few hundred bytes would be several MiB).
	if m1.HeapInuse > m0.HeapInuse+8<<20 {
		t.Errorf("heap grew from %d to %d bytes", m0.HeapInuse, m1.HeapInuse)
	}
	if _, err := Ask(ctx, addr, good, NewRequest("udp")); err != nil {
		t.Errorf("a good request after the flood: %v", err)
	}
}

func TestRateLimitPerSource(t *testing.T) {
	d := &Dispatcher{Registry: twoInstances(), RatePerSec: 2, Burst: 4}
	now := time.Now()
	n := 0
	for range 10 {
		if d.allow("192.0.2.2", now) {
			n++
		}
	}
	if n != 4 {
		t.Errorf("burst of 10 from one source: %d allowed, want 4", n)
	}
	if !d.allow("192.0.2.3", now) {
		t.Errorf("another source was limited too")
	}
	if !d.allow("192.0.2.2", now.Add(time.Second)) {
		t.Errorf("one second later the source is still limited")
	}
}

// A reply's words become openvpn's argv in `cluster connect`: anything but
// a host, a port and udp/tcp is refused, so no reply can add an option.
func TestReplyCheck(t *testing.T) {
	for _, tc := range []struct {
		r  Reply
		ok bool
	}{
		{Reply{Remote: "198.51.100.2", Port: 1195, Proto: "udp"}, true},
		{Reply{Remote: "vpn.example.net", Port: 1195, Proto: "tcp"}, true},
		{Reply{Remote: "fd00::2", Port: 1195, Proto: "udp"}, true},
		{Reply{Remote: "--up", Port: 1195, Proto: "udp"}, false},
		{Reply{Remote: "-x", Port: 1195, Proto: "udp"}, false},
		{Reply{Remote: "a b", Port: 1195, Proto: "udp"}, false},
		{Reply{Remote: "", Port: 1195, Proto: "udp"}, false},
		{Reply{Remote: "h\n", Port: 1195, Proto: "udp"}, false},
		{Reply{Remote: "h", Port: 0, Proto: "udp"}, false},
		{Reply{Remote: "h", Port: 1195, Proto: "--script-security"}, false},
		{Reply{Remote: "h", Port: 1195, Proto: "tcp-client"}, false},
	} {
		if err := tc.r.Check(); (err == nil) != tc.ok {
			t.Errorf("%+v: Check() = %v, want ok %v", tc.r, err, tc.ok)
		}
	}
}

// `cluster connect --tunnels N` asks with the instances it has: never one
// of them again, and a clear refusal when none is left.
func TestAssignExclude(t *testing.T) {
	d := &Dispatcher{Registry: twoInstances(), Strategy: LeastLoaded}
	now := time.Now()
	r := NewRequest("udp")
	r.Exclude = []string{"u0"}
	got, err := d.Assign(r, now)
	if err != nil || got.Instance != "u1" {
		t.Fatalf("exclude u0: %+v %v, want u1", got, err)
	}
	r = NewRequest("udp")
	r.Exclude = []string{"u0", "u1"}
	if got, err := d.Assign(r, now); err == nil || !strings.Contains(err.Error(), "no other instance") {
		t.Errorf("exclude both: %+v %v", got, err)
	}
	line, _ := json.Marshal(r)
	if p, err := ParseRequest(line, now); err != nil || !slices.Equal(p.Exclude, r.Exclude) {
		t.Errorf("ParseRequest with exclude: %+v %v", p, err)
	}
}
