package iperf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// ClientOptions configures one iperf3 client run. Zero values mean iperf3's
// defaults except where noted.
type ClientOptions struct {
	// Server is the address to connect to (-c); its family picks -4 or -6.
	Server netip.Addr
	// Port (-p); 0 means DefaultPort.
	Port int
	// Duration of the measured part (-t), in whole seconds; 0 means 10 s.
	Duration time.Duration
	// Bytes, if not 0, ends the test after this many bytes (-n) instead of
	// after Duration: the way to send a payload file on a path too fast
	// for a file of Duration × rate bytes. Run then allows 5 minutes.
	Bytes uint64
	// Omit is a warm-up left out of the totals (-O), in whole seconds.
	Omit time.Duration
	// Parallel streams (-P); 0 means 1.
	Parallel int
	// Reverse makes the server send (-R): the "down" direction when the
	// server is the lab's server.
	Reverse bool
	// UDP instead of TCP (-u).
	UDP bool
	// BitrateBps is the sender's target rate (-b). 0 means unlimited for
	// both protocols: Run always passes -b, so iperf3's 1 Mbit/s UDP
	// default never applies by accident.
	BitrateBps uint64
	// LengthBytes is the size of each write (-l): the UDP payload size.
	LengthBytes int
	// FilePath (-F) sends this file's bytes instead of random data. The
	// file must hold at least Duration × rate bytes: iperf3 ends the test
	// at the end of the file, and Run reports a test that ended early as
	// an error. Not allowed with Reverse (the client would overwrite the
	// file with what it receives); give the file to the server instead.
	FilePath string
	// Bind is the local address to send from (-B).
	Bind netip.Addr
	// MSS sets the TCP maximum segment size (-M).
	MSS int
	// WindowBytes sets the socket buffers (-w).
	WindowBytes int
	// ConnectTimeout bounds the control connection setup
	// (--connect-timeout); 0 means 5 s.
	ConnectTimeout time.Duration
	// ExtraArgs are appended as they are (for example "-C", "cubic").
	ExtraArgs []string
	// PathSlack is how much longer than Duration the path itself may make
	// a side's measuring window: the longest round trip the path gives a
	// packet, delays, jitter and full queues included (labpath.Path's
	// MaxRoundTrip). Result.Check refuses windows beyond it; 0 suits a
	// LAN.
	PathSlack time.Duration
	// PathRateBitsPerSec is the path's rate limit in the direction the
	// data flows (0: none known); with PathSlack it bounds the bytes the
	// path and the sender's buffers hold (two round trips' worth, see
	// Result.Check), which the receiver may count beyond the sender.
	PathRateBitsPerSec uint64
	// RateUnknown says the path is a user's own, whose rate nobody knows:
	// the receiver's own rate then stands for the path's when Check
	// bounds the bytes in flight (PathRateBitsPerSec must be 0).
	RateUnknown bool
	// LoadedRoundTrip, when set, is called after iperf3 has ended and
	// before Check: it returns the longest round trip measured while the
	// sample ran (echoes that crossed the queue the sample filled), which
	// widens PathSlack where it is longer.
	LoadedRoundTrip func() time.Duration
}

func wholeSeconds(name string, d time.Duration) (int, error) {
	if d < 0 || d%time.Second != 0 {
		return 0, usage.Errorf("iperf3 %s must be a whole number of seconds, got %v", name, d)
	}
	return int(d / time.Second), nil
}

