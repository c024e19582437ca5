package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// outputCases are every output a command writes, as a function of the
// path it writes (target): the flag's value, or the name the command
// derives from its arguments (lint --fix writes CONFIG.lint-fixed,
// measure --capture --out X.json writes X.pcap). setup makes what the
// command needs beside target; want is what its error names.
type outputCase struct {
	name   string
	suffix string // the target's name ends so
	args   func(dir, target string) []string
	setup  func(t *testing.T, dir, target string)
}

func outputCases(t *testing.T) []outputCase {
	fixtures := badFileFixtures(t)
	good := filepath.Join(fixtures, "good.json")
	client := filepath.Join(fixtures, "client.conf")
	return []outputCase{
		{"report -o", ".html", func(_, p string) []string { return []string{"report", "-o", p, good} }, nil},
		{"compare --html", ".html", func(_, p string) []string { return []string{"compare", "--html", p, good, good} }, nil},
		{"lint --fix", ".conf.lint-fixed", func(_, p string) []string { return []string{"lint", "--fix", strings.TrimSuffix(p, ".lint-fixed")} },
			func(t *testing.T, _, p string) {
				if err := os.WriteFile(strings.TrimSuffix(p, ".lint-fixed"), []byte("client\ndev tun\nremote 192.0.2.1 1194\ncomp-lzo\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}},
		{"cluster client-config -o", ".ovpn", func(_, p string) []string {
			return []string{"cluster", "client-config", "abcd", "--host", "h", "--base", client, "-o", p}
		}, nil},
		{"tune --out", ".json", func(_, p string) []string { return []string{"tune", "--out", p} }, nil},
		{"tune --html", ".html", func(_, p string) []string { return []string{"tune", "--html", p} }, nil},
		{"lab run --out", ".json", func(_, p string) []string { return []string{"lab", "run", "--out", p} }, nil},
		{"lab run --html", ".html", func(_, p string) []string { return []string{"lab", "run", "--html", p} }, nil},
		{"recipe --out", ".json", func(_, p string) []string { return []string{"recipe", "mtu", "--out", p} }, nil},
		{"recipe --html", ".html", func(_, p string) []string { return []string{"recipe", "mtu", "--html", p} }, nil},
		{"measure --out", ".json", func(_, p string) []string { return append(measureArgs(), "--out", p) }, nil},
		{"measure --html", ".html", func(_, p string) []string { return append(measureArgs(), "--html", p) }, nil},
		{"watch --history", ".jsonl", func(_, p string) []string {
			return []string{"watch", "198.51.100.2", "--tunnel", "10.8.0.1", "--listen", "127.0.0.1:9477", "--history", p}
		}, nil},
		{"measure --capture", ".pcap", func(_, p string) []string {
			return append(measureArgs(), "--capture", "--out", strings.TrimSuffix(p, ".pcap")+".json")
		}, nil},
		{"lab calibrate --record", ".json", func(_, p string) []string { return []string{"lab", "calibrate", "--record", p} }, nil},
		{"gendoc --markdown", ".md", func(_, p string) []string { return []string{"gendoc", "--markdown", p} }, nil},
		{"gendoc --completion", "ovpnperf.bash", func(d, _ string) []string { return []string{"gendoc", "--completion", d} }, nil},
		{"gendoc --systemd", "ovpnperf-cluster@.service", func(d, _ string) []string { return []string{"gendoc", "--systemd", d} }, nil},
	}
}

// specialFile makes a file of kind at path: what no output may replace.
func specialFile(t *testing.T, kind, path string) {
	t.Helper()
	var err error
	switch kind {
	case "character device":
		// /dev/null's numbers, in the test's own directory: never the
		// system's /dev.
		err = unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
	case "block device":
		err = unix.Mknod(path, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0)))
	case "FIFO":
		err = unix.Mkfifo(path, 0o600)
	case "socket":
		var l *net.UnixListener
		if l, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"}); err == nil {
			l.SetUnlinkOnClose(false)
			l.Close()
		}
	}
	if err != nil {
		t.Fatalf("making a %s: %v", kind, err)
	}
}

// An output path that is a device, a FIFO or a socket is refused before
// any work (exit 2, one line), for every output of every command, and
// the file is left as it was: renaming a finished output over it made
// /dev/null (as root) a regular file. The same for a name longer than
// NAME_MAX and a directory no file can be made in (/sys, /proc), which
// passed the check and failed at the end. Devices need root to make.
func TestOutputSpecialFilesRefused(t *testing.T) {
	kinds := []string{"FIFO", "socket", "character device", "block device"}
	if os.Geteuid() != 0 {
		t.Log("not root: devices not tested")
		kinds = kinds[:2]
	}
	nullBefore, err := os.Lstat("/dev/null")
	if err != nil || nullBefore.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is not a character device before the test: %v %v", nullBefore, err)
	}
	// The cases are parallel (each has its own directory and makes
	// nothing): this check runs after all of them.
	t.Cleanup(func() {
		if nullAfter, err := os.Lstat("/dev/null"); err != nil || nullAfter.Mode() != nullBefore.Mode() {
			t.Errorf("/dev/null changed: %v %v", nullAfter, err)
		}
	})
	for _, c := range outputCases(t) {
		for _, kind := range kinds {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				target := filepath.Join(dir, "out"+c.suffix)
				if !strings.HasPrefix(c.suffix, ".") {
					target = filepath.Join(dir, c.suffix)
				}
				if c.setup != nil {
					c.setup(t, dir, target)
				}
				specialFile(t, kind, target)
				before, _ := os.Lstat(target)
				tree := listTree(t, dir)
				r, _ := runLimited(t, 10*time.Second, nil, c.args(dir, target)...)
				r.mustBeUsageError(t, kind)
				after, err := os.Lstat(target)
				if err != nil || after.Mode().Type() != before.Mode().Type() {
					t.Errorf("%s is no longer a %s: %v %v", target, kind, after, err)
				}
				if now := listTree(t, dir); strings.Join(now, "\n") != strings.Join(tree, "\n") {
					t.Errorf("files changed:\nbefore %v\nafter  %v", tree, now)
				}
			})
		}
	}
	// Names no file system takes, and directories that make no files.
	long := strings.Repeat("n", 300)
	for _, c := range outputCases(t) {
		if !strings.HasPrefix(c.suffix, ".") {
			continue // gendoc's directories: fixed names
		}
		for _, where := range []struct{ name, want string }{
			{"long name", "a file name of"},
			{"/sys", "/sys"},
			{"/proc", "/proc"},
		} {
			if (c.name == "measure --capture" || c.name == "lint --fix") && where.name != "long name" {
				continue // --out, or the config, in the same directory is refused first
			}
			t.Run(where.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				var target string
				switch where.name {
				case "long name":
					target = filepath.Join(dir, long+c.suffix)
					if c.name == "lint --fix" {
						// A config whose name fits, whose copy does not.
						target = filepath.Join(dir, strings.Repeat("n", 250-len(".conf"))+c.suffix)
					}
				default:
					target = filepath.Join(where.name, "ovpnperf-test-out"+c.suffix)
				}
				if c.setup != nil && where.name == "long name" {
					c.setup(t, dir, target)
				}
				tree := listTree(t, dir)
				args := c.args(dir, target)
				if c.name == "measure --capture" {
					args = append(measureArgs(), "--capture", "--out", filepath.Join(dir, strings.Repeat("n", 251)))
				}
				r, _ := runLimited(t, 10*time.Second, nil, args...)
				r.mustBeUsageError(t, where.want)
				if now := listTree(t, dir); strings.Join(now, "\n") != strings.Join(tree, "\n") {
					t.Errorf("files changed:\nbefore %v\nafter  %v", tree, now)
				}
				if _, err := os.Lstat(target); err == nil && where.name != "long name" {
					t.Errorf("%s made", target)
				}
			})
		}
	}
}

