package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// moduleRoot is the checkout the test binary was built from.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// version --json reports the build the binary really came from and the
// programs really installed; --version prints the same text as version.
func TestVersion(t *testing.T) {
	var v versionInfo
	r := ovpnperf(t, "version", "--json").mustSucceed(t)
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("version --json: %v\n%s", err, r.stdout)
	}
	if v.Schema != versionSchema || v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("schema/go/platform = %q %q %q", v.Schema, v.GoVersion, v.Platform)
	}
	// Go stamps the revision only in a checkout whose .git is a directory
	// (not in a `git worktree`, whose .git is a file).
	root := moduleRoot(t)
	if fi, err := os.Stat(filepath.Join(root, ".git")); err == nil && fi.IsDir() {
		head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
		if err != nil {
			t.Fatal(err)
		}
		if v.Revision != strings.TrimSpace(string(head)) {
			t.Errorf("vcs_revision %q, HEAD is %s", v.Revision, head)
		}
		status, _ := exec.Command("git", "-C", root, "status", "--porcelain").Output()
		if v.Modified != (len(status) > 0) {
			t.Errorf("vcs_modified %v, git status:\n%s", v.Modified, status)
		}
	} else if v.Revision != "" {
		t.Errorf("vcs_revision %q outside a git checkout", v.Revision)
	}
	testenv.RequirePrograms(t, "openvpn", "iperf3")
	for prog, got := range map[string]string{"openvpn": v.OpenVPN, "iperf3": v.Iperf3} {
		out, _ := exec.Command(prog, "--version").CombinedOutput()
		first, _, _ := strings.Cut(string(out), "\n")
		if got != strings.TrimSpace(first) || got == "" {
			t.Errorf("%s: reported %q, `%s --version` says %q", prog, got, prog, first)
		}
	}
	text := ovpnperf(t, "version").mustSucceed(t).stdout
	if flag := ovpnperf(t, "--version").mustSucceed(t).stdout; flag != text {
		t.Errorf("--version prints\n%s\nversion prints\n%s", flag, text)
	}
	if !strings.HasPrefix(text, "ovpnperf "+v.Version+"\n") || !strings.Contains(text, v.OpenVPN) {
		t.Errorf("version text does not match its JSON:\n%s", text)
	}
}

// The Debian package that scripts/build-deb.sh builds holds the binary, a
// man page for every command, completions and the template unit; the man
// page renders, the packaged binary runs, and systemd accepts the unit.
func TestDebianPackage(t *testing.T) {
	// It builds no lab and judges files: it overlaps the other tests that
	// judge no rate.
	t.Parallel()
	testenv.RequirePrograms(t, "dpkg-deb", "man", "systemd-analyze", "git")
	root := moduleRoot(t)
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "build-deb.sh"), out)
	cmd.Dir = root
	// xz at its lowest level (dpkg-deb reads the level from the
	// environment; the script names only the type): at the default one
	// compressing the 40 MB binary took 25 s of CPU, at 0 4 s, and the
	// test judges the package's contents, not its size.
	cmd.Env = append(os.Environ(), "DPKG_DEB_COMPRESSOR_LEVEL=0")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("build-deb.sh: %v\n%s", err, b)
	}
	deb := strings.TrimSpace(string(b))
	if !strings.HasPrefix(filepath.Base(deb), "ovpnperf_0.0~") || !strings.HasSuffix(deb, ".deb") {
		t.Fatalf("package name %q", deb)
	}
	listing, err := exec.Command("dpkg-deb", "-c", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v\n%s", err, listing)
	}
	want := []string{"./usr/bin/ovpnperf", "./lib/systemd/system/ovpnperf-cluster@.service",
		"./usr/share/bash-completion/completions/ovpnperf", "./usr/share/zsh/vendor-completions/_ovpnperf",
		"./usr/share/doc/ovpnperf/README.md.gz"}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		want = append(want, "./usr/share/man/man1/"+strings.ReplaceAll(c.CommandPath(), " ", "-")+".1.gz")
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCommand())
	for _, w := range want {
		if !strings.Contains(string(listing), " "+w+"\n") {
			t.Errorf("package lacks %s", w)
		}
	}
	x := t.TempDir()
	if b, err := exec.Command("dpkg-deb", "-x", deb, x).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, b)
	}
	page := exec.Command("man", "-l", filepath.Join(x, "usr/share/man/man1/ovpnperf-lab-run.1.gz"))
	page.Env = append(os.Environ(), "MANWIDTH=100", "MANPAGER=cat", "PAGER=cat")
	rendered, err := page.Output()
	if err != nil || !strings.Contains(string(rendered), "ovpnperf lab run") || !strings.Contains(string(rendered), "EXAMPLE") {
		t.Errorf("man -l ovpnperf-lab-run.1.gz: %v\n%s", err, rendered)
	}
	exe := filepath.Join(x, "usr/bin/ovpnperf")
	if b, err := exec.Command(exe, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(b), "ovpnperf ") {
		t.Errorf("packaged binary: %v\n%s", err, b)
	}
	// The packaged unit names /usr/bin/ovpnperf; verify the same template
	// written for the extracted binary, as instance abcd.
	units := t.TempDir()
	if b, err := exec.Command(exe, "gendoc", "--systemd", units, "--exe", exe).CombinedOutput(); err != nil {
		t.Fatalf("gendoc --systemd: %v\n%s", err, b)
	}
	packaged, _ := os.ReadFile(filepath.Join(x, "lib/systemd/system/ovpnperf-cluster@.service"))
	generated, _ := os.ReadFile(filepath.Join(units, "ovpnperf-cluster@.service"))
	if strings.ReplaceAll(string(generated), exe, "/usr/bin/ovpnperf") != string(packaged) {
		t.Errorf("packaged unit differs from the generated one:\n%s", packaged)
	}
	if !strings.Contains(string(packaged), "ExecStart=/usr/bin/ovpnperf cluster serve --id %i $OVPNPERF_SERVE_ARGS") {
		t.Errorf("unit's ExecStart:\n%s", packaged)
	}
	inst := filepath.Join(units, "ovpnperf-cluster@abcd.service")
	if err := os.Rename(filepath.Join(units, "ovpnperf-cluster@.service"), inst); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("systemd-analyze", "verify", inst).CombinedOutput(); err != nil || len(strings.TrimSpace(string(b))) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, b)
	}
}

// docs/commands.md is what gendoc makes of today's commands: a flag or
// command added, renamed or reworded without regenerating it fails here.
func TestCommandsReference(t *testing.T) {
	want, err := commandsMarkdown(newRootCommand())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(moduleRoot(t), "docs", "commands.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/commands.md is out of date (regenerate: ovpnperf gendoc --markdown docs/commands.md); first difference at line %d:\nfile:      %q\ngenerated: %q", i+1, g, w)
			}
		}
	}
	for _, c := range []string{"## `ovpnperf lab run`", "--rtt", "## `ovpnperf version`"} {
		if !strings.Contains(want, c) {
			t.Errorf("reference lacks %q", c)
		}
	}
}
