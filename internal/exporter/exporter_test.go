package exporter

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/promtest"
)

// fakeExporter exports this test process as if it were an OpenVPN process
// of device dev with the given status file: no tun descriptor, so the
// socket and tun metrics are absent, the rest is read as for OpenVPN.
func fakeExporter(tb testing.TB, o Options, dev, status string) *Exporter {
	tb.Helper()
	e, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := e.fs.Proc(os.Getpid())
	if err != nil {
		tb.Fatal(err)
	}
	e.find = func() ([]*target, int, error) {
		return []*target{{pid: p.PID, proc: p, dev: dev, status: status}}, 0, nil
	}
	return e
}

func scrape(tb testing.TB, e *Exporter) []byte {
	tb.Helper()
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	return promtest.Scrape(tb, srv.URL)
}

// TestClientLabels reads a status file whose clients repeat a common name
// and include UNDEF, in each status-version: labels off, no per-client
// series; labels on, the same names summed, the cap applied and counted,
// and every scrape passes promtool (before this exporter, duplicate names
// made scrapes of OpenVPN exporters fail).
func TestClientLabels(t *testing.T) {
	for _, file := range []string{"status-v1.txt", "status-v2.txt", "status-v3.txt"} {
		t.Run(file, func(t *testing.T) {
			status := filepath.Join("testdata", file)
			off := promtest.Parse(t, scrape(t, fakeExporter(t, Options{}, "tun7", status)))
			if f := off["ovpnperf_openvpn_client_received_bytes_total"]; f != nil {
				t.Errorf("client labels off: %v", f)
			}
			if f := off["ovpnperf_openvpn_clients"]; f == nil || f.GetMetric()[0].GetGauge().GetValue() != 4 {
				t.Errorf("ovpnperf_openvpn_clients = %v, want 4", f)
			}
			body := scrape(t, fakeExporter(t, Options{ClientLabels: true, MaxClients: 2}, "tun7", status))
			promtest.CheckMetrics(t, body)
			on := promtest.Parse(t, body)
			got := map[string]float64{}
			for _, m := range on["ovpnperf_openvpn_client_received_bytes_total"].GetMetric() {
				got[promtest.Label(m, "dev")+"/"+promtest.Label(m, "common_name")] = m.GetCounter().GetValue()
			}
			want := map[string]float64{"tun7/alice": 1010, "tun7/bob": 300}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("client series %v, want %v", got, want)
			}
			if f := on["ovpnperf_openvpn_client_series_dropped"]; f == nil || f.GetMetric()[0].GetGauge().GetValue() != 1 {
				t.Errorf("ovpnperf_openvpn_client_series_dropped = %v, want 1 (UNDEF)", f)
			}
			for _, name := range []string{"ovpnperf_openvpn_cpu_seconds_total", "ovpnperf_openvpn_busiest_thread_cpu_seconds_total", "ovpnperf_openvpn_process_start_time_seconds"} {
				if on[name] == nil {
					t.Errorf("no %s", name)
				}
			}
		})
	}
}

// TestStatusUnread: a status file that is not one, or is missing, is a 0
// in ovpnperf_openvpn_status_read and a scrape that still answers 200.
func TestStatusUnread(t *testing.T) {
	for _, status := range []string{filepath.Join("testdata", "status-v2-partial.txt"), filepath.Join(t.TempDir(), "missing")} {
		body := scrape(t, fakeExporter(t, Options{ClientLabels: true}, "tun7", status))
		promtest.CheckMetrics(t, body)
		f := promtest.Parse(t, body)["ovpnperf_openvpn_status_read"]
		if f == nil || f.GetMetric()[0].GetGauge().GetValue() != 0 {
			t.Errorf("%s: ovpnperf_openvpn_status_read = %v, want 0", status, f)
		}
	}
}

// writeStatus writes a status-version 3 file of n clients.
func writeStatus(tb testing.TB, n int) string {
	var b strings.Builder
	b.WriteString("TITLE\tOpenVPN 2.6.14 x86_64-pc-linux-gnu\nTIME\t2026-11-29 10:00:00\t1795860000\n")
	b.WriteString("HEADER\tCLIENT_LIST\tCommon Name\tReal Address\tVirtual Address\tVirtual IPv6 Address\tBytes Received\tBytes Sent\tConnected Since\tConnected Since (time_t)\tUsername\tClient ID\tPeer ID\tData Channel Cipher\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "CLIENT_LIST\tclient%04d\t198.51.100.%d:%d\t10.8.%d.%d\t\t%d\t%d\t2026-11-29 09:00:00\t1795856400\tUNDEF\t%d\t%d\tAES-256-GCM\n",
			i, i%250+1, 40000+i, i/250, i%250+2, 1000*i, 2000*i, i, i)
	}
	b.WriteString("HEADER\tROUTING_TABLE\tVirtual Address\tCommon Name\tReal Address\tLast Ref\tLast Ref (time_t)\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "ROUTING_TABLE\t10.8.%d.%d\tclient%04d\t198.51.100.%d:%d\t2026-11-29 10:00:00\t1795860000\n", i/250, i%250+2, i, i%250+1, 40000+i)
	}
	b.WriteString("GLOBAL_STATS\tMax bcast/mcast queue length\t0\nGLOBAL_STATS\tdco_enabled\t0\nEND\n")
	p := filepath.Join(tb.TempDir(), "status")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkScrape1000Clients is one scrape of /metrics (read and parse the
// status file, read /proc, encode) of a process whose status file lists
// 1 000 clients; "labels" exports them all per client (--client-labels
// --max-clients 1000), "default" only their number.
func BenchmarkScrape1000Clients(b *testing.B) {
	status := writeStatus(b, 1000)
	for _, tc := range []struct {
		name string
		o    Options
	}{{"default", Options{}}, {"labels", Options{ClientLabels: true, MaxClients: 1000}}} {
		b.Run(tc.name, func(b *testing.B) {
			h := fakeExporter(b, tc.o, "tun7", status).Handler()
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK || w.Body.Len() == 0 {
					b.Fatalf("HTTP %d", w.Code)
				}
			}
		})
	}
}
