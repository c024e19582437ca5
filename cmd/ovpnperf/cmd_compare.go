package main

import (
	"fmt"
	"github.com/ovpnperf/ovpnperf/internal/outputfile"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/report"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newCompareCommand) }

type compareOptions struct {
	json       bool
	html       string
	threshold  float64
	oldVariant string
	newVariant string
}

func newCompareCommand() *cobra.Command {
	var o compareOptions
	c := &cobra.Command{
		Use:   "compare OLD.json NEW.json",
		Short: "Compare two lab run (or recipe) results row by row: better, worse, no change or cannot tell",
		Long: `compare matches the rows of two documents by network, variant and direction
and says for each whether throughput got better, worse, or did not change.
A row with fewer than 3 valid samples on a side is "not enough samples" (one
sample has no spread to judge by). Otherwise it is better or worse when every
sample of one side lies beyond every sample of the other and the medians
differ by --threshold or more; "no change" only when every ratio new/old the
samples allow (slowest new over fastest old … fastest new over slowest old)
lies within ±--threshold, so that a change of that size would have shown;
otherwise "cannot tell", with the range the samples allow. The rules are
explained in docs/evidence.md.

compare also matches the two documents' findings by kind and subject
(network, variant, direction; a document written without findings is judged
from its rows) and lists those that changed: a limit that moved (path-bound →
cpu-bound …), a finding that appeared or went, one whose outcome changed.

Exit status 1 when any row got worse beyond its spread, or a finding got worse:
a confirmed socket-drops, fragmentation, tun-drops or loss finding appeared,
or a limit moved from the path to another (path-bound → cpu-bound,
below-path, window-bound, loss); so a script can gate a configuration change
on it; 0 otherwise; 2 on bad input. The reverse changes are better.
--old-variant and --new-variant compare two variants, also of the same file
(e.g. default against jumbo measured in one run).`,
		Example: `  ovpnperf compare before.json after.json
  ovpnperf compare lan.json lan.json --old-variant default --new-variant jumbo
  ovpnperf compare before.json after.json --json
  ovpnperf compare before.json after.json --html compare.html`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runCompare(cmd.OutOrStdout(), a[0], a[1], o)
		},
	}
	f := c.Flags()
	f.BoolVar(&o.json, "json", false, "print one JSON document (schema "+report.CompareSchema+") instead of a table")
	f.StringVar(&o.html, "html", "", "also write the comparison as an HTML page to this file")
	f.Float64Var(&o.threshold, "threshold", 100*report.DefaultThreshold, "smallest change of the median, in percent, that can be better or worse")
	f.StringVar(&o.oldVariant, "old-variant", "", "compare only this variant of OLD (matched by network and direction)")
	f.StringVar(&o.newVariant, "new-variant", "", "compare only this variant of NEW (matched by network and direction)")
	return c
}

func runCompare(stdout io.Writer, oldFile, newFile string, o compareOptions) error {
	if o.threshold < 0 || o.threshold >= 100 {
		return usage.Errorf("--threshold %g: want a percentage from 0 to under 100", o.threshold)
	}
	if (o.oldVariant == "") != (o.newVariant == "") {
		return usage.Errorf("--old-variant and --new-variant go together")
	}
	if err := checkOutPath("--html", o.html); err != nil {
		return err
	}
	var reps [2]*report.Document
	for i, f := range []string{oldFile, newFile} {
		docs, err := loadDocuments([]string{f})
		if err != nil {
			return err
		}
		if len(docs) != 1 || docs[0].Run == nil {
			return usage.Errorf("%s: compare reads one lab run or recipe document (schema ovpnperf/run/…), not %d document(s) of schema %s", f, len(docs), docs[0].Schema)
		}
		reps[i] = &docs[0]
	}
	old, new := reps[0].Run, reps[1].Run
	opts := report.CompareOptions{Threshold: o.threshold / 100, OldVariant: o.oldVariant, NewVariant: o.newVariant}
	if o.oldVariant != "" && !hasVariant(old, o.oldVariant) {
		return usage.Errorf("--old-variant %q: %s has no such variant", o.oldVariant, oldFile)
	}
	if o.newVariant != "" && !hasVariant(new, o.newVariant) {
		return usage.Errorf("--new-variant %q: %s has no such variant", o.newVariant, newFile)
	}
	for _, c := range []struct {
		file, only string
		rep        *measure.Report
	}{{oldFile, o.oldVariant, old}, {newFile, o.newVariant, new}} {
		if err := report.CheckComparable(c.rep, c.only); err != nil {
			return usage.Errorf("%s: %v", c.file, err)
		}
	}
	cmp := report.NewComparison(oldFile, old, newFile, new, opts)
	if o.html != "" {
		if err := outputfile.Write(o.html, 0o644, func(w io.Writer) error {
			return report.WriteCompareHTML(w, cmp, old, new, report.Options{Argv: os.Args})
		}); err != nil {
			return err
		}
	}
	if o.json {
		if err := writeJSON(stdout, cmp); err != nil {
			return err
		}
	} else if err := cmp.WriteTable(stdout); err != nil {
		return err
	}
	if cmp.Worse {
		if !o.json {
			fmt.Fprintln(stdout, "worse (a row beyond the spread, or a finding): exit status 1")
		}
		return exitCode(1)
	}
	return nil
}

func hasVariant(rep *measure.Report, v string) bool {
	for _, r := range rep.Rows {
		if r.Variant == v {
			return true
		}
	}
	return false
}