// Args returns the iperf3 argument vector for the options.
func (o ClientOptions) Args() ([]string, error) {
	if !o.Server.IsValid() {
		return nil, errors.New("iperf3 client: no server address given")
	}
	if o.FilePath != "" && o.Reverse {
		return nil, usage.Errorf("iperf3 client: a payload file cannot be used with reverse (-R): the client would overwrite %q with what it receives; give it to the server", o.FilePath)
	}
	dur := o.Duration
	if dur == 0 {
		dur = 10 * time.Second
	}
	secs, err := wholeSeconds("duration", dur)
	if err != nil {
		return nil, err
	}
	omit, err := wholeSeconds("omit", o.Omit)
	if err != nil {
		return nil, err
	}
	port := o.Port
	if port == 0 {
		port = DefaultPort
	}
	ct := o.ConnectTimeout
	if ct == 0 {
		ct = 5 * time.Second
	}
	server := o.Server.Unmap() // ::ffff:a.b.c.d is an IPv4 peer
	fam := "-6"
	if server.Is4() {
		fam = "-4"
	}
	argv := []string{"iperf3", "-c", server.String(), "-p", strconv.Itoa(port), fam, "-J"}
	if o.Bytes > 0 {
		argv = append(argv, "-n", strconv.FormatUint(o.Bytes, 10))
	} else {
		argv = append(argv, "-t", strconv.Itoa(secs))
	}
	argv = append(argv, "--connect-timeout", strconv.FormatInt(ct.Milliseconds(), 10))
	if omit > 0 {
		argv = append(argv, "-O", strconv.Itoa(omit))
	}
	if o.Parallel > 1 {
		argv = append(argv, "-P", strconv.Itoa(o.Parallel))
	}
	if o.Reverse {
		argv = append(argv, "-R")
	}
	if o.UDP {
		argv = append(argv, "-u")
	}
	argv = append(argv, "-b", strconv.FormatUint(o.BitrateBps, 10))
	if o.LengthBytes > 0 {
		argv = append(argv, "-l", strconv.Itoa(o.LengthBytes))
	}
	if o.FilePath != "" {
		argv = append(argv, "-F", o.FilePath)
	}
	if o.Bind.IsValid() {
		argv = append(argv, "-B", o.Bind.String())
	}
	if o.MSS > 0 {
		argv = append(argv, "-M", strconv.Itoa(o.MSS))
	}
	if o.WindowBytes > 0 {
		argv = append(argv, "-w", strconv.Itoa(o.WindowBytes))
	}
	return append(argv, o.ExtraArgs...), nil
}

// Run runs one iperf3 client test through command and parses its result.
//
// A test refused while connecting (connection refused or reset, server
// busy) is tried up to connectAttempts times, the wait doubling from
// 250 ms: a server between two tests refuses connections for a few
// milliseconds (Server.Run avoids that gap), and iperf3 3.12's server at
// times for longer. This is the one retry of a test that did not start;
// callers retry only tests that ran and were refused. When every attempt
// was refused the error wraps ErrNotStarted.
//
// It returns an error when iperf3 reports one (also as a *TestError, with
// the partial Result), when the output is not iperf3 JSON, when the figures
// contradict each other (wrapping ErrInconsistent, with the Result: retry
// such a sample once), when a payload file ran out before the requested
// duration, or when the test overruns its duration by more than the connect
// timeout plus 30 s (the client is then killed). Errors carry the whole
// command line.
func Run(ctx context.Context, command CommandFunc, opts ClientOptions) (*Result, error) {
	if err := runner.Require("iperf3"); err != nil {
		return nil, err
	}
	argv, err := opts.Args()
	if err != nil {
		return nil, err
	}
	// A server between two tests refuses or resets connections for a few
	// milliseconds (see Server.WaitIdle); try again before giving up.
	delay := connectRetryDelay
	for attempt := 1; ; attempt++ {
		res, err := runOnce(ctx, command, opts, argv)
		if !refusedAtStart(res, err) {
			return res, err
		}
		if attempt == connectAttempts || ctx.Err() != nil {
			return res, notStarted{err}
		}
		select {
		case <-time.After(delay):
			delay *= 2
		case <-ctx.Done():
			return res, notStarted{err}
		}
	}
}

// One policy for tests refused at the start: 5 attempts over 3.75 s.
const (
	connectAttempts   = 5
	connectRetryDelay = 250 * time.Millisecond
)

// ErrNotStarted is wrapped by Run's error when the test never started: the
// server refused, reset or was busy at every attempt, or nothing listened.
var ErrNotStarted = errors.New("iperf3 test did not start")

// notStarted keeps iperf3's own message and is also ErrNotStarted.
type notStarted struct{ error }

func (e notStarted) Unwrap() []error { return []error{e.error, ErrNotStarted} }

// refusedAtStart reports whether a test failed while connecting, before
// any data moved: a refused or reset control connection, or a busy server.
func refusedAtStart(res *Result, err error) bool {
	var te *TestError
	if !errors.As(err, &te) || res == nil || res.SentBytes != 0 || res.ReceivedBytes != 0 {
		return false
	}
	for _, p := range []string{"unable to connect to server", "unable to receive control message", "the server is busy"} {
		if strings.HasPrefix(te.Msg, p) {
			return true
		}
	}
	return false
}

