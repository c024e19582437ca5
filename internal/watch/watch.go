// Package watch watches a running OpenVPN tunnel from one end over time
// (`ovpnperf watch`): between active rounds it sends no load and reads
// counters only (the OpenVPN process's CPU and busiest thread, its socket's
// drops and buffers, the tun device's drops and bytes, the host's IP
// fragments and TCP retransmissions: package vpnproc) and sends one ICMP
// echo inside and one outside the tunnel every probe interval; every
// Every it takes the samples `ovpnperf measure` takes (package realnet),
// unless the tunnel already carries a sizeable share of its last measured
// rate (Busy). It exports all of it as Prometheus metrics and appends each
// round to a history (package watchdoc's records).
//
//	passive loop (every ProbeInterval)        round loop (every Every, jittered)
//	  vpnproc.Read ─► counters metrics          Busy? ─► skipped{reason}
//	  ping -c1 inside, outside ─► histogram     realnet.Run ─► rates, findings,
//	  (no echo while a round runs)              refusals ─► metrics, history line
package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ovpnperf/ovpnperf/internal/bounds"
	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	pathprobe "github.com/ovpnperf/ovpnperf/internal/probe"
	"github.com/ovpnperf/ovpnperf/internal/realnet"
	"github.com/ovpnperf/ovpnperf/internal/usage"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
	"github.com/ovpnperf/ovpnperf/internal/vpnproc"
	"github.com/ovpnperf/ovpnperf/internal/watch/watchdoc"
)

// Options say what to watch and how often.
type Options struct {
	// Spec is what each active round measures (realnet.Run): the far
	// end, the tunnel, the OpenVPN pid (0: found from the tun device),
	// the sample sizes. Its Progress is not used.
	Spec realnet.Spec
	// Every is the time between the starts of two active rounds
	// (EveryRange); each start is put off by up to a tenth of it, at
	// random (Jitter).
	Every time.Duration
	// ProbeInterval is how often the counters are read and the echoes
	// sent (ProbeIntervalRange; 0: DefaultProbeInterval).
	ProbeInterval time.Duration
	// SkipShare is the share of the last measured tunnel rate from which
	// the tunnel counts as busy and a round is skipped (0:
	// DefaultSkipShare).
	SkipShare float64
	// Log receives one line per round and what goes wrong meanwhile.
	Log io.Writer
	// Argv is the command line, kept in each round's run document.
	Argv []string
}

// EveryRange is the time between two rounds that watch accepts: at least
// 10 s, at most a day.
func EveryRange() bounds.Duration {
	return bounds.Duration{Min: 10 * time.Second, Max: 24 * time.Hour, Whole: true}
}

// ProbeIntervalRange is the interval of the counter reads and echoes: at
// least a second, at most 10 minutes.
func ProbeIntervalRange() bounds.Duration {
	return bounds.Duration{Min: time.Second, Max: 10 * time.Minute, Whole: true}
}

// Defaults of Options.
const (
	// DefaultEvery is watch's --every: four rounds an hour.
	DefaultEvery         = 15 * time.Minute
	DefaultProbeInterval = 5 * time.Second
	// DefaultSkipShare: a tunnel carrying a fifth of its last measured
	// rate is in use; a round would take the rest from its users and
	// share the path with them (a lower figure than the tunnel's).
	DefaultSkipShare = 0.2
)

// Watcher watches one tunnel.
type Watcher struct {
	opts Options
	m    *metrics

	mu sync.Mutex
	// proc is the OpenVPN process (nil: not found at the last probe).
	proc *vpnproc.Process
	// prev and last are the last two counter reads of the passive loop;
	// since is when the last round ended (the pair is judged only when
	// both reads are later).
	prev, last *vpnproc.Counters
	roundEnded time.Time
	running    bool
	// rtts are the echoes' round trips since the last round, lost the
	// echoes without an answer, by path.
	rtts map[string][]time.Duration
	lost map[string]int
	// lastUp and lastDown are the tunnel rates of the last round that
	// measured them (0: none yet).
	lastUp, lastDown float64
	seq              int
	history          *History
}

