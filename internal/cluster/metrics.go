package cluster

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ovpnperf/ovpnperf/internal/clientseries"
)

// DefaultPerClientMax is how many per-client keys (instance, common name)
// a scrape exports when Options.PerClientMax is zero.
const DefaultPerClientMax = clientseries.DefaultMax

// collector reads the supervisors' state at scrape time, so a metric is
// never staler than the last management poll. Names follow Prometheus's
// conventions: base units, _total on counters, labels bounded by the
// cluster's size except common_name, which is opt-in and capped.
type collector struct {
	id        string
	status    func() []InstanceStatus
	perClient bool
	max       int

	up, clients, bytesIn, bytesOut, restarts, cpu *prometheus.Desc
	clientIn, clientOut, clientDropped            *prometheus.Desc
}

func newCollector(id string, status func() []InstanceStatus, perClient bool, max int) *collector {
	if max == 0 {
		max = DefaultPerClientMax
	}
	// Not "instance": Prometheus sets that label on every scraped series
	// (the target's address) and would rename this one exported_instance.
	l := []string{"cluster", "openvpn_instance", "proto", "port"}
	return &collector{id: id, status: status, perClient: perClient, max: max,
		up:            prometheus.NewDesc("ovpnperf_cluster_instance_up", "1 if the instance is up (ready and management state CONNECTED).", l, nil),
		clients:       prometheus.NewDesc("ovpnperf_cluster_instance_clients", "Connected clients (management load-stats).", l, nil),
		bytesIn:       prometheus.NewDesc("ovpnperf_cluster_instance_received_bytes_total", "Bytes the current process read from its transport socket (resets when the supervisor restarts it).", l, nil),
		bytesOut:      prometheus.NewDesc("ovpnperf_cluster_instance_sent_bytes_total", "Bytes the current process wrote to its transport socket (resets when the supervisor restarts it).", l, nil),
		restarts:      prometheus.NewDesc("ovpnperf_cluster_instance_restarts_total", "Restarts by the supervisor.", l, nil),
		cpu:           prometheus.NewDesc("ovpnperf_cluster_instance_cpu_seconds_total", "CPU seconds of the current process, user and system (resets when the supervisor restarts it).", l, nil),
		clientIn:      prometheus.NewDesc("ovpnperf_cluster_client_received_bytes_total", "Bytes received from a client, by common name (clients with the same name summed).", append(l, "common_name"), nil),
		clientOut:     prometheus.NewDesc("ovpnperf_cluster_client_sent_bytes_total", "Bytes sent to a client, by common name (clients with the same name summed).", append(l, "common_name"), nil),
		clientDropped: prometheus.NewDesc("ovpnperf_cluster_client_series_dropped", "Per-client keys (instance, common name) left out of this scrape by the cap (--per-client-max).", []string{"cluster"}, nil),
	}
}

func (k *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{k.up, k.clients, k.bytesIn, k.bytesOut, k.restarts, k.cpu, k.clientIn, k.clientOut, k.clientDropped} {
		ch <- d
	}
}

func (k *collector) Collect(ch chan<- prometheus.Metric) {
	var rows []clientseries.Row
	labels := map[string][]string{}
	for _, s := range k.status() {
		lv := []string{k.id, s.Name, s.Proto, strconv.Itoa(int(s.Port))}
		labels[s.Name] = lv
		up := 0.0
		if s.State == StateUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(k.up, prometheus.GaugeValue, up, lv...)
		ch <- prometheus.MustNewConstMetric(k.clients, prometheus.GaugeValue, float64(s.Clients), lv...)
		ch <- prometheus.MustNewConstMetric(k.bytesIn, prometheus.CounterValue, float64(s.BytesIn), lv...)
		ch <- prometheus.MustNewConstMetric(k.bytesOut, prometheus.CounterValue, float64(s.BytesOut), lv...)
		ch <- prometheus.MustNewConstMetric(k.restarts, prometheus.CounterValue, float64(s.Restarts), lv...)
		ch <- prometheus.MustNewConstMetric(k.cpu, prometheus.CounterValue, s.CPUSeconds, lv...)
		if !k.perClient {
			continue // read for --site only
		}
		for _, pc := range s.PerClient {
			rows = append(rows, clientseries.Row{Group: s.Name, Name: pc.CommonName, Received: float64(pc.BytesIn), Sent: float64(pc.BytesOut)})
		}
	}
	if !k.perClient {
		return
	}
	res := clientseries.Aggregate(rows, k.max)
	for _, r := range res.Rows {
		lv := append(append([]string(nil), labels[r.Group]...), r.Name)
		ch <- prometheus.MustNewConstMetric(k.clientIn, prometheus.CounterValue, r.Received, lv...)
		ch <- prometheus.MustNewConstMetric(k.clientOut, prometheus.CounterValue, r.Sent, lv...)
	}
	ch <- prometheus.MustNewConstMetric(k.clientDropped, prometheus.GaugeValue, float64(res.Dropped), k.id)
}

