package dco

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/runner"
)

// KernelModule is what this host says about one DCO kernel module.
type KernelModule struct {
	// Name as modprobe knows it: "ovpn" (Linux 6.16+, OpenVPN 2.7) or
	// "ovpn-dco-v2" (out of tree, OpenVPN 2.6).
	Name     string `json:"name"`
	Loaded   bool   `json:"loaded"`
	Builtin  bool   `json:"builtin"`
	Loadable bool   `json:"loadable"`
	// How says what was read to decide (file names, modinfo's answer).
	How string `json:"how"`
}

// Available is loaded, built in or loadable.
func (m KernelModule) Available() bool { return m.Loaded || m.Builtin || m.Loadable }

// ModuleFor is the kernel module OpenVPN target uses (README.dco.md:
// the in-tree ovpn module works only with 2.7; 2.6 needs ovpn-dco-v2).
func ModuleFor(target string) string {
	if target == V27 {
		return "ovpn"
	}
	return "ovpn-dco-v2"
}

// Host is what DCO depends on outside the config.
type Host struct {
	KernelRelease string `json:"kernel_release"`
	// KernelConfig is CONFIG_OVPN from the kernel's build config ("y",
	// "m", "n" for absent), "" when no config file could be read.
	KernelConfig     string         `json:"kernel_config_ovpn,omitempty"`
	KernelConfigFrom string         `json:"kernel_config_from,omitempty"`
	Modules          []KernelModule `json:"modules"`
	// OpenVPN is `openvpn --version`; nil when it could not run.
	OpenVPN    *openvpn.Version `json:"openvpn,omitempty"`
	OpenVPNErr string           `json:"openvpn_error,omitempty"`
}

// Target is the installed OpenVPN's version as V26 or V27 ("" unknown).
func (h Host) Target() string {
	if h.OpenVPN == nil {
		return ""
	}
	t, _ := NormTarget(h.OpenVPN.Version)
	return t
}

// BuiltWithDCO: openvpn --version lists [DCO] (options.c title string).
func (h Host) BuiltWithDCO() bool {
	if h.OpenVPN == nil {
		return false
	}
	for _, f := range h.OpenVPN.Features {
		if f == "DCO" {
			return true
		}
	}
	return false
}

// Module returns the named module's state.
func (h Host) Module(name string) KernelModule {
	for _, m := range h.Modules {
		if m.Name == name {
			return m
		}
	}
	return KernelModule{Name: name}
}

// Missing lists why this host cannot offload with OpenVPN target (V26 or
// V27; "" means the installed one): empty when it can.
func (h Host) Missing(target string) []string {
	if target == "" {
		target = h.Target()
	}
	var why []string
	switch {
	case h.OpenVPN == nil:
		why = append(why, "OpenVPN is not installed or did not run ("+h.OpenVPNErr+"; Debian package openvpn)")
	case !h.BuiltWithDCO():
		why = append(why, "openvpn --version shows no [DCO]: this OpenVPN was built without DCO")
	}
	if target == "" {
		return why
	}
	m := h.Module(ModuleFor(target))
	if !m.Available() {
		w := fmt.Sprintf("kernel %s has no %s module (%s)", h.KernelRelease, m.Name, m.How)
		switch {
		case target == V27 && h.KernelConfig != "":
			w = fmt.Sprintf("kernel %s lacks the ovpn driver: CONFIG_OVPN=%s in %s, and %s", h.KernelRelease, h.KernelConfig, h.KernelConfigFrom, m.How)
		case h.KernelConfig != "" && !h.Module("ovpn").Available():
			w += fmt.Sprintf("; nor the in-kernel ovpn driver OpenVPN 2.7 would use (CONFIG_OVPN=%s in %s)", h.KernelConfig, h.KernelConfigFrom)
		}
		why = append(why, w)
	}
	if t := h.Target(); t != "" && t != target {
		why = append(why, fmt.Sprintf("the installed OpenVPN is %s, not %s", h.OpenVPN.Version, target))
	}
	return why
}

