package main

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/outputfile"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

type clusterClientConfigOptions struct {
	base, host, out string
}

func newClusterClientConfigCommand() *cobra.Command {
	var o clusterClientConfigOptions
	c := &cobra.Command{
		Use:   "client-config [ID]",
		Short: "Write a client config with one remote per instance and remote-random",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := clusterID(a)
			if err != nil {
				return err
			}
			return runClusterClientConfig(cmd.Context(), cmd.OutOrStdout(), id, o)
		},
	}
	c.Flags().StringVar(&o.base, "base", "", "client config to start from (its remotes are replaced)")
	c.Flags().StringVar(&o.host, "host", "", "host name or address of the instances (required)")
	c.Flags().StringVarP(&o.out, "output", "o", "", "write here (0600) instead of standard output")
	return c
}

func runClusterClientConfig(ctx context.Context, w io.Writer, id string, o clusterClientConfigOptions) error {
	if o.host == "" || openvpn.ValidateToken(o.host) != nil || strings.ContainsAny(o.host, " \t") {
		return usage.Errorf("--host %q: give the instances' host name or address", o.host)
	}
	if o.base == "" {
		return usage.Errorf("give --base CLIENT.conf (credentials and options to keep)")
	}
	if err := checkOutPath("-o/--output", o.out); err != nil {
		return err
	}
	b, err := inputfile.ReadFile(ctx, o.base, inputfile.Config())
	if err != nil {
		return usage.Errorf("--base %v", err)
	}
	cfg, err := openvpn.ParseString(string(b))
	if err != nil {
		return usage.Errorf("--base %s: %v", o.base, err)
	}
	st, err := cluster.Paths{}.QueryStatus(ctx, id)
	if err != nil {
		return err
	}
	text, err := cluster.ClientConfig(cfg, o.host, st.Instances)
	if err != nil {
		return err
	}
	if o.out == "" {
		_, err := io.WriteString(w, text)
		return err
	}
	// 0600: the client config holds the client's keys.
	return outputfile.WriteBytes(o.out, 0o600, []byte(text))
}
