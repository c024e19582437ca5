package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/outputfile"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newGendocCommand) }

// newGendocCommand writes the man pages and shell completions that the
// Debian package ships (scripts/build-deb.sh). It is hidden: admins read
// the pages with man, they do not generate them.
func newGendocCommand() *cobra.Command {
	var manDir, completionDir, unitDir, exe, markdown string
	c := &cobra.Command{
		Use:    "gendoc [--man DIR] [--completion DIR] [--systemd DIR] [--markdown FILE]",
		Short:  "Write man pages (section 1), bash/zsh completions and the cluster template unit",
		Hidden: true,
		Args:   args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if manDir == "" && completionDir == "" && unitDir == "" && markdown == "" {
				return usage.Errorf("give at least one of --man DIR, --completion DIR, --systemd DIR, --markdown FILE")
			}
			if !filepath.IsAbs(exe) {
				return usage.Errorf("--exe %q: give the absolute path the binary is installed at", exe)
			}
			// Every file with a fixed name is checked before any is
			// written (the man pages' names come from the commands).
			outs := []struct{ flag, dir, name string }{{"--completion", completionDir, "ovpnperf.bash"}, {"--completion", completionDir, "_ovpnperf"},
				{"--systemd", unitDir, "ovpnperf-cluster@.service"}}
			for _, o := range outs {
				if o.dir == "" {
					continue
				}
				if err := existingDir(o.dir, o.flag); err != nil {
					return err
				}
				if err := checkOutPath(o.flag, filepath.Join(o.dir, o.name)); err != nil {
					return err
				}
			}
			if err := checkOutPath("--markdown", markdown); err != nil {
				return err
			}
			root := cmd.Root()
			if markdown != "" {
				text, err := commandsMarkdown(root)
				if err != nil {
					return err
				}
				if err := outputfile.WriteBytes(markdown, 0o644, []byte(text)); err != nil {
					return err
				}
			}
			if manDir != "" {
				if err := existingDir(manDir, "--man"); err != nil {
					return err
				}
				// No date in the header: the pages of one revision are
				// the same whenever they are built.
				zero := root.DisableAutoGenTag
				root.DisableAutoGenTag = true
				defer func() { root.DisableAutoGenTag = zero }()
				hdr := &doc.GenManHeader{Title: "OVPNPERF", Section: "1", Source: "ovpnperf " + buildVersion().Version, Manual: "ovpnperf manual"}
				if err := writeManPages(root, hdr, manDir); err != nil {
					return fmt.Errorf("writing man pages to %s: %w", manDir, err)
				}
			}
			if completionDir != "" {
				if err := existingDir(completionDir, "--completion"); err != nil {
					return err
				}
				// Through outputfile, as every file ovpnperf writes
				// (cobra's *File helpers open the name and follow links).
				if err := outputfile.Write(filepath.Join(completionDir, "ovpnperf.bash"), 0o644, func(w io.Writer) error {
					return root.GenBashCompletionV2(w, true)
				}); err != nil {
					return err
				}
				if err := outputfile.Write(filepath.Join(completionDir, "_ovpnperf"), 0o644, root.GenZshCompletion); err != nil {
					return err
				}
			}
			if unitDir != "" {
				if err := existingDir(unitDir, "--systemd"); err != nil {
					return err
				}
				unit := cluster.SystemdTemplateUnit(exe)
				if err := outputfile.WriteBytes(filepath.Join(unitDir, "ovpnperf-cluster@.service"), 0o644, []byte(unit)); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&manDir, "man", "", "directory to write ovpnperf.1 and one page per command into")
	c.Flags().StringVar(&markdown, "markdown", "", "file to write the command reference (docs/commands.md) into")
	c.Flags().StringVar(&unitDir, "systemd", "", "directory to write the template unit ovpnperf-cluster@.service into")
	c.Flags().StringVar(&exe, "exe", "/usr/bin/ovpnperf", "the installed binary's path, for the unit's Exec lines")
	c.Flags().StringVar(&completionDir, "completion", "", "directory to write ovpnperf.bash and _ovpnperf (zsh) into")
	return c
}

// writeManPages writes the page of cmd and of each command below it, named
// as cobra's GenManTree names them (ovpnperf-lab-up.1), each through
// outputfile.
func writeManPages(cmd *cobra.Command, hdr *doc.GenManHeader, dir string) error {
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := writeManPages(c, hdr, dir); err != nil {
			return err
		}
	}
	name := strings.ReplaceAll(cmd.CommandPath(), " ", "-") + "." + hdr.Section
	h := *hdr
	return outputfile.Write(filepath.Join(dir, name), 0o644, func(w io.Writer) error { return doc.GenMan(cmd, &h, w) })
}

func existingDir(dir, flag string) error {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return usage.Errorf("%s %q: not an existing directory", flag, dir)
	}
	return nil
}

// commandsMarkdown is docs/commands.md: every visible command's synopsis,
// description, examples and flags, generated from the commands themselves
// so that the reference cannot drift from --help (a test compares them).
func commandsMarkdown(root *cobra.Command) (string, error) {
	var b strings.Builder
	b.WriteString("# ovpnperf command reference\n\n" +
		"Every command and flag of ovpnperf, for users who look one up. Generated from the\n" +
		"commands' own help by `ovpnperf gendoc --markdown docs/commands.md`; do not edit by\n" +
		"hand. The README introduces each command and links to the page with its details.\n")
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" && c.Parent() == root {
			return nil
		}
		c.DisableAutoGenTag = true
		var page bytes.Buffer
		if err := doc.GenMarkdownCustom(c, &page, func(string) string { return "" }); err != nil {
			return err
		}
		// One document: the per-command pages' "SEE ALSO" links point to
		// files that do not exist here, and each page's title becomes a
		// section.
		text, _, _ := strings.Cut(page.String(), "### SEE ALSO")
		text = strings.Replace(text, "## "+c.CommandPath(), "## `"+c.CommandPath()+"`", 1)
		b.WriteString("\n" + strings.TrimSpace(strings.ReplaceAll(text, "\n### ", "\n#### ")) + "\n")
		for _, s := range c.Commands() {
			if err := walk(s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return "", err
	}
	return b.String(), nil
}
