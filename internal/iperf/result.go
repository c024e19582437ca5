// Package iperf runs iperf3 (3.12 and later) servers and clients, inside the
// lab's namespaces or anywhere else a caller knows how to start a program,
// and parses the client's `-J` JSON into a typed Result.
//
// Callers say how a program is started with a CommandFunc; for the lab that
// is l.Command bound to a node, so every iperf3 runs under `ip netns exec`
// and can be reproduced by hand:
//
//	srv, err := iperf.StartServer(ctx, labCmd(lab.Server), iperf.ServerOptions{})
//	defer srv.Stop()
//	res, err := srv.Run(ctx, labCmd(lab.Client), iperf.ClientOptions{
//		Server: lab.ServerV4, Duration: 10 * time.Second})
//	fmt.Println(res.ReceivedBitsPerSec)
//
// Behaviours of iperf3 3.12 that shape this package, each seen here:
//   - With -J the client exits with status 0 even when the test failed
//     (connection refused, server busy): the failure is only in the JSON's
//     "error" key, so Parse and Run treat that key as the authority.
//   - stdout on a pipe is block-buffered: servers run with --forceflush so
//     that "Server listening" shows when it happens.
//   - Between two tests the server closes and reopens its listening socket;
//     a client connecting in that gap is refused or reset. Server.Run waits
//     for the next "Server listening"; Run retries such refusals.
//   - With -F FILE the sender stops at the end of the file, whatever -t says,
//     so Run refuses a result that ended well before the requested duration.
//   - The end-of-test message crosses the path after the data, so one
//     side's measuring window is up to a round trip longer than -t asks;
//     ClientOptions.PathSlack says how long a round trip the path can give.
//   - A -O warm-up timer that fires late, or a starved receiver that
//     carries a backlog across it, makes a sample claim more than the link
//     carries; Run refuses such samples (ErrInconsistent).
package iperf

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Result is what one iperf3 client run measured, from the client's -J
// output. "Sent" is the sender's account and "Received" the receiver's,
// whichever end each was (with Reverse the server sends); iperf3 exchanges
// both at the end of a test.
type Result struct {
	Version  string `json:"version"`  // "iperf 3.12"
	Protocol string `json:"protocol"` // "TCP" or "UDP"
	Streams  int    `json:"streams"`
	Reverse  bool   `json:"reverse"`
	// Requested is the test length asked for with -t (without -O omit).
	Requested time.Duration `json:"requested_ns"`
	// Omit is the warm-up excluded from the totals (-O).
	Omit time.Duration `json:"omit_ns"`
	// BlockBytes is the size of each write (-l, or iperf3's default).
	BlockBytes int `json:"block_bytes"`
	// Start is when the client started, as iperf3 reported it.
	Start time.Time `json:"start"`

	SentBytes          uint64        `json:"sent_bytes"`
	SentBitsPerSec     float64       `json:"sent_bps"`
	SentDuration       time.Duration `json:"sent_duration_ns"`
	ReceivedBytes      uint64        `json:"received_bytes"`
	ReceivedBitsPerSec float64       `json:"received_bps"`
	ReceivedDuration   time.Duration `json:"received_duration_ns"`

	// Retransmits counts TCP retransmissions by the sender; -1 when iperf3
	// did not report them (UDP, or a kernel without TCP_INFO).
	Retransmits int64 `json:"retransmits"`
	// UDP only: the receiver's counts.
	UDP *UDPStats `json:"udp,omitempty"`

	CPU CPUUtilization `json:"cpu_utilization_percent"`

	SenderCongestion   string `json:"sender_tcp_congestion,omitempty"`
	ReceiverCongestion string `json:"receiver_tcp_congestion,omitempty"`

	// Intervals are the per-interval sums as the client saw them (-i,
	// default 1 s); with Reverse they are the client's received bytes.
	Intervals []Interval `json:"intervals"`

	// SenderMeanRTT and SenderMaxSndWndBytes are the sending TCP's mean
	// RTT and largest send window (end.streams[].sender mean_rtt,
	// max_snd_wnd; iperf3 3.12 reports them when this end sent, i.e. not
	// with Reverse). 0 when not reported.
	SenderMeanRTT        time.Duration `json:"sender_mean_rtt_ns,omitempty"`
	SenderMaxSndWndBytes int64         `json:"sender_max_snd_wnd_bytes,omitempty"`

	// Error is iperf3's own "error" message, empty when the test ran.
	Error string `json:"error,omitempty"`

	// ClientCPUSeconds is the user+system CPU time of the iperf3 client
	// process, from its rusage when Run reaped it (0 from Parse). Under
	// `ip netns exec` it is iperf3's own: ip execs without forking.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
}

