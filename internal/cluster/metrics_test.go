package cluster

import (
	"net"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/promtest"
)

// serveTest serves fn's endpoint on a loopback port and returns its
// /metrics URL.
func serveTest(t *testing.T, fn func(net.Listener) error) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() { _ = fn(l) }()
	return "http://" + l.Addr().String() + "/metrics"
}

// TestServeMetricsConventions scrapes cluster serve's endpoint over
// instances whose clients repeat common names (duplicate-cn, UNDEF) and
// outnumber the cap: the scrape answers 200, passes promtool, sums the
// repeated names, and counts what the cap left out.
func TestServeMetricsConventions(t *testing.T) {
	inst := func(name string, port uint16, per ...ClientBytes) *instance {
		return &instance{st: InstanceStatus{Name: name, Proto: "udp", Port: port, State: StateUp, Clients: len(per),
			BytesIn: 1000, BytesOut: 2000, CPUSeconds: 1.5, PerClient: per}}
	}
	c := &Cluster{id: "ab12", opts: Options{PerClient: true, PerClientMax: 3}, draining: make(chan struct{}),
		instances: []*instance{
			inst("u0", 1195,
				ClientBytes{CommonName: "alice", BytesIn: 10, BytesOut: 20},
				ClientBytes{CommonName: "alice", BytesIn: 5, BytesOut: 5},
				ClientBytes{CommonName: "UNDEF", BytesIn: 1},
				ClientBytes{CommonName: "UNDEF", BytesIn: 1},
				ClientBytes{CommonName: "bob", BytesIn: 1000}),
			inst("u1", 1196, ClientBytes{CommonName: "alice", BytesIn: 1}),
		}}
	body := promtest.Scrape(t, serveTest(t, c.ServeMetrics))
	promtest.CheckMetrics(t, body)
	fams := promtest.Parse(t, body)
	for _, name := range []string{"ovpnperf_cluster_instance_received_bytes_total", "ovpnperf_cluster_instance_sent_bytes_total",
		"ovpnperf_cluster_instance_cpu_seconds_total", "ovpnperf_cluster_client_received_bytes_total"} {
		if f := fams[name]; f == nil || f.GetType().String() != "COUNTER" {
			t.Errorf("%s: want a counter, got %v", name, f)
		}
	}
	got := map[string]float64{}
	for _, m := range fams["ovpnperf_cluster_client_received_bytes_total"].GetMetric() {
		got[promtest.Label(m, "openvpn_instance")+"/"+promtest.Label(m, "common_name")] = m.GetCounter().GetValue()
	}
	want := map[string]float64{"u0/bob": 1000, "u0/alice": 15, "u0/UNDEF": 2}
	if len(got) != len(want) {
		t.Errorf("client series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("client series %s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	d := fams["ovpnperf_cluster_client_series_dropped"]
	if d == nil || len(d.GetMetric()) != 1 || d.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("ovpnperf_cluster_client_series_dropped = %v, want 1 (u1/alice)", d)
	}
}

// TestDispatchMetricsConventions scrapes a registry dispatcher's endpoint
// over a view of two instances and passes it through promtool.
func TestDispatchMetricsConventions(t *testing.T) {
	v := NewView(nil, "vpn", nil)
	v.inst = map[string]InstanceEntry{
		"a": {V: 1, Host: "h1", Name: "u0", Address: "198.51.100.2", Port: 1195, Proto: "udp", State: StateUp, Clients: 2},
		"b": {V: 1, Host: "h2", Name: "u0", Address: "198.51.100.3", Port: 1195, Proto: "udp", State: StateRestarting},
	}
	d := &Dispatcher{}
	d.Assigned.Add(3)
	body := promtest.Scrape(t, serveTest(t, func(l net.Listener) error { return ServeDispatchMetrics(l, d, v) }))
	promtest.CheckMetrics(t, body)
	for _, want := range []string{"ovpnperf_cluster_registry_instance_up{", "ovpnperf_cluster_dispatch_replies_total{result=\"assigned\"} 3"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q:\n%s", want, body)
		}
	}
}
