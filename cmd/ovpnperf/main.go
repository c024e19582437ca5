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
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/outputfile"
	"github.com/ovpnperf/ovpnperf/internal/printable"
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
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError(err) })
	// --version prints what `ovpnperf version` prints (cobra runs the
	// template only when the flag is given, so the programs are looked up
	// only then).
	root.Version = buildVersion().Version
	cobra.AddTemplateFunc("ovpnperfVersion", func() string {
		var b strings.Builder
		_ = collectVersion(context.Background()).writeText(&b)
		return b.String()
	})
	root.SetVersionTemplate(`{{ovpnperfVersion}}`)
	for _, c := range commands {
		root.AddCommand(c())
	}
	refuseUnknownSubcommands(root)
	guardCommands(root)
	markQuickExit(root)
	return root
}

// refuseUnknownSubcommands makes every command that only groups others
// (ovpnperf, lab, pps) refuse an unknown subcommand as a usage error (exit
// 2) instead of cobra's plain error or, below the root, help and exit 0.
// Without arguments such a command prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, a []string) error {
		if len(a) == 0 {
			return cmd.Help()
		}
		hint := ""
		if s := cmd.SuggestionsFor(a[0]); len(s) > 0 {
			hint = fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
		}
		return usage.Errorf("unknown command %q for %q%s; see %q", a[0], cmd.CommandPath(), hint, cmd.CommandPath()+" --help")
	}
}

// quickExitCommands make nothing on the host but the files they name
// (written through outputfile) and start no program: on SIGINT or SIGTERM
// they exit at once, wherever they are (reading, checking or rendering a
// document of tens of MiB takes seconds that no context check interrupts).
var quickExitCommands = []string{"ovpnperf report", "ovpnperf compare", "ovpnperf analyze", "ovpnperf advise", "ovpnperf schema check"}

// quickExit is set when one of quickExitCommands starts running.
var quickExit atomic.Bool

// markQuickExit makes quickExitCommands set quickExit as they start.
func markQuickExit(root *cobra.Command) {
	for _, path := range quickExitCommands {
		c, _, err := root.Find(strings.Fields(path)[1:])
		if err != nil || c.CommandPath() != path || c.RunE == nil {
			panic("quickExitCommands: no command " + path)
		}
		run := c.RunE
		c.RunE = func(cmd *cobra.Command, a []string) error {
			quickExit.Store(true)
			return run(cmd, a)
		}
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for range sigs {
			if quickExit.Load() {
				outputfile.RemovePending()
				fmt.Fprintln(os.Stderr, "ovpnperf: interrupted")
				os.Exit(130)
			}
		}
	}()
	root := newRootCommand()
	// Every text output goes through one filter that prints control
	// characters escaped: a config line or a document's name cannot
	// steer the terminal (JSON output has none left to escape).
	root.SetOut(printable.Writer(os.Stdout))
	root.SetErr(printable.Writer(os.Stderr))
	err := root.ExecuteContext(ctx)
	interrupted := ctx.Err() != nil
	stop()
	if err != nil && interrupted {
		// Whatever the error says (context canceled, signal: killed of a
		// child), the cause is the signal.
		fmt.Fprintln(os.Stderr, "ovpnperf: interrupted")
		os.Exit(130)
	}
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
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "ovpnperf: interrupted")
		return 130
	}
	if usage.Is(err) || isCobraUsage(err) {
		// A user's mistake is one line, whatever value it quotes.
		fmt.Fprintf(os.Stderr, "ovpnperf: %s\n", printable.Line(err.Error()))
		return 2
	}
	fmt.Fprintf(os.Stderr, "ovpnperf: %s\n", printable.String(err.Error()))
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
