package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/syncbuf"
)

// An example is one command line shown to users: an `Examples:` line of a
// command's help or an `ovpnperf …` line of a `sh` block of README.md or
// of a page in docs/.
type example struct {
	where, text string
}

// exampleRule says how TestEveryExample runs one example, or why it cannot.
// Every example has a rule: a new or changed example fails the test until
// it is classified here.
type exampleRule struct {
	// skip is why the example is not run (it needs a host, file or
	// service outside this machine, or it is longer than the test's
	// budget); empty: run it.
	skip string
	// exit is the documented exit status (lint: 1 when a finding reaches
	// --fail-on).
	exit int
	// add are flags appended to shorten the run, flags the example itself
	// accepts; shorten says why.
	add     []string
	shorten string
	// in runs the example in a node of the lab ("client", "server"): the
	// example addresses the lab's server 198.51.100.2 as a user addresses
	// their own server.
	in string
	// server: the example serves until stopped; it must print ready, and
	// exit 0 on SIGTERM.
	ready string
	// with is a server started (from the test's directory) in the lab's
	// server node before the example runs, stopped after: what the
	// example talks to. ovpnperf in it is the built binary.
	with []string
	// files are made in the example's directory before it runs (see
	// exampleFiles).
	files []string
}

// Reasons shared by several examples.
const (
	outsideHost  = "talks to the user's server or registry outside this machine (vpn.example.net, 10.0.0.x, 198.51.100.7 with its tunnel 10.8.0.1): nothing answers there in a test"
	usersConfig  = "reads the user's own config under /etc/openvpn, which a test machine does not have (the same command on a lab config is run by lint's and probe's tests)"
	labRunLength = "a lab run measures both built-in paths × variants × directions × repeats: minutes even with --time 1s; `ovpnperf lab run --rate 15mbit --rtt 150ms --proto tcp --variant default` is run here shortened, and TestLabRunWAN runs the command"
	tuneLength   = "tune's shortest --budget is 30 s of search after the lab is up, on a loaded machine minutes: outside this test's 3-minute budget; TestTuneBudget and TestTuneAdviceOnIssuePaths run the command"
	cryptoShort  = "0.05 CPU s per measurement instead of 0.1, one table size of three (`ovpnperf crypto` runs them all): 8–10 s otherwise"
	recipeLength = "a recipe measures for minutes (recipe all: tens of minutes): outside this test's budget; the recipes' own lab tests run them"
)

