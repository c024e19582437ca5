package tune

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/iperf"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// TwinOptions say how the lab twin measures.
type TwinOptions struct {
	Path           labpath.Path
	Description    string
	Directions     []string
	Repeat         int
	Duration, Omit time.Duration
	// LabName names the twin's labs NAME-rN (round N); empty picks random
	// names.
	LabName  string
	PKIDir   string
	Progress io.Writer
	// Notes receives what the twin did to its namespaces (sysctl caps).
	Notes func(string)
}

// Twin returns the MeasureFunc that measures each round in a fresh lab
// twin of the path with the experiment framework: all candidates' tunnels
// up at once, samples interleaved, a sample taken while the emulator fell
// behind measured again (twice) and otherwise left out, as in lab run.
func Twin(o TwinOptions) MeasureFunc {
	return func(ctx context.Context, round int, cands []Named) (map[string]Samples, []string, error) {
		if err := o.Validate(); err != nil {
			return nil, nil, err
		}
		spec := experiment.Spec{Command: "tune", Retries: iperf.Retries, Proto: "udp", Protos: map[string]string{},
			Directions: o.Directions, Repeat: o.Repeat, Duration: o.Duration, Omit: o.Omit, PKIDir: o.PKIDir,
			Progress: o.Progress,
			Networks: []experiment.Network{{Name: "twin", Description: o.Description, Path: o.Path}}}
		if o.LabName != "" {
			spec.LabName = fmt.Sprintf("%s-r%d", o.LabName, round)
		}
		maxBuf := 0
		for _, c := range cands {
			v, err := c.Variant(c.Name)
			if err != nil {
				return nil, nil, fmt.Errorf("candidate %s: %w", c.Name, err)
			}
			spec.Variants = append(spec.Variants, v)
			spec.Protos[c.Name] = c.Proto
			maxBuf = max(maxBuf, bufferOf(v))
		}
		spec.Prepare = func(ctx context.Context, l *lab.Lab) error {
			note, err := raiseBufferCaps(l, maxBuf)
			if note != "" && o.Notes != nil {
				o.Notes(note)
			}
			return err
		}
		rep, err := experiment.Run(ctx, spec)
		out := map[string]Samples{}
		var errs []string
		if rep != nil {
			for _, r := range rep.Rows {
				if r.Path != measure.PathTunnel {
					continue
				}
				if out[r.Variant] == nil {
					out[r.Variant] = Samples{}
				}
				out[r.Variant][r.Direction] = append([]float64(nil), r.SamplesBps...)
				if r.Error != "" {
					errs = append(errs, r.Variant+" "+r.Direction+": "+r.Error)
				}
			}
		}
		return out, errs, err
	}
}

// bufferOf returns the largest sndbuf/rcvbuf a variant sets (0 for none).
func bufferOf(v openvpn.Variant) int {
	n := 0
	for _, it := range v.Items {
		if (it.Name == "sndbuf" || it.Name == "rcvbuf") && len(it.Args) == 1 {
			b, _ := strconv.Atoi(it.Args[0])
			n = max(n, b)
		}
	}
	return n
}

// bufferCapKeys are the caps SO_SNDBUF/SO_RCVBUF requests are clamped to.
var bufferCapKeys = []string{"net/core/rmem_max", "net/core/wmem_max"}

// raiseBufferCaps raises net.core.rmem_max and wmem_max in the twin's
// client and server namespaces to want, so that the buffers a candidate
// asks for are not silently clamped, where the kernel lets a namespace
// have its own caps. Kernels differ: on older ones the caps are global
// and absent from child namespaces; on newer ones (6.18 here) a child
// namespace shows its creator's values read-only. In both cases raising
// them would mean changing the host's, which is not tune's to do: the
// note says the buffers stay capped at the host's value.
func raiseBufferCaps(l *lab.Lab, want int) (string, error) {
	if want == 0 {
		return "", nil
	}
	hostBefore := readCaps()
	var notes []string
	for _, n := range []lab.Node{lab.Client, lab.Server} {
		// Equivalent to: ip netns exec NS sysctl -w net.core.rmem_max=N net.core.wmem_max=N
		err := netns.Do(l.Namespace(n), func() error {
			for _, k := range bufferCapKeys {
				p := "/proc/sys/" + k
				key := strings.ReplaceAll(k, "/", ".")
				fi, err := os.Stat(p)
				if os.IsNotExist(err) {
					notes = append(notes, fmt.Sprintf("%s is global on this kernel: buffers above the host's %d are clamped in the twin (tune leaves the host's sysctls alone)", key, hostBefore[k]))
					continue
				}
				if err != nil {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				cur, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				if cur >= want {
					continue
				}
				if fi.Mode().Perm()&0o200 == 0 {
					notes = append(notes, fmt.Sprintf("%s is read-only in the twin's namespaces on this kernel (inherited from the host: %d): buffers above it are clamped (tune leaves the host's sysctls alone)", key, cur))
					continue
				}
				if err := os.WriteFile(p, []byte(strconv.Itoa(want)), 0o644); err != nil {
					return fmt.Errorf("sysctl %s=%d: %w", key, want, err)
				}
				notes = append(notes, fmt.Sprintf("%s raised %d → %d in the twin's namespaces", key, cur, want))
			}
			return nil
		})
		if err != nil {
			return strings.Join(notes, "; "), fmt.Errorf("%s namespace: %w", n, err)
		}
	}
	// The host's caps must not have moved: if they did, the kernel shared
	// them after all; put them back and refuse.
	if after := readCaps(); fmt.Sprint(after) != fmt.Sprint(hostBefore) {
		for _, k := range bufferCapKeys {
			_ = os.WriteFile("/proc/sys/"+k, []byte(strconv.Itoa(hostBefore[k])), 0o644)
		}
		return "", fmt.Errorf("raising the buffer caps in the twin changed the host's (%v → %v); restored, not raising them", hostBefore, after)
	}
	return strings.Join(Uniq(notes), "; "), nil
}

// HostBufferCap returns min(net.core.rmem_max, wmem_max) of the calling
// process's namespace: the most a twin's socket buffer can be when the
// twin cannot raise its own caps.
func HostBufferCap() int {
	c := readCaps()
	return min(c["net/core/rmem_max"], c["net/core/wmem_max"])
}

// readCaps reads the caps of the calling process's namespace (the host's).
func readCaps() map[string]int {
	m := map[string]int{}
	for _, k := range bufferCapKeys {
		b, _ := os.ReadFile("/proc/sys/" + k)
		m[k], _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return m
}

// Validate refuses a twin whose samples are outside tune's ranges, naming
// the flag, as a usage error.
func (o TwinOptions) Validate() error {
	if r := RepeatRange(); !r.Contains(o.Repeat) {
		return usage.Errorf("--repeat %d: want %s", o.Repeat, r)
	}
	if r := SampleTimeRange(); !r.Contains(o.Duration) {
		return usage.Errorf("--time %v: want whole seconds from %s (iperf3 -t)", o.Duration, r)
	}
	if err := experiment.CheckOmit(o.Omit); err != nil {
		return err
	}
	return nil
}