// measureArgs is a measure command line that is refused or runs.
func measureArgs() []string { return []string{"measure", "198.51.100.2", "--tunnel", "10.8.0.1"} }

// An output in a directory on a read-only mount is refused up front
// (root passes every permission check there, and the write failed at the
// end with status 1). The mount is made in a mount namespace of the
// command's own (unshare -m), so the host never sees it.
func TestOutputReadOnlyMountRefused(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePrograms(t, "unshare", "mount")
	dir := t.TempDir()
	fixtures := badFileFixtures(t)
	good := filepath.Join(fixtures, "good.json")
	for _, args := range [][]string{
		{"report", good, "-o", filepath.Join(dir, "r.html")},
		{"compare", good, good, "--html", filepath.Join(dir, "c.html")},
		{"tune", "--out", filepath.Join(dir, "t.json")},
		{"cluster", "client-config", "abcd", "--host", "h", "--base", filepath.Join(fixtures, "client.conf"), "-o", filepath.Join(dir, "c.ovpn")},
	} {
		t.Run(args[0], func(t *testing.T) {
			script := `mount -t tmpfs -o ro,size=1m tmpfs "$0" && exec "$@"`
			r, _ := runLimitedArgv(t, 10*time.Second, append([]string{"unshare", "-m", "--propagation", "private", "sh", "-c", script, dir, binary}, args...)...)
			r.mustBeUsageError(t, "read-only file system")
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files made in the host's view of %s: %v", dir, ents)
	}
}

// runLimitedArgv runs any command line (argv[0] a program) as runLimited
// runs the binary.
func runLimitedArgv(t *testing.T, limit time.Duration, argv ...string) (result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%v: still running after %v", argv, limit)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%v: %v", argv, err)
	}
	return r, nil
}
