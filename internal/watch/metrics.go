package watch

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
	"github.com/ovpnperf/ovpnperf/internal/vpnproc"
	"github.com/ovpnperf/ovpnperf/internal/watch/watchdoc"
)

// EchoBuckets are the RTT histogram's upper bounds in seconds: 50 µs
// doubling to about 26 s, the default of the Prometheus smokeping prober
// (SuperQ/smokeping_prober), so that a dashboard made for it reads these
// histograms too. An echo is given up after 2 s (ping -W 2): the buckets
// above stay empty. The slice is the caller's own.
func EchoBuckets() []float64 { return prometheus.ExponentialBuckets(50e-6, 2, 20) }

// Label values of the finding metric for a finding about no one
// direction.
const directionAll = "all"

// metrics are what a watcher exports. Every label takes values from a
// fixed list (results, reasons, refusal kinds, finding kinds, outcomes,
// paths, directions), so the number of series is bounded; each series is
// made at 0 when the watcher starts, so a scrape names all of them.
type metrics struct {
	reg *prometheus.Registry

	rounds   *prometheus.CounterVec // result
	skipped  *prometheus.CounterVec // reason
	failed   *prometheus.CounterVec // kind
	refused  *prometheus.CounterVec // kind (rows)
	running  prometheus.Gauge
	lastTime prometheus.Gauge
	lastDur  prometheus.Gauge
	rate     *prometheus.GaugeVec // path, direction
	finding  *prometheus.GaugeVec // kind, direction, outcome
	load     prometheus.Gauge
	rtt      *prometheus.HistogramVec // path
	lost     *prometheus.CounterVec   // path

	mu       sync.Mutex
	ctr      *vpnproc.Counters // latest; nil when OpenVPN is not found
	proto    string
	busiest  float64
	haveBusy bool
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.rounds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ovpnperf_watch_rounds_total",
		Help: "Active rounds by result: ok, partial (some rows refused), skipped, failed."}, []string{"result"})
	m.skipped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ovpnperf_watch_rounds_skipped_total",
		Help: "Rounds not run, by reason: busy (the tunnel carried at least the skip share of its last measured rate), no-openvpn."}, []string{"reason"})
	m.failed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ovpnperf_watch_rounds_failed_total",
		Help: "Rounds that failed, by kind: no-server (no iperf3 at the far end), openvpn-gone, no-valid-row, error."}, []string{"kind"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ovpnperf_watch_rows_refused_total",
		Help: "Rows of measured rounds refused, by refusal kind (the run document's refusal kinds)."}, []string{"kind"})
	m.running = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ovpnperf_watch_round_running",
		Help: "1 while an active round sends load through the tunnel."})
	m.lastTime = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ovpnperf_watch_round_last_start_timestamp_seconds",
		Help: "When the last round (of any result) started, Unix time."})
	m.lastDur = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ovpnperf_watch_round_last_duration_seconds",
		Help: "How long the last round that ran took."})
	m.rate = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ovpnperf_watch_rate_bytes_per_second",
		Help: "Median TCP goodput (bytes a second, the base unit: bits are 8 times it) of the last round that measured the row, inside the tunnel or outside it, up (this host to the far end) or down."}, []string{"path", "direction"})
	m.finding = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ovpnperf_watch_finding",
		Help: "1 when the last measured round made this finding with this outcome, else 0."}, []string{"kind", "direction", "outcome"})
	m.load = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ovpnperf_watch_tunnel_load_ratio",
		Help: "The tunnel's traffic before the last round over its last measured rate (the larger direction): the skip rule's figure."})
	m.rtt = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ovpnperf_watch_echo_rtt_seconds",
		Help: "Round trips of single ICMP echoes to the far end, inside and outside the tunnel, between active rounds.", Buckets: EchoBuckets()}, []string{"path"})
	m.lost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ovpnperf_watch_echo_lost_total",
		Help: "ICMP echoes without an answer within 2 s, by path."}, []string{"path"})
	m.reg.MustRegister(m.rounds, m.skipped, m.failed, m.refused, m.running, m.lastTime, m.lastDur, m.rate, m.finding, m.load, m.rtt, m.lost, &counterCollector{m})
	for _, r := range watchdoc.Results() {
		m.rounds.WithLabelValues(r)
	}
	for _, r := range watchdoc.SkipReasons() {
		m.skipped.WithLabelValues(r)
	}
	for _, k := range watchdoc.FailureKinds() {
		m.failed.WithLabelValues(k)
	}
	for _, k := range measure.RefusalKinds() {
		m.refused.WithLabelValues(k)
	}
	for _, p := range []string{watchdoc.PathInside, watchdoc.PathOutside} {
		m.rtt.WithLabelValues(p)
		m.lost.WithLabelValues(p)
	}
	return m
}

// setFindings sets the finding series from one measured round: every kind
// × direction × outcome is 0 but the ones the round found.
func (m *metrics) setFindings(fs []finding.Finding) {
	for _, k := range finding.Kinds() {
		for _, d := range []string{measure.DirectionUp, measure.DirectionDown, directionAll} {
			for _, o := range verdict.Outcomes() {
				m.finding.WithLabelValues(string(k), d, string(o)).Set(0)
			}
		}
	}
	for _, f := range fs {
		if !f.Kind.Valid() || !f.Outcome.Valid() {
			continue // a label outside the lists would be unbounded
		}
		d := f.Subject.Direction
		if d != measure.DirectionUp && d != measure.DirectionDown {
			d = directionAll
		}
		m.finding.WithLabelValues(string(f.Kind), d, string(f.Outcome)).Set(1)
	}
}

