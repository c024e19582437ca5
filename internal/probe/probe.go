// Package probe measures what advise needs about a path and the local
// machine, and stores it as one versioned JSON path description
// (schema ovpnperf/probe/v1). Every field says whether it was measured,
// read from the system, or is not available (and why), so that advice
// built on a probe never mistakes a gap for a zero.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"io"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/advise"
	"github.com/ovpnperf/ovpnperf/internal/finding"
)

// Schema names the JSON format.
const Schema = "ovpnperf/probe/v1"

// Sources of a field.
const (
	Measured     = "measured"
	Read         = "read"
	NotAvailable = "not available"
)

// Field is one figure with where it came from. Value is meaningful only
// when Source is Measured or Read.
type Field[T any] struct {
	Value  T      `json:"value"`
	Source string `json:"source"`
	// Note says how it was measured or why it is not available.
	Note string `json:"note,omitempty"`
	// Method names the mechanism that produced the value, for the fields
	// that can come from more than one (MethodPPSEcho, MethodICMPEcho,
	// MethodEthtoolIoctl); absent in older documents and other fields.
	Method string `json:"method,omitempty"`
}

// Methods of a field.
const (
	// MethodPPSEcho: UDP probes echoed by an `ovpnperf pps server`.
	MethodPPSEcho = "pps-echo"
	// MethodICMPEcho: ICMP echo requests (iputils ping).
	MethodICMPEcho = "icmp-echo"
	// MethodEthtoolIoctl: the kernel's ETHTOOL_GFEATURES ioctl.
	MethodEthtoolIoctl = "ethtool-ioctl"
)

// Known reports whether the field holds a value.
func (f Field[T]) Known() bool { return f.Source == Measured || f.Source == Read }

func measured[T any](v T, note string) Field[T] {
	return Field[T]{Value: v, Source: Measured, Note: note}
}
func read[T any](v T, note string) Field[T] { return Field[T]{Value: v, Source: Read, Note: note} }
func missing[T any](why string) Field[T]    { return Field[T]{Source: NotAvailable, Note: why} }

// by records the method that produced (or failed to produce) the field.
func (f Field[T]) by(method string) Field[T] { f.Method = method; return f }

// Echoes are the counts of the paced echoes RTT, jitter and loss were
// measured with: Sent, of which Answered came back in time (the round
// trip). Up and Down are the one-way counts, known only from a pps echo
// whose server reported its own (Up: the probes sent and those that
// reached the server; Down: the echoes the server sent and those that
// came back, late ones included).
type Echoes struct {
	Sent     int     `json:"sent"`
	Answered int     `json:"answered"`
	Up       *OneWay `json:"up,omitempty"`
	Down     *OneWay `json:"down,omitempty"`
}

// OneWay counts the packets sent one way and those that arrived.
type OneWay struct {
	Sent    int `json:"sent"`
	Arrived int `json:"arrived"`
}

// PMTU is a path MTU result of one family.
type PMTU struct {
	Bytes     int  `json:"bytes"`
	Blackhole bool `json:"blackhole"`
}

