package pps

import (
	"slices"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Interval is one line of the per-second series. Sent and lost count the
// probes sent in the interval; received counts the echoes that arrived in it
// (the last interval also holds echoes that arrived after sending stopped).
//
// In a one-way test (Params.OneWay) received counts the probes sent in the
// interval that reached the server, as the server counted them, PPS is that
// count per second, lost is sent − received, and the RTT fields are zero.
// The series is known only at the end, when the server reports it.
type Interval struct {
	StartS      float64 `json:"start_s"`
	EndS        float64 `json:"end_s"`
	Sent        uint64  `json:"sent"`
	Received    uint64  `json:"received"`
	Lost        uint64  `json:"lost"`
	SentPPS     float64 `json:"sent_pps"`
	PPS         float64 `json:"pps"` // echoes (one-way: probes at the server) per second
	LossPercent float64 `json:"loss_percent"`
	RTTMinUs    float64 `json:"rtt_min_us"`
	RTTMeanUs   float64 `json:"rtt_mean_us"`
	RTTMaxUs    float64 `json:"rtt_max_us"`
}

// CPU is the CPU time a process used during the run.
type CPU struct {
	UserS   float64 `json:"user_s"`
	SystemS float64 `json:"system_s"`
	// Percent is (user + system) / wall time, in percent of one core.
	Percent float64 `json:"percent"`
}

// Schema names the JSON document of `ovpnperf pps client --json`, so that
// `ovpnperf report` can tell it from other documents.
const Schema = "ovpnperf/pps/v1"

// Result is the outcome of a client run; its JSON form is the contract of
// `ovpnperf pps client --json`.
type Result struct {
	// Schema is Schema; empty in documents written before it existed.
	Schema string `json:"schema,omitempty"`
	// Argv and Host are the command line and the machine, set by the
	// command that writes the document (absent in older documents).
	Argv      []string       `json:"argv,omitempty"`
	Host      *hostinfo.Host `json:"host,omitempty"`
	Server    string         `json:"server"`
	Session   uint32         `json:"session"`
	Start     time.Time      `json:"start"`
	Requested Params         `json:"requested"`
	// Params are the parameters the server accepted (it may cap Duration).
	Params Params `json:"params"`
	Count  uint64 `json:"count,omitempty"`
	// SendSeconds is how long the client sent.
	SendSeconds float64 `json:"send_seconds"`
	Counters
	LossPercent float64 `json:"loss_percent"`
	// PPSMedian, PPSMin and PPSMax are over the whole seconds of the series,
	// of echoes received per second (one-way: probes the server received);
	// PPSMean is received / SendSeconds. In a one-way test the RTT fields
	// are zero (nothing is measured), Received, Lost and Duplicates come
	// from the server's counts (zero if it did not report them), and Flows
	// hold only what each flow sent.
	PPSMedian   float64 `json:"pps_median"`
	PPSMin      float64 `json:"pps_min"`
	PPSMax      float64 `json:"pps_max"`
	PPSMean     float64 `json:"pps_mean"`
	SentPPSMean float64 `json:"sent_pps_mean"`
	RTTMinUs    float64 `json:"rtt_min_us"`
	RTTMeanUs   float64 `json:"rtt_mean_us"`
	RTTP50Us    float64 `json:"rtt_p50_us"`
	RTTP90Us    float64 `json:"rtt_p90_us"`
	RTTP99Us    float64 `json:"rtt_p99_us"`
	RTTP999Us   float64 `json:"rtt_p999_us"`
	RTTMaxUs    float64 `json:"rtt_max_us"`
	// RTTStdDevUs is the standard deviation of the RTTs (ping's mdev);
	// absent in documents written before it existed.
	RTTStdDevUs float64    `json:"rtt_stddev_us,omitempty"`
	Series      []Interval `json:"series"`
	CPU         CPU        `json:"cpu"`
	// ServerReport is what the server counted; nil if it did not answer
	// the final exchange.
	ServerReport *ServerReport `json:"server_report,omitempty"`
	ServerCPU    *CPU          `json:"server_cpu,omitempty"`
	// Flows holds the counters of each flow.
	Flows       []Counters `json:"flows"`
	Warnings    []string   `json:"warnings,omitempty"`
	Interrupted bool       `json:"interrupted,omitempty"`
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// summarize fills the derived fields from counters, histogram and series.
func (r *Result) summarize(h *histogram) {
	if r.Sent > 0 {
		r.LossPercent = 100 * float64(r.Lost) / float64(r.Sent)
	}
	if r.SendSeconds > 0 {
		r.PPSMean = float64(r.Received) / r.SendSeconds
		r.SentPPSMean = float64(r.Sent) / r.SendSeconds
	}
	var full []float64
	for _, iv := range r.Series {
		if iv.EndS-iv.StartS >= 0.999 {
			full = append(full, iv.PPS)
		}
	}
	if len(full) == 0 {
		r.PPSMedian, r.PPSMin, r.PPSMax = r.PPSMean, r.PPSMean, r.PPSMean
	} else {
		r.PPSMedian = verdict.Median(full)
		r.PPSMin, r.PPSMax = slices.Min(full), slices.Max(full)
	}
	if h.n > 0 {
		r.RTTMinUs = us(time.Duration(h.min))
		r.RTTMaxUs = us(time.Duration(h.max))
		r.RTTMeanUs = us(h.mean())
		r.RTTStdDevUs = us(h.stddev())
		r.RTTP50Us = us(h.quantile(0.50))
		r.RTTP90Us = us(h.quantile(0.90))
		r.RTTP99Us = us(h.quantile(0.99))
		r.RTTP999Us = us(h.quantile(0.999))
	}
}

func cpuOf(user, sys, wall time.Duration) CPU {
	c := CPU{UserS: user.Seconds(), SystemS: sys.Seconds()}
	if wall > 0 {
		c.Percent = 100 * float64(user+sys) / float64(wall)
	}
	return c
}