// setCounters keeps the OpenVPN process's latest counters (nil: not
// found) and the busiest thread's share of a core since the read before.
func (m *metrics) setCounters(c *vpnproc.Counters, proto string, busiest float64, haveBusy bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctr, m.proto, m.busiest, m.haveBusy = c, proto, busiest, haveBusy
}

// counterCollector exports the counters of the last read as they are:
// the kernel's and the process's own counters, so a restart of OpenVPN
// is a counter reset, which Prometheus's rate() handles.
type counterCollector struct{ m *metrics }

var (
	descUp          = prometheus.NewDesc("ovpnperf_watch_openvpn_up", "1 when the OpenVPN process of the tunnel is found and read.", nil, nil)
	descCPU         = prometheus.NewDesc("ovpnperf_watch_openvpn_cpu_seconds_total", "CPU time of the OpenVPN process, all threads, user and system.", nil, nil)
	descBusiest     = prometheus.NewDesc("ovpnperf_watch_openvpn_busiest_thread_ratio", "The busiest OpenVPN thread's share of one core over the last probe interval (1: a whole core, its ceiling).", nil, nil)
	descDrops       = prometheus.NewDesc("ovpnperf_watch_openvpn_socket_drops_total", "Datagrams OpenVPN's UDP socket dropped (its receive buffer was full).", nil, nil)
	descSockRetrans = prometheus.NewDesc("ovpnperf_watch_openvpn_socket_retransmits_total", "Segments OpenVPN's TCP socket retransmitted (TCP transport only).", nil, nil)
	descRcvbuf      = prometheus.NewDesc("ovpnperf_watch_openvpn_socket_receive_buffer_bytes", "The receive buffer the kernel gave OpenVPN's socket (SO_RCVBUF).", nil, nil)
	descSndbuf      = prometheus.NewDesc("ovpnperf_watch_openvpn_socket_send_buffer_bytes", "The send buffer the kernel gave OpenVPN's socket (SO_SNDBUF).", nil, nil)
	descTunBytes    = prometheus.NewDesc("ovpnperf_watch_tun_bytes_total", "Bytes through the tun device: up into the tunnel (its tx), down out of it (its rx).", []string{"direction"}, nil)
	descTunDrops    = prometheus.NewDesc("ovpnperf_watch_tun_transmit_dropped_total", "Packets the tun device dropped before OpenVPN read them.", nil, nil)
	descFrag        = prometheus.NewDesc("ovpnperf_watch_ip_fragments_created_total", "IP fragments this host made, all interfaces (/proc/net/snmp FragCreates).", nil, nil)
	descFragFails   = prometheus.NewDesc("ovpnperf_watch_ip_fragmentation_failures_total", "Datagrams this host had to drop instead of fragmenting (FragFails).", nil, nil)
	descReasm       = prometheus.NewDesc("ovpnperf_watch_ip_reassembly_requests_total", "IP fragments received for reassembly (ReasmReqds).", nil, nil)
	descReasmFails  = prometheus.NewDesc("ovpnperf_watch_ip_reassembly_failures_total", "Datagrams that could not be reassembled (ReasmFails).", nil, nil)
	descTCPRetrans  = prometheus.NewDesc("ovpnperf_watch_tcp_retransmitted_segments_total", "TCP segments this host retransmitted, all sockets (RetransSegs).", nil, nil)
	descUnread      = prometheus.NewDesc("ovpnperf_watch_counters_unread", "How many of these counters could not be read at the last probe (the log says which).", nil, nil)
)

func (k *counterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descCPU, descBusiest, descDrops, descSockRetrans, descRcvbuf, descSndbuf, descTunBytes, descTunDrops,
		descFrag, descFragFails, descReasm, descReasmFails, descTCPRetrans, descUnread} {
		ch <- d
	}
}

func (k *counterCollector) Collect(ch chan<- prometheus.Metric) {
	m := k.m
	m.mu.Lock()
	c, proto, busiest, haveBusy := m.ctr, m.proto, m.busiest, m.haveBusy
	m.mu.Unlock()
	if c == nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	g := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	n := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	g(descUp, 1)
	ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, c.CPU.Seconds())
	if haveBusy {
		g(descBusiest, busiest)
	}
	// A counter that could not be read is left out, never exported as 0
	// (Counters.Unread names it, by the prefixes vpnproc writes).
	if proto == "udp" && !unread(c, "socket drops") {
		n(descDrops, c.SocketDrops)
	}
	if !unread(c, "socket buffers") {
		if proto == "tcp" {
			n(descSockRetrans, c.TCPRetrans)
		}
		g(descRcvbuf, float64(c.RcvbufBytes))
		g(descSndbuf, float64(c.SndbufBytes))
	}
	if !unread(c, "tun device") {
		n(descTunBytes, c.TunTxBytes, measure.DirectionUp)
		n(descTunBytes, c.TunRxBytes, measure.DirectionDown)
		n(descTunDrops, c.TunTxDropped)
	}
	if !unread(c, "IP fragment counters") {
		n(descFrag, c.SNMP.FragCreates)
		n(descFragFails, c.SNMP.FragFails)
		n(descReasm, c.SNMP.ReasmReqds)
		n(descReasmFails, c.SNMP.ReasmFails)
		n(descTCPRetrans, c.SNMP.RetransSegs)
	}
	g(descUnread, float64(len(c.Unread)))
}

// unread reports whether c names the counter of prefix as unread.
func unread(c *vpnproc.Counters, prefix string) bool {
	for _, u := range c.Unread {
		if strings.HasPrefix(u, prefix) {
			return true
		}
	}
	return false
}
