package iperf

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

func TestMain(m *testing.M) { labtest.Main(m) }

func in(l *lab.Lab, n lab.Node) CommandFunc {
	return func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, n, argv...) }
}

// TestLab measures the routed path of a lab shaped to 20 Mbit/s each way,
// with a server of this package and one started by lab.Start, the two ways
// ovpnperf runs iperf3 servers.
func TestLab(t *testing.T) {
	testenv.Exclusive(t)
	testenv.RequirePrograms(t, "iperf3")
	const rate = 20e6
	l := labtest.New(t, labpath.Path{Up: labpath.Link{RateBitsPerSec: rate}, Down: labpath.Link{RateBitsPerSec: rate}})
	ctx := context.Background()

	srv, err := StartServer(ctx, in(l, lab.Server), ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	// ip netns exec execs iperf3: the pid is iperf3's, ready for cpuacct.
	if tm, err := cpuacct.Read(srv.Pid()); err != nil || tm.Comm != "iperf3" {
		t.Errorf("server pid %d: %+v %v", srv.Pid(), tm, err)
	}

	for _, tc := range []struct {
		name string
		opts ClientOptions
	}{
		{"tcp up", ClientOptions{}},
		{"tcp down", ClientOptions{Reverse: true}},
		{"tcp up v6", ClientOptions{Server: lab.ServerV6()}},
		{"udp down 10M", ClientOptions{Reverse: true, UDP: true, BitrateBps: rate / 2, LengthBytes: 1200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			if !o.Server.IsValid() {
				o.Server = lab.ServerV4()
			}
			o.Port, o.Duration = srv.Port(), 2*time.Second
			r, consistent, err := runRetry(t, ctx, in(l, lab.Client), o)
			if err != nil {
				t.Fatal(err)
			}
			want := rate
			if o.BitrateBps != 0 {
				want = float64(o.BitrateBps)
			}
			// Loose bounds: the machine is shared (load 8 on 2 cores seen
			// while writing this: TCP down fell to 0.7 of the rate, UDP lost
			// 16 %); a unit or direction mistake is off by far more.
			got := r.ReceivedBitsPerSec
			t.Logf("%s: received %.2f Mbit/s (sent %.2f), retransmits %d", tc.name, got/1e6, r.SentBitsPerSec/1e6, r.Retransmits)
			if got < 0.3*want || (consistent && got > 1.1*want) {
				t.Errorf("received %.2f Mbit/s through a %.0f Mbit/s path", got/1e6, want/1e6)
			}
			if r.UDP != nil && (r.UDP.Packets == 0 || r.UDP.LostPercent > 50) {
				t.Errorf("UDP at half the rate lost %.1f %%", r.UDP.LostPercent)
			}
		})
	}

	// Back-to-back tests, TCP then UDP, each direction: iperf3 3.12 refuses
	// connections for a few ms between tests (3 of 24 failed before
	// WaitIdle). runOnce has no retry, so only WaitIdle can close the gap.
	t.Run("back to back", func(t *testing.T) {
		for i := range 8 {
			o := ClientOptions{Server: lab.ServerV4(), Port: srv.Port(), Duration: time.Second, Reverse: i%4 >= 2}
			if i%2 == 1 {
				o.UDP, o.BitrateBps, o.LengthBytes = true, rate/2, 1200
			}
			argv, err := o.Args()
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.WaitIdle(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := runOnce(ctx, in(l, lab.Client), o, argv); err != nil && !errors.Is(err, ErrInconsistent) {
				t.Errorf("test %d: %v", i, err)
			}
		}
		// And through Server.Run.
		if _, err := srv.Run(ctx, in(l, lab.Client), ClientOptions{Server: lab.ServerV4(), Duration: time.Second}); err != nil && !errors.Is(err, ErrInconsistent) {
			t.Error(err)
		}
	})

	t.Run("lab.Start server", func(t *testing.T) {
		logPath := filepath.Join(l.Dir(), "iperf3-server.log")
		opts := ServerOptions{Port: DefaultPort + 1}
		p, err := l.Start(ctx, lab.Server, logPath, opts.Args()...)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Stop()
		for i := range 2 {
			if err := WaitListening(ctx, logPath, p.Done(), 0); err != nil {
				t.Fatal(err)
			}
			r, _, err := runRetry(t, ctx, in(l, lab.Client), ClientOptions{Server: lab.ServerV4(), Port: opts.Port, Duration: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if r.ReceivedBytes == 0 {
				t.Errorf("test %d: nothing received", i)
			}
		}
	})

	t.Run("WaitListening on a server that fails", func(t *testing.T) {
		logPath := filepath.Join(l.Dir(), "iperf3-taken.log")
		// The port of the running server: iperf3 cannot listen and exits.
		p, err := l.Start(ctx, lab.Server, logPath, ServerOptions{Port: srv.Port()}.Args()...)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Stop()
		if err := WaitListening(ctx, logPath, p.Done(), 5*time.Second); err == nil {
			t.Error("no error for a server that could not listen")
		}
	})
}
