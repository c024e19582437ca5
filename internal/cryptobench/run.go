package cryptobench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo/hostcollect"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// Variant says how OpenSSL runs: as it does on this machine, or with AES-NI
// hidden from it.
type Variant int

const (
	// WithAESNI is OpenSSL as is (it uses AES-NI if the CPU has it).
	WithAESNI Variant = iota
	// WithoutAESNI runs OpenSSL with OPENSSL_ia32cap=AESNIMask.
	WithoutAESNI
)

func (v Variant) String() string {
	if v == WithoutAESNI {
		return "without AES-NI"
	}
	return "with AES-NI"
}

// hmacAlgorithm is the key of the HMAC measurements among the ciphers'.
const hmacAlgorithm = "HMAC-" + CBCAuth

// cell is one thing measured: an algorithm at a buffer size and a variant.
type cell struct {
	Algorithm string // a DataCiphers name or hmacAlgorithm
	Bytes     int
	Variant   Variant
}

// Measurements are the raw results of a run, by cell, one per repeat.
type Measurements map[cell][]SpeedResult

// Normalize checks opts and fills in defaults.
func (o Options) Normalize() (Options, error) {
	if len(o.Ciphers) == 0 {
		for _, c := range DataCiphers() {
			o.Ciphers = append(o.Ciphers, c.Name)
		}
	}
	var names []string
	for _, n := range o.Ciphers {
		c, ok := LookupCipher(n)
		if !ok {
			return o, fmt.Errorf("unknown cipher %q (known: %s)", n, cipherNames())
		}
		if !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	o.Ciphers = names
	if len(o.BlockSizes) == 0 {
		o.BlockSizes = DefaultBlockSizes()
	}
	if o.PacketBytes == 0 {
		o.PacketBytes = DefaultPacketBytes
	}
	for _, n := range append(slices.Clone(o.BlockSizes), o.PacketBytes) {
		// openssl speed allocates the buffer; 64 KiB is the largest packet
		// OpenVPN could ever hand it.
		if n < 16 || n > 65536 {
			return o, fmt.Errorf("buffer size %d bytes out of range 16–65536", n)
		}
	}
	if o.PerMeasurement == 0 {
		o.PerMeasurement = DefaultPerMeasurement
	}
	if o.PerMeasurement < MinPerMeasurement || o.PerMeasurement > MaxPerMeasurement {
		return o, fmt.Errorf("time per measurement %v out of range %v–%v (openssl's timer counts in %v steps)",
			o.PerMeasurement, MinPerMeasurement, MaxPerMeasurement, TimerResolution)
	}
	if o.Repeat == 0 {
		o.Repeat = 1
	}
	if o.Repeat < 1 || o.Repeat > 100 {
		return o, fmt.Errorf("repeat %d out of range 1–100", o.Repeat)
	}
	return o, nil
}

func cipherNames() string {
	var n []string
	for _, c := range DataCiphers() {
		n = append(n, c.Name)
	}
	return strings.Join(n, ", ")
}

// sizes returns the block sizes and the packet size, sorted, without repeats.
func (o Options) sizes() []int {
	s := append(slices.Clone(o.BlockSizes), o.PacketBytes)
	slices.Sort(s)
	return slices.Compact(s)
}

// cells lists what opts measures, skipping unavailable ciphers.
func (o Options) cells(unavailable map[string]string) []cell {
	var cells []cell
	for _, n := range o.Ciphers {
		if unavailable[n] != "" {
			continue
		}
		for _, size := range o.sizes() {
			for _, v := range []Variant{WithAESNI, WithoutAESNI} {
				cells = append(cells, cell{n, size, v})
			}
		}
	}
	if o.needsHMAC(unavailable) {
		for _, v := range []Variant{WithAESNI, WithoutAESNI} {
			cells = append(cells, cell{hmacAlgorithm, o.PacketBytes, v})
		}
	}
	return cells
}

// passes returns the runs in order: Repeat passes over all cells, then
// further passes over the AEAD cells at the packet size until those have
// PacketRepeat samples.
func (o Options) passes(cells []cell) [][]cell {
	var passes [][]cell
	for range o.Repeat {
		passes = append(passes, cells)
	}
	for i := o.Repeat; i < PacketRepeat; i++ {
		var extra []cell
		for _, c := range cells {
			if ci, ok := LookupCipher(c.Algorithm); ok && ci.AEAD && c.Bytes == o.PacketBytes {
				extra = append(extra, c)
			}
		}
		passes = append(passes, extra)
	}
	return passes
}

// Runs returns how many openssl runs Run makes for opts when all ciphers
// are available, for estimating the duration.
func (o Options) Runs() int {
	n := 0
	for _, p := range o.passes(o.cells(nil)) {
		n += len(p)
	}
	return n
}

// needsHMAC reports whether a CBC cipher will be measured, whose projection
// needs the HMAC's rate.
func (o Options) needsHMAC(unavailable map[string]string) bool {
	for _, n := range o.Ciphers {
		if c, _ := LookupCipher(n); !c.AEAD && unavailable[n] == "" {
			return true
		}
	}
	return false
}

// Run measures the ciphers of opts with openssl and returns the report. It
// runs one openssl process at a time and leaves nothing behind.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts, err := opts.Normalize()
	if err != nil {
		return nil, err
	}
	if err := runner.Require("openssl"); err != nil {
		return nil, err
	}
	start := time.Now()
	envIA32Cap, envSet := os.LookupEnv("OPENSSL_ia32cap")
	env := newEnvs()

	host := Host{Cores: runtime.NumCPU()}
	if h, err := hostcollect.Host(ctx); err == nil {
		h.EmulationBackend = "none" // no lab: nothing is emulated
		host.Machine = &h
	} else {
		host.Notes = append(host.Notes, fmt.Sprintf("cannot describe the host: %v", err))
	}
	out, err := runner.Output(env.command(ctx, WithAESNI, "openssl", "version", "-a"))
	if err != nil {
		return nil, err
	}
	host.OpenSSL = ParseVersion(out)
	if w, ok, err := ParseIA32Cap(out); err != nil {
		return nil, err
	} else if ok {
		sees := w&ia32capAESNI != 0
		host.OpenSSLSeesAESNI = &sees
	}
	if host.CPU, err = hostinfo.ReadCPU(); err != nil {
		host.Notes = append(host.Notes, fmt.Sprintf("cannot read CPU flags: %v", err))
	}
	if envSet {
		host.Notes = append(host.Notes, fmt.Sprintf(
			"OPENSSL_ia32cap=%q is set in the environment; ovpnperf measured without it. OpenVPN started from this environment would inherit it.",
			envIA32Cap))
	}

	// Which ciphers can run at all: BF-CBC only with the legacy provider.
	unavailable := map[string]string{}
	for _, n := range opts.Ciphers {
		c, _ := LookupCipher(n)
		if !c.Legacy {
			continue
		}
		if why := legacyUnavailable(ctx, env, c.Name); why != "" {
			unavailable[c.Name] = why
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	cells := opts.cells(unavailable)

	// Passes over all cells rather than repeats of one cell in a row, so
	// that a change of load on the shared machine spreads over all figures
	// instead of biasing some.
	passes := opts.passes(cells)
	m := Measurements{}
	if opts.Progress != nil {
		total := 0
		for _, p := range passes {
			total += len(p)
		}
		opts.Progress.Start(total)
	}
	for _, pass := range passes {
		for _, c := range pass {
			if opts.Progress != nil {
				opts.Progress.Step(fmt.Sprintf("%s %d bytes %s", c.Algorithm, c.Bytes, c.Variant))
			}
			var r SpeedResult
			for attempt := 1; ; attempt++ {
				r, err = speed(ctx, env, c, opts.PerMeasurement)
				if err != nil {
					return nil, err
				}
				if r.Reliable() || attempt == maxAttempts {
					break
				}
			}
			if rate := r.Rate(); math.IsInf(rate, 0) || rate <= 0 {
				return nil, fmt.Errorf("openssl speed %s at %d bytes %s: no usable figure in %d attempts (%d buffers in %.2f s of CPU time); is the machine overloaded?",
					c.Algorithm, c.Bytes, c.Variant, maxAttempts, r.Count, r.CPUSeconds)
			}
			m[c] = append(m[c], r)
		}
	}
	rep := Analyze(opts, host, m, unavailable)
	rep.ElapsedSeconds = time.Since(start).Seconds()
	return rep, nil
}

// maxAttempts is how often a measurement is taken when it comes out
// unreliable (see SpeedResult.Reliable) before the last one is kept.
const maxAttempts = 3

// legacyUnavailable returns why cipher cannot be measured through OpenSSL's
// legacy provider, or "" when it can.
func legacyUnavailable(ctx context.Context, env envs, cipher string) string {
	out, err := runner.Output(env.command(ctx, WithAESNI, "openssl", "list", "-cipher-algorithms", "-provider", "legacy", "-provider", "default"))
	return legacyVerdict(cipher, out, err != nil)
}

// legacyVerdict reads the output of `openssl list -cipher-algorithms
// -provider legacy -provider default`: "" when a provider implements
// cipher, else why not.
func legacyVerdict(cipher string, out []byte, failed bool) string {
	if failed {
		first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return "OpenSSL's legacy provider does not load (" + first + "); OpenVPN 2.6 cannot use " + cipher + " either"
	}
	if _, ok := ProviderCiphers(out)[strings.ToUpper(cipher)]; !ok {
		return "no loaded OpenSSL provider implements " + cipher
	}
	return ""
}

// envs holds the two environments openssl runs in.
type envs struct{ asIs, masked []string }

func newEnvs() envs {
	var base []string
	for _, kv := range runner.Env() {
		// A value set by the user would distort the "as is" run.
		if !strings.HasPrefix(kv, "OPENSSL_ia32cap=") {
			base = append(base, kv)
		}
	}
	return envs{asIs: base, masked: append(slices.Clone(base), "OPENSSL_ia32cap="+AESNIMask)}
}

func (e envs) command(ctx context.Context, v Variant, argv ...string) *exec.Cmd {
	cmd := runner.Command(ctx, argv...)
	if v == WithoutAESNI {
		cmd.Env = e.masked
	} else {
		cmd.Env = e.asIs
	}
	return cmd
}

// speedArgs returns the openssl command line that measures c; its -seconds
// is only the backstop of the SIGALRM ovpnperf sends after d.
func speedArgs(c cell, d time.Duration) []string {
	argv := []string{"openssl", "speed"}
	if ci, ok := LookupCipher(c.Algorithm); ok && ci.Legacy {
		argv = append(argv, "-provider", "legacy", "-provider", "default")
	}
	argv = append(argv, "-seconds", strconv.Itoa(backstopSeconds(d)), "-bytes", strconv.Itoa(c.Bytes), "-mr")
	if c.Algorithm == hmacAlgorithm {
		return append(argv, "-hmac", strings.ToLower(CBCAuth))
	}
	return append(argv, "-evp", strings.ToLower(c.Algorithm))
}

// backstopSeconds is openssl's own limit (wall-clock, via alarm(2)): a
// second more than d, so that ovpnperf's signal after d of CPU time comes
// first unless the machine is so busy that openssl gets less than d/(d+1)
// of a CPU.
func backstopSeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds())) + 1
}

