package cryptobench

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// SpeedResult is one `openssl speed -mr` measurement of one algorithm at one
// buffer size.
type SpeedResult struct {
	// Algorithm as openssl names it in its output ("AES-256-GCM",
	// "ChaCha20-Poly1305", "hmac(sha1)").
	Algorithm string
	// BufferBytes is the size of each buffer processed (`-bytes`).
	BufferBytes int
	// Count is how many buffers openssl processed in CPUSeconds.
	Count int64
	// CPUSeconds is the time openssl divided by: its own CPU user time,
	// counted in clock ticks (1/100 s on Linux).
	CPUSeconds float64
	// BytesPerSecond is openssl's own figure (the +F line): Count ×
	// BufferBytes / CPUSeconds.
	BytesPerSecond float64
	// ClockCPUSeconds is the CPU time of the measurement as ovpnperf read
	// it from openssl's CPU clock (nanoseconds, not ticks) when it ended the
	// run itself; 0 otherwise.
	ClockCPUSeconds float64
}

// Reliable reports whether openssl's CPU time and the clock agree. They
// disagree when the kernel spent much of the measurement on the process
// outside the loop (page faults under memory pressure on a busy machine):
// openssl counts user time only, split from the total by sampled ticks,
// while the clock counts all of it. Such a sample measures the machine's
// load, not the cipher.
func (r SpeedResult) Reliable() bool {
	if r.CPUSeconds <= 0 || r.Count <= 0 || math.IsInf(r.BytesPerSecond, 0) {
		return false
	}
	return r.ClockCPUSeconds == 0 || math.Abs(r.ClockCPUSeconds-r.CPUSeconds) <= clockSlack.Seconds()
}

// clockSlack is how far openssl's time and the clock may differ: one step
// of openssl's timer plus the reads around the signal.
const clockSlack = TimerResolution + 2*time.Millisecond

// Rate is the throughput in bytes per second: Count × BufferBytes divided by
// the CPU time read from the clock when there is one (it has no 10 ms steps,
// and where it disagrees with openssl it is the lower, conservative figure),
// and openssl's own figure otherwise.
func (r SpeedResult) Rate() float64 {
	if r.ClockCPUSeconds > 0 && r.Count > 0 {
		return float64(r.Count) * float64(r.BufferBytes) / r.ClockCPUSeconds
	}
	return r.BytesPerSecond
}

// ParseSpeed reads the machine-readable output of
// `openssl speed -mr -bytes N -evp NAME` (or `-hmac NAME`). openssl 3.0
// writes the progress lines to stderr:
//
//	+DT:AES-256-GCM:1:1024        algorithm, seconds asked for, buffer bytes
//	+R:1342562:AES-256-GCM:0.970000   buffers done, CPU seconds used
//
// and the results to stdout, the last one without a newline:
//
//	+H:1024                        buffer sizes
//	+F:25:AES-256-GCM:1417302564.95   index, algorithm, bytes per second per size
//
// Exactly one buffer size is expected, as ovpnperf runs one size per process.
func ParseSpeed(stdout, stderr []byte) (SpeedResult, error) {
	var r SpeedResult
	var haveH, haveF, haveR bool
	for _, line := range lines(stdout, stderr) {
		switch {
		case strings.HasPrefix(line, "+H:"):
			f := strings.Split(line[len("+H:"):], ":")
			if len(f) != 1 {
				return r, fmt.Errorf("openssl speed: expected one buffer size, got %q", line)
			}
			n, err := strconv.Atoi(f[0])
			if err != nil || n <= 0 {
				return r, fmt.Errorf("openssl speed: bad buffer size in %q", line)
			}
			r.BufferBytes, haveH = n, true
		case strings.HasPrefix(line, "+F:"):
			// +F:<index>:<name>:<bytes/s>; the name itself has no colon in
			// openssl's EVP names, but split from the right to be safe.
			rest := line[len("+F:"):]
			i := strings.IndexByte(rest, ':')
			j := strings.LastIndexByte(rest, ':')
			if i < 0 || j <= i {
				return r, fmt.Errorf("openssl speed: malformed result line %q", line)
			}
			v, err := strconv.ParseFloat(rest[j+1:], 64)
			if err != nil {
				return r, fmt.Errorf("openssl speed: bad rate in %q", line)
			}
			r.Algorithm, r.BytesPerSecond, haveF = rest[i+1:j], v, true
		case strings.HasPrefix(line, "+R:"):
			rest := line[len("+R:"):]
			i := strings.IndexByte(rest, ':')
			j := strings.LastIndexByte(rest, ':')
			if i < 0 || j <= i {
				return r, fmt.Errorf("openssl speed: malformed count line %q", line)
			}
			n, err1 := strconv.ParseInt(rest[:i], 10, 64)
			s, err2 := strconv.ParseFloat(rest[j+1:], 64)
			if err1 != nil || err2 != nil {
				return r, fmt.Errorf("openssl speed: bad count or time in %q", line)
			}
			r.Count, r.CPUSeconds, haveR = n, s, true
		}
	}
	switch {
	case !haveF || !haveH:
		return r, fmt.Errorf("openssl speed printed no result (+H/+F lines)")
	case !haveR:
		return r, fmt.Errorf("openssl speed printed no count (+R line)")
	case r.Count <= 0:
		return r, fmt.Errorf("openssl speed processed no buffers")
	case r.CPUSeconds <= 0:
		// openssl divided by zero ("inf"): less than one clock tick of
		// user time. Not a parse error; Reliable says no.
	case r.BytesPerSecond <= 0 || math.IsNaN(r.BytesPerSecond) || math.IsNaN(r.CPUSeconds):
		return r, fmt.Errorf("openssl speed reported %v bytes per second", r.BytesPerSecond)
	}
	return r, nil
}