// exampleRules classifies every example by its exact text.
var exampleRules = map[string]exampleRule{
	// advise: pure computation; path.json is a probe of the lab's server.
	"ovpnperf advise --probe path.json":                                                        {files: []string{"path.json"}},
	"ovpnperf advise --rate 20mbit --rtt 200ms --pmtu 1500":                                    {},
	"ovpnperf advise --rate 100mbit --rtt 10ms --pmtu 1400 --blackhole --format conf":          {},
	"ovpnperf advise --probe path.json --client-os windows --json":                             {files: []string{"path.json"}},
	"ovpnperf probe vpn.example.net --json > path.json":                                        {skip: outsideHost},
	"ovpnperf probe 127.0.0.1 --pings 10 --no-crypto --config /etc/openvpn/server/server.conf": {skip: usersConfig},
	"ovpnperf lab exec NAME client -- ovpnperf probe 198.51.100.2 --iperf3 5201 --json":        {with: []string{"iperf3", "-s", "-p", "5201"}, add: []string{"--pings", "10", "--iperf3-time", "1s", "--no-crypto"}, shorten: "10 pings, a 1-second iperf3 test, no cipher test (crypto's examples run it): 17 s otherwise"},

	// cluster
	"ovpnperf cluster connect vpn.example.net:8443 --ca ca.crt --cert me.crt --key me.key -- --config client.conf":                                                                                                                                 {skip: outsideHost},
	"ovpnperf cluster connect d1.example.net:8443,d2.example.net:8443 --reconnect --ca ca.crt --cert me.crt --key me.key -- --config client.conf":                                                                                                  {skip: outsideHost},
	"ovpnperf cluster dispatch --registry etcd://10.0.0.5:2379 --registry-ca etcd-ca.crt --registry-cert dispatch1.crt --registry-key dispatch1.key --listen 0.0.0.0:8443 --ca ca.crt --cert server.crt --key server.key --metrics 127.0.0.1:9188": {skip: outsideHost + "; TestRegistryAcrossHosts runs dispatch against a lab's etcd"},
	"ovpnperf cluster serve --config /etc/openvpn/server.conf --instances auto --one-port 1194 --port-base 1195":                                                                                                                                   {skip: usersConfig},
	"ovpnperf cluster serve --lab mylab --instances 2 --one-port 1194 --dispatcher 198.51.100.2:8443":                                                                                                                                              {ready: "dispatcher on 198.51.100.2:8443"},

	// exporter: serves until stopped, in the lab's server namespace (its
	// port is the namespace's own); TestExporterPrometheus scrapes it.
	"ovpnperf exporter --listen 127.0.0.1:9234":                                  {in: "server", ready: "serving metrics on"},
	"ovpnperf exporter --listen 127.0.0.1:9234 --client-labels --max-clients 50": {in: "server", ready: "serving metrics on"},

	// compare: two recorded lab runs.
	"ovpnperf compare before.json after.json":                                      {files: []string{"before.json", "after.json"}},
	"ovpnperf compare lan.json lan.json --old-variant default --new-variant jumbo": {files: []string{"lan.json"}},
	"ovpnperf compare before.json after.json --json":                               {files: []string{"before.json", "after.json"}},
	"ovpnperf compare before.json after.json --html compare.html":                  {files: []string{"before.json", "after.json"}},
	// Gate a change in CI (docs/schemas.md): the recorded run edited so
	// that the WAN's limit moved from the path to OpenVPN's CPU; the first
	// gate fails on it (TestGateExamples checks what each prints).
	gateWorse:      {files: []string{"main.json", "branch.json"}, exit: 1},
	gateKind:       {files: []string{"main.json", "branch.json"}},
	gateLimitMoved: {files: []string{"main.json", "branch.json"}},

	// analyze: a capture recorded by the fragment recipe stands for the
	// user's.
	"tcpdump -i eth0 -n -s 128 -w outer.pcap host 198.51.100.7": {skip: "tcpdump on the user's interface toward their server 198.51.100.7, a host outside this machine; analyze runs here on a recorded capture"},
	"ovpnperf analyze outer.pcap --port 1194":                   {files: []string{"outer.pcap"}},
	"ovpnperf analyze outer.pcap --json":                        {files: []string{"outer.pcap"}},

	// measure: the user's server and tunnel.
	"ovpnperf measure 198.51.100.7 --tunnel 10.8.0.1":                                                {skip: outsideHost},
	"ovpnperf measure 198.51.100.7 --tunnel 10.8.0.1 --repeat 5 --time 10s --json --out before.json": {skip: outsideHost},
	"ovpnperf measure vpn.example.org --tunnel 10.8.0.1 --capture --out after.json":                  {skip: outsideHost},

	// watch: the user's server and tunnel; TestWatchRoundAndInterrupt
	// runs the same command through a lab tunnel.
	"ovpnperf watch 198.51.100.7 --tunnel 10.8.0.1 --listen 127.0.0.1:9477":                                                    {skip: outsideHost},
	"ovpnperf watch 198.51.100.7 --tunnel 10.8.0.1 --every 1h --listen 127.0.0.1:9477 --history /var/lib/ovpnperf/watch.jsonl": {skip: outsideHost},
	"ovpnperf report watch.jsonl -o watch.html":                                                                                {files: []string{"watch.jsonl"}},

	// crypto
	// The first runs the whole default table; the others one table size
	// (the packet size is always measured), as what they show (JSON, the
	// repeat, the chosen ciphers) does not depend on the table's sizes.
	"ovpnperf crypto":                        {add: []string{"--seconds", "0.05"}, shorten: "0.05 CPU s per measurement instead of 0.1"},
	"ovpnperf crypto --json":                 {add: []string{"--seconds", "0.05", "--sizes", "1024"}, shorten: cryptoShort},
	"ovpnperf crypto --seconds 1 --repeat 3": {add: []string{"--seconds", "0.05", "--repeat", "1", "--sizes", "1024"}, shorten: "once at 0.05 CPU s per measurement instead of three times at 1 s (minutes on a loaded machine), one table size (`ovpnperf crypto` runs them all)"},
	"ovpnperf crypto --ciphers AES-256-GCM,CHACHA20-POLY1305 --packet-bytes 1500": {add: []string{"--seconds", "0.05", "--sizes", "1024"}, shorten: cryptoShort},

	// lab
	"ovpnperf lab exec branch client -- ping -c 10 198.51.100.2": {add: []string{"-i", "0.2"}, shorten: "ping's own -i 0.2: 2 s instead of 10"},
	"ovpnperf lab exec branch server -- iperf3 -s -1":            {skip: "waits for the iperf3 client the user starts next; iperf3 servers in lab nodes are run by the lab's tests and by probe's example here"},
	"ovpnperf lab run": {skip: labRunLength},
	"ovpnperf lab run --rate 50mbit --rtt 20ms --variant default --repeat 3 --json":                  {skip: labRunLength},
	"ovpnperf lab run --variant default --variant jumbo --variant 'gcm128=data-ciphers AES-128-GCM'": {skip: labRunLength},
	"ovpnperf lab run --rate 50mbit --variant dco --variant default":                                 {skip: labRunLength + "; and this kernel has no DCO driver (the dco variant falls back to userspace)"},
	"ovpnperf lab run --rate 15mbit --rtt 150ms --proto tcp --variant default":                       {add: []string{"--time", "1s", "--omit", "0s", "--repeat", "1"}, shorten: "one 1-second sample per row without a warm-up instead of three of 2 s after 1 s each"},
	"ovpnperf lab run --json --out run.json && ovpnperf report run.json -o run.html":                 {skip: labRunLength + "; report is run here on recorded runs"},
	"./scripts/install.sh && ./bin/ovpnperf lab run":                                                 {skip: "installs Debian packages on the host, then " + labRunLength},
	"ovpnperf lab up --name branch --rate 15mbit --rtt 150ms":                                        {},
	"ovpnperf lab up --name pppoe --mtu 1492 --icmp-blackhole":                                       {},
	"ovpnperf lab up --name sat --up-rate 2mbit --down-rate 20mbit --rtt 600ms --loss 0.5%":          {},
	"ovpnperf lab up --name farm --host web1 --host web2 --host web3 --host reg --etcd reg":          {},
	"ovpnperf lab calibrate --duration 1s":                                                           {add: []string{"--rates", "1000,2000", "--record", "ceiling.json"}, shorten: "two low rates of the eleven (seconds instead of up to 33 s), and the record into the example's directory: /var/lib/ovpnperf holds this host's own figures"},
	"ovpnperf lab status --json":                                                                     {},
	"ovpnperf lab up --name wire --rtt 40ms --emulator afpacket":                                     {},
	"ovpnperf lab status wire":                                                                       {},
	"ovpnperf lab down wire":                                                                         {},
	"ovpnperf lab down branch":                                                                       {},
	"ovpnperf lab status farm":                                                                       {},
	"ovpnperf lab down farm":                                                                         {},
	"ovpnperf lab exec farm web1 -- etcdctl --endpoints https://198.18.4.2:2379 --cacert $E/ca.crt --cert $E/ovpnperf-dispatch.crt --key $E/ovpnperf-dispatch.key get --prefix /ovpnperf/ --keys-only": {skip: "a walk-through line: $E is set by the shell line before it, and the keys it lists are written by the serve and dispatch lines, which need the user's OpenVPN CA; TestLabCommandHostsAndEtcd reads a lab's etcd with its certificates"},
	"ovpnperf lab exec farm web1 -- ping -c 1 198.18.2.2": {},
	"ovpnperf lab exec farm web1 -- ovpnperf cluster serve --config server.conf --instances 2 --registry etcd://198.18.4.2:2379 --registry-ca $E/ca.crt --registry-cert $E/ovpnperf-serve.crt --registry-key $E/ovpnperf-serve.key --registry-host web1 --advertise 198.18.1.2 &": {skip: "a walk-through: it needs the user's server.conf and $E set by the lines before it; TestRegistryAcrossHosts runs the same on a lab"},
	"ovpnperf lab exec farm client -- ovpnperf cluster dispatch --registry etcd://198.18.4.2:2379 --registry-ca $E/ca.crt --registry-cert $E/ovpnperf-dispatch.crt --registry-key $E/ovpnperf-dispatch.key --listen 192.0.2.2:8443 --ca ovpn-ca.crt --cert d1.crt --key d1.key &": {skip: "a walk-through: it needs the user's OpenVPN CA and dispatcher certificate and $E set by the lines before it; TestRegistryAcrossHosts runs the same on a lab"},

	// lint: the lab's own configs stand for the user's.
	"ovpnperf lint /etc/openvpn/server/server.conf":                           {skip: usersConfig},
	"ovpnperf lint client.ovpn --rtt 200ms --rate 50mbit --pmtu 1492 --json":  {files: []string{"client.ovpn"}},
	"ovpnperf lint --target 2.7 /etc/openvpn/server/server.conf":              {skip: usersConfig},
	"ovpnperf lint --format gcc --fail-on error /etc/openvpn/client/":         {skip: usersConfig},
	"ovpnperf lint --format sarif server.conf > lint.sarif":                   {files: []string{"server.conf"}},
	"journalctl -u openvpn-server@server | ovpnperf lint server.conf --log -": {skip: "reads the journal of the user's OpenVPN service; TestLintLogStdin runs --log - on a recorded log"},
	"ovpnperf lint server.conf --fix":                                         {files: []string{"server.conf"}},

	// pmtu
	"ovpnperf pmtu vpn.example.net":                                      {skip: outsideHost},
	"ovpnperf pmtu -6 vpn.example.net --cipher CHACHA20-POLY1305 --json": {skip: outsideHost},
	"ovpnperf pmtu --through-tunnel 10.8.0.1":                            {skip: "needs the user's OpenVPN tunnel up, its far end at 10.8.0.1; TestPMTUThroughTunnel runs it through a lab tunnel"},
	"ovpnperf lab exec NAME client -- ovpnperf pmtu 198.51.100.2":        {},

	// pps: clients in the lab's client against a pps server in its server.
	"ovpnperf pps client 198.51.100.2":                                  {in: "client", with: []string{"ovpnperf", "pps", "server"}, add: []string{"--duration", "1s"}, shorten: "1 s instead of the default 10 s"},
	"ovpnperf pps client 198.51.100.2 --rate 0 --flows 2 --duration 5s": {in: "client", with: []string{"ovpnperf", "pps", "server"}, add: []string{"--duration", "1s"}, shorten: "1 s instead of 5 s"},
	"ovpnperf pps client 198.51.100.2 --rate 0 --one-way":               {in: "client", with: []string{"ovpnperf", "pps", "server"}, add: []string{"--duration", "1s"}, shorten: "1 s instead of the default 10 s"},
	"ovpnperf pps client 2001:db8:5::2 --size 1400 --rate 50k --json":   {in: "client", with: []string{"ovpnperf", "pps", "server"}, add: []string{"--duration", "1s"}, shorten: "1 s instead of the default 10 s"},
	"ovpnperf pps server": {in: "server", ready: "listening"},
	"ovpnperf pps server --bind 198.51.100.2 --port 7007 --once": {in: "server", ready: "listening"},
	"ovpnperf pps server --key-file pps.key":                     {in: "server", ready: "listening", files: []string{"pps.key"}},
	"ovpnperf pps client 198.51.100.2 --key-file pps.key":        {in: "client", files: []string{"pps.key"}, with: []string{"ovpnperf", "pps", "server", "--key-file", "pps.key"}, add: []string{"--duration", "1s"}, shorten: "1 s instead of the default 10 s"},

	// recipe
	"ovpnperf recipe list":                   {},
	"ovpnperf recipe ciphers --repeat 5":     {skip: recipeLength},
	"ovpnperf recipe buffers --json":         {skip: recipeLength},
	"ovpnperf recipe all --out recipes.json": {skip: recipeLength},
	"ovpnperf recipe judge recipes.json":     {files: []string{"recipes.json"}},

	// report: recorded documents, and ones made here.
	"ovpnperf report recipes.json pmtu.json crypto.json -o all.html": {files: []string{"recipes.json", "pmtu.json", "crypto.json"}},

	// tune
	"ovpnperf tune --rate 20mbit --rtt 200ms --budget 10m":                                {skip: tuneLength},
	"ovpnperf tune --rate 100mbit --rtt 10ms --mtu 1400 --icmp-blackhole --fix proto=udp": {skip: tuneLength},
	"ovpnperf tune --rate 5mbit --rtt 300ms --loss 2% --allow-tcp --json":                 {skip: tuneLength},

	// cluster across hosts (docs/cluster-hosts.md): the user's etcd members.
	"ovpnperf cluster serve --config /etc/openvpn/server.conf --instances auto --pool 10.8.0.0/20 --registry etcd://10.0.0.11:2379,10.0.0.12:2379,10.0.0.13:2379 --registry-cluster vpn --registry-ca /etc/ovpnperf/etcd-ca.crt --registry-cert /etc/ovpnperf/hostA-serve.crt --registry-key /etc/ovpnperf/hostA-serve.key --registry-host hostA --advertise 203.0.113.10 --registry-ttl 10s": {skip: outsideHost},
	"ovpnperf cluster dispatch --registry etcd://10.0.0.11:2379,10.0.0.12:2379,10.0.0.13:2379 --registry-cluster vpn --registry-ca etcd-ca.crt --registry-cert d1-dispatch.crt --registry-key d1-dispatch.key --listen 0.0.0.0:8443 --ca ovpn-ca.crt --cert d1.crt --key d1.key --strategy least-loaded --metrics 127.0.0.1:9188":                                                             {skip: outsideHost},
	"ovpnperf cluster status --registry etcd://10.0.0.11:2379 --registry-cluster vpn --registry-ca etcd-ca.crt --registry-cert d1-dispatch.crt --registry-key d1-dispatch.key":                                                                                                                                                                                                                {skip: outsideHost},

	// schema: recorded lab runs, and a document made here.
	"ovpnperf schema check before.json after.json":      {files: []string{"before.json", "after.json"}},
	"ovpnperf version --json | ovpnperf schema check -": {},
	"ovpnperf schema list":                              {},
	"ovpnperf schema show ovpnperf/run/v2":              {},

	// version
	"ovpnperf version":        {},
	"ovpnperf version --json": {},
	"ovpnperf --version":      {},
}