// UDPStats are the receiver's counts for a UDP test.
type UDPStats struct {
	Packets     int64   `json:"packets"`
	LostPackets int64   `json:"lost_packets"`
	LostPercent float64 `json:"lost_percent"`
	JitterMs    float64 `json:"jitter_ms"`
	OutOfOrder  int64   `json:"out_of_order"`
}

// CPUUtilization is iperf3's own CPU account of the client ("host") and
// server ("remote") processes, in percent of one CPU over the test.
type CPUUtilization struct {
	HostTotal    float64 `json:"host_total"`
	HostUser     float64 `json:"host_user"`
	HostSystem   float64 `json:"host_system"`
	RemoteTotal  float64 `json:"remote_total"`
	RemoteUser   float64 `json:"remote_user"`
	RemoteSystem float64 `json:"remote_system"`
}

// Interval is one periodic report summed over streams.
type Interval struct {
	Start      time.Duration `json:"start_ns"`
	End        time.Duration `json:"end_ns"`
	Bytes      uint64        `json:"bytes"`
	BitsPerSec float64       `json:"bps"`
	// Retransmits in this interval (TCP sender side only, else -1).
	Retransmits int64 `json:"retransmits"`
	// Omitted intervals belong to the -O warm-up.
	Omitted bool `json:"omitted"`
	// Sender is true when the client was sending in this interval.
	Sender bool `json:"sender"`
}

// BytesWithWarmup returns the bytes the receiver counted plus those of the
// -O warm-up intervals, which the totals leave out. CPU time sampled
// around a whole iperf3 run covers the warm-up too, so this is the amount
// to divide it by: with -O 1 -t 2, ReceivedBytes alone would overstate
// CPU-seconds per GB by about half. (Warm-up intervals are the client's
// view: bytes sent in forward tests, received in reverse ones.)
func (r *Result) BytesWithWarmup() uint64 {
	n := r.ReceivedBytes
	for _, iv := range r.Intervals {
		if iv.Omitted {
			n += iv.Bytes
		}
	}
	return n
}

// ErrInconsistent marks a sample whose figures cannot all be right; see
// Result.Check. Such a sample is worth measuring again, not a report.
var ErrInconsistent = errors.New("inconsistent iperf3 sample")

// Retries is how often `lab run`, `tune`, `measure` and `probe` measure a
// sample again when its figures contradict each other (ErrInconsistent)
// before they report it missing with the last reason.
const Retries = 2

// Tolerances of Check: how far a side's measuring window may stray from
// the requested duration (beyond what the path explains, see Check), and
// how far the receiver may count above the sender. On a loaded host a
// sender under-counts more than a window strays, so the second bound is
// wider (docs/measurements.md#iperf3s-windows-and-counts).
const (
	windowTolerance  = 0.075
	receiveTolerance = 0.08
)

// WindowTolerance is Check's allowance for late timers, as a share of the
// requested duration, for callers that apply the same window rule.
const WindowTolerance = windowTolerance

