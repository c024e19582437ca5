package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// Timing is how the supervisor restarts and watches its instances
// (Options.Timing); a zero field takes its value from DefaultTiming.
//
// Backoff of restarts: the first retry after FirstBackoff, doubling up to
// MaxBackoff, back to FirstBackoff once an instance stayed up ResetAfter or
// was killed from outside (killedFromOutside).
// CrashLoopRestarts restarts within ResetAfter mark a crash loop.
type Timing struct {
	FirstBackoff      time.Duration
	MaxBackoff        time.Duration
	ResetAfter        time.Duration
	CrashLoopRestarts int
	// ReadyTimeout bounds the wait for OpenVPN's "Initialization
	// Sequence Completed"; PollInterval is how often the management
	// interface is read once an instance is up.
	ReadyTimeout time.Duration
	PollInterval time.Duration
	// SiteInterval is how often the site routes follow the instances'
	// clients (site.go).
	SiteInterval time.Duration
}

// DefaultTiming is the timing `cluster serve` runs with.
func DefaultTiming() Timing {
	return Timing{
		FirstBackoff:      100 * time.Millisecond,
		MaxBackoff:        10 * time.Second,
		ResetAfter:        60 * time.Second,
		CrashLoopRestarts: 5,
		ReadyTimeout:      20 * time.Second,
		PollInterval:      500 * time.Millisecond,
		SiteInterval:      250 * time.Millisecond,
	}
}

// withDefaults fills the zero fields of t from DefaultTiming.
func (t Timing) withDefaults() Timing {
	d := DefaultTiming()
	pick := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	pick(&t.FirstBackoff, d.FirstBackoff)
	pick(&t.MaxBackoff, d.MaxBackoff)
	pick(&t.ResetAfter, d.ResetAfter)
	pick(&t.ReadyTimeout, d.ReadyTimeout)
	pick(&t.PollInterval, d.PollInterval)
	pick(&t.SiteInterval, d.SiteInterval)
	if t.CrashLoopRestarts == 0 {
		t.CrashLoopRestarts = d.CrashLoopRestarts
	}
	return t
}

// instance supervises one OpenVPN process.
type instance struct {
	spec  Spec
	c     *Cluster
	mu    sync.Mutex
	st    InstanceStatus
	proc  *openvpn.Process
	exits []time.Time
	// everUp is set once the instance was up; failedStarts counts the
	// exits before that (WaitStarted refuses an instance that cannot
	// start at all).
	everUp       bool
	failedStarts int
	last         struct {
		at    time.Time
		bytes int64
	}
}

func (in *instance) status() InstanceStatus {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := in.st
	s.Recoveries = append([]float64(nil), s.Recoveries...)
	s.PerClient = append([]ClientBytes(nil), s.PerClient...)
	return s
}

func (in *instance) set(fn func(s *InstanceStatus)) {
	in.mu.Lock()
	fn(&in.st)
	in.mu.Unlock()
}

// launcher starts OpenVPN in the cluster's namespace (or this one), in its
// own process group, with SIGTERM if serve dies.
func (c *Cluster) launcher() openvpn.Launcher {
	if c.opts.Netns != "" {
		return openvpn.NetnsLauncher(c.opts.Netns)
	}
	return openvpn.HostLauncher()
}