func lines(outputs ...[]byte) []string {
	var out []string
	for _, b := range outputs {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			out = append(out, strings.TrimSpace(sc.Text()))
		}
	}
	return out
}

// ParseIA32Cap extracts the capability vector OpenSSL uses on x86 from
// `openssl version -a`:
//
//	CPUINFO: OPENSSL_ia32cap=0xfffa3203078bffff:0x40069c219c07ab env:…
//
// It returns the first 64-bit word (CPUID.1 EDX in the low half, ECX in the
// high half) and whether the line was present; non-x86 builds print none.
func ParseIA32Cap(versionA []byte) (word0 uint64, ok bool, err error) {
	for _, line := range lines(versionA) {
		rest, found := strings.CutPrefix(line, "CPUINFO: OPENSSL_ia32cap=")
		if !found {
			continue
		}
		v, _, _ := strings.Cut(rest, ":")
		v, _, _ = strings.Cut(v, " ")
		w, err := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 64)
		if err != nil {
			return 0, false, fmt.Errorf("openssl version -a: bad OPENSSL_ia32cap in %q", line)
		}
		return w, true, nil
	}
	return 0, false, nil
}

// ParseVersion returns the first line of `openssl version -a`, e.g.
// "OpenSSL 3.0.19 27 Jan 2026 (Library: OpenSSL 3.0.19 27 Jan 2026)".
func ParseVersion(versionA []byte) string {
	for _, line := range lines(versionA) {
		if line != "" {
			return line
		}
	}
	return ""
}

// ProviderCiphers lists the cipher names that loaded providers offer, from
// `openssl list -cipher-algorithms` (OpenSSL 3). Only the provider section
// counts, lines such as
//
//	{ 1.3.6.1.4.1.3029.1.2, BF, BF-CBC, BLOWFISH } @ legacy
//	BF-ECB @ legacy
//
// because the first section ("bf => BF-CBC") lists libcrypto's built-in
// names whether or not a provider implements them. Names are upper-cased.
func ProviderCiphers(list []byte) map[string]string {
	names := map[string]string{}
	for _, line := range lines(list) {
		left, provider, found := strings.Cut(line, " @ ")
		if !found {
			continue
		}
		left = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(left), "{"), "}")
		for _, n := range strings.Split(left, ",") {
			n = strings.ToUpper(strings.TrimSpace(n))
			if n != "" {
				names[n] = strings.TrimSpace(provider)
			}
		}
	}
	return names
}
