// Package cryptobench measures how fast this machine runs OpenVPN's
// data-channel ciphers, with `openssl speed -evp`, once as OpenSSL runs here
// and once with AES-NI hidden from OpenSSL (OPENSSL_ia32cap), derives from
// the two whether AES-NI is actually used, and projects the figures onto
// OpenVPN: bytes per second per core for a full-size tunnel packet, the
// ceiling that crypto alone puts on one OpenVPN process, and the cipher to
// prefer on this CPU.
//
// OpenSSL 3.0's `openssl speed` takes whole seconds only (-seconds) and one
// buffer size per run (-bytes), and times itself with times(2), in 10 ms
// steps. To keep a full run at a few seconds, ovpnperf gives each run a
// whole-second limit as a backstop and ends it after the CPU time asked for
// (0.1 s by default) with SIGALRM, the signal openssl's own timer uses:
// openssl stops the loop and reports the buffers it processed. ovpnperf
// divides by the CPU time it read from openssl's POSIX CPU clock around
// the run (nanoseconds), cross-checked against openssl's own figure.
package cryptobench

import (
	"strings"
	"time"
)

// Cipher is one data-channel cipher OpenVPN 2.6 can negotiate.
type Cipher struct {
	// Name as OpenVPN and OpenSSL spell it.
	Name string
	// AEAD ciphers carry their own tag; the others need --auth (HMAC).
	AEAD bool
	// AES ciphers are the ones AES-NI can speed up.
	AES bool
	// Legacy ciphers need OpenSSL 3's legacy provider (OpenVPN:
	// --providers legacy default).
	Legacy bool
}

// DataCiphers are the ciphers measured by default: OpenVPN 2.6's default
// --data-ciphers (AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305), the CBC
// ciphers older peers still negotiate, and BF-CBC, the pre-2.4 default,
// when OpenSSL's legacy provider has it. The slice is the caller's own.
func DataCiphers() []Cipher {
	return []Cipher{
		{Name: "AES-128-GCM", AEAD: true, AES: true},
		{Name: "AES-256-GCM", AEAD: true, AES: true},
		{Name: "CHACHA20-POLY1305", AEAD: true},
		{Name: "AES-128-CBC", AES: true},
		{Name: "AES-256-CBC", AES: true},
		{Name: "BF-CBC", Legacy: true},
	}
}

// LookupCipher finds a cipher of DataCiphers by name, case-insensitively.
func LookupCipher(name string) (Cipher, bool) {
	for _, c := range DataCiphers() {
		if strings.EqualFold(c.Name, name) {
			return c, true
		}
	}
	return Cipher{}, false
}

// AESNIMask is the OPENSSL_ia32cap value that hides AES-NI from OpenSSL.
// The first word clears bit 57 (CPUID.1:ECX bit 25, AESNI) and bit 33
// (CPUID.1:ECX bit 1, PCLMULQDQ, which GCM's GHASH uses with AES-NI); the
// second word clears bits 41 and 42 (CPUID.7:ECX bits 9 and 10, VAES and
// VPCLMULQDQ, used by the AVX-512 AES-GCM code of OpenSSL 3.2 and later).
// The second word must be given: without it OpenSSL zeroes the whole
// extended word, which also switches off AVX2 and AVX-512 and slows
// CHACHA20-POLY1305 down (measured here: 1.8 → 1.1 GB/s).
const AESNIMask = "~0x200000200000000:~0x60000000000"

// ia32capAESNI is the AESNI bit in the first word of OPENSSL_ia32cap.
const ia32capAESNI = 1 << 57

// SpeedupThreshold is how much faster AES-GCM must run as is than with AES-NI
// masked before ovpnperf says AES-NI is used. Real AES-NI gives 3–10× on
// AES-GCM (bit-sliced/vector-permute AES plus table GHASH against AES-NI plus
// PCLMULQDQ); without it both runs take the same code path and differ only
// by noise.
const SpeedupThreshold = 1.5

// TimerResolution is the step of the CPU time openssl speed divides by:
// times(2) counts in clock ticks, 1/100 s on Linux (USER_HZ).
const TimerResolution = 10 * time.Millisecond

// DefaultBlockSizes are the buffer sizes of the table; the slice is the
// caller's own.
func DefaultBlockSizes() []int { return []int{256, 1024, 8192} }

// Defaults.
const (
	// DefaultPerMeasurement keeps a full run (6 ciphers × 4 sizes × 2, plus
	// HMAC-SHA1, plus the AEAD repeats at the packet size: 62 runs) at
	// about 8 seconds.
	DefaultPerMeasurement = 100 * time.Millisecond
	// MinPerMeasurement is 5 steps of openssl's timer (±20 % at worst).
	MinPerMeasurement = 5 * TimerResolution
	// MaxPerMeasurement bounds a single openssl run.
	MaxPerMeasurement = 10 * time.Minute
)

// PacketRepeat is the least number of times the AEAD ciphers are measured
// at the packet size: the preferred cipher and aesni_used rest on these
// figures, and on a shared machine one sample of 0.1 s can be off by 15 %.
const PacketRepeat = 3

// DefaultPacketBytes is the plaintext of a full-size tunnel packet: the
// inner IPv4 packet of a TCP flow under OpenVPN 2.6's default
// "mssfix 1492 mtu" with an AEAD cipher over IPv4/UDP (1492 − 20 IP − 8 UDP
// − 24 AEAD overhead = 1440, MSS 1400; internal/overhead's MSS(1492) + 40,
// checked in TestDefaultPacketBytesMatchesModel). UDP traffic can fill
// tun-mtu (1500); the per-byte rate barely differs between the two.
const DefaultPacketBytes = 1440

// CBCAuth is the HMAC OpenVPN uses with CBC ciphers by default (--auth SHA1);
// the projection for a CBC cipher includes it, as OpenVPN encrypts and then
// authenticates every packet.
const CBCAuth = "SHA1"

// Published per-core throughput of OpenVPN without DCO (public reports; see
// the OpenVPN facts collected for ovpnperf). Quoted, not measured.
const (
	PublishedNoDCOLowMbitPerSec  = 400
	PublishedNoDCOHighMbitPerSec = 700
)

// Options select what Run measures. Zero values mean the defaults.
type Options struct {
	// Ciphers to measure, by name; nil means all of DataCiphers.
	Ciphers []string
	// BlockSizes of the table, in bytes; nil means DefaultBlockSizes.
	BlockSizes []int
	// PacketBytes is the size of the projection; 0 means DefaultPacketBytes.
	PacketBytes int
	// PerMeasurement is the CPU time of each openssl run.
	PerMeasurement time.Duration
	// Repeat is how often each measurement is taken (interleaved passes).
	Repeat int
	// Progress, if set, hears how many openssl runs there will be and
	// when each begins.
	Progress Progress
}

// Progress follows a Run.
type Progress interface {
	// Start is called once, with the number of openssl runs planned.
	Start(total int)
	// Step is called before each run, with what it measures.
	Step(label string)
}
