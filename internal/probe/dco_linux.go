package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// ConfigError is a --config file probe cannot read: the user's mistake.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// dcoFields reads what DCO depends on (kernel, modules, OpenVPN build)
// and, with a config, whether OpenVPN would offload it here and every
// reason it would not.
func dcoFields(ctx context.Context, p *Path, configPath string) error {
	h := dco.ProbeHost(ctx)
	if h.KernelRelease != "" {
		p.KernelRelease = read(h.KernelRelease, "uname")
	} else {
		p.KernelRelease = missing[string]("uname failed")
	}
	if h.KernelConfig != "" {
		p.KernelOVPN = read(h.KernelConfig, "CONFIG_OVPN in "+h.KernelConfigFrom+" (n: not set)")
	} else {
		p.KernelOVPN = missing[string]("no /boot/config-" + h.KernelRelease + " and no /proc/config.gz")
	}
	mod := func(name string) Field[string] {
		m := h.Module(name)
		st := "absent"
		switch {
		case m.Loaded:
			st = "loaded"
		case m.Builtin:
			st = "built in"
		case m.Loadable:
			st = "loadable"
		}
		return read(st, m.How)
	}
	p.ModuleOVPN = mod("ovpn")
	p.ModuleOVPNDCO = mod("ovpn-dco-v2")
	target := h.Target()
	if h.OpenVPN != nil {
		p.OpenVPNBuild = read(h.OpenVPN.Features, "openvpn --version: "+h.OpenVPN.Line)
	} else {
		p.OpenVPNBuild = missing[[]string]("openvpn --version: " + h.OpenVPNErr + " (Debian package openvpn)")
	}
	hostWhy := h.Missing(target)
	switch {
	case h.OpenVPN == nil:
		p.DCO = missing[bool](strings.Join(hostWhy, "; "))
	case len(hostWhy) == 0:
		p.DCO = read(true, fmt.Sprintf("OpenVPN %s built with [DCO], kernel module %s %s", h.OpenVPN.Version, dco.ModuleFor(target), p.module(target).Value))
	default:
		p.DCO = read(false, strings.Join(hostWhy, "; "))
	}
	if configPath == "" {
		p.DCOWithConfig = missing[bool]("no --config FILE given")
		p.DCOOffReasons = missing[[]string]("no --config FILE given")
		return nil
	}
	cfg, err := openvpn.ReadConfigFile(configPath)
	var perr *openvpn.ParseError
	switch {
	case errors.As(err, &perr):
		return &ConfigError{fmt.Sprintf("--config %s:%d: %s (ovpnperf lint %s says more)", perr.File, perr.Line, perr.Msg, configPath)}
	case err != nil:
		return &ConfigError{fmt.Sprintf("--config: %v", err)}
	}
	if target == "" {
		p.DCOWithConfig = missing[bool]("the installed OpenVPN's version is unknown: " + strings.Join(hostWhy, "; "))
		p.DCOOffReasons = missing[[]string]("the installed OpenVPN's version is unknown")
		return nil
	}
	var why []string
	certain := true
	for _, b := range dco.Check(cfg, target) {
		if b.Pushed {
			continue // reaches the clients, not this OpenVPN
		}
		if b.Rule == "user" {
			// dco.c checks the capabilities OpenVPN starts with; probe
			// cannot know how the service starts it.
			certain = false
		}
		why = append(why, fmt.Sprintf("%s:%d: %s", b.Pos.File, b.Pos.Line, b.Reason()))
	}
	// A fixed dev name that exists and is no DCO interface (dco.c).
	if d, ok := lastDirective(cfg, "dev"); ok {
		name := d.Args[0]
		if name != "tun" && name != "tap" && name != "null" {
			if kind, err := linkKind(name); err == nil && kind != "ovpn" && kind != "ovpn-dco" {
				r := dco.Rules()["interface-exists"]
				why = append(why, fmt.Sprintf("interface %s exists and is a %q link, not a DCO interface (%s)", name, kind, r.Sources[target]))
			}
		}
	}
	why = append(why, hostWhy...)
	note := fmt.Sprintf("OpenVPN %s rules (%s) applied to %s on this host", target, map[string]string{dco.V26: dco.Tag26, dco.V27: dco.Tag27}[target], configPath)
	if len(why) == 0 {
		p.DCOWithConfig = read(true, note)
		p.DCOOffReasons = read([]string{}, note)
		return nil
	}
	if !certain && len(why) == 1 {
		p.DCOWithConfig = missing[bool]("depends on the capabilities OpenVPN starts with: " + why[0])
	} else {
		p.DCOWithConfig = read(false, note)
	}
	p.DCOOffReasons = read(why, note)
	return nil
}

func (p *Path) module(target string) Field[string] {
	if target == dco.V27 {
		return p.ModuleOVPN
	}
	return p.ModuleOVPNDCO
}

func lastDirective(f *openvpn.ConfigFile, name string) (openvpn.PosDirective, bool) {
	for i := len(f.Directives) - 1; i >= 0; i-- {
		if d := f.Directives[i]; d.Name == name && !d.Inline && len(d.Args) > 0 {
			return d, true
		}
	}
	return openvpn.PosDirective{}, false
}

// linkKind is the kind of the link named name in this namespace.
// Equivalent to: ip -d link show NAME
func linkKind(name string) (string, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return "", err
	}
	return l.Type(), nil
}