// checkBounds returns what Check allows res on opts' path: the window
// slack, widened to the round trip measured during the sample where that
// was longer, and the rate that bounds the bytes in flight, the receiver's
// own where the path's is unknown.
func (opts ClientOptions) checkBounds(res *Result) (slack time.Duration, rateBitsPerSec uint64) {
	slack, rateBitsPerSec = opts.PathSlack, opts.PathRateBitsPerSec
	if opts.LoadedRoundTrip != nil {
		slack = max(slack, opts.LoadedRoundTrip())
	}
	if opts.RateUnknown && rateBitsPerSec == 0 {
		rateBitsPerSec = uint64(math.Ceil(res.ReceivedBitsPerSec))
	}
	return slack, rateBitsPerSec
}

// readLoad returns the load average (1, 5, 15 min) as /proc/loadavg had
// it, for the reason of a refused sample: the figure, not a guess at the
// cause; ok is false when it could not be read.
func readLoad() (load [3]float64, ok bool) {
	load, err := hostinfo.LoadAvg()
	return load, err == nil
}

// loadText describes the load average e was refused at.
func (e *InconsistentError) loadText() string {
	if e.CPUs == 0 {
		return "load average not readable"
	}
	return fmt.Sprintf("load average %.2f %.2f %.2f (1, 5, 15 min) on %d CPUs", e.Load[0], e.Load[1], e.Load[2], e.CPUs)
}

// PayloadShortError is a test whose payload file (-F) ran out before the
// requested size (Bytes > 0) or duration.
type PayloadShortError struct {
	Command, File string
	// SentBytes of WantBytes (a test of a fixed size), or ReceivedBytes
	// in Received of Requested (a timed test).
	SentBytes, WantBytes, ReceivedBytes uint64
	Received, Requested                 time.Duration
}

func (e *PayloadShortError) Error() string {
	if e.WantBytes > 0 {
		return fmt.Sprintf("running %q: the payload file %s ran out after %d of %d bytes: write a larger one", e.Command, e.File, e.SentBytes, e.WantBytes)
	}
	return fmt.Sprintf("running %q: the payload file %s ran out after %v of %v (%d bytes): write a larger one",
		e.Command, e.File, e.Received.Round(time.Millisecond), e.Requested, e.ReceivedBytes)
}

func runOnce(ctx context.Context, command CommandFunc, opts ClientOptions, argv []string) (*Result, error) {
	dur := opts.Duration
	if dur == 0 {
		dur = 10 * time.Second
	}
	if opts.Bytes > 0 {
		dur = 5 * time.Minute
	}
	ct := opts.ConnectTimeout
	if ct == 0 {
		ct = 5 * time.Second
	}
	// A server that stops answering mid-test leaves a 3.12 client waiting
	// for minutes; bound it.
	ctx, cancel := context.WithTimeout(ctx, dur+opts.Omit+ct+30*time.Second)
	defer cancel()

	cmd := command(ctx, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	cmdline := strings.Join(cmd.Args, " ")

	res, perr := Parse(stdout.Bytes())
	if res != nil && cmd.ProcessState != nil {
		res.ClientCPUSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if res == nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("running %q: %w", cmdline, ctx.Err())
		}
		return nil, fmt.Errorf("running %q: %v: %w\n%s", cmdline, runErr, perr, bytes.TrimSpace(append(stderr.Bytes(), stdout.Bytes()...)))
	}
	if perr != nil {
		return res, fmt.Errorf("running %q: %w", cmdline, perr)
	}
	if runErr != nil {
		return res, fmt.Errorf("running %q: %w\n%s", cmdline, runErr, bytes.TrimSpace(stderr.Bytes()))
	}
	if opts.FilePath != "" && opts.Bytes > 0 && res.SentBytes < opts.Bytes {
		return res, &PayloadShortError{Command: cmdline, File: opts.FilePath, SentBytes: res.SentBytes, WantBytes: opts.Bytes}
	}
	if short := time.Duration(float64(dur) * (1 - windowTolerance)); opts.FilePath != "" && opts.Bytes == 0 &&
		(res.SentDuration < short || res.ReceivedDuration < short) {
		return res, &PayloadShortError{Command: cmdline, File: opts.FilePath, ReceivedBytes: res.ReceivedBytes, Received: res.ReceivedDuration, Requested: dur}
	}
	if err := res.Check(opts.checkBounds(res)); err != nil {
		var ie *InconsistentError
		if errors.As(err, &ie) {
			if load, ok := readLoad(); ok {
				ie.Load, ie.CPUs = load, runtime.NumCPU()
			}
			return res, fmt.Errorf("running %q: %w; %s", cmdline, err, ie.loadText())
		}
		return res, fmt.Errorf("running %q: %w", cmdline, err)
	}
	return res, nil
}
