// Package exporter serves Prometheus metrics of every OpenVPN process in
// its network namespace, whoever started it (a distribution's
// openvpn@.service, `cluster serve`, a hand-started server or client).
//
// Everything is read without touching OpenVPN:
//
//	/proc (prometheus/procfs)      processes named openvpn, their command
//	                               line and config (status, dev, cd), CPU
//	                               time of the process and of each thread,
//	                               start time
//	internal/vpnproc               the tun device it holds, its transport
//	                               socket's drops (/proc/net/udp) and
//	                               buffers (sock_diag), the tun device's
//	                               counters (netlink)
//	netlink                        with data channel offload (no tun: an
//	                               ovpn device) that device's counters
//	the status file (--status)     clients, per-client bytes; versions 1,
//	                               2 and 3 and a client's statistics
//
// The management interface is never used: OpenVPN takes one management
// client at a time, and an exporter holding it would lock the admin's
// tools out.
//
// Labels stay bounded: per process, the device name; per client (only
// with Options.ClientLabels) the common name, capped at MaxClients keys
// per scrape, the same names summed (internal/clientseries).
package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/procfs"
	"github.com/vishvananda/netlink"

	"github.com/ovpnperf/ovpnperf/internal/clientseries"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/vpnproc"
)

// DefaultMaxClients is how many per-client keys a scrape exports with
// client labels on when Options.MaxClients is zero.
const DefaultMaxClients = clientseries.DefaultMax

// Options configure an exporter.
type Options struct {
	// ClientLabels exports bytes per client, labelled by common name;
	// MaxClients caps those keys (device, common name) per scrape, the
	// busiest kept (0: DefaultMaxClients).
	ClientLabels bool
	MaxClients   int
	// Proc is where procfs is mounted ("": /proc).
	Proc string
	// ReadTimeout bounds the reading of one status file (0: 5 s).
	ReadTimeout time.Duration
	Log         *slog.Logger
}

// Exporter finds the OpenVPN processes at each scrape and reads them.
type Exporter struct {
	opts    Options
	fs      procfs.FS
	selfNet uint32

	mu    sync.Mutex
	known map[procKey]*target
	// find lists the processes to read; tests replace it.
	find func() ([]*target, int, error)
}

// procKey tells a process from a later one with the same pid.
type procKey struct {
	pid   int
	start uint64
}

// target is one OpenVPN process and what was found about it once.
type target struct {
	pid     int
	proc    procfs.Proc
	dev     string
	status  string // absolute path of the status file, "" without one
	version int    // status-version of the config (0: not given, 1)
	// tun: the process held a tun device when first seen; its socket
	// is looked up again at each scrape (a client's restart opens a new
	// one).
	tun bool
	// why says what could not be found (the device, the socket).
	why string
}

// New returns an exporter reading procfs at o.Proc.
func New(o Options) (*Exporter, error) {
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.MaxClients == 0 {
		o.MaxClients = DefaultMaxClients
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	fs, err := procfs.NewFS(o.Proc)
	if err != nil {
		return nil, fmt.Errorf("exporter: %w", err)
	}
	self, err := fs.Self()
	if err != nil {
		return nil, fmt.Errorf("exporter: %w", err)
	}
	ns, err := self.Namespaces()
	if err != nil {
		return nil, fmt.Errorf("exporter: reading this process's network namespace: %w", err)
	}
	e := &Exporter{opts: o, fs: fs, selfNet: ns["net"].Inode, known: map[procKey]*target{}}
	e.find = e.discover
	return e, nil
}

// discover lists the processes named openvpn in this network namespace,
// keeping what was found about each from one scrape to the next; the second
// result counts the processes whose device could not be told.
func (e *Exporter) discover() ([]*target, int, error) {
	procs, err := e.fs.AllProcs()
	if err != nil {
		return nil, 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[procKey]bool{}
	var out []*target
	devs := map[string]bool{}
	unread := 0
	for _, p := range procs {
		if p.PID == os.Getpid() {
			continue
		}
		if comm, err := p.Comm(); err != nil || comm != "openvpn" {
			continue
		}
		st, err := p.Stat()
		if err != nil {
			continue // gone
		}
		if ns, err := p.Namespaces(); err != nil || ns["net"].Inode != e.selfNet {
			continue // another network namespace, or not ours to look at
		}
		k := procKey{p.PID, st.Starttime}
		seen[k] = true
		t, ok := e.known[k]
		if !ok {
			t = e.inspect(p)
			e.known[k] = t
		}
		// Two processes claiming one device (a config's `dev tun` read
		// when the device itself could not be) would make duplicate
		// series: only the first is exported.
		if t.dev == "" || devs[t.dev] {
			unread++
			continue
		}
		devs[t.dev] = true
		out = append(out, t)
	}
	for k := range e.known {
		if !seen[k] {
			delete(e.known, k)
		}
	}
	return out, unread, nil
}

// inspect finds a process's device, socket and status file.
func (e *Exporter) inspect(p procfs.Proc) *target {
	t := &target{pid: p.PID, proc: p}
	cwd, _ := p.Cwd()
	resolve := func(path string) string {
		if path == "" || filepath.IsAbs(path) || cwd == "" {
			return path
		}
		return filepath.Join(cwd, path)
	}
	argv, err := p.CmdLine()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), e.opts.ReadTimeout)
		defer cancel()
		so, err := parseCmdline(argv, func(path string) ([]byte, error) {
			return inputfile.ReadFile(ctx, resolve(path), inputfile.Config())
		})
		if err != nil {
			t.why = err.Error()
		}
		t.dev, t.status, t.version = so.Dev, resolve(so.Status), so.Version
	}
	// The tun device the process holds is the truth (a config's `dev tun`
	// names a numbered one); without one (data channel offload: an ovpn
	// device; or not root) the config's name stands.
	if v, err := vpnproc.Open(p.PID, "", netip.Addr{}); err == nil {
		t.tun, t.dev = true, v.Tun
	} else if t.why == "" {
		t.why = err.Error()
	}
	if t.why != "" {
		e.opts.Log.Info("openvpn process only partly read", "pid", p.PID, "dev", t.dev, "why", t.why)
	}
	return t
}

