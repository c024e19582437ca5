// Package tune searches for a faster OpenVPN configuration in a lab twin of
// a path: it measures OpenVPN's defaults and advise's variant, then walks
// the search space one parameter at a time (coordinate descent), moving
// only when a candidate beats the current best beyond the spread of
// interleaved samples, and reports the best it found, or that nothing beat
// the defaults. The search logic is a pure loop over a measuring function,
// so it can be replayed with crafted samples; the real function builds the
// twin with the experiment framework (same validity rules as lab run).
package tune

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/rules"
	"github.com/ovpnperf/ovpnperf/internal/tune/tunedoc"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// Axis names of the search space, in the order the search visits them:
// the path-MTU settings first (on a black-holed path nothing else matters
// until they are right), then socket buffers, transport, cipher, the tun
// queue and fast-io. Directives advise proposes outside these axes get an
// axis of their own named "advise:DIRECTIVE".
const (
	AxisMTU        = "mtu"
	AxisBuffers    = "buffers"
	AxisProto      = "proto"
	AxisCipher     = "cipher"
	AxisTxQueueLen = "txqueuelen"
	AxisFastIO     = "fast-io"
	// AxisDCO tries data channel offload (the variant item dco); Space
	// adds it only when the host can offload (SpaceOptions.DCO).
	AxisDCO = "dco"
)

// baseAxes lists the built-in axes in search order.
var baseAxes = []string{AxisMTU, AxisBuffers, AxisProto, AxisCipher, AxisTxQueueLen, AxisFastIO}

// directiveAxis says which axis a variant directive belongs to.
var directiveAxis = map[string]string{
	"tun-mtu": AxisMTU, "tun-mtu-max": AxisMTU, "mssfix": AxisMTU, "fragment": AxisMTU,
	"sndbuf": AxisBuffers, "rcvbuf": AxisBuffers,
	"data-ciphers": AxisCipher, "data-ciphers-fallback": AxisCipher, "cipher": AxisCipher, "auth": AxisCipher,
	"txqueuelen": AxisTxQueueLen, "fast-io": AxisFastIO, "dco": AxisDCO,
}

// Candidate is one point of the search space.
type Candidate struct {
	Proto string
	// Settings maps an axis to its value; a missing axis is the default.
	Settings map[string]string
}

// with returns a copy of c with axis set to value.
func (c Candidate) with(axis, value string) Candidate {
	out := Candidate{Proto: c.Proto, Settings: map[string]string{}}
	for k, v := range c.Settings {
		out.Settings[k] = v
	}
	if axis == AxisProto {
		out.Proto = value
	} else if value == "" {
		delete(out.Settings, axis)
	} else {
		out.Settings[axis] = value
	}
	return out
}

// get returns the value of axis.
func (c Candidate) get(axis string) string {
	if axis == AxisProto {
		return c.Proto
	}
	return c.Settings[axis]
}

// Body renders the candidate's directives as a variant body, axes in a
// fixed order so that equal candidates render equally.
func (c Candidate) Body() string {
	var parts []string
	for _, a := range c.axisOrder() {
		if v := c.Settings[a]; v != "" {
			parts = append(parts, v)
		}
	}
	return strings.Join(parts, ";")
}

func (c Candidate) axisOrder() []string {
	order := append([]string(nil), baseAxes...)
	var extra []string
	for a := range c.Settings {
		if !contains(baseAxes, a) {
			extra = append(extra, a)
		}
	}
	sort.Strings(extra)
	return append(order, extra...)
}

// Key identifies the candidate: transport and directives.
func (c Candidate) Key() string { return c.Proto + "|" + c.Body() }

// Variant returns the candidate as an OpenVPN variant named name.
func (c Candidate) Variant(name string) (openvpn.Variant, error) {
	if c.Body() == "" && name == "default" {
		return openvpn.ParseVariant("default")
	}
	return openvpn.ParseVariant(name + "=" + c.Body())
}

// valid reports whether OpenVPN accepts the combination: fragment and
// fast-io work over UDP only.
func (c Candidate) valid() bool {
	if c.Proto == "tcp" {
		return !strings.Contains(c.Settings[AxisMTU], "fragment") && c.Settings[AxisFastIO] == ""
	}
	return true
}