// ProbeHost reads the kernel release, its CONFIG_OVPN, the DCO modules
// (loaded: /sys/module; built in: modules.builtin; loadable: modinfo) and
// `openvpn --version`.
func ProbeHost(ctx context.Context) Host {
	var h Host
	h.KernelRelease = hostinfo.KernelRelease()
	h.KernelConfig, h.KernelConfigFrom = kernelConfig(h.KernelRelease, "CONFIG_OVPN")
	for _, name := range []string{"ovpn", "ovpn-dco-v2"} {
		h.Modules = append(h.Modules, probeModule(ctx, h.KernelRelease, name))
	}
	out, err := runner.RunBounded(ctx, runner.VersionTimeout, "openvpn", "--version")
	v := openvpn.ParseVersion(string(out))
	switch {
	case v.Version != "":
		h.OpenVPN = &v
	case err != nil:
		h.OpenVPNErr, _, _ = strings.Cut(err.Error(), "\n")
	default:
		h.OpenVPNErr = "openvpn --version printed no version"
	}
	return h
}

func probeModule(ctx context.Context, release, name string) KernelModule {
	m := KernelModule{Name: name}
	sysName := strings.ReplaceAll(name, "-", "_")
	var how []string
	if st, err := os.Stat("/sys/module/" + sysName); err == nil && st.IsDir() {
		m.Loaded = true
		how = append(how, "/sys/module/"+sysName+" exists")
	} else {
		how = append(how, "not loaded (no /sys/module/"+sysName+")")
	}
	builtin := filepath.Join("/lib/modules", release, "modules.builtin")
	if b, err := os.ReadFile(builtin); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if base := filepath.Base(l); base == sysName+".ko" || base == name+".ko" {
				m.Builtin = true
				how = append(how, "built in ("+builtin+")")
			}
		}
	}
	// modinfo finds loadable modules under /lib/modules/RELEASE (and
	// reports built-in ones too).
	cmd := exec.CommandContext(ctx, "modinfo", "-k", release, "-F", "filename", name)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	fn := strings.TrimSpace(string(out))
	switch {
	case err == nil && strings.Contains(filepath.Base(fn), ".ko"):
		m.Loadable = true
		how = append(how, "loadable ("+fn+")")
	case errors.Is(err, exec.ErrNotFound):
		// No modinfo: read modules.dep, which lists every loadable module.
		dep := filepath.Join("/lib/modules", release, "modules.dep")
		b, derr := os.ReadFile(dep)
		switch {
		case derr != nil:
			how = append(how, fmt.Sprintf("not loadable: %v (modinfo not installed: Debian package kmod)", derr))
		case strings.Contains(string(b), "/"+name+".ko") || strings.Contains(string(b), "/"+sysName+".ko"):
			m.Loadable = true
			how = append(how, "loadable (listed in "+dep+")")
		default:
			how = append(how, "not loadable (not in "+dep+")")
		}
	default:
		how = append(how, fmt.Sprintf("modinfo -k %s %s: %s", release, name, firstLine(fn)))
	}
	m.How = strings.Join(how, "; ")
	return m
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	if s == "" {
		return "no such module"
	}
	return s
}

// kernelConfig reads sym from /boot/config-RELEASE or /proc/config.gz:
// its value, "n" when the file does not set it, "" when no file could be
// read.
func kernelConfig(release, sym string) (val, from string) {
	try := func(path string, r io.Reader) (string, bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, sym+"=") {
				return strings.TrimPrefix(l, sym+"="), true
			}
			if l == "# "+sym+" is not set" {
				return "n", true
			}
		}
		return "n", sc.Err() == nil
	}
	p := "/boot/config-" + release
	if f, err := os.Open(p); err == nil {
		defer f.Close()
		if v, ok := try(p, f); ok {
			return v, p
		}
	}
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if z, err := gzip.NewReader(f); err == nil {
			if v, ok := try("/proc/config.gz", z); ok {
				return v, "/proc/config.gz"
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", ""
	}
	return "", ""
}
