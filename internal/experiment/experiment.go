// Package experiment measures OpenVPN variants against the bare routed path,
// in labs it builds for the purpose: every variant's tunnel is up at once,
// and samples are interleaved (routed A B C, routed A B C, …) so that a
// drift in the shared machine's load touches every variant alike. Each
// sample records the rate iperf3's receiver saw and the CPU time the
// OpenVPN processes and the iperf3 server used, as CPU-seconds per GB.
package experiment

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ovpnperf/ovpnperf/internal/cpuacct"
	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/hostinfo/hostcollect"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/tunnel"
	"github.com/ovpnperf/ovpnperf/internal/ui"
)

// Run measures spec and returns the report. Labs are torn down on return,
// also on error and when ctx is cancelled. Options left zero take their
// defaults (Spec.WithDefaults); one outside its range is refused before
// anything is built (Spec.Validate).
func Run(ctx context.Context, spec Spec) (*measure.Report, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	for _, n := range spec.Networks {
		names := map[string]bool{}
		for _, v := range n.variants(spec) {
			names[v.Name] = true
		}
		for _, v := range n.variants(spec) {
			if spec.InnerIPv6[v.Name] && names[v.Name+InnerIPv6Suffix] {
				return nil, fmt.Errorf("variant %s: its IPv6 rows would have the name of variant %s", v.Name, v.Name+InnerIPv6Suffix)
			}
		}
	}
	host, err := hostcollect.Host(ctx)
	if err != nil {
		return nil, err
	}
	// DCO variants run only where the host can offload: probed here,
	// never assumed.
	notTested, dcoHost := dcoNotTested(ctx, spec)
	spec.Networks = append([]Network(nil), spec.Networks...)
	skipped := map[string][]openvpn.Variant{}
	for i, n := range spec.Networks {
		var keep []openvpn.Variant
		for _, v := range n.variants(spec) {
			if _, ok := notTested[v.Name]; ok {
				skipped[n.Name] = append(skipped[n.Name], v)
				continue
			}
			keep = append(keep, v)
		}
		if len(skipped[n.Name]) > 0 {
			spec.Networks[i].Variants = append([]openvpn.Variant{}, keep...)
		}
	}
	sc := measure.Scenario{
		Command: spec.Command, DurationSeconds: spec.Duration.Seconds(), Repeat: spec.Repeat,
		Parallel: spec.Parallel, Extra: map[string]any{"proto": spec.Proto, "payload": payloadName(spec.Payload)},
	}
	for k, v := range spec.Extra {
		sc.Extra[k] = v
	}
	variants := map[string]string{}
	total := 0
	payloads := map[string]string{}
	for _, n := range spec.Networks {
		sc.Networks = append(sc.Networks, measure.Network{Name: n.Name, Description: n.Description, Path: n.Path})
		subjects := len(n.variants(spec)) + btoi(spec.Routed)
		for _, v := range n.variants(spec) {
			variants[v.Name] = v.String()
			subjects += btoi(spec.InnerIPv6[v.Name])
		}
		for _, v := range skipped[n.Name] {
			variants[v.Name] = v.String()
		}
		total += len(spec.Directions) * spec.Repeat * subjects
		if n.Payload != "" {
			payloads[n.Name] = payloadName(n.payload(spec))
		}
	}
	if len(payloads) > 0 {
		sc.Extra["network_payloads"] = payloads
	}
	sc.Extra["variants"] = variants
	rep := measure.NewReport(host, sc)
	prog := ui.NewProgress(total, spec.Progress)
	defer prog.Done()
	for _, n := range spec.Networks {
		if len(n.variants(spec)) == 0 && !spec.Routed {
			// Nothing to measure on this network (every variant is
			// not tested here): no lab is built.
			rep.Rows = append(rep.Rows, notTestedRows(spec, n, skipped[n.Name], notTested)...)
			continue
		}
		rows, backend, why, err := runNetwork(ctx, spec, n, prog)
		for i := range rows {
			if v, ok := variantByName(n.variants(spec), rows[i].Variant); ok && v.DCO() && dcoHost != "" {
				if rows[i].Extra == nil {
					rows[i].Extra = map[string]any{}
				}
				rows[i].Extra["dco_host"] = dcoHost
			}
		}
		rows = append(rows, notTestedRows(spec, n, skipped[n.Name], notTested)...)
		if backend != labpath.BackendNone && backend != "" {
			rep.Host.EmulationBackend, rep.Host.EmulationBackendWhy = backend, why
		} else if rep.Host.EmulationBackend == "" {
			rep.Host.EmulationBackend, rep.Host.EmulationBackendWhy = backend, why
		}
		// What this host's calibration says of that backend's ceiling.
		rep.Host.EmulationCeiling = lab.EmulationCeiling(rep.Host.EmulationBackend)
		rep.Rows = append(rep.Rows, rows...)
		if err != nil {
			rep.InvalidateUnsampled("no sample: the run ended before this row was measured")
			return rep, err
		}
	}
	rep.FillRatios()
	rep.Finish()
	return rep, nil
}

