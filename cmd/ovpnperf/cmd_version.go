package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/ovpnperf/ovpnperf/internal/hostinfo/hostcollect"
	"github.com/spf13/cobra"
)

func init() { register(newVersionCommand) }

// versionSchema identifies the JSON document of `ovpnperf version --json`.
const versionSchema = "ovpnperf/version/v1"

// versionInfo is what `ovpnperf version` reports: the binary's own build
// (from the Go build info the toolchain embeds) and the programs it drives,
// so that a bug report or a saved result says exactly what produced it.
type versionInfo struct {
	Schema string `json:"schema"`
	// Version is the module version the Go toolchain stamped: a tag, a
	// pseudo-version derived from the commit, or "(devel)".
	Version string `json:"version"`
	// Revision, Time and Modified come from the VCS stamp (-buildvcs); empty
	// when the binary was built outside a checkout.
	Revision  string `json:"vcs_revision,omitempty"`
	Time      string `json:"vcs_time,omitempty"`
	Modified  bool   `json:"vcs_modified"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	// OpenVPN and Iperf3 are the first lines of `openvpn --version` and
	// `iperf3 --version`; empty when the program is not installed,
	// "unknown (…)" when it does not answer within a few seconds.
	OpenVPN string `json:"openvpn"`
	Iperf3  string `json:"iperf3"`
	Kernel  string `json:"kernel"`
}

// buildVersion reads the binary's own build info; it never runs a program.
func buildVersion() versionInfo {
	v := versionInfo{Schema: versionSchema, Version: "(unknown)", GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// collectVersion adds the versions of the programs ovpnperf drives.
func collectVersion(ctx context.Context) versionInfo {
	v := buildVersion()
	// hostcollect.Host fails only when uname or /proc/cpuinfo cannot be read;
	// what it found before that is still worth printing.
	h, _ := hostcollect.Host(ctx)
	v.OpenVPN, v.Iperf3, v.Kernel = h.OpenVPNVersion, h.Iperf3Version, h.Kernel
	return v
}

func (v versionInfo) writeText(w io.Writer) error {
	rev := v.Revision
	if rev == "" {
		rev = "unknown (built outside a git checkout)"
	} else if v.Modified {
		rev += " (modified: built from a tree with uncommitted changes)"
	}
	notFound := func(s, pkg string) string {
		if s == "" {
			return "not found (Debian package " + pkg + ")"
		}
		return s
	}
	_, err := fmt.Fprintf(w, "ovpnperf %s\n  revision: %s\n  built:    %s, %s %s\n  openvpn:  %s\n  iperf3:   %s\n  kernel:   %s\n",
		v.Version, rev, orUnknown(v.Time), v.GoVersion, v.Platform,
		notFound(v.OpenVPN, "openvpn"), notFound(v.Iperf3, "iperf3"), orUnknown(v.Kernel))
	return err
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func newVersionCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print ovpnperf's version and build, and the OpenVPN and iperf3 it finds",
		Long: `Print the version of this ovpnperf binary (module version, git revision and
whether the tree had uncommitted changes, Go version), and the first line of
'openvpn --version' and 'iperf3 --version' as found on PATH. 'ovpnperf
--version' prints the same.`,
		Example: `  ovpnperf version
  ovpnperf version --json
  ovpnperf --version`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := collectVersion(cmd.Context())
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			return v.writeText(cmd.OutOrStdout())
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON document (schema "+versionSchema+")")
	return c
}
