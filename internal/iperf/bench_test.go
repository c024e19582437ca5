package iperf

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// benchRuns runs one 1-second iperf3 test per iteration and reports the
// median received rate and the CPU-seconds per GB of both iperf3
// processes, the figures `lab run` builds its rows from:
//
//	go test -run '^$' -bench Loopback -benchtime 5x ./internal/iperf
//	go test -run '^$' -bench LabRouted -benchtime 5x ./internal/iperf   (root)
func benchRuns(b *testing.B, srv *Server, client CommandFunc, opts ClientOptions) {
	ctx := context.Background()
	var rates []float64
	var clientCPU, serverCPU float64
	var bytes uint64
	for b.Loop() {
		before, err := cpuacct.Snapshot(srv.Pid())
		if err != nil {
			b.Fatal(err)
		}
		r, err := Run(ctx, client, opts)
		for i := 0; i < 2 && errors.Is(err, ErrInconsistent); i++ {
			b.Logf("retrying: %v", err)
			r, err = Run(ctx, client, opts)
		}
		if err != nil {
			b.Fatal(err)
		}
		after, err := cpuacct.Snapshot(srv.Pid())
		if err != nil {
			b.Fatal(err)
		}
		d, err := cpuacct.Delta(before, after)
		if err != nil {
			b.Fatal(err)
		}
		rates = append(rates, r.ReceivedBitsPerSec)
		clientCPU += r.ClientCPUSeconds
		serverCPU += d[srv.Pid()]
		bytes += r.BytesWithWarmup()
	}
	med, lo, hi := median3(rates)
	b.ReportMetric(med/1e6, "Mbit/s")
	b.ReportMetric(lo/1e6, "min-Mbit/s")
	b.ReportMetric(hi/1e6, "max-Mbit/s")
	b.ReportMetric(cpuacct.PerGB(clientCPU, bytes), "client-CPU-s/GB")
	b.ReportMetric(cpuacct.PerGB(serverCPU, bytes), "server-CPU-s/GB")
	b.ReportMetric(0, "ns/op")
}

// median3 returns median, min and max without importing measure (which
// would make this package's tests depend on the report layer).
func median3(xs []float64) (med, lo, hi float64) {
	s := append([]float64(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	n := len(s)
	if n == 0 {
		return 0, 0, 0
	}
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

func BenchmarkLoopbackTCP(b *testing.B) {
	testenv.RequirePrograms(b, "iperf3")
	var srv *Server
	var err error
	for range 3 {
		srv, err = StartServer(context.Background(), Local, ServerOptions{Port: freePortTB(b), Bind: loopback})
		if err == nil {
			break
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	benchRuns(b, srv, Local, ClientOptions{Server: loopback, Port: srv.Port(), Duration: time.Second})
}

// BenchmarkLabRouted measures the lab's bare routed path shaped to
// 50 Mbit/s each way with 20 ms RTT, client → server.
func BenchmarkLabRouted(b *testing.B) {
	testenv.RequirePrograms(b, "iperf3")
	l := labtest.New(b, labpath.Path{
		Up:   labpath.Link{RateBitsPerSec: 50e6, Delay: 10 * time.Millisecond},
		Down: labpath.Link{RateBitsPerSec: 50e6, Delay: 10 * time.Millisecond},
	})
	srv, err := StartServer(context.Background(), in(l, lab.Server), ServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	benchRuns(b, srv, in(l, lab.Client), ClientOptions{Server: lab.ServerV4(), Port: srv.Port(), Duration: 2 * time.Second, Omit: time.Second})
}