// run keeps the instance alive until ctx ends.
func (in *instance) run(ctx context.Context) {
	tm := in.c.opts.Timing
	backoff := tm.FirstBackoff
	var exitAt time.Time
	for ctx.Err() == nil {
		in.set(func(s *InstanceStatus) { s.State = StateStarting; s.Pid = 0 })
		started := time.Now()
		reason, werr := in.once(ctx, exitAt)
		if ctx.Err() != nil {
			return
		}
		exitAt = time.Now()
		up := exitAt.Sub(started)
		if up >= tm.ResetAfter || killedFromOutside(werr) {
			backoff = tm.FirstBackoff
		}
		in.mu.Lock()
		in.exits = append(in.exits, exitAt)
		recent := in.exits[:0]
		for _, t := range in.exits {
			if exitAt.Sub(t) < tm.ResetAfter {
				recent = append(recent, t)
			}
		}
		in.exits = recent
		in.st.Restarts++
		if !in.everUp {
			in.failedStarts++
		}
		in.st.LastExit = reason
		in.st.State = StateRestarting
		in.st.Pid = 0
		in.st.UpSince = time.Time{}
		in.st.Clients = 0
		// The dead process's clients are gone (a --site route must not
		// come back to this instance before they reconnect to it).
		in.st.PerClient = nil
		in.st.CrashLoop = len(recent) >= tm.CrashLoopRestarts
		crash := in.st.CrashLoop
		in.mu.Unlock()
		if crash {
			in.c.log.Error("instance in a crash loop", "instance", in.spec.Name, "restarts_last_minute", len(recent), "last_exit", reason)
		} else {
			in.c.log.Warn("instance exited, restarting", "instance", in.spec.Name, "after", backoff, "reason", reason)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if !killedFromOutside(werr) {
			backoff = min(backoff*2, tm.MaxBackoff)
		}
	}
}

// once starts the process, waits for it to be up, polls it and returns why
// it ended, and, when the process exited by itself, its Wait error.
func (in *instance) once(ctx context.Context, exitAt time.Time) (string, error) {
	c := in.c
	// Sockets of a killed instance stay behind; OpenVPN cannot bind over them.
	_ = os.Remove(in.spec.Management)
	p, err := openvpn.StartWith(ctx, c.launcher(), in.spec.Config, c.dir, in.spec.Name)
	if err != nil {
		return "start: " + err.Error(), nil
	}
	pid := p.Pid()
	ticks, _ := startTicks(pid)
	_ = c.state.record(Resource{Kind: KindProcess, Name: in.spec.Name, Netns: c.opts.Netns, Pid: pid, StartTicks: ticks, Argv: []string{"openvpn", "--config", p.ConfigPath}})
	defer func() { _ = c.state.forgetProcess(in.spec.Name, pid) }()
	in.mu.Lock()
	in.proc = p
	in.st.Pid = pid
	in.mu.Unlock()
	// `ip netns exec` execs openvpn in the same process, so the pid is
	// OpenVPN's and affinity and priority stay with it.
	if in.spec.CPU >= 0 {
		var set unix.CPUSet
		set.Set(in.spec.CPU)
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			c.log.Warn("pinning failed", "instance", in.spec.Name, "cpu", in.spec.CPU, "err", err)
		}
	}
	if c.opts.Nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, pid, c.opts.Nice); err != nil {
			c.log.Warn("renice failed", "instance", in.spec.Name, "err", err)
		}
	}
	stop := func(why string) (string, error) {
		_ = p.Stop()
		return why, nil
	}
	if err := p.WaitReady(ctx, c.opts.Timing.ReadyTimeout); err != nil {
		if ctx.Err() != nil {
			return stop("stopped")
		}
		return stop(firstLine(err.Error()))
	}
	_ = os.Chmod(in.spec.Management, 0o600)
	m, err := openvpn.DialManagement(ctx, in.spec.Management)
	if err != nil {
		return stop("management: " + err.Error())
	}
	defer m.Close()
	st, err := m.State(ctx)
	if err != nil || st.Name != "CONNECTED" {
		return stop(fmt.Sprintf("management state %q: %v", st.Name, err))
	}
	now := time.Now()
	in.mu.Lock()
	in.st.State = StateUp
	in.everUp = true
	in.st.UpSince = now
	if !exitAt.IsZero() {
		in.st.Recoveries = append(in.st.Recoveries, now.Sub(exitAt).Seconds())
		if len(in.st.Recoveries) > 1000 {
			in.st.Recoveries = in.st.Recoveries[1:]
		}
	}
	in.last.at, in.last.bytes = time.Time{}, 0
	in.mu.Unlock()
	c.log.Info("instance up", "instance", in.spec.Name, "pid", pid, "port", in.spec.Port, "cpu", in.spec.CPU)
	tick := time.NewTicker(c.opts.Timing.PollInterval)
	defer tick.Stop()
	for {
		in.poll(ctx, m, pid)
		select {
		case <-p.Done():
			werr := p.Wait()
			if werr == nil {
				werr = errors.New("exit status 0")
			}
			return werr.Error(), werr
		case <-ctx.Done():
			return stop("stopped")
		case <-tick.C:
		}
	}
}

// poll reads load-stats and status 3 and the process's CPU time.
func (in *instance) poll(ctx context.Context, m *openvpn.Management, pid int) {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ls, err := m.LoadStats(pctx)
	if err != nil {
		return
	}
	var per []ClientBytes
	if in.c.opts.PerClient || len(in.c.opts.Sites) > 0 {
		if s, err := m.Status(pctx); err == nil {
			for _, row := range s.Clients {
				per = append(per, ClientBytes{CommonName: row["Common Name"], Real: row["Real Address"],
					BytesIn: atoi64(row["Bytes Received"]), BytesOut: atoi64(row["Bytes Sent"])})
			}
		}
	}
	cpu := procCPUSeconds(pid)
	now := time.Now()
	in.mu.Lock()
	defer in.mu.Unlock()
	total := ls.BytesIn + ls.BytesOut
	if !in.last.at.IsZero() {
		if dt := now.Sub(in.last.at).Seconds(); dt > 0 && total >= in.last.bytes {
			in.st.BytesPerSec = float64(total-in.last.bytes) / dt
		}
	}
	in.last.at, in.last.bytes = now, total
	in.st.Clients = ls.Clients
	in.st.BytesIn, in.st.BytesOut = ls.BytesIn, ls.BytesOut
	in.st.PerClient = per
	if cpu >= 0 {
		in.st.CPUSeconds = cpu
	}
}

func atoi64(s string) int64 {
	var n int64
	_, _ = fmt.Sscan(s, &n)
	return n
}

// procCPUSeconds is pid's own CPU time in seconds, -1 when it cannot be read.
func procCPUSeconds(pid int) float64 {
	t, err := cpuacct.Read(pid)
	if err != nil {
		return -1
	}
	return t.Total().Seconds()
}

// killedFromOutside reports an exit by SIGKILL: an operator, the OOM
// killer or a fault test ended a healthy process. Backoff exists to keep a
// process that fails by itself (bad config, port taken, a crash: exit
// status or SIGSEGV/SIGABRT) from spinning; a killed instance is restarted
// after Timing.FirstBackoff every time, and still counts towards the
// crash-loop report.
func killedFromOutside(exit error) bool {
	var ee *exec.ExitError
	if !errors.As(exit, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// kill sends SIGKILL to the instance's current process (tests, chaos).
func (in *instance) kill() (int, error) {
	in.mu.Lock()
	pid := in.st.Pid
	state := in.st.State
	in.mu.Unlock()
	if pid == 0 || state != StateUp {
		return 0, fmt.Errorf("instance %s is %s", in.spec.Name, state)
	}
	// Out of assignment before the signal: the supervisor would only
	// notice the exit a moment later.
	in.set(func(s *InstanceStatus) { s.State = StateRestarting })
	return pid, syscall.Kill(pid, syscall.SIGKILL)
}