// New finds the tunnel's OpenVPN process (a wrong HOST or --tunnel is the
// user's mistake, as in measure) and makes the metrics.
func New(opts Options) (*Watcher, error) {
	if opts.Every <= 0 {
		return nil, errors.New("watch: no interval between rounds")
	}
	if r := EveryRange(); !r.Contains(opts.Every) {
		return nil, usage.Errorf("--every %v: want whole seconds from %s", opts.Every, r)
	}
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}
	if r := ProbeIntervalRange(); !r.Contains(opts.ProbeInterval) {
		return nil, usage.Errorf("--probe-interval %v: want whole seconds from %s", opts.ProbeInterval, r)
	}
	if err := opts.Spec.WithDefaults().Validate(); err != nil {
		return nil, err
	}
	if opts.SkipShare <= 0 {
		opts.SkipShare = DefaultSkipShare
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	loc, err := realnet.Locate(opts.Spec.Host, opts.Spec.Tunnel, opts.Spec.Pid)
	if err != nil {
		return nil, err
	}
	w := &Watcher{opts: opts, m: newMetrics(), proc: loc.Proc,
		rtts: map[string][]time.Duration{}, lost: map[string]int{}}
	return w, nil
}

// SetHistory makes each round's record go to h too; before Run.
func (w *Watcher) SetHistory(h *History) { w.history = h }

// Pid is the OpenVPN process watched (0 when it is not found now).
func (w *Watcher) Pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc == nil {
		return 0
	}
	return w.proc.Pid
}

// Handler serves the metrics (Prometheus text format).
func (w *Watcher) Handler() http.Handler {
	return promhttp.HandlerFor(w.m.reg, promhttp.HandlerOpts{})
}

// Run watches until ctx ends and returns its error. Rounds never overlap:
// one loop runs them in turn, and a round that outlasts Every delays the
// next.
func (w *Watcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.passive(ctx)
	}()
	defer wg.Wait()
	start := time.Now()
	for k := 0; ; k++ {
		due := start.Add(time.Duration(k) * w.opts.Every).Add(Jitter(w.opts.Every))
		t := time.NewTimer(time.Until(due))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		rec := w.round(ctx)
		if ctx.Err() != nil {
			// An interrupted round is no figure: nothing recorded.
			return ctx.Err()
		}
		w.record(rec)
		// Rounds missed while this one ran are not made up.
		for start.Add(time.Duration(k+1) * w.opts.Every).Before(time.Now()) {
			k++
		}
	}
}

// Jitter is how long a round's start is put off: a random time up to a
// tenth of every, drawn again for each round, so that watchers started
// together (one Prometheus scraping many) seldom load a shared path at
// the same moment.
func Jitter(every time.Duration) time.Duration {
	n := int64(every / 10)
	if n <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(n))
}

