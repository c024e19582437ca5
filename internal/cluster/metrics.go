package cluster

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// collector reads the supervisors' state at scrape time, so a metric is
// never staler than the last management poll.
type collector struct {
	c                                             *Cluster
	up, clients, bytesIn, bytesOut, restarts, cpu *prometheus.Desc
	clientIn, clientOut                           *prometheus.Desc
}

func newCollector(c *Cluster) *collector {
	l := []string{"cluster", "instance", "proto", "port"}
	return &collector{c: c,
		up:        prometheus.NewDesc("ovpnperf_cluster_instance_up", "1 if the instance is up (ready and management state CONNECTED).", l, nil),
		clients:   prometheus.NewDesc("ovpnperf_cluster_instance_clients", "Connected clients (management load-stats).", l, nil),
		bytesIn:   prometheus.NewDesc("ovpnperf_cluster_instance_received_bytes", "Bytes the current process read from its transport socket.", l, nil),
		bytesOut:  prometheus.NewDesc("ovpnperf_cluster_instance_sent_bytes", "Bytes the current process wrote to its transport socket.", l, nil),
		restarts:  prometheus.NewDesc("ovpnperf_cluster_instance_restarts_total", "Restarts by the supervisor.", l, nil),
		cpu:       prometheus.NewDesc("ovpnperf_cluster_instance_cpu_seconds", "CPU seconds of the current process.", l, nil),
		clientIn:  prometheus.NewDesc("ovpnperf_cluster_client_received_bytes", "Bytes received from a client, by common name.", append(l, "common_name"), nil),
		clientOut: prometheus.NewDesc("ovpnperf_cluster_client_sent_bytes", "Bytes sent to a client, by common name.", append(l, "common_name"), nil),
	}
}

func (k *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{k.up, k.clients, k.bytesIn, k.bytesOut, k.restarts, k.cpu, k.clientIn, k.clientOut} {
		ch <- d
	}
}

func (k *collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range k.c.Status() {
		lv := []string{k.c.id, s.Name, s.Proto, strconv.Itoa(int(s.Port))}
		up := 0.0
		if s.State == StateUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(k.up, prometheus.GaugeValue, up, lv...)
		ch <- prometheus.MustNewConstMetric(k.clients, prometheus.GaugeValue, float64(s.Clients), lv...)
		ch <- prometheus.MustNewConstMetric(k.bytesIn, prometheus.GaugeValue, float64(s.BytesIn), lv...)
		ch <- prometheus.MustNewConstMetric(k.bytesOut, prometheus.GaugeValue, float64(s.BytesOut), lv...)
		ch <- prometheus.MustNewConstMetric(k.restarts, prometheus.CounterValue, float64(s.Restarts), lv...)
		ch <- prometheus.MustNewConstMetric(k.cpu, prometheus.GaugeValue, s.CPUSeconds, lv...)
		if !k.c.opts.PerClient {
			continue // read for --site only
		}
		for _, pc := range s.PerClient {
			ch <- prometheus.MustNewConstMetric(k.clientIn, prometheus.GaugeValue, float64(pc.BytesIn), append(lv, pc.CommonName)...)
			ch <- prometheus.MustNewConstMetric(k.clientOut, prometheus.GaugeValue, float64(pc.BytesOut), append(lv, pc.CommonName)...)
		}
	}
}

// ServeMetrics serves /metrics on l until it is closed.
func (c *Cluster) ServeMetrics(l net.Listener) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(c))
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
		instances: prometheus.NewDesc("ovpnperf_cluster_registry_instance_up", "1 for an instance of the view that is up, by instance (host/name) and state.", []string{"instance", "state"}, nil),
		load:      prometheus.NewDesc("ovpnperf_cluster_registry_instance_load", "Clients reported plus assignments recorded in the registry.", []string{"instance"}, nil),
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