// Check reports (wrapping ErrInconsistent) a sample that iperf3's own
// figures contradict. pathSlack is how much longer than the requested
// duration the path itself makes a side's window: iperf3's end-of-test
// message crosses the path after the data, behind whatever the bottleneck
// queue holds, so one side's window (the receiver's in a forward test, the
// sender's in a reverse one) lasts up to one round trip with full queues
// longer than asked (a 200 ms path with a one-BDP queue: 2.2–2.4 s for
// -t 2). The rules:
//
//   - a side measured over a window shorter than the requested duration
//     by more than 7.5 %, or longer by more than pathSlack plus 7.5 %: the
//     rate of such a window is not the rate of the test (the -O omit timer
//     fired late, or something held the end-of-test message);
//   - the receiver counted more than 8 % above the sender, beyond what the
//     bytes a long path holds explain (twice pathRateBitsPerSec, the rate
//     of the data's direction, times pathSlack, see inFlight; with a
//     receiver rate within the path's rate): the two ends disagree about
//     one transfer. A starved receiver that reads a backlog
//     built up during the -O warm-up after the counters were reset
//     (iperf3 issues #236, #443) does that, and so does a starved sender
//     on a long path, whose kernel keeps sending from a send buffer of a
//     second or more while the process counts nothing
//     (docs/measurements.md#iperf3s-windows-and-counts). Which end
//     miscounted is not known from the figures, so the message does not
//     say.
//
// The messages give the figures that failed the rule, not a guess at the
// cause. Tests of a fixed size (-n) have no requested duration; only the
// second rule applies to them.
func (r *Result) Check(pathSlack time.Duration, pathRateBitsPerSec uint64) error {
	if r.Requested > 0 {
		tol := time.Duration(windowTolerance * float64(r.Requested))
		for _, w := range []struct {
			side string
			d    time.Duration
		}{{"sender", r.SentDuration}, {"receiver", r.ReceivedDuration}} {
			if w.d <= 0 {
				continue
			}
			e := &InconsistentError{Side: w.side, Window: w.d, Requested: r.Requested, PathSlack: pathSlack, TolerancePercent: 100 * windowTolerance}
			if off := float64(w.d-r.Requested) / float64(r.Requested); off < -0.5 {
				e.Rule = RuleWindowEndedEarly
				return e
			}
			if w.d < r.Requested-tol {
				e.Rule, e.Limit = RuleWindowShort, r.Requested-tol
				return e
			}
			if limit := r.Requested + pathSlack + tol; w.d > limit {
				e.Rule, e.Limit = RuleWindowLong, limit
				return e
			}
		}
	}
	if r.SentBitsPerSec > 0 && r.ReceivedBitsPerSec > r.SentBitsPerSec*(1+receiveTolerance) && !r.inFlight(pathSlack, pathRateBitsPerSec) {
		return &InconsistentError{Rule: RuleReceiverAboveSender, Requested: r.Requested, PathSlack: pathSlack, TolerancePercent: 100 * receiveTolerance,
			ReceivedBitsPerSec: r.ReceivedBitsPerSec, ReceivedBytes: r.ReceivedBytes, ReceivedDuration: r.ReceivedDuration,
			SentBitsPerSec: r.SentBitsPerSec, SentBytes: r.SentBytes, SentDuration: r.SentDuration}
	}
	return nil
}

// Rules of Check (InconsistentError.Rule); internal/measure names its
// refusal kinds alike.
const (
	RuleWindowEndedEarly    = "window-ended-early"
	RuleWindowShort         = "window-short"
	RuleWindowLong          = "window-long"
	RuleReceiverAboveSender = "receiver-above-sender"
)

// InconsistentError is a sample Check refused (errors.Is ErrInconsistent):
// the rule it broke and the figures that broke it. Its message is the one
// place the sentence is written; the run document keeps it beside the
// figures.
type InconsistentError struct {
	// Rule is one of the Rule* constants.
	Rule string
	// Side is the end whose window broke a window rule.
	Side string
	// Window is that side's measuring window; Limit the least or the
	// most allowed (0 for an early end).
	Window, Requested, Limit, PathSlack time.Duration
	// TolerancePercent is the rule's allowance.
	TolerancePercent float64
	// The two ends' accounts (RuleReceiverAboveSender).
	ReceivedBitsPerSec, SentBitsPerSec float64
	ReceivedBytes, SentBytes           uint64
	ReceivedDuration, SentDuration     time.Duration
	// Load is the load average (1, 5, 15 min) and CPUs the machine's CPUs
	// when Run refused the sample; CPUs is 0 when not read.
	Load [3]float64
	CPUs int
}

func (e *InconsistentError) Is(target error) bool { return target == ErrInconsistent }

func (e *InconsistentError) Error() string {
	var s string
	switch e.Rule {
	case RuleWindowEndedEarly:
		s = fmt.Sprintf("the %s measured over %v of the %v asked: the test ended early (a -F payload file too short?)",
			e.Side, e.Window.Round(time.Millisecond), e.Requested)
	case RuleWindowShort:
		s = fmt.Sprintf("the %s measured over %v of the %v asked, shorter than the %v the timers allow (%.1f %% off)",
			e.Side, e.Window.Round(time.Millisecond), e.Requested, e.Limit.Round(time.Millisecond), e.TolerancePercent)
	case RuleWindowLong:
		s = fmt.Sprintf("the %s measured over %v of the %v asked, longer than the %v allowed (the path's slack for its round trip with full queues, %v, plus %.1f %% for timers)",
			e.Side, e.Window.Round(time.Millisecond), e.Requested, e.Limit.Round(time.Millisecond), e.PathSlack.Round(time.Millisecond), e.TolerancePercent)
	default:
		s = fmt.Sprintf("the receiver counted %.2f Mbit/s (%d bytes in %v), %.0f %% above the sender's %.2f (%d bytes in %v; the rule allows %.0f %%): the two ends' counts of one transfer disagree, so one of them counted bytes of the -O warm-up or missed some",
			e.ReceivedBitsPerSec/1e6, e.ReceivedBytes, e.ReceivedDuration.Round(time.Millisecond), e.AbovePercent(),
			e.SentBitsPerSec/1e6, e.SentBytes, e.SentDuration.Round(time.Millisecond), e.TolerancePercent)
	}
	return ErrInconsistent.Error() + ": " + s
}