// Path is what the probe found.
type Path struct {
	PMTUIPv4  Field[PMTU]    `json:"pmtu_ipv4"`
	PMTUIPv6  Field[PMTU]    `json:"pmtu_ipv6"`
	RTTMillis Field[float64] `json:"rtt_ms"`
	JitterMs  Field[float64] `json:"jitter_ms"`
	// LossPercent is the round-trip loss: a probe or its echo lost.
	LossPercent Field[float64] `json:"loss_percent"`
	// LossUpPercent (towards HOST) and LossDownPercent (back) are known
	// only from a pps echo, whose server reports how many probes reached
	// it and how many it echoed; an ICMP echo cannot tell the directions
	// apart. Absent in older documents.
	LossUpPercent   Field[float64] `json:"loss_up_percent"`
	LossDownPercent Field[float64] `json:"loss_down_percent"`
	// LossEchoes are the counts behind the loss fields, what the loss
	// finding is judged on (verdict.JudgeEchoLoss, the rule measure's
	// loss finding uses too); the method is the loss field's. Absent in
	// older documents, whose loss finding is judged from LossPercent
	// alone where the rule needs no count.
	LossEchoes Field[Echoes] `json:"loss_echoes"`
	// ThroughputBitsPerSec is one TCP flow's iperf3 goodput towards HOST;
	// PathRateBitsPerSec the IP-layer rate it implies (goodput ×
	// 1514/1448), only when the path showed no loss (a lossy path's TCP
	// goodput is loss-bound, not the link's rate).
	ThroughputBitsPerSec Field[float64] `json:"throughput_bps"`
	PathRateBitsPerSec   Field[float64] `json:"path_rate_bps"`
	// Local machine.
	AESGCMBytesPerSec Field[float64] `json:"aes_256_gcm_bytes_per_sec_per_core"`
	ChaChaBytesPerSec Field[float64] `json:"chacha20_poly1305_bytes_per_sec_per_core"`
	OpenVPNVersion    Field[string]  `json:"openvpn_version"`
	// DCO: this host can offload with the installed OpenVPN (its build
	// has [DCO] and the kernel the module it needs); the note says why
	// not. The fields after it are what that rests on.
	DCO           Field[bool]     `json:"dco_available"`
	KernelRelease Field[string]   `json:"kernel_release"`
	KernelOVPN    Field[string]   `json:"kernel_config_ovpn"`
	ModuleOVPN    Field[string]   `json:"module_ovpn"`
	ModuleOVPNDCO Field[string]   `json:"module_ovpn_dco"`
	OpenVPNBuild  Field[[]string] `json:"openvpn_build_flags"`
	// DCOWithConfig: with --config FILE, whether OpenVPN would use DCO
	// for that config on this host; DCOOffReasons lists every reason it
	// would not (the config's options and the host's gaps).
	DCOWithConfig Field[bool]            `json:"dco_with_config"`
	DCOOffReasons Field[[]string]        `json:"dco_off_reasons"`
	RmemMax       Field[int]             `json:"rmem_max"`
	WmemMax       Field[int]             `json:"wmem_max"`
	Interface     Field[string]          `json:"interface"`
	InterfaceMTU  Field[int]             `json:"interface_mtu"`
	Offloads      Field[map[string]bool] `json:"offloads"`
}

// Report is the JSON document.
type Report struct {
	Schema string    `json:"schema"`
	Host   string    `json:"host"`
	Time   time.Time `json:"time"`
	Path   Path      `json:"path"`
	// Findings are what the fields show, judged by Findings: loss,
	// black holes, DCO off. Documents written before them are judged
	// on reading (Decode).
	Findings []finding.Finding `json:"findings"`
}

// LoadError is a probe file that cannot be used: the user's mistake.
type LoadError struct{ Msg string }

func (e *LoadError) Error() string { return e.Msg }

// Load reads a probe file.
func Load(file string) (*Report, error) {
	f, err := inputfile.Open(context.Background(), file, inputfile.Document())
	if err != nil {
		return nil, &LoadError{fmt.Sprintf("probe file %v", err)}
	}
	defer f.Close()
	r, err := Decode(f)
	if err != nil {
		return nil, &LoadError{fmt.Sprintf("probe file %s: %v", file, err)}
	}
	return r, nil
}

// Decode reads a probe document and checks its schema.
func Decode(r io.Reader) (*Report, error) {
	var head struct {
		Schema *string         `json:"schema"`
		Host   string          `json:"host"`
		Time   time.Time       `json:"time"`
		Path   json.RawMessage `json:"path"`
	}
	dec := json.NewDecoder(r)
	if err := dec.Decode(&head); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("truncated or empty JSON (write it again with ovpnperf probe HOST --json > FILE)")
		}
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	switch {
	case head.Schema == nil:
		return nil, fmt.Errorf("no \"schema\" field: not an ovpnperf probe (want %s)", Schema)
	case *head.Schema != Schema:
		return nil, fmt.Errorf("schema %q, want %s", *head.Schema, Schema)
	case len(head.Path) == 0 || string(head.Path) == "null":
		// "path": null is no path either: both are refused alike.
		return nil, fmt.Errorf("no \"path\" object")
	}
	if err := measure.CheckFigures(head.Path); err != nil {
		return nil, fmt.Errorf("path.%w", err)
	}
	rep := &Report{Schema: Schema, Host: head.Host, Time: head.Time}
	if err := json.Unmarshal(head.Path, &rep.Path); err != nil {
		return nil, fmt.Errorf("path: %v", err)
	}
	for name, src := range rep.Path.sources() {
		switch src {
		case Measured, Read, NotAvailable, "": // an absent field is not available
		default:
			return nil, fmt.Errorf("path.%s: source %q (measured, read or not available)", name, src)
		}
	}
	// The findings are judged again from the fields, also where the
	// document carries them: they are a function of the fields.
	rep.Findings = Findings(rep)
	return rep, nil
}

