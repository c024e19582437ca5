package cluster_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
)

var (
	benchInstances = flag.String("cluster.instances", "1,2", "instance counts to compare (BenchmarkAggregate)")
	benchClients   = flag.Int("cluster.clients", 4, "OpenVPN clients, each with one iperf3 stream (BenchmarkAggregate)")
	benchSeconds   = flag.Int("cluster.seconds", 10, "iperf3 seconds per run (BenchmarkAggregate)")
)

// BenchmarkAggregate is must-show 6: the same clients through 1 instance
// and through N (one-port mode, counter spreading), aggregate Mbit/s and
// the instances' CPU seconds per GB. Run it with
//
//	go test -run '^$' -bench Aggregate -benchtime 1x ./internal/cluster \
//	    -cluster.instances 1,2 -cluster.clients 4 -cluster.seconds 10
//
// Every iperf3 stream is upload (client → server) and leaves by its own
// client's tun device (--bind-dev).
func BenchmarkAggregate(b *testing.B) {
	for _, s := range strings.Split(*benchInstances, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("-cluster.instances %q", *benchInstances)
		}
		b.Run(fmt.Sprintf("instances=%d/clients=%d", n, *benchClients), func(b *testing.B) {
			for range b.N {
				mbit, cpuPerGB := aggregateOnce(b, n, *benchClients, *benchSeconds)
				b.ReportMetric(mbit, "Mbit/s")
				b.ReportMetric(cpuPerGB, "CPU-s/GB")
			}
		})
	}
}

func aggregateOnce(b *testing.B, instances, clients, seconds int) (mbit, cpuPerGB float64) {
	l := labtest.New(b, labpath.Path{})
	var cpus []int
	for i := range instances {
		cpus = append(cpus, i%2)
	}
	c, pki := startCluster(b, l, cluster.Options{Instances: instances, Protos: []string{"udp"}, PortBase: 1195, OnePort: 1194, CPUs: cpus})
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds+120)*time.Second)
	defer cancel()
	dir := b.TempDir()
	cs := startClients(b, ctx, l, pki, dir, clients, 1194, "udp")
	for i, k := range cs {
		srv, err := l.Start(ctx, lab.Server, "", "iperf3", "-s", "-1", "-p", strconv.Itoa(5201+i))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Stop() })
		_ = k
	}
	time.Sleep(500 * time.Millisecond)
	cpu0 := 0.0
	for _, s := range c.Status() {
		cpu0 += s.CPUSeconds
	}
	var wg sync.WaitGroup
	bytes := make([]float64, len(cs))
	errs := make([]error, len(cs))
	for i, k := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := l.Command(ctx, lab.Client, "iperf3", "-c", serverAddr(c, instanceOf(c, k.addr)).String(), "-p", strconv.Itoa(5201+i),
				"--bind-dev", k.dev, "-t", strconv.Itoa(seconds), "-J").Output()
			if err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
				return
			}
			var j struct {
				End struct {
					SumReceived struct {
						Bytes float64 `json:"bytes"`
					} `json:"sum_received"`
				} `json:"end"`
			}
			errs[i] = json.Unmarshal(out, &j)
			bytes[i] = j.End.SumReceived.Bytes
		}()
	}
	wg.Wait()
	time.Sleep(2 * cluster.DefaultTiming().PollInterval)
	cpu1 := 0.0
	for _, s := range c.Status() {
		cpu1 += s.CPUSeconds
	}
	total := 0.0
	for i := range cs {
		if errs[i] != nil {
			b.Fatalf("iperf3 client %d: %v", i, errs[i])
		}
		total += bytes[i]
	}
	mbit = total * 8 / float64(seconds) / 1e6
	cpuPerGB = (cpu1 - cpu0) / (total / 1e9)
	var per []string
	for i, k := range cs {
		per = append(per, fmt.Sprintf("%s@%s %.0f", k.name, instanceOf(c, k.addr), bytes[i]*8/float64(seconds)/1e6))
	}
	b.Logf("streams (Mbit/s): %s", strings.Join(per, ", "))
	b.Logf("%d instances, %d clients: %.0f Mbit/s aggregate, %.1f CPU-s/GB (instances' CPU %.1f s)", instances, clients, mbit, cpuPerGB, cpu1-cpu0)
	return mbit, cpuPerGB
}
