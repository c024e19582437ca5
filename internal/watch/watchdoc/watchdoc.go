// Package watchdoc is the history `ovpnperf watch` keeps: one record per
// active round (measured, skipped or failed) as a JSON line, each with the
// round's run document and findings when it measured, and the round trips
// the light echoes saw since the round before. `ovpnperf report` reads it
// without linking the watcher (internal/watch).
package watchdoc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/measure"
)

// Schema names this version of a history record. A change of meaning or
// a removed key needs a new version; added keys do not.
const Schema = "ovpnperf/watch-round/v1"

// Results of a round (Round.Result).
const (
	// Every row of the round has a valid sample.
	ResultOK = "ok"
	// The round measured, but some rows were refused (Round.Refusals).
	ResultPartial = "partial"
	// The round was not run (Round.Reason is one of SkipReasons).
	ResultSkipped = "skipped"
	// The round ran and failed (Round.Reason is one of FailureKinds).
	ResultFailed = "failed"
)

// Results lists every result, in the order metrics and pages show them;
// the slice is the caller's own.
func Results() []string { return []string{ResultOK, ResultPartial, ResultSkipped, ResultFailed} }

// Why a round was skipped.
const (
	// The tunnel carried at least SkipShare of its last measured rate
	// in the interval before the round: the user's traffic would be
	// crowded out, and would lower the figure.
	SkipBusy = "busy"
	// The OpenVPN process was not found when the round was due.
	SkipNoOpenVPN = "no-openvpn"
)

// SkipReasons lists every reason a round is skipped; the slice is the
// caller's own.
func SkipReasons() []string { return []string{SkipBusy, SkipNoOpenVPN} }

// Why a round failed, beside the refusal kinds of its rows
// (measure.RefusalKinds).
const (
	// Nothing answered iperf3 at the far end (realnet.ErrNoServer).
	FailNoServer = "no-server"
	// The OpenVPN process ended during the round.
	FailOpenVPNGone = "openvpn-gone"
	// Every row of the round was refused: Round.Refusals says why.
	FailNoValidRow = "no-valid-row"
	// Anything else (Round.Detail says what).
	FailError = "error"
)

// FailureKinds lists every kind of failed round; the slice is the
// caller's own.
func FailureKinds() []string {
	return []string{FailNoServer, FailOpenVPNGone, FailNoValidRow, FailError}
}

// Round is one line of the history.
type Round struct {
	Schema string `json:"schema"`
	// Seq counts the rounds of one watch from 1.
	Seq     int       `json:"seq"`
	Started time.Time `json:"started"`
	// DurationSeconds is how long the round took (0 when skipped).
	DurationSeconds float64 `json:"duration_seconds"`
	Result          string  `json:"result"`
	// Reason is a skip reason or a failure kind.
	Reason string `json:"reason,omitempty"`
	// Detail is the error of a failed round, for people.
	Detail string `json:"detail,omitempty"`
	// Refusals counts the refused rows of the round by refusal kind
	// (measure.RefusalKinds).
	Refusals map[string]int `json:"refusals,omitempty"`
	// Load is the skip rule's figures, when there was a rate to judge by.
	Load *Load `json:"load,omitempty"`
	// Echoes are the light round-trip probes since the round before, one
	// per path.
	Echoes []Echoes `json:"echoes,omitempty"`
	// Run is the round's run document (as `ovpnperf measure --json`
	// writes it, its findings in "findings"); absent when skipped or
	// failed before measuring.
	Run *measure.Report `json:"run,omitempty"`
}

// Load is what the tunnel carried before a round, against the rates the
// last measured round found inside it.
type Load struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	// UpBps and DownBps are the tun device's traffic over the interval
	// (up: into the tunnel from this host).
	UpBps   float64 `json:"up_bps"`
	DownBps float64 `json:"down_bps"`
	// LastUpBps and LastDownBps are the last measured tunnel rates.
	LastUpBps   float64 `json:"last_up_bps"`
	LastDownBps float64 `json:"last_down_bps"`
	// ShareRatio is the larger of up/last up and down/last down.
	ShareRatio float64 `json:"share_ratio"`
	// SkipShareRatio is the share from which a round is skipped.
	SkipShareRatio float64 `json:"skip_share_ratio"`
}

// Paths of the echoes.
const (
	PathInside  = "inside"
	PathOutside = "outside"
)

// Echoes summarises the ICMP echoes of one path between two rounds.
type Echoes struct {
	Path     string `json:"path"`
	Sent     int    `json:"sent"`
	Answered int    `json:"answered"`
	// MedianSeconds and MaxSeconds of the answered echoes (absent when
	// none answered).
	MedianSeconds float64 `json:"median_seconds,omitempty"`
	MaxSeconds    float64 `json:"max_seconds,omitempty"`
}

// Check reports the first way r is not a well-formed record.
func (r *Round) Check() error {
	if r.Schema != Schema {
		return fmt.Errorf("schema %q, want %s", r.Schema, Schema)
	}
	okResult := false
	for _, x := range Results() {
		okResult = okResult || r.Result == x
	}
	if !okResult {
		return fmt.Errorf("round %d: result %q is not one of %v", r.Seq, r.Result, Results())
	}
	if r.Run != nil {
		if err := r.Run.CheckRows(); err != nil {
			return fmt.Errorf("round %d: %w", r.Seq, err)
		}
		for _, f := range r.Run.Findings {
			if err := f.Check(); err != nil {
				return fmt.Errorf("round %d: %w", r.Seq, err)
			}
		}
	}
	return nil
}

// Read reads a history: one record a line, in the order written. A line
// that is not a record is an error naming its line number; the last line
// may be cut short (the watcher stopped while writing it) and is then
// left out, with cut true.
func Read(data []byte) (rounds []Round, cut bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r Round
		if err := json.Unmarshal(line, &r); err != nil {
			if n == bytes.Count(data, []byte("\n"))+1 && !bytes.HasSuffix(data, []byte("\n")) {
				return rounds, true, nil
			}
			return nil, false, fmt.Errorf("line %d: %w", n, err)
		}
		if err := measure.CheckFigures(line); err != nil {
			return nil, false, fmt.Errorf("line %d: %w", n, err)
		}
		if err := r.Check(); err != nil {
			return nil, false, fmt.Errorf("line %d: %w", n, err)
		}
		rounds = append(rounds, r)
	}
	if err := sc.Err(); err != nil {
		return nil, false, err
	}
	if len(rounds) == 0 {
		return nil, false, fmt.Errorf("no round recorded")
	}
	return rounds, cut, nil
}
