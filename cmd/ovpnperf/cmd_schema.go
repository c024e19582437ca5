package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/docs/schemas"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"github.com/ovpnperf/ovpnperf/internal/printable"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newSchemaCommand) }

func newSchemaCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "schema",
		Short: "Check saved JSON documents against their schema files; list and print the schemas",
		Long: `Every JSON document ovpnperf writes names its format in a "schema" key
(ovpnperf/NAME/vN); its JSON Schema (draft 2020-12) is docs/schemas/NAME.vN.json
in the source and is built into the binary. "schema check" checks documents
against the schema each names: a field the schema does not document, a
missing one or a value of the wrong type fails. docs/schemas.md lists the
documents.`,
	}
	c.AddCommand(newSchemaCheckCommand(), newSchemaListCommand(), newSchemaShowCommand())
	return c
}

func newSchemaCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE...",
		Short: "Check JSON documents (a file, or - for standard input) against the schema each names",
		Long: `Check each FILE (- reads standard input): one JSON document, or a list of
them (recipe all --json, lab status --json), against the schema file its
"schema" key names. Prints the schema of each file that follows it; a file
that does not follow it is named on standard error with what failed, and the
exit status is 1. A file that is not JSON or names no schema ovpnperf has is
a usage error (exit status 2).`,
		Example: `  ovpnperf schema check before.json after.json
  ovpnperf version --json | ovpnperf schema check -`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			return runSchemaCheck(cmd, files)
		},
	}
}

func runSchemaCheck(cmd *cobra.Command, files []string) error {
	// Every file is read before any is checked: one that cannot be read
	// is refused with one line, whatever the others hold.
	docs := make([][]byte, len(files))
	for i, f := range files {
		var err error
		if f == "-" {
			docs[i], err = io.ReadAll(inputfile.Stream(cmd.Context(), cmd.InOrStdin(), "standard input", inputfile.Document()))
		} else {
			docs[i], err = inputfile.ReadFile(cmd.Context(), f, inputfile.Document())
		}
		if err != nil {
			return usage.Errorf("%v", err)
		}
	}
	failed := false
	for i, f := range files {
		ids, err := schemas.Check(docs[i])
		switch {
		case errors.Is(err, schemas.ErrNoSchema) || errors.Is(err, schemas.ErrNotJSON):
			return usage.Errorf("%s: %v", f, err)
		case err != nil:
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", f, printable.String(err.Error()))
			failed = true
		case len(ids) == 0:
			return usage.Errorf("%s: an empty list, no document to check", f)
		default:
			fmt.Fprintf(cmd.OutOrStdout(), "%s: follows %s\n", f, describeIDs(ids))
		}
	}
	if failed {
		return exitCode(1)
	}
	return nil
}

// describeIDs is "ovpnperf/run/v2" for one document, "3 documents of
// ovpnperf/run/v2" for a list.
func describeIDs(ids []string) string {
	if len(ids) == 1 {
		return ids[0]
	}
	seen := map[string]bool{}
	var kinds []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			kinds = append(kinds, id)
		}
	}
	return fmt.Sprintf("%d documents of %s", len(ids), strings.Join(kinds, ", "))
}

func newSchemaListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the schema ids and their files",
		Example: `  ovpnperf schema list`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, id := range schemas.IDs() {
				fmt.Fprintf(cmd.OutOrStdout(), "%-40s docs/schemas/%s\n", id, schemas.File(id))
			}
			return nil
		},
	}
}

func newSchemaShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "show ID",
		Short:   "Print the JSON Schema of a document (for another validator)",
		Example: `  ovpnperf schema show ovpnperf/run/v2`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			b, err := schemas.Text(a[0])
			if err != nil || !strings.HasPrefix(a[0], "ovpnperf/") {
				return usage.Errorf("schema %q: want one of %s (ovpnperf schema list)", a[0], strings.Join(schemas.IDs(), ", "))
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
}
