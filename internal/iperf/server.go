package iperf

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// DefaultPort is iperf3's own default port.
const DefaultPort = 5201

// CommandFunc builds (does not start) the command that runs argv, for
// example inside a lab namespace:
//
//	func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, lab.Server, argv...) }
//
// The function must return a command whose Stdout and Stderr are unset.
type CommandFunc func(ctx context.Context, argv ...string) *exec.Cmd

// Local runs programs in the caller's own network namespace, with the C
// locale (runner.Command).
func Local(ctx context.Context, argv ...string) *exec.Cmd { return runner.Command(ctx, argv...) }

// ServerOptions configures an iperf3 server.
type ServerOptions struct {
	// Port to listen on (-p); 0 means DefaultPort.
	Port int
	// Bind restricts the listener to one local address (-B); zero means all.
	Bind netip.Addr
	// OneOff makes the server exit after one test (-1). Without it one
	// server serves any number of sequential tests, which is what a series
	// of measurements wants: no start-up per sample, one pid to account.
	OneOff bool
	// FilePath (-F) makes the server send this file's bytes in reverse (-R)
	// tests instead of random data. Careful: in a forward test iperf3's
	// server truncates the file and writes what it receives into it, so a
	// server with FilePath must serve reverse tests only.
	FilePath string
	// Log receives everything the server prints (from a goroutine); nil
	// discards it. The last lines are kept for error messages either way.
	Log io.Writer
	// StartTimeout bounds the wait for "Server listening"; 0 means 10 s.
	StartTimeout time.Duration
}

// Args returns the iperf3 argument vector for the options.
func (o ServerOptions) Args() []string {
	port := o.Port
	if port == 0 {
		port = DefaultPort
	}
	// --forceflush: iperf3 block-buffers stdout on a pipe, so without it
	// "Server listening" would only show up when the buffer fills.
	argv := []string{"iperf3", "-s", "-p", strconv.Itoa(port), "--forceflush"}
	if o.Bind.IsValid() {
		argv = append(argv, "-B", o.Bind.String())
	}
	if o.OneOff {
		argv = append(argv, "-1")
	}
	if o.FilePath != "" {
		argv = append(argv, "-F", o.FilePath)
	}
	return argv
}

// Server is a running iperf3 server.
type Server struct {
	cmd  *exec.Cmd
	port int
	tail *tailBuffer

	done    chan struct{} // closed when the process has been reaped
	waitErr error

	mu     sync.Mutex
	idle   bool          // the last state line was readyLine
	idleCh chan struct{} // closed when idle becomes true

	stopOnce sync.Once
	stopErr  error
}

// readyLine is how iperf3 announces that its listening socket exists:
// "Server listening on 5201 (test #1)" (3.12; older releases omit the
// test number). It prints it again after every test, once it listens anew.
const readyLine = "Server listening on "

// acceptedLine starts a test: "Accepted connection from 192.0.2.2, port 58282".
const acceptedLine = "Accepted connection from "

// Between two tests iperf3 3.12 closes its listening socket and opens it
// again; a client that connects in that gap (a few ms after the previous
// client exits) gets "Connection refused" or "Connection reset by peer".
// Seen in 3 of 24 back-to-back tests through a lab. So a caller running a
// series waits until the server's output says it listens again: the last
// state line is readyLine, not acceptedLine.

// idleLog reports whether a server log ends in the listening state.
func idleLog(log string) bool {
	ready := strings.LastIndex(log, readyLine)
	return ready >= 0 && ready > strings.LastIndex(log, acceptedLine)
}