// dcoNotTested probes the host once when a variant allows DCO: the
// variants it cannot run, with the reason, and (when it can) what the
// host offers, for the rows.
func dcoNotTested(ctx context.Context, spec Spec) (map[string]string, string) {
	out := map[string]string{}
	var h *dco.Host
	for _, n := range spec.Networks {
		for _, v := range n.variants(spec) {
			if !v.DCO() {
				continue
			}
			if h == nil {
				probe := spec.ProbeDCO
				if probe == nil {
					probe = dco.ProbeHost
				}
				x := probe(ctx)
				h = &x
			}
			if why := h.Missing(""); len(why) > 0 {
				out[v.Name] = NotTestedDCO(*h, why)
			}
		}
	}
	if h == nil || len(out) > 0 {
		return out, ""
	}
	t := h.Target()
	m := h.Module(dco.ModuleFor(t))
	return out, fmt.Sprintf("OpenVPN %s with [DCO], kernel %s module %s (%s); OpenVPN falls back to userspace if an option of the config forbids DCO: see its log", h.OpenVPN.Version, h.KernelRelease, m.Name, m.How)
}

// NotTestedDCO is the status of a DCO row on a host that cannot offload.
func NotTestedDCO(h dco.Host, why []string) string {
	head := "not tested here: "
	m := h.Module(dco.ModuleFor(h.Target()))
	switch {
	case h.OpenVPN != nil && !h.BuiltWithDCO():
		head += "this OpenVPN was built without DCO"
	case !m.Available():
		head += "kernel lacks the ovpn driver"
	default:
		head += "no DCO on this host"
	}
	return head + " (" + strings.Join(why, "; ") + ")"
}

// notTestedRows are the rows of variants not run on n: one per direction,
// no samples, with the configs they would have run (rendered, not
// started) in Extra.
func notTestedRows(spec Spec, n Network, vs []openvpn.Variant, why map[string]string) []measure.Row {
	var rows []measure.Row
	for i, v := range vs {
		srv, cli, err := tunnel.RenderConfigs(tunnel.Options{Variant: v, Slot: i, Proto: spec.protoOf(v.Name), InnerIPv6: spec.InnerIPv6[v.Name]}, "/etc/openvpn")
		extra := map[string]any{"server_config": srv, "client_config": cli}
		if err != nil {
			extra = map[string]any{"render_error": err.Error()}
		}
		for _, d := range spec.Directions {
			rows = append(rows, measure.Row{Network: n.Name, Variant: v.Name, Path: measure.PathTunnel, Direction: d, Proto: spec.protoOf(v.Name),
				SamplesBps: []float64{}, NotTested: why[v.Name], Extra: extra})
		}
	}
	return rows
}

