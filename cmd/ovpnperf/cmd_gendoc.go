package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/ovpnperf/ovpnperf/internal/cluster"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newGendocCommand) }

// newGendocCommand writes the man pages and shell completions that the
// Debian package ships (scripts/build-deb.sh). It is hidden: admins read
// the pages with man, they do not generate them.
func newGendocCommand() *cobra.Command {
	var manDir, completionDir, unitDir, exe string
	c := &cobra.Command{
		Use:    "gendoc [--man DIR] [--completion DIR] [--systemd DIR]",
		Short:  "Write man pages (section 1), bash/zsh completions and the cluster template unit",
		Hidden: true,
		Args:   args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if manDir == "" && completionDir == "" && unitDir == "" {
				return usage.Errorf("give at least one of --man DIR, --completion DIR, --systemd DIR")
			}
			if !filepath.IsAbs(exe) {
				return usage.Errorf("--exe %q: give the absolute path the binary is installed at", exe)
			}
			root := cmd.Root()
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
				if err := doc.GenManTree(root, hdr, manDir); err != nil {
					return fmt.Errorf("writing man pages to %s: %w", manDir, err)
				}
			}
			if completionDir != "" {
				if err := existingDir(completionDir, "--completion"); err != nil {
					return err
				}
				if err := root.GenBashCompletionFileV2(filepath.Join(completionDir, "ovpnperf.bash"), true); err != nil {
					return err
				}
				if err := root.GenZshCompletionFile(filepath.Join(completionDir, "_ovpnperf")); err != nil {
					return err
				}
			}
			if unitDir != "" {
				if err := existingDir(unitDir, "--systemd"); err != nil {
					return err
				}
				unit := cluster.SystemdTemplateUnit(exe)
				if err := os.WriteFile(filepath.Join(unitDir, "ovpnperf-cluster@.service"), []byte(unit), 0o644); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&manDir, "man", "", "directory to write ovpnperf.1 and one page per command into")
	c.Flags().StringVar(&unitDir, "systemd", "", "directory to write the template unit ovpnperf-cluster@.service into")
	c.Flags().StringVar(&exe, "exe", "/usr/bin/ovpnperf", "the installed binary's path, for the unit's Exec lines")
	c.Flags().StringVar(&completionDir, "completion", "", "directory to write ovpnperf.bash and _ovpnperf (zsh) into")
	return c
}

func existingDir(dir, flag string) error {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return usage.Errorf("%s %q: not an existing directory", flag, dir)
	}
	return nil
}