// Handler serves the metrics (the /metrics endpoint).
func (e *Exporter) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(e))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Serve serves /metrics on l until ctx ends.
func (e *Exporter) Serve(ctx context.Context, l net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", e.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(l)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

type collector struct {
	e *Exporter
	d map[string]*prometheus.Desc
}

func newCollector(e *Exporter) *collector {
	dev := []string{"dev"}
	c := &collector{e: e, d: map[string]*prometheus.Desc{}}
	add := func(name, help string, labels []string) {
		c.d[name] = prometheus.NewDesc("ovpnperf_openvpn_"+name, help, labels, nil)
	}
	add("processes", "OpenVPN processes found in this network namespace.", nil)
	add("processes_unread", "OpenVPN processes of this network namespace whose device could not be told (not exported).", nil)
	add("process_info", "1 per OpenVPN process exported: its pid, whether its device is a data channel offload (ovpn) one, the status file's format (0: none read).", []string{"dev", "pid", "dco", "status_version"})
	add("process_start_time_seconds", "Start time of the process since the epoch.", dev)
	add("cpu_seconds_total", "CPU seconds of the process, all threads, user and system.", dev)
	add("busiest_thread_cpu_seconds_total", "CPU seconds of the process's busiest thread (a full core is rate 1).", dev)
	add("threads", "Threads of the process.", dev)
	add("socket_drops_total", "Datagrams the kernel dropped on the transport socket (UDP: /proc/net/udp drops; TCP: sock_diag).", []string{"dev", "proto"})
	add("socket_receive_buffer_bytes", "Receive buffer the kernel gave the transport socket (SO_RCVBUF).", []string{"dev", "proto"})
	add("socket_send_buffer_bytes", "Send buffer the kernel gave the transport socket (SO_SNDBUF).", []string{"dev", "proto"})
	add("tun_receive_bytes_total", "Bytes the device received: packets OpenVPN wrote into the tunnel's device, decrypted.", dev)
	add("tun_transmit_bytes_total", "Bytes the device transmitted: packets for OpenVPN to encrypt.", dev)
	add("tun_receive_packets_total", "Packets the device received.", dev)
	add("tun_transmit_packets_total", "Packets the device transmitted.", dev)
	add("tun_transmit_drops_total", "Packets the device dropped on transmit (OpenVPN did not read them fast enough).", dev)
	add("tun_transmit_queue_length", "The device's txqueuelen.", dev)
	add("status_read", "1 if the status file was read at this scrape, 0 if it could not be (see the exporter's log).", dev)
	add("clients", "Clients in the status file's client list.", dev)
	add("link_received_bytes_total", "A client's or point-to-point process's TCP/UDP read bytes, from its status file.", dev)
	add("link_sent_bytes_total", "A client's or point-to-point process's TCP/UDP write bytes, from its status file.", dev)
	add("client_received_bytes_total", "With client labels: bytes the server received from a client, by common name (the same names summed).", []string{"dev", "common_name"})
	add("client_sent_bytes_total", "With client labels: bytes the server sent to a client, by common name (the same names summed).", []string{"dev", "common_name"})
	add("client_series_dropped", "With client labels: (device, common name) keys left out of this scrape by --max-clients.", nil)
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	targets, unread, err := e.find()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.d["processes"], err)
		return
	}
	gauge := func(name string, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.GaugeValue, v, lv...)
	}
	counter := func(name string, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.CounterValue, v, lv...)
	}
	gauge("processes", float64(len(targets)+unread))
	gauge("processes_unread", float64(unread))
	var rows []clientseries.Row
	for _, t := range targets {
		st, err := t.proc.Stat()
		if err != nil {
			continue // exited since discovery
		}
		if start, err := st.StartTime(); err == nil {
			gauge("process_start_time_seconds", start, t.dev)
		}
		counter("cpu_seconds_total", st.CPUTime(), t.dev)
		gauge("threads", float64(st.NumThreads), t.dev)
		if threads, err := e.fs.AllThreads(t.pid); err == nil {
			busiest := 0.0
			for _, th := range threads {
				if ts, err := th.Stat(); err == nil && ts.CPUTime() > busiest {
					busiest = ts.CPUTime()
				}
			}
			counter("busiest_thread_cpu_seconds_total", busiest, t.dev)
		}
		dco := "0"
		var vpn *vpnproc.Process
		if t.tun {
			vpn, _ = vpnproc.Open(t.pid, "", netip.Addr{})
		}
		if vpn != nil {
			cs, err := vpn.Read()
			if err == nil {
				proto := vpn.Socket.Proto
				counter("socket_drops_total", float64(cs.SocketDrops), t.dev, proto)
				if cs.RcvbufBytes > 0 {
					gauge("socket_receive_buffer_bytes", float64(cs.RcvbufBytes), t.dev, proto)
					gauge("socket_send_buffer_bytes", float64(cs.SndbufBytes), t.dev, proto)
				}
				c.tun(ch, t.dev, cs.TunRxBytes, cs.TunTxBytes, cs.TunRxPackets, cs.TunTxPackets, cs.TunTxDropped, cs.TunTxQueueLen)
			}
		} else if l, err := netlink.LinkByName(t.dev); err == nil { // Equivalent to: ip -s link show DEV
			// No tun descriptor: with data channel offload the kernel's
			// ovpn device carries the data channel, and its counters
			// are the interface's statistics.
			if k := l.Type(); k == "ovpn" || k == "ovpn-dco" { // Linux 6.16's driver, OpenVPN 2.6's module
				dco = "1"
			}
			if s := l.Attrs().Statistics; s != nil {
				c.tun(ch, t.dev, s.RxBytes, s.TxBytes, s.RxPackets, s.TxPackets, s.TxDropped, l.Attrs().TxQLen)
			}
		}
		version := 0
		if t.status != "" {
			s, err := e.readStatus(t.status)
			if err != nil {
				e.opts.Log.Warn("status file unread", "dev", t.dev, "file", t.status, "err", err)
				gauge("status_read", 0, t.dev)
			} else {
				version = s.Version
				gauge("status_read", 1, t.dev)
				if s.Version > 0 {
					gauge("clients", float64(len(s.Clients)), t.dev)
				}
				if n, ok := s.Counters["TCP/UDP read bytes"]; ok {
					counter("link_received_bytes_total", float64(n), t.dev)
				}
				if n, ok := s.Counters["TCP/UDP write bytes"]; ok {
					counter("link_sent_bytes_total", float64(n), t.dev)
				}
				if e.opts.ClientLabels {
					for _, cl := range s.Clients {
						rows = append(rows, clientseries.Row{Group: t.dev, Name: cl.CommonName, Received: float64(cl.BytesReceived), Sent: float64(cl.BytesSent)})
					}
				}
			}
		}
		gauge("process_info", 1, t.dev, strconv.Itoa(t.pid), dco, strconv.Itoa(version))
	}
	if e.opts.ClientLabels {
		res := clientseries.Aggregate(rows, e.opts.MaxClients)
		for _, r := range res.Rows {
			counter("client_received_bytes_total", r.Received, r.Group, r.Name)
			counter("client_sent_bytes_total", r.Sent, r.Group, r.Name)
		}
		gauge("client_series_dropped", float64(res.Dropped))
	}
}

func (c *collector) tun(ch chan<- prometheus.Metric, dev string, rxB, txB, rxP, txP, txDrop uint64, qlen int) {
	for name, v := range map[string]uint64{"tun_receive_bytes_total": rxB, "tun_transmit_bytes_total": txB,
		"tun_receive_packets_total": rxP, "tun_transmit_packets_total": txP, "tun_transmit_drops_total": txDrop} {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.CounterValue, float64(v), dev)
	}
	ch <- prometheus.MustNewConstMetric(c.d["tun_transmit_queue_length"], prometheus.GaugeValue, float64(qlen), dev)
}

// readStatus reads and parses a status file; a file met half rewritten is
// read once more.
func (e *Exporter) readStatus(path string) (*Status, error) {
	var err error
	for try := 0; try < 2; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), e.opts.ReadTimeout)
		var b []byte
		b, err = inputfile.ReadFile(ctx, path, inputfile.Status())
		cancel()
		if err != nil {
			return nil, err
		}
		var s *Status
		if s, err = ParseStatus(b); err == nil {
			return s, nil
		}
		if !errors.Is(err, ErrIncomplete) {
			return nil, err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, err
}
