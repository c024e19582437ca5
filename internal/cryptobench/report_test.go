package cryptobench

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/golden"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
)

func parsed(t *testing.T, file string) SpeedResult {
	t.Helper()
	r, err := ParseSpeed(readTestdata(t, file+".stdout"), readTestdata(t, file+".stderr"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Analyze over real captured openssl output: AES-256-GCM at 1024 bytes as
// is and with AES-NI masked, on a CPU whose /proc/cpuinfo lists aes.
func TestAnalyzeCaptured(t *testing.T) {
	t.Parallel()
	opts, err := Options{Ciphers: []string{"aes-256-gcm"}, BlockSizes: []int{1024}, PacketBytes: 1024, PerMeasurement: time.Second}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	with, without := parsed(t, "speed-aes-256-gcm-1024"), parsed(t, "speed-aes-256-gcm-1024-masked")
	m := Measurements{
		{"AES-256-GCM", 1024, WithAESNI}:    {with},
		{"AES-256-GCM", 1024, WithoutAESNI}: {without},
	}
	w, _, _ := ParseIA32Cap(readTestdata(t, "version-a.txt"))
	sees := w&ia32capAESNI != 0
	host := Host{CPU: hostinfo.ParseCPUInfo(readTestdata(t, "cpuinfo-epyc.txt")), Cores: 2, OpenSSLSeesAESNI: &sees}
	r := Analyze(opts, host, m, nil)

	if r.AESNIUsed == nil || !*r.AESNIUsed {
		t.Fatalf("aesni_used = %v (%s), want true", r.AESNIUsed, r.AESNIEvidence)
	}
	if len(r.Ciphers) != 1 || len(r.Ciphers[0].Sizes) != 1 {
		t.Fatalf("ciphers %+v", r.Ciphers)
	}
	sr := r.Ciphers[0].Sizes[0]
	if sr.WithAESNI.BytesPerSecond != math.Round(with.BytesPerSecond) || sr.WithoutAESNI.BytesPerSecond != math.Round(without.BytesPerSecond) {
		t.Errorf("figures %+v, want openssl's %v and %v", sr, with.BytesPerSecond, without.BytesPerSecond)
	}
	if want := round(with.BytesPerSecond/without.BytesPerSecond, 3); math.Abs(sr.AESNISpeedup-want) > 0.002 || sr.AESNISpeedup < SpeedupThreshold {
		t.Errorf("speedup %v, want %v", sr.AESNISpeedup, want)
	}
	if !sr.PacketSize {
		t.Error("1024 is the packet size here but not marked")
	}
	p := r.Projection
	if len(p.Ciphers) != 1 || p.PreferredCipher != "AES-256-GCM" {
		t.Fatalf("projection %+v", p)
	}
	pr := p.Ciphers[0].WithAESNI
	if want := round(sr.WithAESNI.BytesPerSecond*8/1e6, 1); pr.CeilingMbitPerSec != want {
		t.Errorf("ceiling %v Mbit/s, want bytes/s × 8 / 1e6 = %v", pr.CeilingMbitPerSec, want)
	}
	if want := math.Round(sr.WithAESNI.BytesPerSecond / 1024); pr.PacketsPerSecondPerCore != want {
		t.Errorf("packets/s %v, want %v", pr.PacketsPerSecondPerCore, want)
	}
	if r.Noise.Method != "" || r.Noise.Compared != 0 {
		t.Errorf("noise %+v with one sample and no control pair, want none", r.Noise)
	}

	// The JSON contract: the keys the issue names.
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		AESNIUsed *bool `json:"aesni_used"`
		Ciphers   []struct {
			Cipher string `json:"cipher"`
			Sizes  []struct {
				BlockBytes   int                `json:"block_bytes"`
				WithAESNI    map[string]float64 `json:"with_aesni"`
				WithoutAESNI map[string]float64 `json:"without_aesni"`
			} `json:"sizes"`
		} `json:"ciphers"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	s := j.Ciphers[0].Sizes[0]
	if j.AESNIUsed == nil || s.BlockBytes != 1024 || s.WithAESNI["bytes_per_second"] <= 0 || s.WithoutAESNI["bytes_per_second"] <= 0 {
		t.Errorf("JSON lacks the contract keys: %s", b)
	}
}

func TestDecideAESNI(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	x86 := func(flag bool) CPUFacts { return CPUFacts{FlagAES: flag, OpenSSLSeesAESNI: &flag} }
	for _, tc := range []struct {
		name    string
		cpu     CPUFacts
		speedup map[string]float64
		want    *bool
		says    string
	}{
		{"used", x86(true), map[string]float64{"AES-128-GCM": 6.6, "AES-256-GCM": 7.5}, &yes, "/proc/cpuinfo lists aes"},
		{"no AES-NI on the CPU", x86(false), map[string]float64{"AES-256-GCM": 1.02}, &no, "no aes flag"},
		// The slowest AES-GCM decides: one cipher not gaining is suspect.
		{"one cipher does not gain", x86(true), map[string]float64{"AES-128-GCM": 6.6, "AES-256-GCM": 1.1}, &no, "changes little"},
		{"flag but OpenSSL does not see it", CPUFacts{FlagAES: true, OpenSSLSeesAESNI: &no}, map[string]float64{"AES-256-GCM": 0.98}, &no, "no AESNI bit"},
		{"measured without flag", x86(false), map[string]float64{"AES-256-GCM": 5}, &yes, "does not list aes"},
		{"nothing measured", x86(true), nil, nil, "not determined"},
		{"not x86", CPUFacts{FlagAES: true}, map[string]float64{"AES-256-GCM": 1.0}, nil, "not an x86 CPU"},
		{"just below threshold", x86(true), map[string]float64{"AES-256-GCM": SpeedupThreshold - 0.01}, &no, "changes little"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := decideAESNI(tc.cpu, tc.speedup, 1440)
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("used = %v, want %v (%s)", ptr(got), ptr(tc.want), why)
			}
			if !strings.Contains(why, tc.says) {
				t.Errorf("evidence %q does not say %q", why, tc.says)
			}
		})
	}
}

func ptr(b *bool) string {
	if b == nil {
		return "null"
	}
	if *b {
		return "true"
	}
	return "false"
}

func TestPrefer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		rates  map[string]float64
		margin float64
		want   string
		equal  []string
		says   string
	}{
		{"AES-NI: GCM clearly fastest",
			map[string]float64{"AES-256-GCM": 3000e6, "AES-128-GCM": 3600e6, "CHACHA20-POLY1305": 1500e6}, 5,
			"AES-128-GCM", []string{"AES-128-GCM"}, "saves 0.5% of a core at 700 Mbit/s"},
		{"no AES-NI: ChaCha",
			map[string]float64{"AES-256-GCM": 200e6, "AES-128-GCM": 240e6, "CHACHA20-POLY1305": 900e6}, 5,
			"CHACHA20-POLY1305", []string{"CHACHA20-POLY1305"}, "Put CHACHA20-POLY1305 first"},
		// Within the margin the default order decides.
		{"tie",
			map[string]float64{"AES-256-GCM": 1780e6, "AES-128-GCM": 1830e6, "CHACHA20-POLY1305": 1800e6}, 5,
			"AES-256-GCM", []string{"AES-256-GCM", "AES-128-GCM", "CHACHA20-POLY1305"}, "Keep OpenVPN's default"},
		{"AES-128 and ChaCha tie, AES-256 behind",
			map[string]float64{"AES-256-GCM": 1500e6, "AES-128-GCM": 1830e6, "CHACHA20-POLY1305": 1800e6}, 5,
			"AES-128-GCM", []string{"AES-128-GCM", "CHACHA20-POLY1305"}, "closer than this measurement"},
		{"a noisy run widens the margin",
			map[string]float64{"AES-256-GCM": 1500e6, "AES-128-GCM": 1830e6}, 20,
			"AES-256-GCM", []string{"AES-256-GCM", "AES-128-GCM"}, "within 20%"},
		{"only ChaCha measured", map[string]float64{"CHACHA20-POLY1305": 900e6}, 5,
			"CHACHA20-POLY1305", []string{"CHACHA20-POLY1305"}, "fastest AEAD"},
		{"nothing", nil, 5, "", nil, "no AEAD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, equal, why := prefer(tc.rates, tc.margin)
			if got != tc.want || !slices.Equal(equal, tc.equal) {
				t.Errorf("prefer = %q %v, want %q %v (%s)", got, equal, tc.want, tc.equal, why)
			}
			if !strings.Contains(why, tc.says) {
				t.Errorf("reason %q does not say %q", why, tc.says)
			}
		})
	}
}

// CBC ciphers are projected with the HMAC: time per byte adds up.
func TestProjectCBCWithHMAC(t *testing.T) {
	t.Parallel()
	fig := func(bps float64) Figure { return Figure{BytesPerSecond: bps, Samples: 1} }
	ciphers := []CipherResult{
		{Cipher: "AES-256-CBC", Available: true, Sizes: []SizeResult{{BlockBytes: 1440, WithAESNI: fig(900e6), WithoutAESNI: fig(250e6)}}},
		{Cipher: "AES-256-GCM", AEAD: true, Available: true, Sizes: []SizeResult{{BlockBytes: 1440, WithAESNI: fig(1800e6), WithoutAESNI: fig(210e6)}}},
		{Cipher: "BF-CBC", Available: false},
	}
	hmac := &SizeResult{BlockBytes: 1440, WithAESNI: fig(1350e6), WithoutAESNI: fig(1350e6)}
	p := project(1440, ciphers, hmac, 5)
	if len(p.Ciphers) != 2 {
		t.Fatalf("projected %d ciphers, want 2 (BF-CBC unavailable)", len(p.Ciphers))
	}
	cbc := p.Ciphers[0]
	if cbc.DataChannel != "AES-256-CBC + HMAC-SHA1" {
		t.Errorf("data channel %q", cbc.DataChannel)
	}
	// 1 / (1/900 + 1/1350) = 540 MB/s.
	if got := cbc.WithAESNI.BytesPerSecondPerCore; math.Abs(got-540e6) > 1 {
		t.Errorf("CBC+HMAC rate %.0f, want 540e6", got)
	}
	if got := cbc.WithAESNI.CeilingMbitPerSec; got != 4320 {
		t.Errorf("ceiling %v Mbit/s, want 4320", got)
	}
	// 700 Mbit/s = 87.5 MB/s of 540 MB/s.
	if got := cbc.WithAESNI.CorePercentAtPublished; got != 16.2 {
		t.Errorf("core share %v %%, want 16.2", got)
	}
	if p.Ciphers[1].WithAESNI.BytesPerSecondPerCore != 1800e6 {
		t.Errorf("AEAD projected with an HMAC: %+v", p.Ciphers[1])
	}
	if p.PreferredCipher != "AES-256-GCM" {
		t.Errorf("preferred %q: a CBC cipher must never be preferred", p.PreferredCipher)
	}
	if !strings.Contains(p.Note, "400–700 Mbit/s") {
		t.Errorf("note does not cite the published per-core figures: %q", p.Note)
	}
}

func TestNoise(t *testing.T) {
	t.Parallel()
	s := func(bps ...float64) []SpeedResult {
		var out []SpeedResult
		for _, b := range bps {
			out = append(out, SpeedResult{BufferBytes: 1024, Count: 1, CPUSeconds: 0.1, BytesPerSecond: b})
		}
		return out
	}
	// One pass: ChaCha and the HMAC are control pairs; AES is not.
	m := Measurements{
		{"CHACHA20-POLY1305", 1024, WithAESNI}:    s(2000),
		{"CHACHA20-POLY1305", 1024, WithoutAESNI}: s(2100),
		{hmacAlgorithm, 1024, WithAESNI}:          s(1000),
		{hmacAlgorithm, 1024, WithoutAESNI}:       s(1000),
		{"AES-256-GCM", 1024, WithAESNI}:          s(1400),
		{"AES-256-GCM", 1024, WithoutAESNI}:       s(200),
	}
	n := noise(Options{Repeat: 1, PerMeasurement: 100 * time.Millisecond}, m)
	if n.Method != "control pairs" || n.Compared != 2 || n.MaxSpreadPercent != 4.9 || n.MedianSpreadPercent != 2.4 {
		t.Errorf("control pairs: %+v, want 2 compared, max 4.9 %%, median 2.4 %%", n)
	}
	if n.Samples != 6 || n.ClockTimed != 0 || n.Unreliable != 0 {
		t.Errorf("sample counts %+v", n)
	}
	// Repeats: spread of each cell.
	m = Measurements{
		{"AES-256-GCM", 1024, WithAESNI}:    s(1400, 1300, 1500),
		{"AES-256-GCM", 1024, WithoutAESNI}: s(200, 200, 200),
	}
	n = noise(Options{Repeat: 3, PerMeasurement: 100 * time.Millisecond}, m)
	if n.Method != "repeats" || n.Compared != 2 || n.MaxSpreadPercent != 14.3 || n.MedianSpreadPercent != 7.1 {
		t.Errorf("repeats: %+v, want max 14.3 %%, median 7.1 %%", n)
	}
	if tieMargin(Noise{MedianSpreadPercent: 1}) != MinTieMarginPercent || tieMargin(Noise{MedianSpreadPercent: 8}) != 16 {
		t.Error("tie margin is not max(5, 2 × median noise)")
	}
}

func FuzzParseSpeed(f *testing.F) {
	for _, n := range []string{"speed-aes-256-gcm-1024", "speed-bf-cbc-256-nolegacy", "speed-hmac-sha1-1440"} {
		f.Add(readTestdata(f, n+".stdout"), readTestdata(f, n+".stderr"))
	}
	f.Fuzz(func(t *testing.T, stdout, stderr []byte) {
		r, err := ParseSpeed(stdout, stderr)
		if err == nil && (r.Count <= 0 || r.BufferBytes <= 0) {
			t.Errorf("accepted %+v", r)
		}
		_ = r.Rate()
		_ = r.Reliable()
	})
}

func TestFigureMedian(t *testing.T) {
	t.Parallel()
	f, ok := figure([]SpeedResult{
		{BufferBytes: 1, Count: 1, CPUSeconds: 0.1, BytesPerSecond: 300},
		{BufferBytes: 1, Count: 1, CPUSeconds: 0.1, BytesPerSecond: 100},
		{BufferBytes: 1, Count: 1, CPUSeconds: 0.1, BytesPerSecond: 200},
		{BufferBytes: 1, Count: 1, CPUSeconds: 0.1, BytesPerSecond: 1000},
	})
	if !ok || f.BytesPerSecond != 250 || f.MinBytesPerSecond != 100 || f.MaxBytesPerSecond != 1000 || f.Samples != 4 || f.CPUSeconds != 0.4 {
		t.Errorf("figure %+v", f)
	}
	if _, ok := figure(nil); ok {
		t.Error("figure of no samples")
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	o, err := Options{}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Ciphers) != len(DataCiphers()) || o.PacketBytes != DefaultPacketBytes || o.Repeat != 1 || o.PerMeasurement != DefaultPerMeasurement {
		t.Errorf("defaults %+v", o)
	}
	if got := o.sizes(); !slices.Equal(got, []int{256, 1024, 1440, 8192}) {
		t.Errorf("sizes %v", got)
	}
	// 6 ciphers × 4 sizes × 2 variants + HMAC × 2, then 2 more passes
	// over the 3 AEAD ciphers × 2 variants at the packet size.
	if o.Runs() != 62 {
		t.Errorf("runs %d, want 62", o.Runs())
	}
	o3 := o
	o3.Repeat = 3
	if o3.Runs() != 150 {
		t.Errorf("runs with --repeat 3: %d, want 150 (no extra passes)", o3.Runs())
	}
	o, _ = Options{Ciphers: []string{"chacha20-poly1305", "CHACHA20-POLY1305"}}.Normalize()
	if !slices.Equal(o.Ciphers, []string{"CHACHA20-POLY1305"}) || o.needsHMAC(nil) {
		t.Errorf("ciphers %v needsHMAC %v", o.Ciphers, o.needsHMAC(nil))
	}
	// BF-CBC alone, without the legacy provider: nothing to measure, not
	// even the HMAC.
	o, _ = Options{Ciphers: []string{"BF-CBC"}}.Normalize()
	if cells := o.cells(map[string]string{"BF-CBC": "no legacy provider"}); len(cells) != 0 {
		t.Errorf("cells %v for an unavailable cipher", cells)
	}
	for _, bad := range []Options{
		{Ciphers: []string{"AES-192-GCM"}},
		{BlockSizes: []int{8}},
		{PacketBytes: 1 << 20},
		{PerMeasurement: time.Millisecond},
		{Repeat: -1},
	} {
		if _, err := bad.Normalize(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestSpeedArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    cell
		d    time.Duration
		want string
	}{
		{cell{"AES-256-GCM", 1024, WithAESNI}, 100 * time.Millisecond, "openssl speed -seconds 2 -bytes 1024 -mr -evp aes-256-gcm"},
		{cell{"AES-256-GCM", 1024, WithoutAESNI}, 2500 * time.Millisecond, "openssl speed -seconds 4 -bytes 1024 -mr -evp aes-256-gcm"},
		{cell{"BF-CBC", 256, WithAESNI}, time.Second, "openssl speed -provider legacy -provider default -seconds 2 -bytes 256 -mr -evp bf-cbc"},
		{cell{hmacAlgorithm, 1440, WithAESNI}, time.Second, "openssl speed -seconds 2 -bytes 1440 -mr -hmac sha1"},
	} {
		if got := strings.Join(speedArgs(tc.c, tc.d), " "); got != tc.want {
			t.Errorf("speedArgs(%v, %v) = %q, want %q", tc.c, tc.d, got, tc.want)
		}
	}
}

// The environments: "as is" drops a user's OPENSSL_ia32cap, "masked" sets
// exactly AESNIMask, and both run in the C locale.
func TestEnvs(t *testing.T) {
	t.Setenv("OPENSSL_ia32cap", "0x0")
	e := newEnvs()
	count := func(env []string, prefix string) (n int, last string) {
		for _, kv := range env {
			if strings.HasPrefix(kv, prefix) {
				n, last = n+1, kv
			}
		}
		return
	}
	if n, _ := count(e.asIs, "OPENSSL_ia32cap="); n != 0 {
		t.Error("as-is environment keeps OPENSSL_ia32cap")
	}
	if n, kv := count(e.masked, "OPENSSL_ia32cap="); n != 1 || kv != "OPENSSL_ia32cap="+AESNIMask {
		t.Errorf("masked environment: %d settings, %q", n, kv)
	}
	if n, kv := count(e.asIs, "LC_ALL="); n != 1 || kv != "LC_ALL=C" {
		t.Errorf("locale %q", kv)
	}
}

// Golden text rendering of a real report (ovpnperf crypto --json on the
// 2-core EPYC test VM). go test -run TestWriteTextGolden -update rewrites it.
func TestWriteTextGolden(t *testing.T) {
	t.Parallel()
	var r Report
	if err := json.Unmarshal(readTestdata(t, "report-epyc.json"), &r); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "report-epyc.txt"), buf.Bytes())
	// Independent of the golden file: the table has both rows per cipher
	// and the figures are MB/s of the JSON.
	out := buf.String()
	sr := r.Ciphers[1].Sizes[1] // AES-256-GCM, 1024 bytes
	for _, want := range []string{"AES-256-GCM", "as is", "masked", mb(sr.WithAESNI.BytesPerSecond), mb(sr.WithoutAESNI.BytesPerSecond), "Prefer " + r.Projection.PreferredCipher} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q", want)
		}
	}
}
