package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// orderPrelude runs first in every scenario of TestNetnsOrder. Each scenario
// runs in a private mount namespace (unshare --mount --propagation private)
// with a fresh tmpfs on /run, so that /run/netns is a plain directory on a
// private mount, as on a fresh host or in a container, where the host's own
// /run/netns (already a mount, with other labs under it) is out of sight
// and nothing done here reaches it. /run/ovpnperf is inside it too, so the
// labs' state is private. When the scenario ends, the mount namespace and
// every namespace mount in it go away even if a step failed; the trap still
// takes the labs down, because a lab's owner would keep its mount namespace
// (a copy, through ip netns exec) alive.
const orderPrelude = `
set -eu
mount -t tmpfs -o mode=0755 ovpnperf-test /run
cleanup() {
	for l in $LAB1 $LAB2; do "$OVPNPERF" lab down "$l" >/dev/null 2>&1 || true; done
	umount -l /run/netns/* 2>/dev/null || true
}
trap cleanup EXIT
# lab_up NAME: a persistent lab, as an administrator would make it.
lab_up() { "$OVPNPERF" lab up --name "$1" >/dev/null; }
# reach NAME: the lab's names work (ip netns exec through ovpnperf).
reach() { "$OVPNPERF" lab exec "$1" client -- ping -c 1 -W 2 192.0.2.1 >/dev/null; }
# left: prints whatever is left: names, namespace mounts, lab state.
left() {
	ls -A /run/netns 2>/dev/null | sed 's/^/name: /'
	# Only this scenario's: the host's namespace mounts are copied into this
	# mount namespace too, out of sight under the tmpfs.
	grep ' - nsfs ' /proc/self/mountinfo | grep -e "$ID" | sed 's/^/mount: /' || true
	ls -A /run/ovpnperf/labs 2>/dev/null | sed 's/^/state: /'
}
`

// The namespace handling coexists with iproute2 and with tools that mount
// /run/netns again, in every order: each scenario
// ends with `lab down` exiting 0 and nothing left (no name, no namespace
// mount, no state, no process of the lab).
func TestNetnsOrder(t *testing.T) {
	labtest.Require(t)
	testenv.RequirePrograms(t, "unshare", "mount", "umount", "ping")
	for _, sc := range []struct {
		name, script string
	}{
		// The sequence of the issue: the first `ip netns add` after the lab
		// used to bind /run/netns over itself and hide the lab's names.
		{"ovpnperf first", `
lab_up $LAB1
ip netns add $IPNS1
reach $LAB1
ip netns exec $IPNS1 true
"$OVPNPERF" lab down $LAB1 >/dev/null
ip netns del $IPNS1
`},
		{"iproute2 first", `
ip netns add $IPNS1
lab_up $LAB1
reach $LAB1
"$OVPNPERF" lab down $LAB1 >/dev/null
ip netns exec $IPNS1 true
ip netns del $IPNS1
`},
		{"interleaved", `
ip netns add $IPNS1
lab_up $LAB1
ip netns add $IPNS2
lab_up $LAB2
ip netns del $IPNS1
reach $LAB1
"$OVPNPERF" lab down $LAB1 >/dev/null
reach $LAB2
ip netns exec $IPNS2 true
ip netns del $IPNS2
"$OVPNPERF" lab down $LAB2 >/dev/null
`},
		// A tool binds /run/netns over itself recursively (what iproute2 does
		// where it is not a mount yet): the copies propagate the unmount.
		{"rbind later", `
lab_up $LAB1
mount --rbind /run/netns /run/netns
ip netns add $IPNS1
reach $LAB1
"$OVPNPERF" lab down $LAB1 >/dev/null
ip netns del $IPNS1
umount /run/netns
`},
		// A tool makes /run/netns private; ip makes it shared again.
		{"make-private later", `
lab_up $LAB1
mount --make-private /run/netns
ip netns add $IPNS1
reach $LAB1
lab_up $LAB2
"$OVPNPERF" lab down $LAB1 >/dev/null
"$OVPNPERF" lab down $LAB2 >/dev/null
ip netns del $IPNS1
`},
	} {
		t.Run(sc.name, func(t *testing.T) {
			out := runOrderScenario(t, sc.script+"\nleft\n")
			if strings.TrimSpace(out) != "" {
				t.Errorf("left behind:\n%s", out)
			}
		})
	}
}

