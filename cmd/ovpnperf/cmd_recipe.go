package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/ui"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/experiment"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/recipe"
	"github.com/ovpnperf/ovpnperf/internal/report"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
	"github.com/ovpnperf/ovpnperf/internal/verdict"
)

func init() { register(newRecipeCommand) }

type recipeOptions struct {
	flags    pathFlags
	repeat   int
	duration time.Duration
	json     bool
	out      string
	html     string
	pki      string
	name     string
}

func newRecipeCommand() *cobra.Command { return recipeCommand(new(recipeOptions)) }

// recipeCommand is the command with its options parsed into o (the flag tests
// read them).
func recipeCommand(o *recipeOptions) *cobra.Command {
	var names []string
	for _, r := range recipe.All() {
		names = append(names, r.Name)
	}
	c := &cobra.Command{
		Use:   "recipe list | all | NAME | judge FILE.json",
		Short: "Re-run a published OpenVPN tuning experiment in the lab and judge its claims",
		Long: `Each recipe rebuilds a published OpenVPN tuning experiment in a lab on this
kernel and OpenVPN, prints the publication's table with the published figures
beside the measured ones, and a verdict per claim computed from the
measurements: confirmed, changed, refuted, noise when the spread of the
samples does not allow a verdict, or "not tested here" when this path cannot
decide the claim (the reason says why).

Recipes: ` + strings.Join(names, ", ") + `.
"recipe list" describes them; "recipe all" runs them all and ends with a
summary of the verdicts. Path flags replace a recipe's own path.
"recipe judge FILE.json" recomputes the verdicts of a saved result (--out or
--json of a recipe, or of recipe all) with this binary's rules, without
measuring anything, and lists the verdicts that differ from the saved ones.`,
		Example: `  ovpnperf recipe list
  ovpnperf recipe ciphers --repeat 5
  ovpnperf recipe buffers --json
  ovpnperf recipe all --out recipes.json
  ovpnperf recipe judge recipes.json`,
		Args: args(func(cmd *cobra.Command, a []string) error {
			switch {
			case len(a) == 0:
				return fmt.Errorf("name a recipe, list, all, or judge FILE.json (see ovpnperf recipe list)")
			case a[0] == "judge" && len(a) == 1:
				return fmt.Errorf("recipe judge: give the FILE.json of a saved recipe result (--out of a recipe or of recipe all)")
			case a[0] == "judge" && len(a) > 2:
				return fmt.Errorf("recipe judge: give one FILE.json, not %d", len(a)-1)
			case a[0] != "judge" && len(a) > 1:
				return fmt.Errorf("recipe %s: takes no argument after the recipe's name, got %q", a[0], a[1])
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, a []string) error {
			if a[0] == "judge" {
				return runRecipeJudge(cmd.Context(), cmd.OutOrStdout(), a[1], o.json)
			}
			return runRecipe(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), a[0], *o)
		},
	}
	f := c.Flags()
	o.flags.bind(f)
	rangeFlag(f, &o.repeat, "repeat", "", 0, experiment.RepeatRange(), "samples per row, %s (default: the recipe's, usually "+strconv.Itoa(experiment.DefaultRepeat)+")")
	durationRangeFlag(f, &o.duration, "time", "", 0, experiment.SampleTimeRange(), "length of each throughput sample in whole seconds, %s (default: the recipe's)")
	f.BoolVar(&o.json, "json", false, "print JSON (one report; with all, a list of reports)")
	stringFlag(f, &o.out, "out", "", "", "a file path", "also write the JSON to this file (checked before the run)")
	stringFlag(f, &o.html, "html", "", "", "a file path", "also write the report page (as `ovpnperf report` makes it) to this file")
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
				_ = ui.RenderTable(stdout, rep)
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
		rep.Scenario.Argv = os.Args
		reports = append(reports, rep)
		if !o.json {
			if err := ui.RenderTable(stdout, rep); err != nil {
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
	if o.html != "" && len(reports) > 0 {
		if err := writeHTML(o.html, reports); err != nil {
			return err
		}
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
		outErr = writeOut(out, func(w io.Writer) error { return writeJSON(w, v) })
	}
	if asJSON {
		return errors.Join(writeJSON(stdout, v), outErr)
	}
	return outErr
}

func (o recipeOptions) recipeOptions() (recipe.Options, error) {
	var opts recipe.Options
	custom := o.flags.given()
	if custom {
		p, err := o.flags.path()
		if err != nil {
			return opts, err
		}
		opts.Path = &p
	}
	if err := checkOutPath("--out", o.out); err != nil {
		return opts, err
	}
	if err := checkOutPath("--html", o.html); err != nil {
		return opts, err
	}
	if o.pki != "" {
		if _, err := openvpn.LoadPKI(o.pki); err != nil {
			return opts, usage.Errorf("--pki %q: %v", o.pki, err)
		}
	}
	if o.name != "" {
		if err := lab.ValidateName(o.name + "-xxxxx"); err != nil {
			return opts, usage.Errorf("--name %q: want 1–%d lower-case letters, digits or dashes", o.name, lab.MaxNameLen-len("-xxxxx"))
		}
	}
	opts.Repeat, opts.Duration, opts.PKIDir, opts.LabName = o.repeat, o.duration, o.pki, o.name
	return opts, opts.Validate()
}

// recipeListSchema names the document of `recipe list --json`.
const recipeListSchema = "ovpnperf/recipe-list/v1"

// recipeList is `recipe list --json`.
type recipeList struct {
	Schema  string       `json:"schema"`
	Recipes []recipeItem `json:"recipes"`
}

type recipeItem struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	Source  string `json:"source"`
}

func listRecipes(w io.Writer, asJSON bool) error {
	items := []recipeItem{}
	for _, r := range recipe.All() {
		items = append(items, recipeItem{r.Name, r.Summary, r.Source})
	}
	if asJSON {
		return writeJSON(w, recipeList{Schema: recipeListSchema, Recipes: items})
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

// readReports reads a saved recipe result: one report, or the list that
// `recipe all` writes, through the loader `report` and `compare` use (so
// the same documents, figures and schemas are accepted), keeping only
// run documents of a recipe.
func readReports(ctx context.Context, path string) ([]*measure.Report, bool, error) {
	b, err := inputfile.ReadFile(ctx, path, inputfile.Document())
	if err != nil {
		return nil, false, usage.Errorf("recipe judge: %v", err)
	}
	return parseReports(path, b)
}

// parseReports is readReports on the file's bytes.
func parseReports(path string, b []byte) ([]*measure.Report, bool, error) {
	docs, err := report.Parse(path, b)
	if err != nil {
		return nil, false, usage.Errorf("recipe judge: %v", err)
	}
	var reps []*measure.Report
	for _, d := range docs {
		if d.Run == nil || !strings.HasPrefix(d.Run.Scenario.Command, "recipe ") {
			what := d.Schema
			if d.Run != nil {
				what = fmt.Sprintf("%q", d.Run.Scenario.Command)
			}
			return nil, false, usage.Errorf("recipe judge: %s holds a %s result, not a recipe's (save one with ovpnperf recipe NAME --out FILE)", d.File, what)
		}
		reps = append(reps, d.Run)
	}
	list := bytes.HasPrefix(bytes.TrimSpace(b), []byte("["))
	return reps, list, nil
}

// runRecipeJudge recomputes the verdicts of saved reports and prints them
// as a run would, then the verdicts that differ from the saved ones.
func runRecipeJudge(ctx context.Context, stdout io.Writer, path string, asJSON bool) error {
	reps, list, err := readReports(ctx, path)
	if err != nil {
		return err
	}
	return judgeReports(stdout, path, reps, list, asJSON)
}

// judgeReports is runRecipeJudge on reports read from path.
func judgeReports(stdout io.Writer, path string, reps []*measure.Report, list, asJSON bool) error {
	type change struct {
		recipe, claim string
		was, now      verdict.Outcome
	}
	var changes []change
	for _, rep := range reps {
		if !strings.HasPrefix(rep.Scenario.Command, "recipe ") {
			return usage.Errorf("recipe judge: %s holds a %q result, not a recipe's", path, rep.Scenario.Command)
		}
		vs, err := recipe.Judge(rep)
		if err != nil {
			return usage.Errorf("recipe judge: %v", err)
		}
		name := strings.TrimPrefix(rep.Scenario.Command, "recipe ")
		was, now := map[string]verdict.Outcome{}, map[string]bool{}
		for _, v := range rep.Verdicts {
			was[v.Claim] = v.Outcome
		}
		for _, v := range vs {
			now[v.Claim] = true
			if o, ok := was[v.Claim]; !ok || o != v.Outcome {
				changes = append(changes, change{name, v.Claim, o, v.Outcome})
			}
		}
		for _, v := range rep.Verdicts {
			if !now[v.Claim] {
				changes = append(changes, change{name, v.Claim, v.Outcome, ""})
			}
		}
		rep.Verdicts = vs
		rep.Columns = recipe.Columns(rep)
	}
	if asJSON {
		var v any = reps
		if !list {
			v = reps[0]
		}
		return writeJSON(stdout, v)
	}
	for _, rep := range reps {
		fmt.Fprintf(stdout, "\n== %s (measured %s, kernel %s, %d CPUs)\n", rep.Scenario.Command, rep.Started.Format("2006-01-02 15:04 MST"), rep.Host.Kernel, rep.Host.CPUs)
		if err := ui.RenderTable(stdout, rep); err != nil {
			return err
		}
	}
	if list {
		summarize(stdout, reps)
	}
	fmt.Fprintf(stdout, "\n== %d verdict(s) differ from the saved ones\n", len(changes))
	for _, c := range changes {
		was, now := string(c.was), string(c.now)
		if was == "" {
			was = "absent"
		}
		if now == "" {
			now = "absent"
		}
		fmt.Fprintf(stdout, "%s: %s → %s: %s\n", c.recipe, was, now, c.claim)
	}
	return nil
}