func (p Path) sources() map[string]string {
	return map[string]string{
		"pmtu_ipv4": p.PMTUIPv4.Source, "pmtu_ipv6": p.PMTUIPv6.Source, "rtt_ms": p.RTTMillis.Source,
		"jitter_ms": p.JitterMs.Source, "loss_percent": p.LossPercent.Source,
		"loss_up_percent": p.LossUpPercent.Source, "loss_down_percent": p.LossDownPercent.Source, "loss_echoes": p.LossEchoes.Source,
		"aes_256_gcm_bytes_per_sec_per_core": p.AESGCMBytesPerSec.Source, "chacha20_poly1305_bytes_per_sec_per_core": p.ChaChaBytesPerSec.Source,
		"interface": p.Interface.Source, "interface_mtu": p.InterfaceMTU.Source, "offloads": p.Offloads.Source, "throughput_bps": p.ThroughputBitsPerSec.Source,
		"path_rate_bps": p.PathRateBitsPerSec.Source, "openvpn_version": p.OpenVPNVersion.Source, "dco_available": p.DCO.Source,
		"kernel_release": p.KernelRelease.Source, "kernel_config_ovpn": p.KernelOVPN.Source, "module_ovpn": p.ModuleOVPN.Source,
		"module_ovpn_dco": p.ModuleOVPNDCO.Source, "openvpn_build_flags": p.OpenVPNBuild.Source, "dco_with_config": p.DCOWithConfig.Source,
		"dco_off_reasons": p.DCOOffReasons.Source,
		"rmem_max":        p.RmemMax.Source, "wmem_max": p.WmemMax.Source,
	}
}

// Input turns the probe into advise's path description for a tunnel over
// proto with outer IPv6 or IPv4. Fields that are not available stay zero
// ("not known" for advise).
func (r *Report) Input(proto string, outerIPv6 bool) advise.Input {
	p := r.Path
	in := advise.Input{Proto: proto, OuterIPv6: outerIPv6}
	pm := p.PMTUIPv4
	if outerIPv6 {
		pm = p.PMTUIPv6
	}
	if pm.Known() {
		in.PathMTU, in.Blackhole = pm.Value.Bytes, pm.Value.Blackhole
	}
	if p.RTTMillis.Known() {
		in.RTT = time.Duration(p.RTTMillis.Value * float64(time.Millisecond))
	}
	if p.JitterMs.Known() {
		in.Jitter = time.Duration(p.JitterMs.Value * float64(time.Millisecond))
	}
	if p.LossPercent.Known() {
		in.LossPercent, in.LossGiven = p.LossPercent.Value, true
	}
	if p.PathRateBitsPerSec.Known() {
		in.RateBitsPerSec = p.PathRateBitsPerSec.Value
	}
	if p.ThroughputBitsPerSec.Known() {
		in.TCPGoodputBitsPerSec = p.ThroughputBitsPerSec.Value
	}
	if p.AESGCMBytesPerSec.Known() {
		in.CryptoBytesPerSec = p.AESGCMBytesPerSec.Value
	}
	if p.ChaChaBytesPerSec.Known() {
		in.ChaChaBytesPerSec = p.ChaChaBytesPerSec.Value
	}
	if p.RmemMax.Known() {
		in.RmemMax = p.RmemMax.Value
	}
	if p.WmemMax.Known() {
		in.WmemMax = p.WmemMax.Value
	}
	if p.OpenVPNVersion.Known() && len(p.OpenVPNVersion.Value) >= 3 && p.OpenVPNVersion.Value[:3] == "2.5" {
		in.OpenVPN = "2.5"
	}
	if p.DCO.Known() && p.DCO.Value && in.OpenVPN != "2.5" {
		in.DCO = true
	}
	return in
}
