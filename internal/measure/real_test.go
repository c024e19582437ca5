package measure

import (
	"strings"
	"testing"
)

// realDoc is a measure document as realnet fills it, replayable without a
// tunnel: the findings are a pure function of it.
func realDoc(tunnel, outside []float64, counters func(i int) OpenVPNCounters) *Report {
	rep := &Report{Schema: Schema, Scenario: Scenario{Command: CommandMeasure,
		Networks: []Network{{Name: NetworkReal}},
		Real: &RealPath{Host: "198.51.100.2", Tunnel: "10.8.0.1", TunDevice: "tun0", Proto: "udp", TunMTU: 1500, PathMTU: 1400, PathMTULearnt: true,
			PredictedRatio: 0.964, PredictionBasis: "model", MTUAdvice: "For a path MTU of 1400: set mssfix 1400 mtu", BufferAdvice: "Set `rcvbuf 4194304`."}}}
	t := NewRow(NetworkReal, VariantTunnel, PathTunnel, DirectionDown, "udp")
	o := NewRow(NetworkReal, VariantOutside, PathRouted, DirectionDown, "tcp")
	for i := range tunnel {
		t.AddSample(tunnel[i])
		o.AddSample(outside[i])
		t.OpenVPN = append(t.OpenVPN, counters(i))
		o.OpenVPN = append(o.OpenVPN, OpenVPNCounters{})
	}
	t.CPUSecondsPerGB = map[string]float64{"openvpn": 12}
	rep.Rows = []Row{o, t}
	return rep
}

func TestRealFindings(t *testing.T) {
	quiet := func(int) OpenVPNCounters { return OpenVPNCounters{BusiestThreadShare: 0.2, RcvbufBytes: 425984} }
	for _, c := range []struct {
		name             string
		tunnel, outside  []float64
		counters         func(int) OpenVPNCounters
		want, wantAbsent []string
	}{
		{"path-bound", []float64{46e6, 46.5e6, 45.8e6}, []float64{47.5e6, 48e6, 47.6e6}, quiet,
			[]string{"real down (198.51.100.2 → this host): path-bound", "Shown wrong by"}, []string{"CPU-bound", "socket drops", "fragmentation"}},
		{"too few samples", []float64{46e6, 46.5e6}, []float64{47.5e6, 48e6}, quiet,
			[]string{"cannot be told (noise)"}, []string{"path-bound: the tunnel"}},
		{"CPU-bound with drops", []float64{20e6, 21e6, 19e6}, []float64{47.5e6, 48e6, 47.6e6},
			func(i int) OpenVPNCounters {
				return OpenVPNCounters{BusiestThreadShare: 0.95, SocketDrops: uint64(10 * i), RcvbufBytes: 32768}
			},
			[]string{"not path-bound", "CPU-bound: OpenVPN's busiest thread used at least 95 %", "socket drops: OpenVPN's UDP socket dropped 30 datagrams in 2 of 3", "receive buffer of 32768 bytes", "rcvbuf 4194304"}, nil},
		{"fragments", []float64{44e6, 44.5e6, 44.2e6}, []float64{47.5e6, 48e6, 47.6e6},
			func(int) OpenVPNCounters { return OpenVPNCounters{FragCreates: 1000} },
			[]string{"fragmentation: this host made 3000 IP fragments", "path MTU 1400 learnt", "mssfix 1400 mtu"}, []string{"socket drops"}},
		{"unread", []float64{46e6, 46.5e6, 45.8e6}, []float64{47.5e6, 48e6, 47.6e6},
			func(int) OpenVPNCounters {
				return OpenVPNCounters{Unread: []string{"socket buffers (sock_diag): EPERM"}}
			},
			[]string{"real: not read (findings that need these are not tested here): socket buffers (sock_diag): EPERM"}, nil},
	} {
		got := strings.Join(Findings(realDoc(c.tunnel, c.outside, c.counters)), "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, got)
			}
		}
		for _, w := range c.wantAbsent {
			if strings.Contains(got, w) {
				t.Errorf("%s: %q in\n%s", c.name, w, got)
			}
		}
	}
}