// AbovePercent is how far the receiver's rate was above the sender's.
func (e *InconsistentError) AbovePercent() float64 {
	if e.SentBitsPerSec <= 0 {
		return 0
	}
	return 100 * (e.ReceivedBitsPerSec/e.SentBitsPerSec - 1)
}

// heldRoundTrips is how many round trips of data, at the path's rate, the
// sender's side may hold that the sender counted before its window opened
// and the receiver counts inside its own: one in flight on the path, and one
// more held back, either unsent in the sender's send buffer (Linux sizes it
// to twice the congestion window's memory, tcp_sndbuf_expand in
// net/ipv4/tcp_input.c) or, after a loss, behind the hole at the receiver
// until the retransmission a round trip later releases it at once.
const heldRoundTrips = 2

// inFlight reports whether the receiver's excess over the sender is what a
// long path explains: the receiver's window runs up to pathSlack later than
// the sender's, so it collects bytes the sender counted before its own
// window opened, at most heldRoundTrips of the path's rate times its
// longest round trip; and the receiver's rate stays within the path's rate
// (plus the 8 %), so it is no backlog counted twice. On a long slow path
// the excess is more than one round trip's bytes
// (docs/measurements.md#iperf3s-windows-and-counts).
func (r *Result) inFlight(pathSlack time.Duration, rate uint64) bool {
	if rate == 0 || pathSlack <= 0 || r.ReceivedBitsPerSec > float64(rate)*(1+receiveTolerance) {
		return false
	}
	held := heldRoundTrips * float64(rate) / 8 * pathSlack.Seconds()
	return float64(r.ReceivedBytes) <= float64(r.SentBytes)*(1+receiveTolerance)+held
}

// TestError is a failure iperf3 reported in its JSON "error" key.
type TestError struct {
	Msg string
}

func (e *TestError) Error() string { return "iperf3: " + e.Msg }

// IsServerBusy reports whether err says the server was still running
// another test (iperf3 serves one test at a time).
func IsServerBusy(err error) bool {
	var te *TestError
	return errors.As(err, &te) && te.Msg == "the server is busy running a test. try again later"
}

// The JSON of iperf3 -J, as far as Result needs it.
type jsonDoc struct {
	Start struct {
		Version   string `json:"version"`
		Timestamp struct {
			TimeSecs int64 `json:"timesecs"`
		} `json:"timestamp"`
		TestStart struct {
			Protocol   string `json:"protocol"`
			NumStreams int    `json:"num_streams"`
			BlkSize    int    `json:"blksize"`
			Omit       int    `json:"omit"`
			Duration   int    `json:"duration"`
			Reverse    int    `json:"reverse"`
		} `json:"test_start"`
	} `json:"start"`
	Intervals []struct {
		Sum jsonSum `json:"sum"`
	} `json:"intervals"`
	End struct {
		Sum                   *jsonSum        `json:"sum"`
		SumSent               *jsonSum        `json:"sum_sent"`
		SumReceived           *jsonSum        `json:"sum_received"`
		CPUUtilizationPercent *CPUUtilization `json:"cpu_utilization_percent"`
		SenderTCPCongestion   string          `json:"sender_tcp_congestion"`
		ReceiverTCPCongestion string          `json:"receiver_tcp_congestion"`
		Streams               []struct {
			UDP *struct {
				OutOfOrder int64 `json:"out_of_order"`
			} `json:"udp"`
			Sender *struct {
				Sender    bool  `json:"sender"`
				MeanRTT   int64 `json:"mean_rtt"`
				MaxSndWnd int64 `json:"max_snd_wnd"`
			} `json:"sender"`
		} `json:"streams"`
	} `json:"end"`
	Error string `json:"error"`
}

