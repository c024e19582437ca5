package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/testenv"
)

// badInputs are mistakes for every command: each must exit 2 with one line
// that names what the user typed (the flag in the form given, or the
// positional argument), before anything is created. The examples of the
// first bad-input review come first.
var badInputs = []struct {
	args []string
	want string
}{
	// Values that wrap or round into something else.
	{[]string{"pps", "client", "127.0.0.1", "--rate", "0.4"}, `--rate "0.4"`},
	{[]string{"pps", "client", "127.0.0.1", "--rate", "1e-3"}, `--rate "1e-3"`},
	{[]string{"lab", "up", "--queue-bytes", "4294967396"}, `--queue-bytes "4294967396"`},
	{[]string{"lab", "up", "--queue-bytes", "1", "--rate", "32gbit", "--rtt", "1s"}, "--queue-bytes 1"},
	{[]string{"lab", "up", "--queue-bytes", "99999999999999"}, `--queue-bytes "99999999999999"`},
	{[]string{"lab", "up", "--rtt", "99999999999999999999s"}, `--rtt "99999999999999999999s"`},
	// The flag typed, not its symmetric sibling.
	{[]string{"lab", "up", "--up-loss", "200"}, `--up-loss "200"`},
	{[]string{"lab", "up", "--up-jitter", "5x"}, `--up-jitter "5x"`},
	{[]string{"lab", "up", "--down-jitter", "5ms", "--down-delay", "1ms"}, "--down-jitter"},
	{[]string{"lab", "up", "--queue-bytes", "-1"}, `--queue-bytes "-1"`},
	{[]string{"lab", "up", "--down-rate", "fast"}, `--down-rate "fast"`},
	{[]string{"lab", "up", "--up-delay", "6s", "--down-delay", "6s"}, "--down-delay"},
	{[]string{"lab", "down", "Bad_Name"}, `lab name "Bad_Name"`},
	{[]string{"schema", "show", "run"}, `schema "run"`},
	{[]string{"schema", "check", "no-such.json"}, "no-such.json"},
	{[]string{"lab", "up", "--host", "Web-1"}, `--host "Web-1"`},
	{[]string{"lab", "up", "--host", "server"}, `--host "server"`},
	{[]string{"lab", "up", "--host", "web1", "--host", "web1"}, `--host "web1" given twice`},
	{[]string{"lab", "up", "--host", "web1", "--etcd", "reg"}, `--etcd "reg"`},
	{[]string{"lab", "status", "Bad_Name"}, `lab name "Bad_Name"`},
	{[]string{"lab", "exec", "Bad_Name", "client", "--", "true"}, `lab name "Bad_Name"`},
	// No raw Go parse errors.
	{[]string{"lab", "up", "--mtu", "abc"}, `--mtu "abc"`},
	{[]string{"lab", "run", "--time", "5"}, `--time "5"`},
	{[]string{"crypto", "--sizes", ""}, "--sizes"},
	{[]string{"crypto", "--sizes", "256,x"}, `--sizes "x"`},
	{[]string{"crypto", "--seconds", "abc"}, `--seconds "abc"`},
	{[]string{"crypto", "--packet-bytes", "1.5"}, `--packet-bytes "1.5"`},
	{[]string{"pmtu", "--max", "big", "192.0.2.1"}, `--max "big"`},
	{[]string{"pmtu", "--timeout", "2", "192.0.2.1"}, `--timeout "2"`},
	{[]string{"pps", "client", "127.0.0.1", "-P", "x"}, `-P/--flows "x"`},
	{[]string{"pps", "client", "127.0.0.1", "--count", "-5"}, `--count "-5"`},
	{[]string{"pps", "client", "127.0.0.1", "--duration", "10"}, `--duration "10"`},
	{[]string{"pps", "server", "--port", "70000"}, `--port "70000"`},
	{[]string{"pps", "server", "--max-duration", "forever"}, `--max-duration "forever"`},
	{[]string{"recipe", "mtu", "--repeat", "lots"}, `--repeat "lots"`},
	{[]string{"recipe", "mtu", "--time", "3"}, `--time "3"`},
	{[]string{"recipe", "mtu", "--up-rate", "1x"}, `--up-rate "1x"`},
	{[]string{"lab", "run", "--parallel", "0"}, `--parallel "0"`},
	{[]string{"lab", "run", "--omit", "1.5s"}, `--omit "1.5s"`},
	// Empty values are mistakes, not defaults.
	{[]string{"lab", "up", "--name", ""}, "--name"},
	{[]string{"lab", "up", "--rate", ""}, "--rate"},
	{[]string{"crypto", "--ciphers", ""}, "--ciphers"},
	{[]string{"lab", "run", "--name", ""}, "--name"},
	{[]string{"lab", "run", "--payload", ""}, "--payload"},
	{[]string{"recipe", "mtu", "--pki", ""}, "--pki"},
	{[]string{"pps", "server", "--bind", ""}, "--bind"},
	{[]string{"pps", "client", "127.0.0.1", "--key-file", ""}, "--key-file"},
	// Paths checked before a run.
	{[]string{"lab", "run", "--out", "/nonexistent/dir/x.json"}, "--out"},
	{[]string{"recipe", "mtu", "--out", "/nonexistent/dir/x.json"}, "--out"},
	{[]string{"recipe", "mtu", "--pki", "/nonexistent"}, "--pki"},
	{[]string{"lab", "run", "--pki", "/nonexistent"}, "--pki"},
	{[]string{"pps", "server", "--key-file", "/nonexistent"}, "--key-file"},
	// Variants, with OpenVPN's own limits.
	{[]string{"lab", "run", "--variant", "x=data-ciphers " + strings.Repeat("AES-256-GCM:", 11) + "none"}, "data-ciphers"},
	{[]string{"lab", "run", "--variant", "x=tun-mtu 1500\nup /bin/sh"}, "tun-mtu"},
	// Probe targets.
	{[]string{"pmtu", "0.0.0.0"}, "0.0.0.0"},
	{[]string{"pmtu", "255.255.255.255"}, "255.255.255.255"},
	{[]string{"pmtu", "224.0.0.1"}, "224.0.0.1"},
	{[]string{"pmtu", "999.1.1.1"}, "999.1.1.1"},
	{[]string{"pmtu", "1.2.3"}, "1.2.3"},
	{[]string{"pmtu", "no-such-host.invalid"}, "no-such-host.invalid"},
	{[]string{"pmtu", "--through-tunnel", "0.0.0.0"}, "--through-tunnel"},
	{[]string{"pps", "client", "0.0.0.0"}, "0.0.0.0"},
	{[]string{"pps", "client", "ff02::1"}, "ff02::1"},
	{[]string{"pps", "client", "999.1.1.1"}, "999.1.1.1"},
	{[]string{"pps", "client", "no-such-host.invalid"}, "no-such-host.invalid"},
	// Unknown commands.
	{[]string{"frobnicate"}, "frobnicate"},
	{[]string{"lab", "frob"}, "frob"},
	{[]string{"pps", "frob"}, "frob"},
	{[]string{"recipe", "frob"}, "frob"},
	{[]string{"lab", "up", "--frobnicate"}, "--frobnicate"},
}