// helpExamples walks the command tree and returns every Examples: line,
// continuation lines (ending in \) joined.
func helpExamples() []example {
	var out []example
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, l := range joinContinued(strings.Split(c.Example, "\n")) {
			out = append(out, example{"help of " + c.CommandPath(), l})
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCommand())
	return out
}

// docExamples returns the lines of the sh blocks of README.md and of the
// pages in docs/ that start with ovpnperf or ./bin/ovpnperf, continuation
// lines joined, trailing comments dropped. docs/commands.md is generated
// from the help, whose examples helpExamples reads.
func docExamples(t *testing.T) []example {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	for _, p := range append([]string{"../../README.md"}, pages...) {
		if filepath.Base(p) == "commands.md" {
			continue
		}
		out = append(out, shExamples(t, p)...)
	}
	return out
}

// shExamples returns the ovpnperf lines of one Markdown file's sh blocks.
func shExamples(t *testing.T, path string) []example {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(path, "../../")
	var out []example
	var block []string
	in, start := false, 0
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.HasPrefix(l, "```sh"):
			in, block, start = true, nil, i+2
		case in && strings.HasPrefix(l, "```"):
			in = false
			for _, j := range joinContinued(block) {
				if strings.HasPrefix(j, "ovpnperf ") || strings.HasPrefix(j, "./") && strings.Contains(j, "bin/ovpnperf") {
					out = append(out, example{fmt.Sprintf("%s block at line %d", name, start), j})
				}
			}
		case in:
			block = append(block, l)
		}
	}
	return out
}

