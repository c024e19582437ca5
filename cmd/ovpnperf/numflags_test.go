package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// numericFlagTypes are the pflag types of whole-number flags, ovpnperf's
// own (flagvalues.go) and pflag's.
var numericFlagTypes = map[string]bool{"int": true, "uint": true, "uint16": true, "uint32": true, "int64": true, "uint64": true, "port": true, "ints": true, "count": true}

// portOrCount names the flags whose value is a port or a count: zero is
// never what a user means by one unless the help says what 0 does.
var portOrCount = regexp.MustCompile(`(^|-)(port|port-base|one-port|tunnels|count|flows|repeat|pings|clients|parallel|iperf3|reserve-cpus)$`)

// documentedZero is help text that says what a value of 0 does.
var documentedZero = regexp.MustCompile(`\(0[:=]|0 = |0: `)

// Every whole-number flag of every command is read in decimal only
// (pflag's integers took 0x10, 0o7, 0b1, 1_000, and 010 as 8), and a port
// or count flag refuses 0 unless its help says what 0 means (cluster
// serve --port-base 0 became 1195; --tunnels 0x2 was 2). The flags are
// found by walking the commands, so a flag added later is covered; each
// case runs the built binary and must exit 2 with one line naming the
// flag, before any work.
func TestNumberFlagsDecimalAndNonZero(t *testing.T) {
	type flagCase struct{ cmd, flag, label, value string }
	var cases []flagCase
	zeroChecked := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			walk(s)
		}
		if !c.Runnable() {
			return
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !numericFlagTypes[f.Value.Type()] {
				return
			}
			label := flagLabel(f.Name, f.Shorthand)
			for _, v := range []string{"0x2", "0X2", "0o7", "0b1", "010", "1_0", "-0x1", "+0x1", "2e3", "1.0", " 0x2"} {
				cases = append(cases, flagCase{c.CommandPath(), f.Name, label, v})
			}
			if portOrCount.MatchString(f.Name) {
				if documentedZero.MatchString(f.Usage) {
					t.Logf("%s --%s: 0 is documented: %s", c.CommandPath(), f.Name, f.Usage)
					return
				}
				zeroChecked++
				cases = append(cases, flagCase{c.CommandPath(), f.Name, label, "0"}, flagCase{c.CommandPath(), f.Name, label, "00"}, flagCase{c.CommandPath(), f.Name, label, "-0"})
			}
		})
	}
	walk(newRootCommand())
	if zeroChecked < 10 {
		t.Fatalf("only %d port or count flags found: the walk is broken", zeroChecked)
	}
	t.Logf("%d cases, %d port or count flags refusing 0", len(cases), zeroChecked)
	for _, c := range cases {
		args := append(strings.Fields(c.cmd)[1:], "--"+c.flag+"="+c.value)
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			// Each case is a refused command line that makes nothing:
			// the cases share nothing and overlap.
			t.Parallel()
			r, _ := runLimited(t, 10*time.Second, nil, args...)
			r.mustBeUsageError(t, c.label)
		})
	}
}
