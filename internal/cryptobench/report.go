package cryptobench

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/rules"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

// ReportVersion is the version of the JSON layout of Report.
const ReportVersion = 1

// Schema names the JSON document of `ovpnperf crypto --json`, so that
// `ovpnperf report` can tell it from other documents.
const Schema = "ovpnperf/crypto/v1"

// Report is the result of Run; its JSON form is ovpnperf crypto --json.
type Report struct {
	// Schema is Schema; empty in documents written before it existed.
	Schema  string `json:"schema,omitempty"`
	Version int    `json:"version"`
	// Argv is the command line, set by the command (absent in older documents).
	Argv []string `json:"argv,omitempty"`
	// Host is the machine, as every ovpnperf report describes it.
	Host    *hostinfo.Host `json:"host,omitempty"`
	OpenSSL string         `json:"openssl_version"`
	CPU     CPUFacts       `json:"cpu"`
	// AESNIUsed is derived from the measurements: AES-GCM runs at least
	// SpeedupThreshold times faster as is than with AES-NI masked. Null when
	// no AES-GCM cipher was measured.
	AESNIUsed     *bool  `json:"aesni_used"`
	AESNIEvidence string `json:"aesni_evidence"`
	AESNIMask     string `json:"aesni_mask"`

	SecondsPerMeasurement  float64 `json:"seconds_per_measurement"`
	Repeat                 int     `json:"repeat"`
	TimerResolutionSeconds float64 `json:"timer_resolution_seconds"`
	BlockSizes             []int   `json:"block_sizes"`

	Ciphers    []CipherResult `json:"ciphers"`
	HMAC       *SizeResult    `json:"hmac,omitempty"`
	Projection Projection     `json:"projection"`
	Noise      Noise          `json:"noise"`
	Notes      []string       `json:"notes,omitempty"`

	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

// CPUFacts are what the system and OpenSSL say about the CPU, as opposed to
// what the measurements show.
type CPUFacts struct {
	Model string `json:"model"`
	Cores int    `json:"cores"`
	// FlagAES and FlagPCLMULQDQ: /proc/cpuinfo lists the flag.
	FlagAES       bool `json:"flag_aes"`
	FlagPCLMULQDQ bool `json:"flag_pclmulqdq"`
	// OpenSSLSeesAESNI: bit 57 of OpenSSL's capability vector
	// (openssl version -a); null when OpenSSL prints none (not x86).
	OpenSSLSeesAESNI *bool `json:"openssl_sees_aesni"`
}

// CipherResult holds the measurements of one cipher.
type CipherResult struct {
	Cipher    string       `json:"cipher"`
	AEAD      bool         `json:"aead"`
	Available bool         `json:"available"`
	Note      string       `json:"note,omitempty"`
	Sizes     []SizeResult `json:"sizes,omitempty"`
}

// SizeResult is one algorithm at one buffer size, as is and with AES-NI
// masked.
type SizeResult struct {
	Algorithm    string `json:"algorithm,omitempty"`
	BlockBytes   int    `json:"block_bytes"`
	PacketSize   bool   `json:"packet_size,omitempty"`
	WithAESNI    Figure `json:"with_aesni"`
	WithoutAESNI Figure `json:"without_aesni"`
	// AESNISpeedup is WithAESNI / WithoutAESNI.
	AESNISpeedup float64 `json:"aesni_speedup"`
}

// Figure summarises the repeats of one measurement.
type Figure struct {
	// BytesPerSecond is the median over the samples.
	BytesPerSecond    float64 `json:"bytes_per_second"`
	MinBytesPerSecond float64 `json:"min_bytes_per_second"`
	MaxBytesPerSecond float64 `json:"max_bytes_per_second"`
	Samples           int     `json:"samples"`
	// CPUSeconds is the CPU time openssl counted over all samples.
	CPUSeconds float64 `json:"cpu_seconds"`
}

// Projection maps the figures at the packet size onto OpenVPN.
type Projection struct {
	PacketBytes int                `json:"packet_bytes"`
	CBCAuth     string             `json:"cbc_auth"`
	Ciphers     []CipherProjection `json:"ciphers"`
	// PreferredCipher is the AEAD cipher to put first on this CPU: the
	// fastest as is, or, among those within EqualWithinPercent of the
	// fastest (EquallyFast), the first in OpenVPN's default --data-ciphers.
	PreferredCipher    string   `json:"preferred_cipher"`
	PreferredReason    string   `json:"preferred_reason"`
	EquallyFast        []string `json:"equally_fast"`
	EqualWithinPercent float64  `json:"equal_within_percent"`
	// Published per-core figures of OpenVPN without DCO (quoted).
	PublishedNoDCOMbitPerSec [2]float64 `json:"published_openvpn_no_dco_mbit_per_sec"`
	Note                     string     `json:"note"`
}

// CipherProjection is what one data-channel cipher allows one OpenVPN
// process, crypto alone.
type CipherProjection struct {
	Cipher string `json:"cipher"`
	// DataChannel names what each packet costs: the cipher, plus the HMAC
	// for CBC ciphers.
	DataChannel  string     `json:"data_channel"`
	WithAESNI    PacketRate `json:"with_aesni"`
	WithoutAESNI PacketRate `json:"without_aesni"`
}

// PacketRate is the crypto throughput of one core at the packet size.
type PacketRate struct {
	BytesPerSecondPerCore   float64 `json:"bytes_per_second_per_core"`
	PacketsPerSecondPerCore float64 `json:"packets_per_second_per_core"`
	// CeilingMbitPerSec = bytes/s × 8 / 1e6: the most one OpenVPN process
	// (single-threaded) could carry if crypto were its only cost.
	CeilingMbitPerSec float64 `json:"ceiling_mbit_per_sec"`
	// CorePercentAtPublished is the share of one core the crypto takes at
	// the upper published per-core rate without DCO (700 Mbit/s).
	CorePercentAtPublished float64 `json:"core_percent_at_700_mbit"`
}

// Noise says how far to trust the figures.
type Noise struct {
	// Method: "repeats" (spread (max−min)/median of measurements taken
	// several times), "control pairs" (ciphers that AES-NI masking does not
	// affect, measured once as is and once masked: any difference is
	// noise), or both joined by " + ".
	Method              string  `json:"method"`
	Compared            int     `json:"compared"`
	MedianSpreadPercent float64 `json:"median_spread_percent"`
	MaxSpreadPercent    float64 `json:"max_spread_percent"`
	// Samples is the number of openssl runs kept; ClockTimed of them were
	// timed by ovpnperf from openssl's CPU clock (the others by openssl in
	// 10 ms steps); Unreliable of them still disagreed with openssl's own
	// time after retries (see SpeedResult.Reliable): a sign of a busy
	// machine.
	Samples    int `json:"samples"`
	ClockTimed int `json:"clock_timed"`
	Unreliable int `json:"unreliable"`
}

// Host describes the machine, gathered before measuring.
type Host struct {
	Machine          *hostinfo.Host
	OpenSSL          string
	CPU              hostinfo.CPU
	Cores            int
	OpenSSLSeesAESNI *bool
	Notes            []string
}

// Analyze turns raw measurements into a report. unavailable maps the
// ciphers that could not run to the reason.
func Analyze(opts Options, host Host, m Measurements, unavailable map[string]string) *Report {
	r := &Report{
		Schema:  Schema,
		Version: ReportVersion,
		Host:    host.Machine,
		OpenSSL: host.OpenSSL,
		CPU: CPUFacts{
			Model:            host.CPU.Model,
			Cores:            host.Cores,
			FlagAES:          host.CPU.Flags["aes"],
			FlagPCLMULQDQ:    host.CPU.Flags["pclmulqdq"],
			OpenSSLSeesAESNI: host.OpenSSLSeesAESNI,
		},
		AESNIMask:              AESNIMask,
		SecondsPerMeasurement:  opts.PerMeasurement.Seconds(),
		Repeat:                 opts.Repeat,
		TimerResolutionSeconds: TimerResolution.Seconds(),
		BlockSizes:             opts.sizes(),
		Notes:                  slices.Clone(host.Notes),
	}

	for _, name := range opts.Ciphers {
		c, _ := LookupCipher(name)
		cr := CipherResult{Cipher: c.Name, AEAD: c.AEAD, Available: unavailable[c.Name] == ""}
		if !cr.Available {
			cr.Note = unavailable[c.Name]
		} else if c.Legacy {
			cr.Note = "needs OpenSSL's legacy provider (OpenVPN: --providers legacy default); 64-bit block, SWEET32"
		}
		if cr.Available {
			for _, size := range opts.sizes() {
				if sr, ok := sizeResult(m, c.Name, size); ok {
					sr.PacketSize = size == opts.PacketBytes
					cr.Sizes = append(cr.Sizes, sr)
				}
			}
		}
		r.Ciphers = append(r.Ciphers, cr)
	}
	if sr, ok := sizeResult(m, hmacAlgorithm, opts.PacketBytes); ok {
		sr.Algorithm = hmacAlgorithm
		r.HMAC = &sr
	}

	gcm := map[string]float64{}
	for _, cr := range r.Ciphers {
		if c, _ := LookupCipher(cr.Cipher); c.AES && c.AEAD {
			if sr, ok := cr.at(opts.PacketBytes); ok {
				gcm[cr.Cipher] = sr.AESNISpeedup
			}
		}
	}
	r.AESNIUsed, r.AESNIEvidence = decideAESNI(r.CPU, gcm, opts.PacketBytes)
	r.Noise = noise(opts, m)
	r.Projection = project(opts.PacketBytes, r.Ciphers, r.HMAC, tieMargin(r.Noise))
	return r
}

func (cr CipherResult) at(size int) (SizeResult, bool) {
	for _, s := range cr.Sizes {
		if s.BlockBytes == size {
			return s, true
		}
	}
	return SizeResult{}, false
}

func sizeResult(m Measurements, alg string, size int) (SizeResult, bool) {
	with, ok1 := figure(m[cell{alg, size, WithAESNI}])
	without, ok2 := figure(m[cell{alg, size, WithoutAESNI}])
	if !ok1 || !ok2 {
		return SizeResult{}, false
	}
	return SizeResult{
		BlockBytes:   size,
		WithAESNI:    with,
		WithoutAESNI: without,
		AESNISpeedup: round(with.BytesPerSecond/without.BytesPerSecond, 3),
	}, true
}

func figure(samples []SpeedResult) (Figure, bool) {
	if len(samples) == 0 {
		return Figure{}, false
	}
	v := make([]float64, len(samples))
	f := Figure{Samples: len(samples)}
	for i, s := range samples {
		v[i] = math.Round(s.Rate())
		if s.ClockCPUSeconds > 0 {
			f.CPUSeconds += s.ClockCPUSeconds
		} else {
			f.CPUSeconds += s.CPUSeconds
		}
	}
	slices.Sort(v)
	f.BytesPerSecond = verdict.Median(v)
	f.MinBytesPerSecond, f.MaxBytesPerSecond = v[0], v[len(v)-1]
	f.CPUSeconds = round(f.CPUSeconds, 2)
	return f, true
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// decideAESNI derives whether AES-NI is used from the AES-GCM speedups
// (as is / masked) at the packet size, and cross-checks the CPU flag.
func decideAESNI(cpu CPUFacts, gcmSpeedup map[string]float64, packet int) (*bool, string) {
	if len(gcmSpeedup) == 0 {
		return nil, "not determined: no AES-GCM cipher was measured"
	}
	if cpu.OpenSSLSeesAESNI == nil {
		// No OPENSSL_ia32cap line: not x86 (arm64 has its own AES
		// instructions, switched by OPENSSL_armcap, which ovpnperf does
		// not vary), so masking changed nothing and proves nothing.
		return nil, "not determined: OpenSSL reports no x86 capability vector (not an x86 CPU?), so OPENSSL_ia32cap masks nothing"
	}
	names := make([]string, 0, len(gcmSpeedup))
	for n := range gcmSpeedup {
		names = append(names, n)
	}
	slices.Sort(names)
	var parts []string
	lowest := math.Inf(1)
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f×", n, gcmSpeedup[n]))
		lowest = min(lowest, gcmSpeedup[n])
	}
	measured := fmt.Sprintf("AES-GCM as is / with AES-NI masked at %d bytes: %s", packet, strings.Join(parts, ", "))
	used := lowest >= SpeedupThreshold
	var why string
	switch {
	case used && cpu.FlagAES:
		why = fmt.Sprintf("%s (threshold %.1f×); /proc/cpuinfo lists aes", measured, SpeedupThreshold)
	case used:
		why = fmt.Sprintf("%s, although /proc/cpuinfo does not list aes: the flag list may be incomplete (virtual machine)", measured)
	case cpu.FlagAES && cpu.OpenSSLSeesAESNI != nil && !*cpu.OpenSSLSeesAESNI:
		why = fmt.Sprintf("the CPU lists aes, but OpenSSL's capability vector has no AESNI bit; %s", measured)
	case cpu.FlagAES:
		why = fmt.Sprintf("the CPU lists aes, but masking it changes little (%s, threshold %.1f×)", measured, SpeedupThreshold)
	default:
		why = fmt.Sprintf("/proc/cpuinfo has no aes flag and masking changes little (%s)", measured)
	}
	return &used, why
}

// project derives the per-core crypto rate of each cipher at the packet size.
// For CBC ciphers OpenVPN encrypts and then computes an HMAC over every
// packet, so the time per byte is the sum of both.
func project(packet int, ciphers []CipherResult, hmac *SizeResult, marginPercent float64) Projection {
	p := Projection{
		PacketBytes:              packet,
		CBCAuth:                  CBCAuth,
		PublishedNoDCOMbitPerSec: [2]float64{PublishedNoDCOLowMbitPerSec, PublishedNoDCOHighMbitPerSec},
		Note: fmt.Sprintf("The ceiling is for crypto alone. A real OpenVPN process (single-threaded) also pays per-packet "+
			"system calls, copies between tun and socket and its own bookkeeping: public reports give roughly %d–%d Mbit/s "+
			"per core without DCO, and more with DCO, where the kernel does the crypto.",
			PublishedNoDCOLowMbitPerSec, PublishedNoDCOHighMbitPerSec),
	}
	rates := map[string]float64{}
	for _, cr := range ciphers {
		sr, ok := cr.at(packet)
		if !ok {
			continue
		}
		cp := CipherProjection{Cipher: cr.Cipher, DataChannel: cr.Cipher}
		with, without := sr.WithAESNI.BytesPerSecond, sr.WithoutAESNI.BytesPerSecond
		if !cr.AEAD {
			if hmac == nil {
				continue
			}
			cp.DataChannel = cr.Cipher + " + HMAC-" + CBCAuth
			with = serial(with, hmac.WithAESNI.BytesPerSecond)
			without = serial(without, hmac.WithoutAESNI.BytesPerSecond)
		}
		cp.WithAESNI, cp.WithoutAESNI = packetRate(with, packet), packetRate(without, packet)
		p.Ciphers = append(p.Ciphers, cp)
		if cr.AEAD && with > 0 {
			rates[cr.Cipher] = with
		}
	}
	p.PreferredCipher, p.EquallyFast, p.PreferredReason = prefer(rates, marginPercent)
	p.EqualWithinPercent = marginPercent
	return p
}

// defaultDataCiphers is OpenVPN 2.6's default --data-ciphers, in order.
var defaultDataCiphers = strings.Split(rules.DefaultDataCiphers, ":")

// MinTieMarginPercent is the smallest difference between two ciphers that
// decides the preference; twice the median noise when that is larger.
// Below 10 % the ranking flips between runs on a shared machine, and the
// difference is under 1 % of a core at the published OpenVPN rates, where
// crypto takes about 5 % of a core with AES-NI.
const MinTieMarginPercent = 10

func tieMargin(n Noise) float64 {
	return max(MinTieMarginPercent, round(2*n.MedianSpreadPercent, 1))
}

// prefer picks the AEAD cipher to put first: the fastest, unless others are
// within marginPercent of it, in which case the measurement cannot tell them
// apart and OpenVPN's default order decides. It returns the choice, the
// ciphers that tie with the fastest, and the reason in words.
func prefer(rates map[string]float64, marginPercent float64) (string, []string, string) {
	if len(rates) == 0 {
		return "", nil, "no AEAD cipher was measured"
	}
	names := make([]string, 0, len(rates))
	for n := range rates {
		names = append(names, n)
	}
	// Fastest first; ties in the default order.
	rank := func(n string) int {
		if i := slices.Index(defaultDataCiphers, n); i >= 0 {
			return i
		}
		return len(defaultDataCiphers)
	}
	slices.SortFunc(names, func(a, b string) int {
		if rates[a] != rates[b] {
			if rates[a] > rates[b] {
				return -1
			}
			return 1
		}
		return rank(a) - rank(b)
	})
	fastest := names[0]
	var equal []string
	for _, n := range names {
		if rates[n] >= rates[fastest]*(1-marginPercent/100) {
			equal = append(equal, n)
		}
	}
	chosen := slices.MinFunc(equal, func(a, b string) int { return rank(a) - rank(b) })
	slices.SortFunc(equal, func(a, b string) int { return rank(a) - rank(b) })

	var others []string
	for _, n := range names[1:] {
		others = append(others, fmt.Sprintf("%s %.0f%% slower", n, 100*(1-rates[n]/rates[fastest])))
	}
	var s string
	switch {
	case len(equal) == 1:
		s = fmt.Sprintf("%s is the fastest AEAD cipher here", fastest)
		if len(others) > 0 {
			s += " (" + strings.Join(others, ", ") + ")"
		}
	default:
		s = fmt.Sprintf("%s are within %.0f%% of the fastest (%s; %s), closer than this measurement can separate; of them %s comes first in OpenVPN's default --data-ciphers",
			strings.Join(equal, ", "), marginPercent, fastest, strings.Join(others, ", "), chosen)
	}
	switch {
	case chosen == "CHACHA20-POLY1305":
		s += ". Put CHACHA20-POLY1305 first in the server's --data-ciphers: the server picks the first cipher of its list that the client supports"
	case chosen == defaultDataCiphers[0]:
		s += ". Keep OpenVPN's default --data-ciphers " + strings.Join(defaultDataCiphers, ":") + "; peers without AES-NI (phones, small routers) still get CHACHA20-POLY1305 from it"
	default:
		s += ". Keep AES-GCM first in --data-ciphers, as OpenVPN's default does"
		if d, ok := rates[defaultDataCiphers[0]]; ok && d > 0 {
			// Share of one core the crypto takes at the upper published
			// OpenVPN rate, with the default first cipher and with this one.
			perByte := PublishedNoDCOHighMbitPerSec * 1e6 / 8
			saved := 100 * (perByte/d - perByte/rates[chosen])
			s += fmt.Sprintf("; putting %s before %s saves %.1f%% of a core at %d Mbit/s", chosen, defaultDataCiphers[0], saved, PublishedNoDCOHighMbitPerSec)
		}
	}
	return chosen, equal, s + "."
}

// serial is the rate of doing two things to every byte, one after the other.
func serial(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return 1 / (1/a + 1/b)
}

func packetRate(bps float64, packet int) PacketRate {
	if bps <= 0 {
		return PacketRate{}
	}
	return PacketRate{
		BytesPerSecondPerCore:   math.Round(bps),
		PacketsPerSecondPerCore: math.Round(bps / float64(packet)),
		CeilingMbitPerSec:       round(bps*8/1e6, 1),
		CorePercentAtPublished:  round(PublishedNoDCOHighMbitPerSec*1e6/8/bps*100, 1),
	}
}

// noise estimates the measurement noise: from the repeats when there are
// any, otherwise from the pairs of measurements that AES-NI masking cannot
// change (non-AES ciphers and the HMAC).
func noise(opts Options, m Measurements) Noise {
	n := Noise{}
	for _, s := range m {
		for _, r := range s {
			n.Samples++
			if r.ClockCPUSeconds > 0 {
				n.ClockTimed++
			}
			if !r.Reliable() {
				n.Unreliable++
			}
		}
	}
	var spreads []float64
	var methods []string
	for _, smp := range m {
		f, ok := figure(smp)
		if ok && f.Samples >= 2 && f.BytesPerSecond > 0 {
			spreads = append(spreads, 100*(f.MaxBytesPerSecond-f.MinBytesPerSecond)/f.BytesPerSecond)
		}
	}
	if len(spreads) > 0 {
		methods = append(methods, "repeats")
	}
	if opts.Repeat < 2 {
		pairs := 0
		for c, smp := range m {
			if c.Variant != WithAESNI || affectedByMask(c.Algorithm) {
				continue
			}
			a, ok1 := figure(smp)
			b, ok2 := figure(m[cell{c.Algorithm, c.Bytes, WithoutAESNI}])
			if ok1 && ok2 && a.BytesPerSecond+b.BytesPerSecond > 0 {
				spreads = append(spreads, 100*math.Abs(a.BytesPerSecond-b.BytesPerSecond)/((a.BytesPerSecond+b.BytesPerSecond)/2))
				pairs++
			}
		}
		if pairs > 0 {
			methods = append(methods, "control pairs")
		}
	}
	n.Method = strings.Join(methods, " + ")
	if len(spreads) == 0 {
		return n
	}
	slices.Sort(spreads)
	n.Compared = len(spreads)
	n.MedianSpreadPercent = round(verdict.Median(spreads), 1)
	n.MaxSpreadPercent = round(spreads[len(spreads)-1], 1)
	return n
}

func affectedByMask(alg string) bool {
	c, ok := LookupCipher(alg)
	return ok && c.AES
}