var trailingComment = regexp.MustCompile(`\s+#\s.*$`)

// joinContinued trims lines, drops blank ones and trailing comments, and
// joins a line ending in a backslash with the next.
func joinContinued(lines []string) []string {
	var out []string
	cur := ""
	for _, l := range lines {
		l = strings.TrimSpace(trailingComment.ReplaceAllString(l, ""))
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, `\`) {
			cur += strings.TrimSpace(strings.TrimSuffix(l, `\`)) + " "
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	if cur != "" {
		out = append(out, strings.TrimSpace(cur))
	}
	return out
}

// TestExampleRulesComplete fails for an example without a rule (so a new
// example is classified before it ships) and for a rule whose example is
// gone. It needs no root.
func TestExampleRulesComplete(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, e := range append(helpExamples(), docExamples(t)...) {
		seen[e.text] = true
		if _, ok := exampleRules[e.text]; !ok {
			t.Errorf("%s: example %q has no rule in exampleRules: run it (say how) or say why it cannot run", e.where, e.text)
		}
	}
	for text, r := range exampleRules {
		if !seen[text] {
			t.Errorf("exampleRules has %q, which is no longer an example", text)
		}
		if r.skip == "" && len(r.add) > 0 && r.shorten == "" {
			t.Errorf("%q: flags %v added without saying why", text, r.add)
		}
	}
}

// exampleEnv is what the examples share: the built binary, a lab for the
// examples that name one, and the labs examples bring up themselves.
type exampleEnv struct {
	t      *testing.T
	shared string            // the lab examples name when they did not make one
	names  map[string]string // lab name in an example → lab name here
	made   []string          // labs made here, downed at the end
}

func (env *exampleEnv) sharedLab() string {
	if env.shared == "" {
		env.shared = "x" + lab.NewName()
		env.made = append(env.made, env.shared)
		ovpnperf(env.t, "lab", "up", "--name", env.shared).mustSucceed(env.t)
	}
	return env.shared
}

var (
	labUpName = regexp.MustCompile(`^(ovpnperf lab up --name )(\S+)`)
	labRef    = regexp.MustCompile(`(--lab |lab exec |lab down |lab status )([A-Za-z][\w-]*)`)
	ovCommand = regexp.MustCompile(`(^|&& |\| |; |-- )(\./bin/)?ovpnperf( |$)`)
)

// rewrite gives an example this machine's lab names and binary.
func (env *exampleEnv) rewrite(text string) string {
	if m := labUpName.FindStringSubmatch(text); m != nil {
		fresh := "x" + lab.NewName()
		env.names[m[2]] = fresh
		env.made = append(env.made, fresh)
		text = m[1] + fresh + text[len(m[0]):]
	} else {
		text = labRef.ReplaceAllStringFunc(text, func(s string) string {
			m := labRef.FindStringSubmatch(s)
			n, ok := env.names[m[2]]
			if !ok {
				n = env.sharedLab()
			}
			return m[1] + n
		})
	}
	return ovCommand.ReplaceAllString(text, "${1}"+binary+"${3}")
}

// exampleFiles are the files examples read, made from recorded runs or by
// ovpnperf itself (never edited by hand).
func (env *exampleEnv) makeFile(dir, name string) {
	t := env.t
	t.Helper()
	copyRecorded := func(src string) []byte {
		b, err := os.ReadFile(recorded(src))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var b []byte
	mode := os.FileMode(0o644)
	switch name {
	case "before.json":
		b = copyRecorded("labrun-wan-1.json")
	case "after.json":
		b = copyRecorded("labrun-wan-2.json")
	case "lan.json":
		b = copyRecorded("labrun-lan-jumbo.json")
	case "main.json":
		b = copyRecorded("compare-path-bound.json")
	case "branch.json":
		b = copyRecorded("compare-cpu-bound.json")
	case "recipes.json":
		b = copyRecorded("recipe-all.json")
	case "client.ovpn":
		b, _ = os.ReadFile("../../internal/lint/testdata/debian/client.conf")
	case "server.conf":
		b, _ = os.ReadFile("../../internal/lint/testdata/debian/server.conf")
	case "outer.pcap":
		b = copyRecorded("../../recipe/testdata/fragment/frag1400-1400.pcap")
	case "pps.key":
		b, mode = bytes.Repeat([]byte("k"), 32), 0o600
	case "watch.jsonl":
		b = copyRecorded("watch-history.jsonl")
	case "crypto.json":
		b = []byte(ovpnperf(t, "crypto", "--json", "--seconds", "0.05", "--ciphers", "AES-256-GCM").mustSucceed(t).stdout)
	case "pmtu.json":
		b = []byte(ovpnperf(t, "lab", "exec", env.sharedLab(), "client", "--", binary, "pmtu", lab.ServerV4().String(), "--json").mustSucceed(t).stdout)
	case "path.json":
		b = []byte(ovpnperf(t, "lab", "exec", env.sharedLab(), "client", "--", binary, "probe", lab.ServerV4().String(), "--pings", "10", "--no-crypto", "--json").mustSucceed(t).stdout)
	default:
		t.Fatalf("no way to make %s", name)
	}
	if len(b) == 0 {
		t.Fatalf("%s: empty", name)
	}
	if strings.HasSuffix(name, ".json") {
		checkSchema(t, "example file "+name, string(b), false)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, mode); err != nil {
		t.Fatal(err)
	}
}

// TestEveryExample runs every example that needs no host outside this
// machine, in a lab where it names one; exampleRules says why the others
// are not run. An example that fails is a failing test.
func TestEveryExample(t *testing.T) {
	// Each example is judged by its exit status alone, which another
	// lab's load does not change (a lab run exits 0 with invalid rows),
	// and its labs are its own: it overlaps the other tests that judge no
	// rate (see docs/testing.md).
	t.Parallel()
	labtest.Require(t)
	env := &exampleEnv{t: t, names: map[string]string{}}
	t.Cleanup(func() {
		for _, n := range env.made {
			ovpnperf(t, "lab", "down", n)
			labtest.CheckGone(t, n)
		}
	})
	files := t.TempDir()
	schemaChecked := map[string]int{}
	t.Cleanup(func() { t.Logf("documents checked against their schema: %v", schemaChecked) })
	examples := append(helpExamples(), docExamples(t)...)
	done := map[string]bool{}
	for _, e := range examples {
		r, ok := exampleRules[e.text]
		if !ok || r.skip != "" || done[e.text] {
			continue
		}
		done[e.text] = true
		start := time.Now()
		dir := filepath.Join(files, fmt.Sprintf("%02d", len(done)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range r.files {
			env.makeFile(dir, f)
		}
		cmd := env.rewrite(e.text)
		if len(r.add) > 0 {
			cmd += " " + strings.Join(r.add, " ")
		}
		if r.in != "" {
			cmd = "ip netns exec " + lab.NamespaceName(env.sharedLab(), lab.Node(r.in)) + " " + cmd
		}
		var with *bgRun
		if len(r.with) > 0 {
			argv := append([]string(nil), r.with...)
			if argv[0] == "ovpnperf" {
				argv[0] = binary
			}
			with = startBackgroundArgv(t, dir, append([]string{"ip", "netns", "exec", lab.NamespaceName(env.sharedLab(), lab.Server)}, argv...)...)
			time.Sleep(500 * time.Millisecond) // no readiness line from every server
		}
		if r.ready != "" {
			bg := startBackgroundArgv(t, dir, "sh", "-c", "exec "+cmd)
			bg.waitFor(t, r.ready, 90*time.Second)
			if code := bg.stop(t, syscall.SIGTERM); code != r.exit {
				t.Errorf("%s: %s\n  ran %s\n  exit %d after SIGTERM, want %d:\n%s", e.where, e.text, cmd, code, r.exit, bg.output())
			}
		} else {
			code, stdout, out := runExample(dir, cmd)
			if code != r.exit {
				t.Errorf("%s: %s\n  ran %s\n  exit %d, want %d:\n%s", e.where, e.text, cmd, code, r.exit, out)
			} else if strings.Contains(e.text, " --json") && !strings.ContainsAny(e.text, ">|") {
				// What it printed follows its schema (docs/schemas).
				for _, id := range checkSchema(t, e.text, stdout, false) {
					schemaChecked[id]++
				}
			}
		}
		// And every document it wrote (lab calibrate's --record).
		if written, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(written) > 0 {
			for _, f := range written {
				if slices.Contains(r.files, filepath.Base(f)) {
					continue
				}
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range checkSchema(t, e.text+": "+filepath.Base(f), string(b), false) {
					schemaChecked[id]++
				}
			}
		}
		if with != nil {
			with.stop(t, syscall.SIGTERM)
		}
		t.Logf("%5.1fs  %s", time.Since(start).Seconds(), e.text)
	}
	var skipped []string
	for text, r := range exampleRules {
		if r.skip != "" {
			skipped = append(skipped, text+": "+r.skip)
		}
	}
	sort.Strings(skipped)
	t.Logf("ran %d examples; not run (%d):\n  %s", len(done), len(skipped), strings.Join(skipped, "\n  "))
	// Every rule that does not skip names an example the help or the
	// docs have (TestExampleRulesComplete checks the other way): each
	// of them ran.
	if want := len(exampleRules) - len(skipped); len(done) != want {
		t.Errorf("ran %d examples, the rules name %d to run", len(done), want)
	}
}

// runExample runs one example line with sh in dir, with a 2-minute limit,
// and returns its exit status, its standard output, and both outputs.
func runExample(dir, line string) (int, string, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := runner.Command(ctx, "sh", "-c", line)
	c.Dir = dir
	// Both outputs go to one buffer, in the order they came, from the two
	// goroutines exec copies them with.
	var stdout bytes.Buffer
	var both syncbuf.Buffer
	c.Stdout, c.Stderr = io.MultiWriter(&stdout, &both), &both
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), both.String()
	case err != nil:
		return -1, stdout.String(), err.Error() + "\n" + both.String()
	}
	return 0, stdout.String(), both.String()
}
