// Command ovpnperf measures OpenVPN tunnels and the paths under them, rebuilds
// those paths in Linux network namespaces, and runs real OpenVPN and iperf3
// across them. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// commands holds the constructors of the subcommands; each cmd_*.go file adds
// its own in an init function, so that commands live in one file each.
var commands []func() *cobra.Command

func register(newCmd func() *cobra.Command) { commands = append(commands, newCmd) }

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "ovpnperf",
		Short: "Measure, rebuild and tune OpenVPN paths on a real kernel",
		Long: `ovpnperf measures OpenVPN tunnels and the paths under them (path MTU, RTT,
throughput inside and outside the tunnel, packet rate, crypto speed, CPU per
byte), rebuilds such paths in Linux network namespaces, and runs real OpenVPN
and iperf3 across them. Most commands need root.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usage.Errorf("%v", err)
	})
	for _, c := range commands {
		root.AddCommand(c())
	}
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	os.Exit(exitStatus(err))
}

// exitStatus prints err (one line for a user's mistake) and returns the
// process exit status: 0 success, 2 bad usage, 1 anything else, 130 when
// interrupted.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintf(os.Stderr, "ovpnperf: %v\n", err)
	switch {
	case usage.Is(err) || isCobraUsage(err):
		return 2
	case errors.Is(err, context.Canceled):
		return 130
	}
	return 1
}

// exitCode is returned by commands that pass on another program's exit
// status (lab exec); main exits with it and prints nothing.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// isCobraUsage recognises cobra's own argument errors (unknown command,
// wrong number of arguments), which it does not type.
func isCobraUsage(err error) bool {
	var a *argsError
	return errors.As(err, &a)
}

// argsError wraps cobra positional-argument validation failures.
type argsError struct{ error }

func (e *argsError) Unwrap() error { return e.error }

// args wraps a cobra.PositionalArgs so that its failures are usage errors.
func args(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := v(cmd, a); err != nil {
			return &argsError{err}
		}
		return nil
	}
}
