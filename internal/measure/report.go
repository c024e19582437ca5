// Package measure holds what ovpnperf's measuring commands (`lab run`, the
// recipes) report: the versioned JSON document (Report, Schema), the host
// it was measured on (hostinfo.Host, collected by
// internal/hostinfo/hostcollect), the spread of each row's samples (by
// internal/verdict, where statistics are taken), why a sample or a row was
// refused (Refusal: a kind and figures, and its sentence), and the
// findings the rows show. People read it as the text table of internal/ui
// (ui.RenderTable, with the extra Columns a command adds).
//
// JSON is the contract; its keys are documented on the types and never
// change meaning within one Schema version. Rates are bits per second,
// durations carry their unit in the key.
package measure

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/finding"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Schema names this version of the document. A change of meaning or a
// removed key needs a new version; added keys do not.
//
// v2 added rows[].samples (each sample's rate and its iperf3 intervals)
// and scenario.argv (the command line), and later rows[].refusal (why a
// row is not valid, as data; readers take its absence for "not given");
// every v1 key kept its meaning, so ReadJSON reads v1 documents too (their
// rows have no samples[]).
const Schema = "ovpnperf/run/v2"

// SchemaV1 is the previous version, still read by ReadJSON.
const SchemaV1 = "ovpnperf/run/v1"

// Values of Row.Path.
const (
	PathRouted = "routed" // the bare routed path, no tunnel: the baseline
	PathTunnel = "tunnel" // through OpenVPN
)

// Values of Row.Direction.
const (
	DirectionUp   = "up"   // client → server
	DirectionDown = "down" // server → client
)

