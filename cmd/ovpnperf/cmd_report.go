package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/measure"
	"github.com/ovpnperf/ovpnperf/internal/report"
	"github.com/ovpnperf/ovpnperf/internal/tune"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newReportCommand) }

type reportOptions struct {
	out   string
	title string
}

func newReportCommand() *cobra.Command {
	var o reportOptions
	c := &cobra.Command{
		Use:   "report FILE.json… [-o report.html]",
		Short: "Turn ovpnperf JSON documents into one self-contained HTML page with charts",
		Long: `report reads JSON documents written by ovpnperf (lab run, recipe, recipe all,
pps client, pmtu, crypto, tune, cluster status, and the history of watch, whose
rounds it draws over time; recognised by their "schema" key, or for cluster
status by its keys) and writes one HTML
page with nothing external: charts as SVG, the figures as tables beside them,
the host and the exact command that produced each document. It opens from a
file:// URL or an e-mail attachment, in dark and light mode, and prints.

Schemas read: ` + strings.Join(report.Schemas(), ", ") + `.`,
		Example: `  ovpnperf lab run --json --out run.json && ovpnperf report run.json -o run.html
  ovpnperf report recipes.json pmtu.json crypto.json -o all.html`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runReport(cmd.OutOrStdout(), a, o)
		},
	}
	c.Flags().StringVarP(&o.out, "out", "o", "", "write the page to this file (default: standard output)")
	c.Flags().StringVar(&o.title, "title", "", "the page's title (default: from the documents)")
	return c
}

// loadDocuments reads every file. Any failure (missing or unreadable file,
// not JSON, unknown schema) is a usage error: the user named the wrong
// file, and nothing is written. A tune document of schema 1 is judged
// again by tune's rules.
func loadDocuments(files []string) ([]report.Document, error) {
	var docs []report.Document
	r := report.Reader{RejudgeTune: tune.Rejudge}
	for _, f := range files {
		d, err := r.Load(f)
		if err != nil {
			return nil, usage.Errorf("%v", err)
		}
		docs = append(docs, d...)
	}
	return docs, nil
}

func runReport(stdout io.Writer, files []string, o reportOptions) error {
	if err := checkOutPath("-o/--out", o.out); err != nil {
		return err
	}
	docs, err := loadDocuments(files)
	if err != nil {
		return err
	}
	opts := report.Options{Title: o.title, Argv: os.Args}
	if o.out == "" {
		return report.Write(stdout, docs, opts)
	}
	return report.WriteFile(o.out, docs, opts)
}

// writeHTML writes the report page of run documents just measured
// (lab run --html, recipe --html).
func writeHTML(path string, reps []*measure.Report) error {
	var docs []report.Document
	for _, r := range reps {
		docs = append(docs, report.Document{File: "this run", Schema: r.Schema, Run: r})
	}
	if err := report.WriteFile(path, docs, report.Options{Argv: os.Args}); err != nil {
		return fmt.Errorf("writing the report page: %w", err)
	}
	return nil
}
