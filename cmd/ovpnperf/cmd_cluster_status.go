package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func clusterID(args []string) (string, error) {
	if len(args) == 1 {
		// The id names a directory and a socket under /run/ovpnperf:
		// nothing but 4 hex digits may reach a path.
		if !cluster.ValidID(args[0]) {
			return "", usage.Errorf("cluster id %q: want 4 hex digits (see `ovpnperf cluster status`)", args[0])
		}
		return args[0], nil
	}
	ids, err := cluster.Paths{}.List()
	if err != nil {
		return "", err
	}
	if len(ids) != 1 {
		return "", usage.Errorf("%d clusters here (%s): name one", len(ids), strings.Join(ids, ", "))
	}
	return ids[0], nil
}

func newClusterStatusCommand() *cobra.Command {
	var asJSON bool
	var reg registryFlags
	c := &cobra.Command{
		Use:   "status [ID] | status --registry etcd://HOST:PORT",
		Short: "Show each instance: state, pid, CPU, port, clients, bytes, restarts, last exit (with --registry: every host's)",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if reg.url != "" {
				if len(a) > 0 {
					return usage.Errorf("--registry shows the whole cluster: give no ID")
				}
				return runRegistryStatus(cmd.Context(), cmd.OutOrStdout(), reg, asJSON)
			}
			id, err := clusterID(a)
			if err != nil {
				return err
			}
			st, err := cluster.Paths{}.QueryStatus(cmd.Context(), id)
			if err != nil {
				return err
			}
			if asJSON {
				st.Schema, st.Argv = cluster.StatusSchema, os.Args
				return writeJSON(cmd.OutOrStdout(), st)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "cluster %s\tnetns %s\tone-port %d %s\n", st.ID, st.Netns, st.OnePort, st.Backend)
			fmt.Fprintln(w, "INSTANCE\tSTATE\tPID\tCPU\tPROTO\tPORT\tCLIENTS\tBYTES IN\tBYTES OUT\tRESTARTS\tLAST EXIT")
			for _, s := range st.Instances {
				state := s.State
				if s.CrashLoop {
					state += " (crash loop)"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Name, state, s.Pid, s.CPU, s.Proto, s.Port, s.Clients, s.BytesIn, s.BytesOut, s.Restarts, s.LastExit)
			}
			for _, s := range st.Sites {
				via := strings.Join(s.Via, ", ")
				if via == "" {
					via = "(no tunnel up: not routed)"
				}
				fmt.Fprintf(w, "site %s\tclient %s\ttunnels via %s\n", s.Prefix, s.CN, via)
			}
			return w.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON document (schema "+cluster.StatusSchema+")")
	reg.add(c.Flags())
	return c
}

func newClusterStopCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stop [ID]",
		Short: "Ask a running `cluster serve` to drain and stop, and wait until it has",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := clusterID(a)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
			defer cancel()
			return cluster.Paths{}.RequestStop(ctx, id)
		},
	}
}
