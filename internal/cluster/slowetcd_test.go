package cluster_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
)

// delayProxy forwards TCP connections to target and holds every chunk
// etcd sends back for delay before passing it on: a far-away etcd
// (one round trip ≥ delay), without limiting throughput, since chunks are
// timed independently rather than one after another.
type delayProxy struct {
	l       net.Listener
	target  string
	delay   time.Duration
	toEtcd  atomic.Int64 // bytes forwarded towards etcd
	wg      sync.WaitGroup
	closing chan struct{}
}

func startDelayProxy(t *testing.T, target string, delay time.Duration) *delayProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{l: l, target: target, delay: delay, closing: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { close(p.closing); l.Close(); p.wg.Wait() })
	return p
}

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.wg.Add(3)
		go func() { // closes both when the proxy closes
			defer p.wg.Done()
			<-p.closing
			c.Close()
			up.Close()
		}()
		go func() { // client → etcd, at once
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					p.toEtcd.Add(int64(n))
					if _, werr := up.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					up.Close()
					return
				}
			}
		}()
		go func() { // etcd → client, each chunk delay after it arrived
			defer p.wg.Done()
			type chunk struct {
				b   []byte
				due time.Time
			}
			q := make(chan chunk, 4096)
			go func() {
				for ch := range q {
					time.Sleep(time.Until(ch.due))
					if _, err := c.Write(ch.b); err != nil {
						_, _ = io.Copy(io.Discard, up)
						return
					}
				}
				c.Close()
			}()
			defer close(q)
			for {
				buf := make([]byte, 32<<10)
				n, err := up.Read(buf)
				if n > 0 {
					q <- chunk{buf[:n], time.Now().Add(p.delay)}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// TestDispatcherSlowEtcd: with etcd 300 ms away, ten concurrent
// least-loaded requests to one dispatcher each wait for etcd (Sync, Record)
// side by side, not one after another behind the dispatcher's lock: the ten
// take far less than 10 × 300 ms. Each request is also checked to have
// waited for etcd at all, so a dispatcher that skipped etcd (a stale view)
// cannot pass.
func TestDispatcherSlowEtcd(t *testing.T) {
	const delay = 300 * time.Millisecond
	e := startLocalEtcd(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	h := newFakeHost(2)
	pub := &cluster.Publisher{Client: e.connect(t), Cluster: "slow", Host: "h1", Advertise: "198.18.1.2", ClusterID: "abcd",
		TTL: 10 * time.Second, Every: 200 * time.Millisecond, Source: h.status, Log: log}
	wg.Add(1)
	go func() { defer wg.Done(); pub.Run(ctx) }()

	proxy := startDelayProxy(t, e.client, delay)
	cli, err := cluster.RegistryOptions{Endpoints: []string{proxy.l.Addr().String()}}.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	v := cluster.NewView(cli, "slow", log)
	v.Probe = 2 * time.Second // longer than a round trip through the proxy
	wg.Add(1)
	go func() { defer wg.Done(); v.Run(ctx) }()
	waitFor(t, 20*time.Second, "the view through the slow proxy shows no 2 instances", func() bool {
		return len(v.Instances()) == 2 && !v.Status().Stale
	})

	d := &cluster.Dispatcher{Registry: v, Strategy: cluster.LeastLoaded}
	const n = 10
	took := make([]time.Duration, n)
	errs := make([]error, n)
	sent := proxy.toEtcd.Load()
	start := time.Now()
	var rw sync.WaitGroup
	for i := 0; i < n; i++ {
		rw.Add(1)
		go func(i int) {
			defer rw.Done()
			t0 := time.Now()
			_, errs[i] = d.Assign(cluster.NewRequest("udp"), time.Now())
			took[i] = time.Since(t0)
		}(i)
	}
	rw.Wait()
	total := time.Since(start)
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	if st := v.Status(); st.Stale {
		t.Errorf("the view went stale during the requests (%+v): the test did not exercise etcd", st)
	}
	if proxy.toEtcd.Load() == sent {
		t.Error("no request reached etcd during the assignments")
	}
	for i, d := range took {
		// Sync alone waits a round trip (or its bound of 300 ms).
		if d < delay*8/10 {
			t.Errorf("request %d took %v: it did not wait for etcd", i, d)
		}
	}
	t.Logf("%d concurrent requests with etcd %v away: %v in all, each %v", n, delay, total.Round(time.Millisecond), took)
	if total >= n*delay {
		t.Errorf("%d concurrent requests took %v ≥ %d × %v: they waited for etcd one after another", n, total, n, delay)
	}
}