type jsonSum struct {
	Start         float64  `json:"start"`
	End           float64  `json:"end"`
	Seconds       float64  `json:"seconds"`
	Bytes         uint64   `json:"bytes"`
	BitsPerSecond float64  `json:"bits_per_second"`
	Retransmits   *int64   `json:"retransmits"`
	JitterMs      *float64 `json:"jitter_ms"`
	LostPackets   *int64   `json:"lost_packets"`
	Packets       *int64   `json:"packets"`
	LostPercent   *float64 `json:"lost_percent"`
	Omitted       bool     `json:"omitted"`
	Sender        bool     `json:"sender"`
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Parse reads the JSON that `iperf3 -c … -J` prints. A document with an
// "error" key gives the partial Result it holds and a *TestError; text that
// is not iperf3 JSON gives a nil Result and an error.
func Parse(data []byte) (*Result, error) {
	var doc jsonDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parsing iperf3 JSON: %w", err)
	}
	if doc.Start.Version == "" && doc.Error == "" {
		return nil, errors.New("parsing iperf3 JSON: no start.version and no error: not iperf3 -J output")
	}
	ts := doc.Start.TestStart
	r := &Result{
		Version:            doc.Start.Version,
		Protocol:           ts.Protocol,
		Streams:            ts.NumStreams,
		Reverse:            ts.Reverse != 0,
		Requested:          time.Duration(ts.Duration) * time.Second,
		Omit:               time.Duration(ts.Omit) * time.Second,
		BlockBytes:         ts.BlkSize,
		Retransmits:        -1,
		SenderCongestion:   doc.End.SenderTCPCongestion,
		ReceiverCongestion: doc.End.ReceiverTCPCongestion,
		Error:              doc.Error,
	}
	if doc.Start.Timestamp.TimeSecs != 0 {
		r.Start = time.Unix(doc.Start.Timestamp.TimeSecs, 0).UTC()
	}
	if c := doc.End.CPUUtilizationPercent; c != nil {
		r.CPU = *c
	}

	sent, recv := doc.End.SumSent, doc.End.SumReceived
	// 3.12 has sum_sent and sum_received for both protocols; older
	// releases summed UDP in end.sum only. Fall back to it where they lack.
	if sent == nil {
		sent = doc.End.Sum
	}
	if recv == nil {
		recv = doc.End.Sum
	}
	if sent != nil {
		r.SentBytes = sent.Bytes
		r.SentBitsPerSec = sent.BitsPerSecond
		r.SentDuration = seconds(sent.Seconds)
		if sent.Retransmits != nil {
			r.Retransmits = *sent.Retransmits
		}
	}
	if recv != nil {
		r.ReceivedBytes = recv.Bytes
		r.ReceivedBitsPerSec = recv.BitsPerSecond
		r.ReceivedDuration = seconds(recv.Seconds)
	}
	if r.Protocol == "UDP" {
		// The receiver's loss and jitter: end.sum carries them in every
		// version; sum_received repeats them in 3.12.
		src := doc.End.Sum
		if src == nil {
			src = recv
		}
		if src != nil {
			u := &UDPStats{}
			if src.Packets != nil {
				u.Packets = *src.Packets
			}
			if src.LostPackets != nil {
				u.LostPackets = *src.LostPackets
			}
			if src.LostPercent != nil {
				u.LostPercent = *src.LostPercent
			}
			if src.JitterMs != nil {
				u.JitterMs = *src.JitterMs
			}
			for _, s := range doc.End.Streams {
				if s.UDP != nil {
					u.OutOfOrder += s.UDP.OutOfOrder
				}
			}
			r.UDP = u
		}
	}
	for _, iv := range doc.Intervals {
		s := iv.Sum
		rt := int64(-1)
		if s.Retransmits != nil {
			rt = *s.Retransmits
		}
		r.Intervals = append(r.Intervals, Interval{
			Start:       seconds(s.Start),
			End:         seconds(s.End),
			Bytes:       s.Bytes,
			BitsPerSec:  s.BitsPerSecond,
			Retransmits: rt,
			Omitted:     s.Omitted,
			Sender:      s.Sender,
		})
	}
	// The sending TCP's RTT and window, when this end sent: the largest
	// window over the streams, their mean RTT.
	var rtt, n int64
	for _, st := range doc.End.Streams {
		if st.Sender != nil && st.Sender.Sender && st.Sender.MeanRTT > 0 {
			rtt += st.Sender.MeanRTT
			n++
			r.SenderMaxSndWndBytes = max(r.SenderMaxSndWndBytes, st.Sender.MaxSndWnd)
		}
	}
	if n > 0 {
		r.SenderMeanRTT = time.Duration(rtt/n) * time.Microsecond
	}
	if doc.Error != "" {
		return r, &TestError{Msg: doc.Error}
	}
	return r, nil
}