// A tool that binds /run/netns over itself without --rbind hides every
// namespace under it, from ip as much as from ovpnperf, and the kernel gives
// no way to unmount a hidden mount without removing the mount over it,
// which ovpnperf did not make and must not touch. `lab down` then stops the
// lab's processes, keeps its state, and says what hides it; once the
// covering mount is gone, `lab clean NAME` finishes with nothing left.
func TestNetnsOrderHiddenByBind(t *testing.T) {
	labtest.Require(t)
	testenv.RequirePrograms(t, "unshare", "mount", "umount")
	out := runOrderScenario(t, `
lab_up $LAB1
mount --bind /run/netns /run/netns
if "$OVPNPERF" lab down $LAB1 2>/tmp/ovpnperf-down.$$; then echo "lab down: exit 0 with hidden names"; fi
grep -q "hidden under" /tmp/ovpnperf-down.$$ || { echo "lab down said:"; cat /tmp/ovpnperf-down.$$; }
rm -f /tmp/ovpnperf-down.$$
"$OVPNPERF" lab status | grep -q "$LAB1" || echo "state of $LAB1 gone before the lab"
umount /run/netns
"$OVPNPERF" lab clean $LAB1 >/dev/null
left
`)
	if strings.TrimSpace(out) != "" {
		t.Errorf("unexpected:\n%s", out)
	}
}

// runOrderScenario runs script after orderPrelude in a private mount
// namespace and returns its standard output; a failing step fails the test.
// It also checks that no process names the scenario's labs afterwards.
func runOrderScenario(t *testing.T, script string) string {
	t.Helper()
	id := lab.NewName()
	env := map[string]string{
		"OVPNPERF": binary, "ID": id, "LAB1": "o" + id, "LAB2": "p" + id,
		"IPNS1": "ovpnperf-" + id + "-ip1", "IPNS2": "ovpnperf-" + id + "-ip2",
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := runner.Command(ctx, "unshare", "--mount", "--propagation", "private", "sh", "-c", orderPrelude+script)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("scenario failed: %v\nstdout:\n%s\nstderr:\n%s", err, so.String(), se.String())
	}
	for _, l := range []string{env["LAB1"], env["LAB2"]} {
		if pids := processesNaming(l); len(pids) > 0 {
			t.Errorf("processes of lab %s still run: %v", l, pids)
		}
	}
	return so.String()
}

// processesNaming lists the command lines of running processes that
// mention s.
func processesNaming(s string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join(filepath.Dir(d), "stat"))
		if strings.Contains(string(stat), ") Z ") {
			continue
		}
		found = append(found, strings.ReplaceAll(string(b), "\x00", " "))
	}
	return found
}

// A corrupt state file (here a half-written one) beside
// a healthy orphaned lab. `lab status` lists both; `lab clean` removes the
// orphan and reports the corrupt one, failing; `lab clean NAME` removes the
// corrupt one (its namespaces found by name, its owner stopped). It runs in
// a private mount namespace like TestNetnsOrder, so that the unfiltered
// `lab clean` sees only this test's labs.
func TestLabCleanCorruptBesideOrphan(t *testing.T) {
	labtest.Require(t)
	testenv.RequirePrograms(t, "unshare", "mount", "pgrep")
	out := runOrderScenario(t, `
lab_up $LAB1
lab_up $LAB2
pkill -KILL -f "lab owner $LAB1\$"
while pgrep -f "lab owner $LAB1\$" >/dev/null; do sleep 0.01; done
f=/run/ovpnperf/labs/$LAB2/journal.jsonl
head -c 100 $f >$f.half && mv $f.half $f
"$OVPNPERF" lab status >/tmp/ovpnperf-st.$$
grep -q "$LAB1.*DEAD" /tmp/ovpnperf-st.$$ || { echo "status:"; cat /tmp/ovpnperf-st.$$; }
grep -q "$LAB2.*CORRUPT" /tmp/ovpnperf-st.$$ || { echo "status:"; cat /tmp/ovpnperf-st.$$; }
if "$OVPNPERF" lab clean >/tmp/ovpnperf-st.$$ 2>/tmp/ovpnperf-err.$$; then echo "lab clean: exit 0 with a corrupt lab"; fi
grep -q "removed orphaned lab $LAB1" /tmp/ovpnperf-st.$$ || { echo "clean stdout:"; cat /tmp/ovpnperf-st.$$; }
grep -q "$LAB2: corrupt state file" /tmp/ovpnperf-err.$$ || { echo "clean stderr:"; cat /tmp/ovpnperf-err.$$; }
ls /run/netns | grep -q "$LAB1" && echo "$LAB1 not removed"
ls /run/netns | grep -q "$LAB2-router" || echo "$LAB2 removed without being named"
"$OVPNPERF" lab clean $LAB2 >/dev/null
rm -f /tmp/ovpnperf-st.$$ /tmp/ovpnperf-err.$$
left
`)
	if strings.TrimSpace(out) != "" {
		t.Errorf("unexpected:\n%s", out)
	}
}
