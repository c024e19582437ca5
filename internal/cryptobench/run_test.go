package cryptobench

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// children lists the processes whose parent is this test process.
func children(t *testing.T) []string {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []string
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces, so cut at ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == self {
			kids = append(kids, strings.TrimSpace(s[:i+1]))
		}
	}
	return kids
}

func checkNoChildren(t *testing.T) {
	t.Helper()
	if kids := children(t); len(kids) > 0 {
		t.Errorf("child processes left behind: %v", kids)
	}
}

// checkGoroutines fails unless the number of goroutines falls back to
// before within a second (the timer goroutines of exec need a moment).
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	for range 100 {
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d goroutines after Run, %d before", runtime.NumGoroutine(), before)
}

// Tier 2: the real openssl, short. Checks the figures are there and
// positive, the JSON contract, and that AES-NI is found used where the CPU
// and OpenSSL both have it.
func TestRunReal(t *testing.T) {
	testenv.RequirePrograms(t, "openssl")
	goroutines := runtime.NumGoroutine()
	rep, err := Run(context.Background(), Options{
		Ciphers:        []string{"AES-256-GCM", "CHACHA20-POLY1305", "AES-128-CBC"},
		BlockSizes:     []int{1024},
		PerMeasurement: MinPerMeasurement,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkNoChildren(t)
	checkGoroutines(t, goroutines)

	if !strings.HasPrefix(rep.OpenSSL, "OpenSSL ") {
		t.Errorf("openssl version %q", rep.OpenSSL)
	}
	for _, cr := range rep.Ciphers {
		if !cr.Available || len(cr.Sizes) != 2 {
			t.Fatalf("%s: available %v, %d sizes, want 2 (1024 and the packet size)", cr.Cipher, cr.Available, len(cr.Sizes))
		}
		for _, sr := range cr.Sizes {
			for v, f := range map[string]Figure{"with": sr.WithAESNI, "without": sr.WithoutAESNI} {
				if f.BytesPerSecond <= 0 || f.Samples < 1 || f.CPUSeconds <= 0 {
					t.Errorf("%s %d bytes %s AES-NI: %+v", cr.Cipher, sr.BlockBytes, v, f)
				}
			}
			want := 1
			if cr.AEAD && sr.BlockBytes == DefaultPacketBytes {
				want = PacketRepeat
			}
			if sr.WithAESNI.Samples != want {
				t.Errorf("%s %d bytes: %d samples, want %d", cr.Cipher, sr.BlockBytes, sr.WithAESNI.Samples, want)
			}
		}
	}
	if rep.HMAC == nil || rep.HMAC.WithAESNI.BytesPerSecond <= 0 {
		t.Errorf("no HMAC figure for the CBC projection: %+v", rep.HMAC)
	}
	if len(rep.Projection.Ciphers) != 3 || rep.Projection.PreferredCipher == "" {
		t.Errorf("projection %+v", rep.Projection)
	}
	if rep.Noise.Samples == 0 || rep.Noise.ClockTimed == 0 {
		t.Errorf("noise %+v: no run was timed from the CPU clock", rep.Noise)
	}

	if rep.AESNIUsed == nil {
		t.Fatalf("aesni_used not determined: %s", rep.AESNIEvidence)
	}
	if rep.CPU.FlagAES && rep.CPU.OpenSSLSeesAESNI != nil && *rep.CPU.OpenSSLSeesAESNI && !*rep.AESNIUsed {
		t.Errorf("CPU and OpenSSL have AES-NI but aesni_used is false: %s", rep.AESNIEvidence)
	}
	if !rep.CPU.FlagAES && *rep.AESNIUsed {
		t.Logf("aesni_used without the CPU flag: %s", rep.AESNIEvidence)
	}
	// ChaCha20 does not use AES-NI; the mask must not slow it down as the
	// mask without its second word would (OpenSSL then clears AVX2 too).
	// Generous bound: the machine is shared.
	for _, cr := range rep.Ciphers {
		if cr.Cipher == "CHACHA20-POLY1305" {
			for _, sr := range cr.Sizes {
				if sr.AESNISpeedup > 1.4 {
					t.Errorf("CHACHA20-POLY1305 at %d bytes runs %.2f× slower masked: the mask touches more than AES-NI", sr.BlockBytes, sr.AESNISpeedup)
				}
			}
		}
	}

	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"aesni_used":`, `"bytes_per_second":`, `"with_aesni":`, `"without_aesni":`, `"ceiling_mbit_per_sec":`, `"preferred_cipher":`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}

// BF-CBC needs the legacy provider; where it loads, ovpnperf must find it.
func TestLegacyAvailability(t *testing.T) {
	testenv.RequirePrograms(t, "openssl")
	why := legacyUnavailable(context.Background(), newEnvs(), "BF-CBC")
	_, statErr := os.Stat("/usr/lib/x86_64-linux-gnu/ossl-modules/legacy.so")
	if statErr == nil && why != "" {
		t.Errorf("legacy.so is installed but BF-CBC reported unavailable: %s", why)
	}
	t.Logf("BF-CBC: %q", why)
}

// Interrupting a run stops openssl and leaves no process behind.
func TestRunCancel(t *testing.T) {
	testenv.RequirePrograms(t, "openssl")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	goroutines := runtime.NumGoroutine()
	start := time.Now()
	_, err := Run(ctx, Options{PerMeasurement: 2 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run returned %v after the context ended", d)
	}
	checkNoChildren(t)
	checkGoroutines(t, goroutines)
}

func TestRunMissingOpenSSL(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Run(context.Background(), Options{})
	var missing *runner.MissingProgramError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "apt-get install openssl") {
		t.Errorf("error %v, want one naming the Debian package openssl", err)
	}
}

// Benchmark-style figure printer: go test -run XXX -bench Crypto prints
// the AES-256-GCM rate at the packet size with and without AES-NI.
func BenchmarkAES256GCMPacket(b *testing.B) {
	testenv.RequirePrograms(b, "openssl")
	env := newEnvs()
	for b.Loop() {
		for _, v := range []Variant{WithAESNI, WithoutAESNI} {
			r, err := speed(context.Background(), env, cell{"AES-256-GCM", DefaultPacketBytes, v}, 200*time.Millisecond)
			if err != nil {
				b.Fatal(err)
			}
			name := "MB/s-aesni"
			if v == WithoutAESNI {
				name = "MB/s-masked"
			}
			b.ReportMetric(r.Rate()/1e6, name)
		}
	}
}
