package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// checkServeArgs parses the flags a unit would pass to `cluster serve`
// with serve's own flag set (guarded as every flag is) and checks them
// with serve's own toOptions, so that a unit
// is written only for a serve that would start: unknown flags, arguments,
// bad values and a second --id (the unit's clean lines name its own id)
// are refused now, not at the service's start.
func checkServeArgs(id string, a []string) error {
	serve, o := newClusterServe()
	f := serve.Flags()
	if err := f.Parse(a); err != nil {
		return usage.Errorf("serve flags after --: %v", flagError(err))
	}
	if rest := f.Args(); len(rest) > 0 {
		return usage.Errorf("serve flags after --: %q is not a flag; cluster serve takes no arguments", rest[0])
	}
	if f.Changed("id") {
		return usage.Errorf("serve flags after --: --id %q: the unit runs cluster %s (systemd-unit --id) and its clean lines name it; give the id once, with systemd-unit --id", o.id, id)
	}
	o.id = id
	if _, err := o.toOptions(); err != nil {
		return usage.Errorf("serve flags after --: %v", err)
	}
	return nil
}

func newClusterSystemdUnitCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "systemd-unit --id ID -- [serve flags]",
		Short: "Print a systemd unit that runs `cluster serve` as a service",
		Args:  args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			if !cluster.ValidID(id) {
				return usage.Errorf("--id %q: give a fixed cluster id of 4 hex digits, so stop and clean can name it", id)
			}
			if err := checkServeArgs(id, a); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			exe, _ = filepath.Abs(exe)
			_, err = io.WriteString(cmd.OutOrStdout(), cluster.SystemdUnit(exe, id, a))
			return err
		},
	}
	c.Flags().StringVar(&id, "id", "", "the cluster id the service uses (4 hex digits)")
	return c
}
