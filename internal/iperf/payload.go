package iperf

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Payload kinds for WritePayload.
const (
	// PayloadRandom is incompressible: bytes from crypto/rand.
	PayloadRandom = "random"
	// PayloadZeros is as compressible as data gets.
	PayloadZeros = "zeros"
)

// WritePayload writes a file of size bytes of the given kind ("random" or
// "zeros") for iperf3's -F, replacing any file at path. The file is 0600:
// it lives in the lab's directory next to keys.
//
// iperf3 ends a test at the end of its -F file, so size must cover the
// whole test: PayloadSize gives a safe size for a rate and duration.
func WritePayload(path string, kind string, size int64) (err error) {
	var src io.Reader
	switch kind {
	case PayloadRandom:
		src = rand.Reader
	case PayloadZeros:
		src = zeroReader{}
	default:
		return usage.Errorf("unknown payload %q: use %q or %q", kind, PayloadRandom, PayloadZeros)
	}
	if size < 0 {
		return fmt.Errorf("payload size %d is negative", size)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := io.CopyN(w, src, size); err != nil {
		return fmt.Errorf("writing payload %s: %w", path, err)
	}
	return w.Flush()
}

// PayloadSize returns a file size that lasts a test of duration d at
// rateBps with a 25 % margin, and at least 1 MiB. Mind the size on fast
// paths: /run is tmpfs (RAM) on most systems, and 4 Gbit/s for 12 s is
// 7.5 GB. There, a fixed file with ClientOptions.Bytes is the better way.
func PayloadSize(rateBps uint64, d time.Duration) int64 {
	n := int64(float64(rateBps) / 8 * d.Seconds() * 1.25)
	if n < 1<<20 {
		n = 1 << 20
	}
	return n
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