// differs lists the axes on which a and b differ.
func differs(a, b Candidate) []string {
	var out []string
	for _, ax := range a.axisOrderWith(b) {
		if a.get(ax) != b.get(ax) {
			out = append(out, ax)
		}
	}
	return out
}

func (c Candidate) axisOrderWith(o Candidate) []string {
	order := c.axisOrder()
	for _, a := range o.axisOrder() {
		if !contains(order, a) {
			order = append(order, a)
		}
	}
	return order
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// FromVariant groups a variant's directives by axis: the candidate a
// variant (advise's) stands for.
func FromVariant(v openvpn.Variant, proto string) Candidate {
	c := Candidate{Proto: proto, Settings: map[string]string{}}
	for _, it := range v.Items {
		name := it.Name
		if name == "push" && len(it.Args) > 0 {
			name = strings.Fields(it.Args[0])[0]
		}
		axis, ok := directiveAxis[name]
		if !ok {
			axis = "advise:" + name
		}
		one := openvpn.Variant{Name: "x", Items: []openvpn.VariantItem{it}}.String()[2:]
		if c.Settings[axis] != "" {
			c.Settings[axis] += ";" + one
		} else {
			c.Settings[axis] = one
		}
	}
	if c.Proto == "" {
		c.Proto = "udp"
	}
	return c
}

// SpaceOptions shape the search space.
type SpaceOptions struct {
	// PathMTU is the path's MTU (the lab's bottleneck or the probe's);
	// below 1500 the MTU axis tries mssfix and fragment at it.
	PathMTU int
	// LossPercent is the lossier direction's loss: above
	// rules.JumboMaxLossPercent the MTU axis leaves out Jumbo.
	LossPercent float64
	AllowTCP    bool
	// Fixed pins axes (ParseFix); the search does not move them.
	Fixed map[string]string
	// Advice, when set, adds advise's value of each axis to the axis.
	Advice *Candidate
	// BufferCap, when not 0, leaves out buffer sizes above it: the twin's
	// net.core.rmem_max/wmem_max, which it cannot raise without the host's
	// (OpenVPN's SO_SNDBUF/SO_RCVBUF would be clamped to it).
	BufferCap int
	// DCO: the host can offload (probed: OpenVPN's [DCO] build and the
	// kernel module), so the dco axis is searched.
	DCO bool
}

// Jumbo is the MTU axis' jumbo value: a 9000-byte tun device, and no
// mssfix, so that inner TCP uses the whole of it.
const Jumbo = "tun-mtu 9000;mssfix 0"

// JumboTried reports whether the MTU axis tries Jumbo, and when not, why.
// It does whenever the path passes a jumbo tunnel's outer fragments, by
// the shared jumbo rule (rules.FragmentsPass: its loss), whatever the path MTU:
// OpenVPN's 9000-byte datagrams leave the sender as fragments without DF,
// which pass an ICMP black hole and a bottleneck below 1500 alike.
func JumboTried(o SpaceOptions) (bool, tunedoc.NotTried) {
	if rules.FragmentsPass(o.LossPercent) {
		return true, tunedoc.NotTried{}
	}
	return false, tunedoc.NotTried{Axis: AxisMTU, Value: Jumbo, Reason: tunedoc.NotTriedPathLoss, LossPercent: o.LossPercent, LimitPercent: rules.JumboMaxLossPercent}
}

// Buffer sizes tried, in bytes: OpenVPN sets them with SO_SNDBUF and
// SO_RCVBUF, so the twin's net.core.{r,w}mem_max must allow the largest.
var bufferSizes = []int{512 << 10, 4 << 20, 8 << 20}

// Space returns the axes to search.
func Space(o SpaceOptions) []Axis {
	mtu := []string{""}
	if o.PathMTU > 0 && o.PathMTU < 1500 {
		// The 2.6 "mtu" keyword counts the outer IP and UDP headers, so
		// the path MTU is the value itself.
		mtu = append(mtu, fmt.Sprintf("mssfix %d mtu", o.PathMTU), fmt.Sprintf("fragment %d mtu", o.PathMTU))
	}
	if ok, _ := JumboTried(o); ok {
		// Also below 1500 and behind a black hole: the outer datagrams
		// are fragmented by the sender (measured faster than advise's
		// mssfix on 100 Mbit/s, MTU 1400, black hole).
		mtu = append(mtu, Jumbo)
	}
	bufs := []string{""}
	for _, b := range bufferSizes {
		if o.BufferCap > 0 && b > o.BufferCap {
			continue
		}
		bufs = append(bufs, fmt.Sprintf("sndbuf %d;rcvbuf %d", b, b))
	}
	proto := []string{"udp"}
	if o.AllowTCP {
		proto = append(proto, "tcp")
	}
	axes := []Axis{
		{Name: AxisMTU, Values: mtu},
		{Name: AxisBuffers, Values: bufs},
		{Name: AxisProto, Values: proto},
		{Name: AxisCipher, Values: []string{"", "data-ciphers AES-128-GCM", "data-ciphers CHACHA20-POLY1305"}},
		{Name: AxisTxQueueLen, Values: []string{"", "txqueuelen 1000", "txqueuelen 5000"}},
		{Name: AxisFastIO, Values: []string{"", "fast-io"}},
	}
	if o.DCO {
		axes = append(axes, Axis{Name: AxisDCO, Values: []string{"", "dco"}})
	}
	if o.Advice != nil {
		for i := range axes {
			if v := o.Advice.get(axes[i].Name); !contains(axes[i].Values, v) {
				axes[i].Values = append(axes[i].Values, v)
			}
		}
		var extra []string
		for a := range o.Advice.Settings {
			if !contains(baseAxes, a) {
				extra = append(extra, a)
			}
		}
		sort.Strings(extra)
		for _, a := range extra {
			axes = append(axes, Axis{Name: a, Values: []string{"", o.Advice.Settings[a]}})
		}
	}
	for i := range axes {
		if v, ok := o.Fixed[axes[i].Name]; ok {
			axes[i] = Axis{Name: axes[i].Name, Values: []string{v}, Fixed: true}
		}
	}
	return axes
}

// ParseFix reads one --fix AXIS=VALUE and returns the axis and its value
// as a variant body. Accepted: proto=udp|tcp, cipher=default|CIPHER,
// mtu=default|DIRECTIVES (tun-mtu, mssfix, fragment), buffers=default|BYTES,
// txqueuelen=default|N, fast-io=on|off.
func ParseFix(s string) (axis, value string, err error) {
	eq := strings.IndexByte(s, '=')
	if eq < 0 {
		return "", "", usage.Errorf("--fix %q: want AXIS=VALUE with AXIS one of %s", s, strings.Join(baseAxes, ", "))
	}
	axis, raw := s[:eq], strings.TrimSpace(s[eq+1:])
	bad := func(want string) (string, string, error) {
		return "", "", usage.Errorf("--fix %q: want %s=%s", s, axis, want)
	}
	switch axis {
	case AxisProto:
		if raw != "udp" && raw != "tcp" {
			return bad("udp|tcp")
		}
		return axis, raw, nil
	case AxisFastIO:
		switch raw {
		case "on":
			return axis, "fast-io", nil
		case "off", "default":
			return axis, "", nil
		}
		return bad("on|off")
	}
	if raw == "default" {
		if !contains(baseAxes, axis) {
			return bad("…")
		}
		return axis, "", nil
	}
	var body string
	switch axis {
	case AxisCipher:
		body = "data-ciphers " + raw
	case AxisBuffers:
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 1<<30 {
			return bad("default|BYTES (1–1073741824)")
		}
		body = fmt.Sprintf("sndbuf %d;rcvbuf %d", n, n)
	case AxisTxQueueLen:
		body = "txqueuelen " + raw
	case AxisMTU:
		body = raw
	default:
		return "", "", usage.Errorf("--fix %q: unknown axis %s; want one of %s", s, axis, strings.Join(baseAxes, ", "))
	}
	v, err := openvpn.ParseVariant("fix=" + body)
	if err != nil {
		return "", "", usage.Errorf("--fix %q: %v", s, err)
	}
	for _, it := range v.Items {
		if directiveAxis[it.Name] != axis {
			return "", "", usage.Errorf("--fix %q: directive %s does not belong to axis %s", s, it.Name, axis)
		}
	}
	return axis, FromVariant(v, "udp").Settings[axis], nil
}
