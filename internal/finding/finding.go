// Package finding is what ovpnperf concluded from a document's figures, as
// data: a stable kind, the subject it is about, the outcome of the evidence
// rules (internal/verdict), the figures it rests on, what would decide it
// when it is undecided, and the sources it cites. Documents carry these
// records in their "findings"; the sentences people read are rendered from
// them in one place, and scripts, tests, compare and the metrics of watch
// read the records, never the sentences.
package finding

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// Kind names what a finding is about. Kinds are stable across versions:
// scripts gate on them. docs/schemas.md lists them.
type Kind string

// The kinds of findings.
const (
	// The path's rate is the tunnel's limit: the tunnel keeps what the
	// overhead model predicts of the routed (or outside) rate.
	PathBound Kind = "path-bound"
	// The tunnel is below the path in every sample pair.
	BelowPath Kind = "below-path"
	// One OpenVPN process (one core) is the limit.
	CPUBound Kind = "cpu-bound"
	// OpenVPN's UDP socket dropped datagrams: its receive buffer was full.
	SocketDrops Kind = "socket-drops"
	// OpenVPN's outer packets were fragmented: larger than the path MTU.
	Fragmentation Kind = "fragmentation"
	// One TCP flow moved at its window over the round-trip time.
	WindowBound Kind = "window-bound"
	// The path itself loses packets (TCP outside the tunnel retransmits).
	Loss Kind = "loss"
	// Whether the cipher costs: cipher none against the defaults.
	CipherCost Kind = "cipher-cost"
	// The tun device dropped packets before OpenVPN read them.
	TunDrops Kind = "tun-drops"
	// What limits the tunnel could not be told from this run.
	LimitUnknown Kind = "limit-unknown"
	// Counters a finding needs could not be read: those findings are not
	// tested here.
	NotRead Kind = "not-read"
	// tune: the search's best configuration is faster than OpenVPN's
	// defaults in a direction, by the rule over rounds.
	TunedFaster Kind = "tuned-faster"
	// tune: no configuration the search measured beat OpenVPN's defaults.
	NoFasterSetting Kind = "no-faster-setting"
	// tune: advise's variant is slower than the search's best in a
	// direction.
	AdviseShort Kind = "advise-short"
	// probe: packets above the path MTU vanish without an ICMP "too big"
	// (a black hole): tun-mtu or mssfix must keep OpenVPN's packets under
	// it, path MTU discovery cannot find it.
	PMTUBlackhole Kind = "pmtu-blackhole"
	// probe: OpenVPN would not use data channel offload here (the host,
	// or the given config), with every reason.
	DCOOff Kind = "dco-off"
)

// RunKinds are the kinds of run documents (lab run, measure): what
// measure judges from rows. The slice is the caller's own.
func RunKinds() []Kind {
	return []Kind{PathBound, BelowPath, CPUBound, SocketDrops, Fragmentation, WindowBound, Loss, CipherCost, TunDrops, LimitUnknown, NotRead}
}

// Kinds lists every kind, in the order documents list them: the run
// kinds, then those of tune and probe documents. The slice is the
// caller's own.
func Kinds() []Kind {
	return append(RunKinds(), TunedFaster, NoFasterSetting, AdviseShort, PMTUBlackhole, DCOOff)
}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool {
	for _, x := range Kinds() {
		if k == x {
			return true
		}
	}
	return false
}

// Subject is what a finding is about: a network (lab network or "real"),
// and where it applies a variant and a direction, with the indexes of the
// document's rows the finding rests on.
type Subject struct {
	Network   string `json:"network"`
	Variant   string `json:"variant,omitempty"`
	Direction string `json:"direction,omitempty"`
	Rows      []int  `json:"rows,omitempty"`
}

// Figures are a finding's numbers by name; each name ends in its unit
// (_bps, _bytes, _seconds, _percent, _packets, _ratio, _cpu_seconds_per_gb,
// …) as every key of the documents does. A figure that was not read is
// absent, never 0.
type Figures map[string]float64

// Finding is one judgement.
type Finding struct {
	Kind    Kind            `json:"kind"`
	Subject Subject         `json:"subject"`
	Outcome verdict.Outcome `json:"outcome"`
	Figures Figures         `json:"figures,omitempty"`
	// Settings are the non-numeric facts the finding names (a device, a
	// cipher, the basis of a prediction), by name.
	Settings map[string]string `json:"settings,omitempty"`
	// Advice is the change the finding recommends, as a sentence, when
	// there is one.
	Advice string `json:"advice,omitempty"`
	// Why says why a finding whose outcome is noise or not tested could
	// not be decided; Decide what would decide it; RefutedBy what
	// observation would show a confirmed one wrong.
	Why       string `json:"why,omitempty"`
	Decide    string `json:"decide,omitempty"`
	RefutedBy string `json:"refuted_by,omitempty"`
	// Cites are the documents the rule comes from, as repository paths
	// with a heading's anchor, in docs/evidence.md or docs/openvpn-facts.md.
	Cites []string `json:"cites,omitempty"`
	// Text is the sentence people read, rendered from the fields above by
	// the package that judged it (its one renderer); readers of the data
	// never parse it.
	Text string `json:"text"`
}

// Check reports the first way f is not a well-formed finding: a kind or
// outcome outside the lists, a figure that is not a finite number or
// whose name carries no unit-style suffix, no sentence.
func (f Finding) Check() error {
	if !f.Kind.Valid() {
		return fmt.Errorf("finding kind %q is not one of %v", f.Kind, Kinds())
	}
	if !f.Outcome.Valid() {
		return fmt.Errorf("finding %s: outcome %q is not one of %v", f.Kind, f.Outcome, verdict.Outcomes())
	}
	if f.Subject.Network == "" {
		return fmt.Errorf("finding %s: no subject network", f.Kind)
	}
	names := make([]string, 0, len(f.Figures))
	for k := range f.Figures {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := f.Figures[k]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("finding %s: figure %s is %v", f.Kind, k, v)
		}
		if !strings.Contains(k, "_") && k != "samples" && k != "pairs" {
			return fmt.Errorf("finding %s: figure %q names no unit", f.Kind, k)
		}
	}
	if strings.TrimSpace(f.Text) == "" {
		return fmt.Errorf("finding %s: no sentence", f.Kind)
	}
	return nil
}

// Key identifies the subject and kind of a finding across two documents
// (compare): the same kind about the same network, variant and direction.
func (f Finding) Key() string {
	return strings.Join([]string{f.Subject.Network, f.Subject.Variant, f.Subject.Direction, string(f.Kind)}, "/")
}