// speed runs one openssl speed measurement. ovpnperf ends the run itself:
// it reads openssl's CPU clock when openssl announces the run (+DT line) and
// sends SIGALRM once openssl has used d of CPU time; openssl's handler ends
// the loop and openssl reports the buffers it processed. The rate then
// divides by the CPU time read from the clock (see SpeedResult.Rate).
func speed(ctx context.Context, env envs, c cell, d time.Duration) (SpeedResult, error) {
	argv := speedArgs(c, d)
	cmd := env.command(ctx, c.Variant, argv...)
	shown := strings.Join(argv, " ")
	if c.Variant == WithoutAESNI {
		shown = "OPENSSL_ia32cap=" + AESNIMask + " " + shown
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return SpeedResult{}, err
	}
	if err := cmd.Start(); err != nil {
		return SpeedResult{}, fmt.Errorf("running %q: %w", shown, err)
	}
	stop := make(chan struct{})
	var timing chan cpuWindow
	r := bufio.NewReader(io.TeeReader(pipe, &stderr))
	for {
		line, err := r.ReadString('\n')
		if strings.HasPrefix(line, "+DT:") {
			timing = make(chan cpuWindow, 1)
			go func() { timing <- stopAfterCPU(cmd.Process, d, stop) }()
			break
		}
		if err != nil {
			break
		}
	}
	// EOF: openssl has exited, by our signal or its own backstop.
	_, _ = io.Copy(io.Discard, r)
	close(stop)
	var w cpuWindow
	if timing != nil {
		w = <-timing
	}
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return SpeedResult{}, ctx.Err()
	}
	if werr != nil {
		return SpeedResult{}, fmt.Errorf("running %q: %w\n%s", shown, werr,
			bytes.TrimSpace(append(stdout.Bytes(), stderr.Bytes()...)))
	}
	res, err := ParseSpeed(stdout.Bytes(), stderr.Bytes())
	if err != nil {
		return SpeedResult{}, fmt.Errorf("%s: %w\n%s", shown, err, bytes.TrimSpace(stderr.Bytes()))
	}
	if res.BufferBytes != c.Bytes {
		return SpeedResult{}, fmt.Errorf("%s: openssl measured %d-byte buffers, not %d", shown, res.BufferBytes, c.Bytes)
	}
	if w.ok {
		res.ClockCPUSeconds = (w.end - w.start).Seconds()
	}
	return res, nil
}