// ServeMetrics serves /metrics on l until it is closed.
func (c *Cluster) ServeMetrics(l net.Listener) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(c.id, c.Status, c.opts.PerClient, c.opts.PerClientMax))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return (&http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}).Serve(l)
}

// dispatchCollector exports a registry dispatcher's view and counts.
type dispatchCollector struct {
	d                                   *Dispatcher
	v                                   *View
	stale, age, instances, load, served *prometheus.Desc
}

func (k *dispatchCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{k.stale, k.age, k.instances, k.load, k.served} {
		ch <- d
	}
}

func (k *dispatchCollector) Collect(ch chan<- prometheus.Metric) {
	st := k.v.Status()
	stale := 0.0
	if st.Stale {
		stale = 1
	}
	ch <- prometheus.MustNewConstMetric(k.stale, prometheus.GaugeValue, stale)
	ch <- prometheus.MustNewConstMetric(k.age, prometheus.GaugeValue, st.AgeSeconds)
	for _, e := range k.v.Instances() {
		up := 0.0
		if e.State == StateUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(k.instances, prometheus.GaugeValue, up, e.Name, e.State)
		ch <- prometheus.MustNewConstMetric(k.load, prometheus.GaugeValue, float64(e.Clients+e.Assigned), e.Name)
	}
	ch <- prometheus.MustNewConstMetric(k.served, prometheus.CounterValue, float64(k.d.Assigned.Load()), "assigned")
	ch <- prometheus.MustNewConstMetric(k.served, prometheus.CounterValue, float64(k.d.Refused.Load()), "refused")
}

// DispatchStatus is the JSON a registry dispatcher serves at /status.
type DispatchStatus struct {
	Schema    string     `json:"schema"`
	Strategy  string     `json:"strategy"`
	View      ViewStatus `json:"view"`
	Assigned  int64      `json:"assigned"`
	Refused   int64      `json:"refused"`
	Instances []Endpoint `json:"instances"`
}

// DispatchStatusSchema names DispatchStatus's format.
const DispatchStatusSchema = "ovpnperf/cluster-dispatch-status/v1"

// ServeDispatchMetrics serves /metrics (Prometheus) and /status (JSON) of a
// dispatcher over a registry view on l until it is closed.
func ServeDispatchMetrics(l net.Listener, d *Dispatcher, v *View) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&dispatchCollector{d: d, v: v,
		stale:     prometheus.NewDesc("ovpnperf_cluster_registry_stale", "1 while etcd does not answer and the dispatcher assigns from its last view.", nil, nil),
		age:       prometheus.NewDesc("ovpnperf_cluster_registry_view_age_seconds", "Seconds since etcd last answered this dispatcher (-1: never).", nil, nil),
		instances: prometheus.NewDesc("ovpnperf_cluster_registry_instance_up", "1 for an instance of the view that is up, by instance (host/name) and state.", []string{"openvpn_instance", "state"}, nil),
		load:      prometheus.NewDesc("ovpnperf_cluster_registry_instance_load", "Clients reported plus assignments recorded in the registry.", []string{"openvpn_instance"}, nil),
		served:    prometheus.NewDesc("ovpnperf_cluster_dispatch_replies_total", "Dispatcher replies by result.", []string{"result"}, nil),
	})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(DispatchStatus{Schema: DispatchStatusSchema, Strategy: d.Strategy, View: v.Status(),
			Assigned: d.Assigned.Load(), Refused: d.Refused.Load(), Instances: v.Instances()})
	})
	return (&http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}).Serve(l)
}
