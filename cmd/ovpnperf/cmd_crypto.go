package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/cryptobench"
	"github.com/ovpnperf/ovpnperf/internal/ui"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newCryptoCommand) }

type cryptoOptions struct {
	json        bool
	seconds     float64
	repeat      int
	ciphers     []string
	sizes       []int
	packetBytes int
	out         io.Writer
}

func newCryptoCommand() *cobra.Command {
	opts := cryptoOptions{}
	cmd := &cobra.Command{
		Use:   "crypto",
		Short: "Measure data-channel cipher speed with and without AES-NI and project it onto OpenVPN",
		Long: `Runs openssl speed -evp for OpenVPN's data-channel ciphers (AES-128/256-GCM,
CHACHA20-POLY1305, AES-128/256-CBC, and BF-CBC when OpenSSL's legacy provider
has it) at 256, 1024 and 8192 bytes and at the size of a full tunnel packet
(1440 bytes), once as OpenSSL runs here and once with AES-NI hidden from it
(OPENSSL_ia32cap=` + cryptobench.AESNIMask + `). From the two it says
whether AES-NI is actually used (AES-GCM much faster as is than masked),
and projects what this means for one OpenVPN process: bytes per second per
core at the packet size, the ceiling in Mbit/s that crypto alone allows, and
the cipher to prefer on this CPU. CBC ciphers are projected with the
HMAC-SHA1 OpenVPN adds to every packet.

Timing: openssl speed in OpenSSL 3 takes whole seconds only and times itself
in 10 ms steps. ovpnperf gives each run a whole-second backstop and ends it
after --seconds of CPU time with SIGALRM, the signal of openssl's own timer;
openssl reports the buffers it processed, and ovpnperf divides by the CPU time
it read from openssl's process CPU clock (nanoseconds). The default, 0.1 s per
figure, makes 62 runs (the AEAD ciphers at the packet size three times, as
the verdicts rest on them) and takes about 8 seconds; the noise is reported.
Use --seconds 1 --repeat 3 (about 2.5 minutes) for steadier figures. Runs are
sequential, one openssl at a time; no root needed, nothing is left behind.`,
		Example: `  ovpnperf crypto
  ovpnperf crypto --json
  ovpnperf crypto --seconds 1 --repeat 3
  ovpnperf crypto --ciphers AES-256-GCM,CHACHA20-POLY1305 --packet-bytes 1500`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.out = cmd.OutOrStdout()
			return runCrypto(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.json, "json", false, "print the report as JSON")
	floatFlag(f, &opts.seconds, "seconds", cryptobench.DefaultPerMeasurement.Seconds(),
		cryptobench.MinPerMeasurement.Seconds(), cryptobench.MaxPerMeasurement.Seconds(),
		"CPU seconds per measurement (0.05–600, fractions allowed)")
	intFlag(f, &opts.repeat, "repeat", "", 1, 1, 100, "measure everything this many times and report median and spread (1–100)")
	stringListFlag(f, &opts.ciphers, "ciphers", "cipher names separated by commas, e.g. AES-256-GCM,CHACHA20-POLY1305",
		"ciphers to measure, comma-separated (default all: "+strings.Join(cryptoCipherNames(), ",")+")")
	intListFlag(f, &opts.sizes, "sizes", cryptobench.DefaultBlockSizes(), 16, 65536, "buffer sizes of the table in bytes (16–65536, comma-separated)")
	intFlag(f, &opts.packetBytes, "packet-bytes", "", cryptobench.DefaultPacketBytes, 16, 65536,
		"plaintext bytes of a full-size tunnel packet for the projection (1440: inner IPv4 packet under the default mssfix 1492 mtu)")
	return cmd
}

func cryptoCipherNames() []string {
	var n []string
	for _, c := range cryptobench.DataCiphers() {
		n = append(n, c.Name)
	}
	return n
}

// benchOptions checks the flags and turns them into cryptobench
// options; a bad value is a usage error.
func (o cryptoOptions) benchOptions() (cryptobench.Options, error) {
	if math.IsNaN(o.seconds) || o.seconds < cryptobench.MinPerMeasurement.Seconds() || o.seconds > cryptobench.MaxPerMeasurement.Seconds() {
		return cryptobench.Options{}, usage.Errorf("--seconds %v: give the CPU time per measurement between %g and %g seconds",
			o.seconds, cryptobench.MinPerMeasurement.Seconds(), cryptobench.MaxPerMeasurement.Seconds())
	}
	if o.repeat < 1 || o.repeat > 100 {
		return cryptobench.Options{}, usage.Errorf("--repeat %d: give a count between 1 and 100", o.repeat)
	}
	for _, c := range o.ciphers {
		if _, ok := cryptobench.LookupCipher(c); !ok {
			return cryptobench.Options{}, usage.Errorf("--ciphers: unknown cipher %q; known: %s", c, strings.Join(cryptoCipherNames(), ","))
		}
	}
	for _, s := range append(append([]int(nil), o.sizes...), o.packetBytes) {
		if s < 16 || s > 65536 {
			return cryptobench.Options{}, usage.Errorf("buffer size %d: give sizes between 16 and 65536 bytes", s)
		}
	}
	bo := cryptobench.Options{
		Ciphers:        o.ciphers,
		BlockSizes:     o.sizes,
		PacketBytes:    o.packetBytes,
		PerMeasurement: time.Duration(math.Round(o.seconds * float64(time.Second))),
		Repeat:         o.repeat,
	}
	n, err := bo.Normalize()
	if err != nil {
		return bo, usage.Errorf("%v", err)
	}
	return n, nil
}

// cryptoProgress shows a Run's progress as a ui.Progress bar.
type cryptoProgress struct {
	w io.Writer
	p *ui.Progress
}

func (c *cryptoProgress) Start(total int)   { c.p = ui.NewProgress(total, c.w) }
func (c *cryptoProgress) Step(label string) { c.p.Step(label) }

func (c *cryptoProgress) done() {
	if c != nil {
		c.p.Done()
	}
}

// cryptoIsTerminal reports whether f is a terminal.
func cryptoIsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func runCrypto(ctx context.Context, opts cryptoOptions) error {
	bo, err := opts.benchOptions()
	if err != nil {
		return err
	}
	// A bar on a terminal only: 62 plain progress lines would bury the
	// report, and --json output is for programs.
	var prog *cryptoProgress
	if !opts.json && cryptoIsTerminal(os.Stderr) {
		prog = &cryptoProgress{w: os.Stderr}
		bo.Progress = prog
	}
	rep, err := cryptobench.Run(ctx, bo)
	prog.done()
	if err != nil {
		return err
	}
	if opts.json {
		rep.Argv = os.Args
		enc := json.NewEncoder(opts.out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if err := rep.WriteText(opts.out); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}
