package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/recipe"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newRecipeCommand) }

type recipeOptions struct {
	flags    pathFlags
	repeat   int
	duration time.Duration
	json     bool
	out      string
	pki      string
	name     string
}

func newRecipeCommand() *cobra.Command {
	var o recipeOptions
	var names []string
	for _, r := range recipe.All() {
		names = append(names, r.Name)
	}
	c := &cobra.Command{
		Use:   "recipe list | all | NAME",
		Short: "Re-run a published OpenVPN tuning experiment in the lab and judge its claims",
		Long: `Each recipe rebuilds a published OpenVPN tuning experiment in a lab on this
kernel and OpenVPN, prints the publication's table with the published figures
beside the measured ones, and a verdict per claim computed from the
measurements: confirmed, changed, refuted, or noise when the spread of the
samples does not allow a verdict.

Recipes: ` + strings.Join(names, ", ") + `.
"recipe list" describes them; "recipe all" runs them all and ends with a
summary of the verdicts. Path flags replace a recipe's own path.`,
		Example: `  ovpnperf recipe list
  ovpnperf recipe ciphers --repeat 5
  ovpnperf recipe buffers --json
  ovpnperf recipe all --out recipes.json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runRecipe(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), a[0], o)
		},
	}
	f := c.Flags()
	o.flags.bind(f)
	intFlag(f, &o.repeat, "repeat", "", 0, 1, 50, "samples per row, 1–50 (default: the recipe's, usually 3)")
	durationFlag(f, &o.duration, "time", "", 0, time.Second, 300*time.Second, true, "length of each throughput sample in whole seconds, 1s–300s (default: the recipe's)")
	f.BoolVar(&o.json, "json", false, "print JSON (one report; with all, a list of reports)")
	stringFlag(f, &o.out, "out", "", "", "a file path", "also write the JSON to this file (checked before the run)")
	stringFlag(f, &o.pki, "pki", "", "", "a PKI directory", "reuse the PKI in this directory")
	stringFlag(f, &o.name, "name", "", "", "a lab name of lower-case letters, digits and dashes", "name the recipe's labs (default random)")
	return c
}

func runRecipe(ctx context.Context, stdout, stderr io.Writer, name string, o recipeOptions) error {
	if name == "list" {
		return listRecipes(stdout, o.json)
	}
	var todo []recipe.Recipe
	if name == "all" {
		todo = recipe.All()
	} else {
		r, ok := recipe.Lookup(name)
		if !ok {
			return usage.Errorf("no recipe %q (see `ovpnperf recipe list`)", name)
		}
		todo = []recipe.Recipe{r}
	}
	opts, err := o.recipeOptions()
	if err != nil {
		return err
	}
	if err := lab.Preflight(); err != nil {
		return err
	}
	needs := []string{"openvpn", "iperf3"}
	for _, r := range todo {
		needs = append(needs, r.Needs...)
	}
	if err := runner.Require(needs...); err != nil {
		return err
	}
	if !o.json {
		opts.Progress = stderr
	}
	var reports []*measure.Report
	var errs []error
	for _, r := range todo {
		if !o.json {
			fmt.Fprintf(stdout, "\n== recipe %s: %s\n   published: %s\n", r.Name, r.Summary, r.Source)
		}
		rep, err := r.Run(ctx, opts)
		if ctx.Err() != nil {
			// Interrupted: show what was measured, then stop.
			if rep != nil && !o.json {
				_ = measure.RenderTable(stdout, rep)
			}
			return ctx.Err()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("recipe %s: %w", r.Name, err))
		}
		if rep == nil {
			continue
		}
		rep.Scenario.Command = "recipe " + r.Name
		reports = append(reports, rep)
		if !o.json {
			if err := measure.RenderTable(stdout, rep); err != nil {
				return err
			}
		}
	}
	if name == "all" && !o.json {
		summarize(stdout, reports)
	}
	if err := writeReports(stdout, reports, o.json, o.out, name == "all"); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// writeReports prints JSON (one report, or a list for `all`) and writes it
// to out.
func writeReports(stdout io.Writer, reports []*measure.Report, asJSON bool, out string, list bool) error {
	var v any = reports
	if !list && len(reports) == 1 {
		v = reports[0]
	}
	var outErr error
	if out != "" {
		outErr = writeOut(out, func(f *os.File) error { return writeJSON(f, v) })
	}
	if asJSON {
		return errors.Join(writeJSON(stdout, v), outErr)
	}
	return outErr
}

func (o recipeOptions) recipeOptions() (recipe.Options, error) {
	var opts recipe.Options
	custom := false
	for _, n := range pathFlagNames {
		custom = custom || o.flags.fs.Changed(n)
	}
	if custom {
		p, err := o.flags.path()
		if err != nil {
			return opts, err
		}
		opts.Path = &p
	}
	if o.repeat < 0 || o.repeat > 50 {
		return opts, usage.Errorf("--repeat %d: want 1–50", o.repeat)
	}
	if o.duration < 0 || o.duration > 300*time.Second || o.duration%time.Second != 0 {
		return opts, usage.Errorf("--time %v: want whole seconds from 1s to 300s", o.duration)
	}
	if err := checkOutPath("--out", o.out); err != nil {
		return opts, err
	}
	if o.pki != "" {
		if _, err := openvpn.LoadPKI(o.pki); err != nil {
			return opts, usage.Errorf("--pki %q: %v", o.pki, err)
		}
	}
	if o.name != "" {
		if err := lab.ValidateName(o.name + "-xxxxx"); err != nil {
			return opts, usage.Errorf("--name %q: want 1–14 lower-case letters, digits or dashes", o.name)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return opts, err
	}
	opts.Repeat, opts.Duration, opts.PKIDir, opts.Executable, opts.LabName = o.repeat, o.duration, o.pki, exe, o.name
	return opts, nil
}

func listRecipes(w io.Writer, asJSON bool) error {
	type item struct {
		Name    string `json:"name"`
		Summary string `json:"summary"`
		Source  string `json:"source"`
	}
	var items []item
	for _, r := range recipe.All() {
		items = append(items, item{r.Name, r.Summary, r.Source})
	}
	if asJSON {
		return writeJSON(w, items)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, it := range items {
		fmt.Fprintf(tw, "%s\t%s\n", it.Name, it.Summary)
		fmt.Fprintf(tw, "\tpublished: %s\n", it.Source)
	}
	return tw.Flush()
}

// summarize prints one line per verdict of every recipe.
func summarize(w io.Writer, reports []*measure.Report) {
	fmt.Fprintln(w, "\n== summary of verdicts")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECIPE\tOUTCOME\tCLAIM")
	for _, rep := range reports {
		for _, v := range rep.Verdicts {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.TrimPrefix(rep.Scenario.Command, "recipe "), v.Outcome, v.Claim)
		}
	}
	tw.Flush()
}