// passive reads the counters and sends the echoes every ProbeInterval.
func (w *Watcher) passive(ctx context.Context) {
	tick := time.NewTicker(w.opts.ProbeInterval)
	defer tick.Stop()
	for {
		w.readCounters()
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if !running {
			// A round's load would be in the idle round trip: no echo
			// then (the round's own echoes measure the loaded path).
			w.echoes(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// readCounters reads the OpenVPN process's counters, finding the process
// again when it ended (a restarted OpenVPN is a new process).
func (w *Watcher) readCounters() {
	w.mu.Lock()
	proc := w.proc
	w.mu.Unlock()
	if proc == nil {
		loc, err := realnet.Locate(w.opts.Spec.Host, w.opts.Spec.Tunnel, w.opts.Spec.Pid)
		if err != nil {
			w.m.setCounters(nil, "", 0, false)
			return
		}
		proc = loc.Proc
		fmt.Fprintf(w.opts.Log, "OpenVPN found again: pid %d on %s\n", proc.Pid, proc.Tun)
	}
	c, err := proc.Read()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.proc != nil {
			fmt.Fprintf(w.opts.Log, "OpenVPN pid %d: %v; looking for it again every %v\n", proc.Pid, err, w.opts.ProbeInterval)
		}
		w.proc, w.prev, w.last = nil, nil, nil
		w.m.setCounters(nil, "", 0, false)
		return
	}
	if w.proc != proc {
		w.prev, w.last = nil, nil // another process's counters
	}
	w.proc = proc
	w.prev, w.last = w.last, &c
	busiest, ok := 0.0, false
	if w.prev != nil {
		busiest, ok = vpnproc.Sub(*w.prev, c).BusiestThreadShare, true
	}
	w.m.setCounters(&c, proc.Socket.Proto, busiest, ok)
}

// echoes sends one ICMP echo inside and one outside the tunnel at once.
func (w *Watcher) echoes(ctx context.Context) {
	var wg sync.WaitGroup
	for path, a := range map[string]netip.Addr{watchdoc.PathInside: w.opts.Spec.Tunnel, watchdoc.PathOutside: w.opts.Spec.Host} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Equivalent to: ping -n -q -c 1 -W 2 ADDR
			rtt, _, err := pathprobe.RoundTrips(ctx, a, 1, time.Second)
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if err != nil {
				w.lost[path]++
				w.m.lost.WithLabelValues(path).Inc()
				return
			}
			w.rtts[path] = append(w.rtts[path], rtt)
			w.m.rtt.WithLabelValues(path).Observe(rtt.Seconds())
		}()
	}
	wg.Wait()
}

// loadPair returns two counter reads of an interval in which no round
// ran: the passive loop's last two, or two read now a probe interval
// apart when those saw a round.
func (w *Watcher) loadPair(ctx context.Context, proc *vpnproc.Process) (a, b vpnproc.Counters, err error) {
	w.mu.Lock()
	prev, last, ended := w.prev, w.last, w.roundEnded
	w.mu.Unlock()
	if prev != nil && last != nil && prev.Taken.After(ended) && time.Since(last.Taken) < 2*w.opts.ProbeInterval {
		return *prev, *last, nil
	}
	if a, err = proc.Read(); err != nil {
		return a, b, err
	}
	select {
	case <-ctx.Done():
		return a, b, ctx.Err()
	case <-time.After(w.opts.ProbeInterval):
	}
	b, err = proc.Read()
	return a, b, err
}

// Busy is the skip rule: the tunnel's traffic from a to b (bytes through
// its tun device each way, over the interval) against the last rates
// measured inside it. The tunnel is busy when either direction carries
// share or more of its last rate. With no last rate (no round measured
// yet) nothing is judged: load is nil and busy false.
func Busy(a, b vpnproc.Counters, lastUp, lastDown, share float64) (load *watchdoc.Load, busy bool) {
	secs := b.Taken.Sub(a.Taken).Seconds()
	if secs <= 0 || (lastUp <= 0 && lastDown <= 0) {
		return nil, false
	}
	l := &watchdoc.Load{IntervalSeconds: secs, LastUpBps: lastUp, LastDownBps: lastDown, SkipShareRatio: share,
		UpBps:   float64(b.TunTxBytes-a.TunTxBytes) * 8 / secs,
		DownBps: float64(b.TunRxBytes-a.TunRxBytes) * 8 / secs}
	if b.TunTxBytes < a.TunTxBytes || b.TunRxBytes < a.TunRxBytes {
		// The device was made again between the reads: no figure.
		return nil, false
	}
	if lastUp > 0 {
		l.ShareRatio = max(l.ShareRatio, l.UpBps/lastUp)
	}
	if lastDown > 0 {
		l.ShareRatio = max(l.ShareRatio, l.DownBps/lastDown)
	}
	return l, l.ShareRatio >= share
}

// round runs one active round, or says why it did not.
func (w *Watcher) round(ctx context.Context) watchdoc.Round {
	w.mu.Lock()
	w.seq++
	rec := watchdoc.Round{Schema: watchdoc.Schema, Seq: w.seq, Started: time.Now().UTC(), Echoes: w.takeEchoes()}
	proc, lastUp, lastDown := w.proc, w.lastUp, w.lastDown
	w.mu.Unlock()
	w.m.lastTime.Set(float64(rec.Started.UnixNano()) / 1e9)
	if proc == nil {
		rec.Result, rec.Reason = watchdoc.ResultSkipped, watchdoc.SkipNoOpenVPN
		rec.Detail = fmt.Sprintf("no OpenVPN process holds the tun device the route to %s uses", w.opts.Spec.Tunnel)
		return rec
	}
	a, b, err := w.loadPair(ctx, proc)
	if err != nil {
		if ctx.Err() == nil {
			rec.Result, rec.Reason, rec.Detail = watchdoc.ResultSkipped, watchdoc.SkipNoOpenVPN, err.Error()
		}
		return rec
	}
	load, busy := Busy(a, b, lastUp, lastDown, w.opts.SkipShare)
	rec.Load = load
	if load != nil {
		w.m.load.Set(load.ShareRatio)
	}
	if busy {
		rec.Result, rec.Reason = watchdoc.ResultSkipped, watchdoc.SkipBusy
		return rec
	}
	w.setRunning(true)
	defer w.setRunning(false)
	spec := w.opts.Spec
	spec.Progress = nil
	rep, err := realnet.Run(ctx, spec)
	rec.DurationSeconds = time.Since(rec.Started).Seconds()
	w.m.lastDur.Set(rec.DurationSeconds)
	if ctx.Err() != nil {
		return rec
	}
	if rep != nil {
		rep.Scenario.Argv = w.opts.Argv
		rec.Run = rep
	}
	switch {
	case errors.Is(err, realnet.ErrNoServer):
		rec.Result, rec.Reason = watchdoc.ResultFailed, watchdoc.FailNoServer
	case errors.Is(err, vpnproc.ErrGone):
		rec.Result, rec.Reason = watchdoc.ResultFailed, watchdoc.FailOpenVPNGone
	case err != nil:
		rec.Result, rec.Reason = watchdoc.ResultFailed, watchdoc.FailError
	}
	if err != nil {
		rec.Detail = oneLine(err)
	}
	if rep == nil {
		return rec
	}
	valid := 0
	for _, r := range rep.Rows {
		if r.Valid && len(r.SamplesBps) > 0 {
			valid++
			continue
		}
		kind := measure.RefusalError
		if r.Refusal != nil && r.Refusal.Kind != "" {
			kind = r.Refusal.Kind
		}
		if rec.Refusals == nil {
			rec.Refusals = map[string]int{}
		}
		rec.Refusals[kind]++
	}
	if rec.Result == "" {
		switch valid {
		case len(rep.Rows):
			rec.Result = watchdoc.ResultOK
		case 0:
			rec.Result, rec.Reason = watchdoc.ResultFailed, watchdoc.FailNoValidRow
		default:
			rec.Result = watchdoc.ResultPartial
		}
	}
	return rec
}

// findingsOf returns the judgements of a round's run document, judging
// its rows when the document carries none yet.
func findingsOf(rep *measure.Report) []finding.Finding {
	if rep.Findings == nil {
		rep.Findings = measure.Findings(rep)
	}
	return rep.Findings
}

func (w *Watcher) setRunning(on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running = on
	if on {
		w.m.running.Set(1)
	} else {
		w.m.running.Set(0)
		w.roundEnded = time.Now()
	}
}

// takeEchoes summarises and clears the echoes since the last round; w.mu
// is held.
func (w *Watcher) takeEchoes() []watchdoc.Echoes {
	var out []watchdoc.Echoes
	for _, path := range []string{watchdoc.PathInside, watchdoc.PathOutside} {
		rt := w.rtts[path]
		e := watchdoc.Echoes{Path: path, Sent: len(rt) + w.lost[path], Answered: len(rt)}
		if len(rt) > 0 {
			s := make([]float64, len(rt))
			for i, d := range rt {
				s[i] = d.Seconds()
			}
			sort.Float64s(s)
			e.MedianSeconds, e.MaxSeconds = verdict.Median(s), s[len(s)-1]
		}
		out = append(out, e)
		w.rtts[path], w.lost[path] = nil, 0
	}
	return out
}

// record exports a finished round and appends it to the history.
func (w *Watcher) record(rec watchdoc.Round) {
	m := w.m
	m.rounds.WithLabelValues(rec.Result).Inc()
	switch rec.Result {
	case watchdoc.ResultSkipped:
		m.skipped.WithLabelValues(rec.Reason).Inc()
	case watchdoc.ResultFailed:
		m.failed.WithLabelValues(rec.Reason).Inc()
	}
	for kind, n := range rec.Refusals {
		m.refused.WithLabelValues(kind).Add(float64(n))
	}
	if rep := rec.Run; rep != nil {
		var up, down float64
		for _, r := range rep.Rows {
			if !r.Valid || len(r.SamplesBps) == 0 {
				continue
			}
			path := watchdoc.PathOutside
			if r.Path == measure.PathTunnel {
				path = watchdoc.PathInside
				if r.Direction == measure.DirectionUp {
					up = r.MedianBps
				} else {
					down = r.MedianBps
				}
			}
			m.rate.WithLabelValues(path, r.Direction).Set(r.MedianBps / 8)
		}
		m.setFindings(findingsOf(rep))
		w.mu.Lock()
		if up > 0 {
			w.lastUp = up
		}
		if down > 0 {
			w.lastDown = down
		}
		w.mu.Unlock()
	}
	line := fmt.Sprintf("round %d: %s", rec.Seq, rec.Result)
	if rec.Reason != "" {
		line += " (" + rec.Reason + ")"
	}
	if rec.Load != nil {
		line += fmt.Sprintf("; tunnel load %.0f %% of its last rate", 100*rec.Load.ShareRatio)
	}
	if rec.Detail != "" {
		line += ": " + rec.Detail
	}
	fmt.Fprintln(w.opts.Log, line)
	if w.history != nil {
		if err := w.history.Append(rec); err != nil {
			fmt.Fprintf(w.opts.Log, "history: %v\n", err)
		}
	}
}

// oneLine keeps the first line of an error (iperf3's output follows it).
func oneLine(err error) string {
	s := err.Error()
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