// cpuWindow is the stretch of a process's CPU time between the start of a
// measurement and the signal that ended it.
type cpuWindow struct {
	start, end time.Duration
	ok         bool
}

// stopAfterCPU sends SIGALRM to p once it has used d of CPU time from now,
// and returns the CPU clock readings around that. It gives up when stop is
// closed (the process ended by itself). Where the clock cannot be read it
// falls back to d of wall time and returns no window.
func stopAfterCPU(p *os.Process, d time.Duration, stop <-chan struct{}) cpuWindow {
	wallFallback := func() cpuWindow {
		select {
		case <-stop:
		case <-time.After(d):
			// p is not reaped before stop is closed, so its pid cannot
			// have been reused; os.Process refuses signals after Wait.
			_ = p.Signal(syscall.SIGALRM)
		}
		return cpuWindow{}
	}
	start, err := processCPUTime(p.Pid)
	if err != nil {
		return wallFallback()
	}
	for {
		now, err := processCPUTime(p.Pid)
		if err != nil {
			return wallFallback()
		}
		// The process uses CPU time no faster than wall time (one
		// thread), so sleeping for the remainder never overshoots by more
		// than a wake-up.
		left := d - (now - start)
		if left <= 0 {
			if p.Signal(syscall.SIGALRM) != nil {
				return cpuWindow{}
			}
			end, err := processCPUTime(p.Pid)
			return cpuWindow{start: start, end: end, ok: err == nil}
		}
		select {
		case <-stop:
			return cpuWindow{}
		case <-time.After(left):
		}
	}
}