// Every bad input exits 2 with one line naming what
// was typed, and creates nothing: no lab state or namespace owned by this
// binary, no process of it left running.
func TestBadInputCreatesNothing(t *testing.T) {
	testenv.Exclusive(t)
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := append(badInputs, struct {
		args []string
		want string
	}{[]string{"pps", "server", "--key-file", key}, "chmod 600"})
	before := ownLabs(t)
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ovpnperf(t, c.args...).mustBeUsageError(t, c.want)
			if p := ownProcesses(); len(p) > 0 {
				t.Errorf("processes of ovpnperf left running: %v", p)
			}
		})
	}
	if after := ownLabs(t); len(after) > len(before) {
		t.Errorf("labs made by the bad inputs: before %v, after %v", before, after)
	}
}

// ownLabs lists the labs on this host whose owner is the binary under test
// or dead (a lab a failed run would leave), and the namespaces of any lab
// without a state file.
func ownLabs(t *testing.T) []string {
	t.Helper()
	var out []string
	states, err := lab.List()
	if err != nil {
		t.Logf("lab list: %v", err)
	}
	named := map[string]bool{}
	for _, st := range states {
		named[st.Name] = true
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(st.Owner.Pid) + "/exe")
		if exe == binary || !st.OwnerAlive() {
			out = append(out, st.Name)
		}
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "ovpnperf-")
		if !ok {
			continue
		}
		if i := strings.LastIndexByte(n, '-'); i > 0 && !named[n[:i]] {
			out = append(out, "netns "+e.Name())
		}
	}
	return out
}

// ownProcesses lists running processes of the binary under test (a lab
// owner is the binary re-executed).
func ownProcesses() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		exe, _ := os.Readlink("/proc/" + e.Name() + "/exe")
		if exe == binary {
			cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}