// StartServer starts `iperf3 -s` through command and returns once the server
// listens. If the server exits first (port in use, bad address) the error
// carries its output.
func StartServer(ctx context.Context, command CommandFunc, opts ServerOptions) (*Server, error) {
	if err := runner.Require("iperf3"); err != nil {
		return nil, err
	}
	argv := opts.Args()
	port, _ := strconv.Atoi(argv[3])
	cmd := command(ctx, argv...)
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	// Its own process group keeps a Ctrl-C in the terminal from reaching
	// it before the caller decides to stop it; the parent-death signal
	// ends it if ovpnperf dies without Stop (ip netns exec execs iperf3,
	// so the signal reaches iperf3 itself).
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("starting %q: %w", strings.Join(cmd.Args, " "), err)
	}
	pw.Close()

	s := &Server{cmd: cmd, port: port, tail: newTailBuffer(4096), done: make(chan struct{}), idleCh: make(chan struct{})}
	ready := s.idleCh
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.tail.WriteLine(line)
			if opts.Log != nil {
				fmt.Fprintln(opts.Log, line)
			}
			switch {
			case strings.HasPrefix(line, readyLine):
				s.setIdle(true)
			case strings.HasPrefix(line, acceptedLine):
				s.setIdle(false)
			}
		}
		// A line longer than the scanner's buffer stops the scan; keep
		// draining so that the server never blocks on a full pipe.
		io.Copy(io.Discard, pr)
	}()
	go func() {
		err := cmd.Wait()
		<-copied
		s.waitErr = err
		close(s.done)
	}()

	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-ready:
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("iperf3 server %q exited before listening: %v\n%s", strings.Join(cmd.Args, " "), s.waitErr, s.tail.String())
	case <-timer.C:
		s.Stop()
		return nil, fmt.Errorf("iperf3 server %q did not report listening within %v\n%s", strings.Join(cmd.Args, " "), timeout, s.tail.String())
	case <-ctx.Done():
		s.Stop()
		return nil, ctx.Err()
	}
}

func (s *Server) setIdle(idle bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case idle && !s.idle:
		close(s.idleCh)
	case !idle && s.idle:
		s.idleCh = make(chan struct{})
	}
	s.idle = idle
}

// WaitIdle waits until the server listens for a new test: started, and
// not inside a test according to its output. timeout 0 means 10 s.
func (s *Server) WaitIdle(ctx context.Context, timeout time.Duration) error {
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	s.mu.Lock()
	ch := s.idleCh
	s.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-ch:
		return nil
	case <-s.done:
		return fmt.Errorf("iperf3 server exited: %v\n%s", s.waitErr, s.tail.String())
	case <-timer.C:
		return fmt.Errorf("iperf3 server still busy after %v:\n%s", timeout, s.tail.String())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run runs one client test against this server: it waits until the server
// listens again after its previous test (see WaitIdle), fills in opts.Port
// when it is 0, and calls the package's Run.
func (s *Server) Run(ctx context.Context, command CommandFunc, opts ClientOptions) (*Result, error) {
	if opts.Port == 0 {
		opts.Port = s.port
	}
	if err := s.WaitIdle(ctx, 0); err != nil {
		return nil, err
	}
	return Run(ctx, command, opts)
}

// Port is the port the server listens on.
func (s *Server) Port() int { return s.port }

// Pid is the process id of the started command. Under `ip netns exec` that
// is iperf3's own pid: ip execs the program without forking.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Done is closed when the server process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Output returns the last lines the server printed.
func (s *Server) Output() string { return s.tail.String() }

// Stop ends the server (SIGTERM, then SIGKILL after 5 s) and reaps it. It
// is safe to call more than once. A server that exited on its own before
// Stop returns how it exited; one ended by Stop returns nil.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.done:
			if s.waitErr != nil {
				s.stopErr = fmt.Errorf("iperf3 server exited: %w\n%s", s.waitErr, s.tail.String())
			}
			return
		default:
		}
		runner.Stop(s.cmd.Process, s.done, 5*time.Second)
	})
	return s.stopErr
}

// WaitListening waits until the iperf3 server writing to logPath says it
// listens for a new test: for servers started by another runner, such as
// lab.Start, which records the process in the lab's state and sends its
// output to a file. Call it after starting the server and again before
// each test of a series (see Server.WaitIdle for why). Start such a server
// with ServerOptions.Args (its --forceflush makes the lines appear at
// once). exited, if not nil, is closed when the server exits; timeout 0
// means 10 s. A server that exits or times out gives an error with the
// end of its log.
func WaitListening(ctx context.Context, logPath string, exited <-chan struct{}, timeout time.Duration) error {
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	logTail := func() string {
		b, _ := os.ReadFile(logPath)
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		return strings.TrimSpace(string(b))
	}
	for {
		if b, err := os.ReadFile(logPath); err == nil && idleLog(string(b)) {
			return nil
		}
		select {
		case <-tick.C:
		case <-exited:
			return fmt.Errorf("iperf3 server exited before listening:\n%s", logTail())
		case <-deadline.C:
			return fmt.Errorf("iperf3 server did not report listening within %v:\n%s", timeout, logTail())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tailBuffer keeps the last lines written to it, up to max bytes.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	lines []string
	size  int
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) WriteLine(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.size += len(line) + 1
	for t.size > t.max && len(t.lines) > 1 {
		t.size -= len(t.lines[0]) + 1
		t.lines = t.lines[1:]
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