func variantByName(vs []openvpn.Variant, name string) (openvpn.Variant, bool) {
	for _, v := range vs {
		if v.Name == name || v.Name+InnerIPv6Suffix == name {
			return v, true
		}
	}
	return openvpn.Variant{}, false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func payloadName(p string) string {
	if p == "" {
		return "iperf3"
	}
	return p
}

// subject is one thing measured on a network: the routed path or a tunnel.
type subject struct {
	name   string
	target netip.Addr
	tun    *tunnel.Tunnel
	// family is the inner address family of tunnels measured over both
	// (Spec.InnerIPv6), "" otherwise.
	family string
}

// Bench is one network's lab with a tunnel per variant up: the seam for
// whatever measures through the tunnels (the iperf3 samples here, a
// recipe's own probes). Close takes down the tunnels, then the lab.
type Bench struct {
	Lab *lab.Lab
	PKI *openvpn.PKI
	// Tunnels are in the order of the spec's variants for the network.
	Tunnels []*tunnel.Tunnel
	// Variants are the tunnels' variant names.
	Variants []string
	// Clients are the extra clients of the tunnels (AddClient).
	Clients []*tunnel.Client
}

// UpBench builds network n's lab (named as Spec.LabName says) and loads or
// makes the PKI. Tunnels come with StartTunnels. On error nothing is left.
func UpBench(ctx context.Context, spec Spec, n Network) (*Bench, error) {
	name := spec.LabName
	if name != "" && len(spec.Networks) > 1 {
		name += "-" + n.Name
	}
	l, err := lab.Up(ctx, lab.Options{Name: name, Path: n.Path, Ephemeral: true, Env: spec.Lab})
	if err != nil {
		return nil, err
	}
	pki, err := LoadPKI(spec.PKIDir, l)
	if err != nil {
		_ = l.Down()
		return nil, err
	}
	return &Bench{Lab: l, PKI: pki}, nil
}

// StartTunnels brings up one tunnel per variant of the network, with the
// spec's Configure, and then calls spec.Ready on each, in the variants'
// order. The tunnels start at once: each has its own slot (port, tun
// devices, subnet, directory), and most of a start is waiting for
// OpenVPN's handshake, so one at a time costs a second or two per variant
// (tens of seconds for tune's rounds) for nothing.
func (b *Bench) StartTunnels(ctx context.Context, spec Spec, n Network, prog *ui.Progress) error {
	if spec.Prepare != nil {
		if err := spec.Prepare(ctx, b.Lab); err != nil {
			return err
		}
	}
	vs := n.variants(spec)
	tuns := make([]*tunnel.Tunnel, len(vs))
	errs := make([]error, len(vs))
	var wg sync.WaitGroup
	for i, v := range vs {
		prog.Logf("%s: starting OpenVPN %s (%s)", n.Name, v.Name, spec.protoOf(v.Name))
		opts := tunnel.Options{Variant: v, Slot: i, Proto: spec.protoOf(v.Name), PKI: b.PKI, InnerIPv6: spec.InnerIPv6[v.Name]}
		if spec.Configure != nil {
			name := v.Name
			opts.Configure = func(s, c *openvpn.Config) { spec.Configure(name, s, c) }
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tuns[i], errs[i] = tunnel.Up(ctx, b.Lab, opts)
		}()
	}
	wg.Wait()
	// Close takes down every tunnel that came up, also when another failed.
	for i, t := range tuns {
		if t != nil {
			b.Tunnels = append(b.Tunnels, t)
			b.Variants = append(b.Variants, vs[i].Name)
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for i, v := range vs {
		if spec.Ready != nil {
			if err := spec.Ready(ctx, b.Lab, v.Name, tuns[i]); err != nil {
				return fmt.Errorf("variant %s: %w", v.Name, err)
			}
		}
	}
	return nil
}

// AddTunnel brings up one more tunnel on the bench (with the bench's PKI
// unless o names one); Close takes it down.
func (b *Bench) AddTunnel(ctx context.Context, o tunnel.Options) (*tunnel.Tunnel, error) {
	if o.PKI == nil {
		o.PKI = b.PKI
	}
	t, err := tunnel.Up(ctx, b.Lab, o)
	if err != nil {
		return nil, err
	}
	b.Tunnels = append(b.Tunnels, t)
	b.Variants = append(b.Variants, o.Variant.Name)
	return t, nil
}

// AddClient starts another client, with the client certificate issued as
// name, against tunnel t of the bench (tunnel.Tunnel.AddClient); Close
// stops it before the tunnels go down.
func (b *Bench) AddClient(ctx context.Context, t *tunnel.Tunnel, name string) (*tunnel.Client, error) {
	c, err := t.AddClient(ctx, b.Lab, name)
	if err != nil {
		return nil, err
	}
	b.Clients = append(b.Clients, c)
	return c, nil
}

// Close stops the extra clients, takes the tunnels down (last first), then
// the lab, and returns the lab's teardown error.
func (b *Bench) Close() error {
	for i := len(b.Clients) - 1; i >= 0; i-- {
		_ = b.Clients[i].Stop()
	}
	for i := len(b.Tunnels) - 1; i >= 0; i-- {
		b.Tunnels[i].Down()
	}
	return b.Lab.Down()
}

// iperfServers are the iperf3 servers of a network: one for samples, and
// with a file payload one that sends the file in reverse tests.
type iperfServers struct {
	srv, down  *iperf.Server
	payload    string
	fixedBytes uint64
}

func (s *iperfServers) stop() {
	if s.down != nil {
		s.down.Stop()
	}
	if s.srv != nil {
		s.srv.Stop()
	}
}

// labCommand runs programs in a lab node.
func labCommand(l *lab.Lab, node lab.Node) iperf.CommandFunc {
	return func(ctx context.Context, argv ...string) *exec.Cmd { return l.Command(ctx, node, argv...) }
}

// startServers starts the network's iperf3 servers in the server node.
func startServers(ctx context.Context, spec Spec, n Network, l *lab.Lab) (*iperfServers, error) {
	s := &iperfServers{}
	var err error
	if s.srv, err = iperf.StartServer(ctx, labCommand(l, lab.Server), iperf.ServerOptions{}); err != nil {
		return nil, err
	}
	// With a file payload, the down direction needs a server that sends
	// the file (-F on the server side serves reverse tests only).
	kind := n.payload(spec)
	if kind == "" {
		return s, nil
	}
	s.payload = filepath.Join(l.Dir(), "payload-"+kind)
	rate := n.Path.Up.RateBitsPerSec
	if n.Path.Down.RateBitsPerSec > rate {
		rate = n.Path.Down.RateBitsPerSec
	}
	if rate == 0 {
		rate = 4e9
	}
	if n.PayloadBitsPerSec != 0 {
		rate = n.PayloadBitsPerSec
	}
	payloadBytes := iperf.PayloadSize(rate, spec.Duration+spec.Omit)
	if payloadBytes > maxPayloadBytes {
		// On a fast path the file would not fit in memory (/run is
		// often tmpfs): send a fixed amount instead (-n), which ends
		// the test when the file is sent.
		payloadBytes = maxPayloadBytes
		s.fixedBytes = uint64(payloadBytes)
	}
	if err := iperf.WritePayload(s.payload, kind, payloadBytes); err != nil {
		s.stop()
		return nil, err
	}
	if s.down, err = iperf.StartServer(ctx, labCommand(l, lab.Server), iperf.ServerOptions{Port: iperf.DefaultPort + 1, FilePath: s.payload}); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// benchSubjects lists what is measured: the routed path, then each tunnel
// (and its inner IPv6 where asked).
func benchSubjects(spec Spec, b *Bench) []subject {
	var subjects []subject
	if spec.Routed {
		subjects = append(subjects, subject{name: Routed, target: lab.ServerV4()})
	}
	for i, t := range b.Tunnels {
		name := b.Variants[i]
		subjects = append(subjects, subject{name: name, target: t.ServerAddr, tun: t})
		if spec.InnerIPv6[name] {
			subjects[len(subjects)-1].family = "ipv4"
			subjects = append(subjects, subject{name: name + InnerIPv6Suffix, target: t.ServerAddr6, tun: t, family: "ipv6"})
		}
	}
	return subjects
}

// newRows makes one row per subject and direction, and their index.
func newRows(spec Spec, n Network, subjects []subject) ([]measure.Row, map[[2]string]int) {
	var rows []measure.Row
	index := map[[2]string]int{}
	for _, s := range subjects {
		for _, d := range spec.Directions {
			r := measure.Row{Network: n.Name, Variant: s.name, Path: measure.PathRouted, Direction: d, Proto: "tcp", Valid: true, CPUSecondsPerGB: map[string]float64{}}
			if s.tun != nil {
				r.Path, r.Proto, r.Cipher, r.SocketBuffers = measure.PathTunnel, s.tun.Proto, s.tun.Cipher(), s.tun.SocketBuffers()
			}
			if s.family != "" {
				r.Extra = map[string]any{"inner_family": s.family}
			}
			index[[2]string{s.name, d}] = len(rows)
			rows = append(rows, r)
		}
	}
	return rows, index
}

// measureRounds takes spec.Repeat interleaved rounds of samples (every
// subject and direction once per round) into rows, with CPU-seconds per
// GB summed over the samples.
func measureRounds(ctx context.Context, spec Spec, n Network, l *lab.Lab, subjects []subject, rows []measure.Row, index map[[2]string]int, srvs *iperfServers, prog *ui.Progress, takeSample sampleFunc) error {
	cpuSum := make([]map[string]float64, len(rows))
	bytesSum := make([]uint64, len(rows))
	gaveUp := make([]bool, len(rows))
	for rep := 0; rep < spec.Repeat; rep++ {
		for _, s := range subjects {
			for _, d := range spec.Directions {
				i := index[[2]string{s.name, d}]
				prog.Step(fmt.Sprintf("%s %s %s (%d/%d)", n.Name, s.name, d, rep+1, spec.Repeat))
				if gaveUp[i] {
					continue
				}
				res, cpu, err := takeSample(ctx, l, spec, n, s, d, srvs, labCommand(l, lab.Client))
				tries := 1
				for ; tries <= spec.Retries && err != nil && ctx.Err() == nil && (errors.Is(err, ErrInvalidSample) || errors.Is(err, iperf.ErrInconsistent)); tries++ {
					prog.Logf("%s %s %s: %v; measuring again", n.Name, s.name, d, err)
					res, cpu, err = takeSample(ctx, l, spec, n, s, d, srvs, labCommand(l, lab.Client))
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					// The row is invalid from here on, whatever its
					// later samples say: stop measuring it rather than
					// spend (Repeat-rep-1)×(1+Retries) more samples on
					// it, and say so.
					gaveUp[i] = true
					rf := RefusalOf(err)
					rf.Tries, rf.Sample, rf.Samples, rf.NotMeasured = tries, rep+1, spec.Repeat, spec.Repeat-rep-1
					rows[i].Refuse(rf)
					prog.Logf("%s %s %s: gave up: %s", n.Name, s.name, d, rf.Text())
					continue
				}
				rows[i].AddSample(res.ReceivedBitsPerSec)
				rows[i].Samples = append(rows[i].Samples, SeriesOf(res.Result))
				if res.drained {
					if rows[i].Extra == nil {
						rows[i].Extra = map[string]any{}
					}
					n, _ := rows[i].Extra["drained_samples"].(int)
					rows[i].Extra["drained_samples"] = n + 1
				}
				if cpuSum[i] == nil {
					cpuSum[i] = map[string]float64{}
				}
				for side, sec := range cpu {
					cpuSum[i][side] += sec
				}
				// The CPU snapshot spans the warm-up too, so count its bytes.
				bytesSum[i] += res.BytesWithWarmup()
			}
		}
	}
	for i := range rows {
		for side, sec := range cpuSum[i] {
			rows[i].CPUSecondsPerGB[side] = cpuacct.PerGB(sec, bytesSum[i])
		}
		rows[i].Summarize()
	}
	return nil
}

// runNetwork measures one network: bench (lab, PKI), iperf3 servers,
// tunnels, rows, interleaved rounds of samples; everything it started is
// stopped when it returns.
func runNetwork(ctx context.Context, spec Spec, n Network, prog *ui.Progress) (rows []measure.Row, backend, why string, err error) {
	prog.Logf("%s: building lab (%s)", n.Name, n.Description)
	b, err := UpBench(ctx, spec, n)
	if err != nil {
		return nil, "", "", err
	}
	defer func() {
		if derr := b.Close(); derr != nil && err == nil {
			err = derr
		}
	}()
	backend, why = b.Lab.Backend(), b.Lab.BackendWhy()
	prog.Logf("%s: emulator %s (%s)", n.Name, backend, why)
	srvs, err := startServers(ctx, spec, n, b.Lab)
	if err != nil {
		return nil, backend, why, err
	}
	defer srvs.stop()
	if n.Omit != nil {
		spec.Omit = *n.Omit
	}
	if err := b.StartTunnels(ctx, spec, n, prog); err != nil {
		return nil, backend, why, err
	}
	subjects := benchSubjects(spec, b)
	rows, index := newRows(spec, n, subjects)
	if err := measureRounds(ctx, spec, n, b.Lab, subjects, rows, index, srvs, prog, sample); err != nil {
		return rows, backend, why, err
	}
	return rows, backend, why, nil
}

// LoadPKI reuses dir or makes a throw-away PKI in the lab's directory.
func LoadPKI(dir string, l *lab.Lab) (*openvpn.PKI, error) {
	if dir != "" {
		return openvpn.LoadPKI(dir)
	}
	return openvpn.NewPKI(filepath.Join(l.Dir(), "pki"))
}