// Report is one run of a measuring command.
type Report struct {
	Schema   string        `json:"schema"`
	Host     hostinfo.Host `json:"host"`
	Scenario Scenario      `json:"scenario"`
	Rows     []Row         `json:"rows"`
	// Verdicts are a recipe's conclusions, computed from the rows.
	Verdicts []Verdict `json:"verdicts,omitempty"`
	// Findings are what the rows show (Findings), as data: every document
	// written carries the key, [] when there is nothing to say (a
	// recipe's document: its verdicts judge it). Added within v2: a
	// document written before has no "findings", and ReadJSON judges it
	// on reading and sets JudgedOnReading.
	Findings []finding.Finding `json:"findings"`
	// JudgedOnReading says the findings were not in the document read but
	// judged by ReadJSON from its rows; not part of the JSON document.
	JudgedOnReading bool `json:"-"`
	// Columns are extra columns of the text table (ui.RenderTable), after
	// the standard ones; not part of the JSON document.
	Columns  []Column  `json:"-"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
}

// NewReport starts a report of the current schema.
func NewReport(host hostinfo.Host, sc Scenario) *Report {
	return &Report{Schema: Schema, Host: host, Scenario: sc, Started: time.Now().UTC()}
}

// Scenario is what was asked for: the command, the measurement settings
// and the emulated networks (paths) it ran on.
type Scenario struct {
	// Command is what ran, e.g. "lab run" or "recipe ciphers".
	Command string `json:"command"`
	// Argv is the exact command line that produced the document, program
	// name first (schema v2; empty when not known, e.g. from a test).
	Argv []string `json:"argv,omitempty"`
	// DurationSeconds of each iperf3 sample.
	DurationSeconds float64 `json:"duration_seconds"`
	// Repeat is how many samples each row has (interleaved A B C A B C).
	Repeat int `json:"repeat"`
	// Parallel iperf3 streams.
	Parallel int `json:"parallel"`
	// Networks are the emulated paths; rows name theirs in Row.Network.
	Networks []Network `json:"networks"`
	// Extra holds command-specific settings (payload kind, variants …).
	Extra map[string]any `json:"extra,omitempty"`
	// Real describes the user's path and tunnel of `ovpnperf measure`
	// (Networks then holds the one network NetworkReal).
	Real *RealPath `json:"real,omitempty"`
}

// Network is one emulated path a scenario measured on.
type Network struct {
	// Name is what rows refer to, e.g. "lan" or "wan".
	Name string `json:"name"`
	// Description is one line for people, e.g. "50 Mbit/s, 60 ms RTT".
	Description string `json:"description,omitempty"`
	// Path holds the lab's path settings (labpath.Path marshals itself).
	Path any `json:"path"`
}

// Row is one measured combination: a variant (or the routed baseline) on
// one network in one direction, with all its samples.
type Row struct {
	// Network names the Scenario.Networks entry this row ran on.
	Network string `json:"network"`
	// Variant is the tunnel variant's name; "routed" rows use "routed".
	Variant string `json:"variant"`
	// Path is PathRouted or PathTunnel.
	Path string `json:"path"`
	// Direction is DirectionUp (client→server) or DirectionDown.
	Direction string `json:"direction"`
	// Proto is the tunnel's transport, "udp" or "tcp" (OpenVPN --proto);
	// for routed rows the protocol iperf3 measured with.
	Proto string `json:"proto"`

	// SamplesBps are the receiver's rates of each sample, in run order.
	SamplesBps []float64 `json:"samples_bps"`
	// Samples holds, for each accepted sample in run order (the same
	// order as SamplesBps), iperf3's per-interval figures, so that a stall
	// or a late emulator inside a sample can be seen (schema v2; absent in
	// v1 documents and in rows a recipe filled without iperf3).
	Samples   []Sample `json:"samples,omitempty"`
	MedianBps float64  `json:"median_bps"`
	MinBps    float64  `json:"min_bps"`
	MaxBps    float64  `json:"max_bps"`
	// RatioToRouted is MedianBps over the routed row's median of the same
	// network and direction; absent on routed rows or without a baseline.
	RatioToRouted float64 `json:"ratio_to_routed,omitempty"`

	// CPUSecondsPerGB is CPU time per 10^9 bytes moved, per side:
	// "server", "client" (the openvpn processes), "iperf3" …
	CPUSecondsPerGB map[string]float64 `json:"cpu_seconds_per_gb"`

	// PublishedBps is the figure a publication reported for this row, for
	// recipes that reproduce one; 0 when there is none.
	PublishedBps float64 `json:"published_bps,omitempty"`

	// What OpenVPN reported about itself (tunnel rows).
	Cipher        string `json:"cipher,omitempty"`
	SocketBuffers string `json:"socket_buffers,omitempty"`

	// Valid is false when a sample failed or the emulator fell behind;
	// Refusal says why as data (kind and figures, added within v2: absent
	// in documents written before it) and Error in a sentence
	// (Refusal.Text).
	Valid   bool     `json:"valid"`
	Error   string   `json:"error,omitempty"`
	Refusal *Refusal `json:"refusal,omitempty"`
	// NotTested says why this row was not measured at all (a DCO variant
	// on a kernel without the driver): it has no samples and no number.
	NotTested string `json:"not_tested,omitempty"`

	// Extra holds recipe-specific figures (pps, loss, RTT, fragments …).
	Extra map[string]any `json:"extra,omitempty"`

	// OpenVPN holds, for `ovpnperf measure`, what the local OpenVPN
	// process and the host counted during each accepted sample (the same
	// order as SamplesBps).
	OpenVPN []OpenVPNCounters `json:"openvpn,omitempty"`
}

// Sample is one iperf3 run of a row.
type Sample struct {
	// Bps is the receiver's rate over the whole sample (= SamplesBps[i]).
	Bps float64 `json:"bps"`
	// Intervals are iperf3's periodic reports (-i, 1 s) summed over
	// streams, as the iperf3 client saw them: bytes it sent in "up"
	// samples, bytes it received in "down" samples.
	Intervals []Interval `json:"intervals"`
	// SenderMeanRTTMicros and SenderMaxSndWndBytes are the sending TCP's
	// mean RTT and largest send window (the receiver's advertised window)
	// as iperf3 reported them; 0 when the client did not send (down).
	SenderMeanRTTMicros  int64 `json:"sender_mean_rtt_us,omitempty"`
	SenderMaxSndWndBytes int64 `json:"sender_max_snd_wnd_bytes,omitempty"`
	// LoadedMaxRTTMicros is the largest round trip of the ICMP echoes
	// `measure` sends to the measured address during the sample (the path
	// as the sample loaded it); absent elsewhere or when none came back.
	LoadedMaxRTTMicros int64 `json:"loaded_max_rtt_us,omitempty"`
}

// Interval is one periodic report of a sample.
type Interval struct {
	// StartSeconds and EndSeconds are from the start of the iperf3 test.
	StartSeconds float64 `json:"start_s"`
	EndSeconds   float64 `json:"end_s"`
	Bps          float64 `json:"bps"`
	// Retransmits by the TCP sender in this interval; -1 when iperf3 did
	// not report them (reverse tests, UDP).
	Retransmits int64 `json:"retransmits"`
	// Omitted intervals belong to the -O warm-up, left out of Bps.
	Omitted bool `json:"omitted,omitempty"`
}

// NewRow starts a valid row without samples.
func NewRow(network, variant, path, direction, proto string) Row {
	return Row{Network: network, Variant: variant, Path: path, Direction: direction, Proto: proto, Valid: true}
}

// Key names the row in messages: "wan/default/up/udp".
func (r *Row) Key() string {
	return r.Network + "/" + r.Variant + "/" + r.Direction + "/" + r.Proto
}

// Verdict is a recipe's conclusion about one published claim.
type Verdict struct {
	// Claim is what was published, in one line.
	Claim string `json:"claim"`
	// Outcome is one of verdict.Outcomes.
	Outcome verdict.Outcome `json:"outcome"`
	// Reason says which figures decided it, in one line.
	Reason string `json:"reason"`
	// Basis is what decided the outcome, as a kind (VerdictBasis*), where
	// the recipe records it as data; Figures are the numbers of the basis
	// and the conditions, each name ending in its unit.
	Basis   string          `json:"basis,omitempty"`
	Figures finding.Figures `json:"figures,omitempty"`
	// Conditions are what the recipe changed, or the path did, to the
	// measurement the verdict rests on, as kinds (VerdictCondition*); the
	// reason says each in words.
	Conditions []string `json:"conditions,omitempty"`
}

// Kinds of a verdict's basis (Verdict.Basis).
const (
	// VerdictBasisTooFew: fewer samples (or successful searches) than a
	// verdict needs; figures samples_needed and samples (of the side
	// judged), baseline_samples or ratios, whichever fell short.
	VerdictBasisTooFew = "too-few-samples"
	// VerdictBasisKernelCapped: the kernel capped a requested socket
	// buffer at net.core.{r,w}mem_max.
	VerdictBasisKernelCapped = "kernel-capped"
	// VerdictBasisZeroBaseline: too few ratios because baseline samples
	// are 0 bit/s, to which no ratio can be taken; figures ratios,
	// zero_baseline_samples, baseline_samples and samples_needed.
	VerdictBasisZeroBaseline = "zero-baseline"
)

// Kinds of a verdict's conditions (Verdict.Conditions).
const (
	// VerdictConditionTunQueueCut: the recipe cut the client's tun queue
	// (figure txqueuelen_packets).
	VerdictConditionTunQueueCut = "tun-queue-cut"
	// VerdictConditionProbeFragmented: the probes left as IPv4 datagrams
	// larger than the path MTU, fragmented (figures probe_bytes,
	// datagram_bytes, path_mtu_bytes).
	VerdictConditionProbeFragmented = "probe-fragmented"
)

// MarshalJSON writes the document with its findings, judging the rows
// first when they were not judged yet (Judge does not run on rep: a value
// being encoded is not changed).
func (rep Report) MarshalJSON() ([]byte, error) {
	type plain Report
	p := plain(rep)
	if p.Findings == nil {
		p.Findings = Findings(&rep)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// MarshalJSON writes absent samples and CPU figures as [] and {} rather
// than null, so that every row has the same shape.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	p := plain(r)
	if p.SamplesBps == nil {
		p.SamplesBps = []float64{}
	}
	if p.CPUSecondsPerGB == nil {
		p.CPUSecondsPerGB = map[string]float64{}
	}
	// Keep "->" in OpenVPN's socket buffer line readable: no HTML escaping.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// AddSample appends one rate and refreshes median, min and max.
func (r *Row) AddSample(bps float64) {
	r.SamplesBps = append(r.SamplesBps, bps)
	r.Summarize()
}

// Summarize sets MedianBps, MinBps and MaxBps from SamplesBps (0 without
// samples: a row without samples is not Valid).
func (r *Row) Summarize() {
	s := verdict.Of(r.SamplesBps)
	r.MedianBps, r.MinBps, r.MaxBps = s.Median, s.Min, s.Max
}

// FillRatios sets RatioToRouted on every tunnel row: its median over the
// median of the routed row on the same network and in the same direction
// (one with the same Proto where several exist). Rows without a usable
// baseline get none.
func (rep *Report) FillRatios() {
	for i := range rep.Rows {
		r := &rep.Rows[i]
		r.RatioToRouted = 0
		if r.Path == PathRouted {
			continue
		}
		base := rep.baseline(r)
		if base == nil || base.MedianBps <= 0 || !base.Valid {
			continue
		}
		r.RatioToRouted = r.MedianBps / base.MedianBps
	}
}

func (rep *Report) baseline(r *Row) *Row {
	var first *Row
	for i := range rep.Rows {
		b := &rep.Rows[i]
		if b.Path != PathRouted || b.Network != r.Network || b.Direction != r.Direction {
			continue
		}
		if b.Proto == r.Proto {
			return b
		}
		if first == nil {
			first = b
		}
	}
	return first
}

// InvalidateUnsampled marks every throughput row that has no sample (and
// is not marked not tested) invalid, with reason: what a run cut short
// (interrupted, or ended by an error) leaves of the rows it had not
// reached yet, which are no measurement.
func (rep *Report) InvalidateUnsampled(reason string) {
	for i := range rep.Rows {
		if r := &rep.Rows[i]; r.NotTested == "" && len(r.SamplesBps) == 0 {
			r.Refuse(Refusal{Kind: RefusalNotMeasured, Detail: reason})
		}
	}
}

// Finish stamps the end time and fills the ratios.
func (rep *Report) Finish() {
	rep.Finished = time.Now().UTC()
	rep.FillRatios()
}

// WriteJSON writes the report as indented JSON. Non-finite numbers (which
// JSON cannot carry) are refused with the row that holds them.
func (rep *Report) WriteJSON(w io.Writer) error {
	if err := rep.check(); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}

func (rep *Report) check() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for _, r := range rep.Rows {
		bad := !finite(r.MedianBps) || !finite(r.MinBps) || !finite(r.MaxBps) || !finite(r.RatioToRouted) || !finite(r.PublishedBps)
		for _, s := range r.SamplesBps {
			bad = bad || !finite(s)
		}
		for _, s := range r.Samples {
			bad = bad || !finite(s.Bps)
			for _, iv := range s.Intervals {
				bad = bad || !finite(iv.Bps) || !finite(iv.StartSeconds) || !finite(iv.EndSeconds)
			}
		}
		for _, v := range r.CPUSecondsPerGB {
			bad = bad || !finite(v)
		}
		if bad {
			return fmt.Errorf("row %s holds a non-finite number", r.Key())
		}
	}
	return nil
}

// ReadJSON reads a report and checks its schema.
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("reading report: %w", err)
	}
	if rep.Schema != Schema && rep.Schema != SchemaV1 {
		return nil, fmt.Errorf("report schema %q, this ovpnperf reads %q and %q", rep.Schema, Schema, SchemaV1)
	}
	if err := rep.checkFindings(); err != nil {
		return nil, err
	}
	if rep.Findings == nil {
		rep.Findings = Findings(&rep)
		rep.JudgedOnReading = true
	}
	return &rep, nil
}
