package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovpnperf/ovpnperf/internal/emulate/ceilingdoc"
	"github.com/ovpnperf/ovpnperf/internal/etcdsrv"
	"github.com/ovpnperf/ovpnperf/internal/lab"
	"github.com/ovpnperf/ovpnperf/internal/lab/labpath"
	"github.com/ovpnperf/ovpnperf/internal/printable"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

func init() { register(newLabCommand) }

func newLabCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "lab",
		Short: "Build emulated client–router–server paths in network namespaces",
		Long: `A lab is three network namespaces, client — router — server, joined by two veth
pairs, with IPv4 and IPv6 on both segments. The router emulates the path: rate
(tbf), delay, jitter and loss (netem where the kernel has it, else ovpnperf's
userspace emulator behind iptables NFQUEUE), the MTU of the router–server
segment and an ICMP black hole. Up is client→server, down is server→client.

Addresses: client 192.0.2.2 / 2001:db8:c::2, server 198.51.100.2 / 2001:db8:5::2,
router 192.0.2.1 / 2001:db8:c::1 (client side) and 198.51.100.1 / 2001:db8:5::1.
Namespaces: ovpnperf-NAME-client, ovpnperf-NAME-router, ovpnperf-NAME-server.

--emulator afpacket or afxdp runs the userspace emulator as a layer-2 bump in
the wire between client and router instead, in a fourth namespace
ovpnperf-NAME-wire (no addresses): c0 — wc [emulator] wr — rc. The client's
and router's interfaces and addresses stay as above (docs/lab.md).

lab up --host HOST adds further hosts behind the router (namespace
ovpnperf-NAME-HOST, IPv4 only: host i is 198.18.i.2, the router 198.18.i.1),
for a cluster across machines. Their own links are not emulated: the
emulated path stays client — server. --etcd HOST runs etcd in one of them
(TLS, client certificates, users ovpnperf-serve and ovpnperf-dispatch) until
lab down.`,
	}
	c.AddCommand(newLabUpCommand(), newLabRunCommand(), newLabCalibrateCommand(), newLabDownCommand(), newLabStatusCommand(), newLabExecCommand(), newLabCleanCommand(), newLabOwnerCommand())
	return c
}

type labUpOptions struct {
	name     string
	emulator string
	hosts    []string
	etcd     string
	flags    pathFlags
	json     bool
}

func newLabUpCommand() *cobra.Command {
	var o labUpOptions
	c := &cobra.Command{
		Use:   "up [flags]",
		Short: "Build a lab that stays up until `ovpnperf lab down NAME`",
		Example: `  ovpnperf lab up --name branch --rate 15mbit --rtt 150ms
  ovpnperf lab up --name pppoe --mtu 1492 --icmp-blackhole
  ovpnperf lab up --name sat --up-rate 2mbit --down-rate 20mbit --rtt 600ms --loss 0.5%
  ovpnperf lab up --name farm --host web1 --host web2 --host web3 --host reg --etcd reg
  ovpnperf lab up --name wire --rtt 40ms --emulator afpacket`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLabUp(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	stringFlag(c.Flags(), &o.name, "name", "", "", "a lab name of lower-case letters, digits and dashes", "lab id (lower-case letters, digits, dashes; default: random)")
	c.Flags().BoolVar(&o.json, "json", false, "print the lab's state as JSON")
	c.Flags().StringArrayVar(&o.hosts, "host", nil, "add a host behind the router (1-12 lower-case letters and digits; repeatable): namespace ovpnperf-NAME-HOST, 198.18.i.2, unshaped link")
	stringFlag(c.Flags(), &o.etcd, "etcd", "", "", "one of the --host names", "run etcd (Debian's etcd-server) in this --host, with TLS, client certificates and users, until lab down")
	o.flags.bind(c.Flags())
	emulatorFlag(c.Flags(), &o.emulator)
	return c
}

// labSchema names the document of one lab: `lab up --json` (labUpResult)
// and each element of the list `lab status --json` prints (labStatus).
const labSchema = "ovpnperf/lab/v1"

// labUpResult is `lab up --json`: the lab's state and, with --etcd, where
// its etcd answers and with which files.
type labUpResult struct {
	Schema string `json:"schema"`
	lab.State
	Etcd *labEtcd `json:"etcd,omitempty"`
}

type labEtcd struct {
	Node         lab.Node `json:"node"`
	Endpoint     string   `json:"endpoint"`
	Registry     string   `json:"registry"` // for --registry
	CA           string   `json:"ca"`
	ServeCert    string   `json:"serve_cert"`
	ServeKey     string   `json:"serve_key"`
	DispatchCert string   `json:"dispatch_cert"`
	DispatchKey  string   `json:"dispatch_key"`
	Log          string   `json:"log"`
}

// startLabEtcd runs etcd in a host of a persistent lab and issues the
// certificates of both registry users.
func startLabEtcd(ctx context.Context, l *lab.Lab, node lab.Node) (*labEtcd, error) {
	s, err := etcdsrv.StartDetached(ctx, l, node, filepath.Join(l.Dir(), "etcd"))
	if err != nil {
		return nil, err
	}
	e := &labEtcd{Node: node, Endpoint: s.Endpoint(), CA: s.CAFile(), Log: s.LogFile(),
		Registry: "etcd://" + netip.AddrPortFrom(s.Addr(), etcdsrv.ClientPort).String()}
	if e.ServeCert, e.ServeKey, err = s.ClientCert(etcdsrv.UserServe); err != nil {
		return nil, err
	}
	if e.DispatchCert, e.DispatchKey, err = s.ClientCert(etcdsrv.UserDispatch); err != nil {
		return nil, err
	}
	return e, nil
}

func runLabUp(ctx context.Context, w, errw io.Writer, o labUpOptions) error {
	p, err := o.flags.path()
	if err != nil {
		return err
	}
	if err := lab.CheckEmulator(o.emulator); err != nil {
		return err
	}
	p.Emulator = o.emulator
	if o.name != "" {
		if err := lab.ValidateName(o.name); err != nil {
			return err
		}
	}
	hosts := make([]lab.Node, len(o.hosts))
	for i, h := range o.hosts {
		hosts[i] = lab.Node(h)
	}
	if err := lab.CheckHostNames("--host", hosts); err != nil {
		return err
	}
	if o.etcd != "" && !slices.Contains(hosts, lab.Node(o.etcd)) {
		return usage.Errorf("--etcd %q: name one of the --host names (etcd gets a host of its own)", o.etcd)
	}
	if o.etcd != "" {
		if err := etcdsrv.Available(); err != nil {
			return err
		}
	}
	for _, warn := range queueWarnings(p) {
		fmt.Fprintln(errw, warn)
	}
	start := time.Now()
	l, err := lab.Up(ctx, lab.Options{Name: o.name, Path: p, Hosts: hosts})
	if err != nil {
		return err
	}
	var etcd *labEtcd
	if o.etcd != "" {
		if etcd, err = startLabEtcd(ctx, l, lab.Node(o.etcd)); err != nil {
			_ = l.Down()
			return fmt.Errorf("lab %s: etcd: %w (lab taken down)", l.Name(), err)
		}
	}
	elapsed := time.Since(start)
	if o.json {
		return writeJSON(w, labUpResult{Schema: labSchema, State: l.State(), Etcd: etcd})
	}
	fmt.Fprintf(w, "lab %s up in %v (emulation: %s)\n", l.Name(), elapsed.Round(time.Millisecond), l.Backend())
	fmt.Fprintf(w, "  %s\n", describePath(p))
	fmt.Fprintf(w, "  client  %-22s %s, %s\n", l.Namespace(lab.Client), lab.ClientV4(), v6(p, lab.ClientV6().String()))
	fmt.Fprintf(w, "  router  %-22s %s / %s\n", l.Namespace(lab.Router), lab.RouterClientV4(), lab.RouterServerV4())
	fmt.Fprintf(w, "  server  %-22s %s, %s\n", l.Namespace(lab.Server), lab.ServerV4(), v6(p, lab.ServerV6().String()))
	for _, h := range l.Hosts() {
		fmt.Fprintf(w, "  %-7s %-22s %s (unshaped link; router %s)\n", h.Node, l.Namespace(h.Node), h.Addr, h.RouterAddr)
	}
	if etcd != nil {
		fmt.Fprintf(w, "  etcd    in %s at %s (--registry %s), log %s\n", etcd.Node, etcd.Endpoint, etcd.Registry, etcd.Log)
		fmt.Fprintf(w, "          --registry-ca %s\n", etcd.CA)
		fmt.Fprintf(w, "          serve:    --registry-cert %s --registry-key %s\n", etcd.ServeCert, etcd.ServeKey)
		fmt.Fprintf(w, "          dispatch: --registry-cert %s --registry-key %s\n", etcd.DispatchCert, etcd.DispatchKey)
	}
	fmt.Fprintf(w, "try: ovpnperf lab exec %s client -- ping -c 3 %s\n", l.Name(), lab.ServerV4())
	fmt.Fprintf(w, "end: ovpnperf lab down %s\n", l.Name())
	return nil
}

func v6(p labpath.Path, s string) string {
	if p.NoIPv6 {
		return "no IPv6"
	}
	return s
}

// describePath prints a path the way a person would say it.
func describePath(p labpath.Path) string {
	dir := func(l labpath.Link) string {
		parts := []string{lab.FormatRate(l.RateBitsPerSec)}
		if l.Delay > 0 {
			parts = append(parts, fmt.Sprintf("delay %v", l.Delay))
		}
		if l.Jitter > 0 {
			parts = append(parts, fmt.Sprintf("jitter ±%v", l.Jitter))
		}
		if l.LossPercent > 0 {
			parts = append(parts, fmt.Sprintf("loss %g%%", l.LossPercent))
		}
		return strings.Join(parts, " ")
	}
	s := fmt.Sprintf("up: %s; down: %s; mtu %d", dir(p.Up), dir(p.Down), p.EffectiveMTU())
	if p.ICMPBlackhole {
		s += "; ICMP black hole"
	}
	return s
}

func newLabDownCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "down NAME...",
		Short: "Tear down labs: processes, namespaces (with their links, qdiscs and rules), files",
		Args:  args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, names []string) error {
			if os.Geteuid() != 0 {
				return usage.Errorf("ovpnperf lab down needs root")
			}
			var errs []error
			for _, n := range names {
				if err := lab.CheckName("lab name", n); err != nil {
					return err
				}
			}
			for _, n := range names {
				l, err := lab.Open(n)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if err := l.Down(); err != nil {
					errs = append(errs, fmt.Errorf("lab %s: %w", n, err))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "lab %s down\n", n)
			}
			return errors.Join(errs...)
		},
	}
}

// labStatus is one lab in `lab status --json`.
type labStatus struct {
	Schema string `json:"schema"`
	lab.State
	OwnerAlive bool `json:"owner_alive"`
	Emulator   any  `json:"emulator,omitempty"`
	// Ceiling is what this host's calibration says about the lab's
	// emulation backend (lab calibrate); absent without emulation.
	Ceiling *ceilingdoc.Report `json:"emulation_ceiling,omitempty"`
}

// labStatuses is every lab of env, or the one named, with its owner, its
// emulator's counters and its backend's ceiling on this host.
func labStatuses(env lab.Env, names []string) ([]labStatus, error) {
	states, err := env.List()
	if err != nil {
		return nil, err
	}
	var out []labStatus
	for _, st := range states {
		if len(names) == 1 && st.Name != names[0] {
			continue
		}
		s := labStatus{Schema: labSchema, State: st, OwnerAlive: st.Corrupt == "" && st.OwnerAlive()}
		if st.Corrupt == "" {
			s.Ceiling = env.EmulationCeiling(st.Backend)
		}
		if st.Corrupt == "" && lab.UserspaceBackend(st.Backend) {
			if l, err := env.Open(st.Name); err == nil {
				if es, err := l.Stats(); err == nil {
					s.Emulator = es
				}
			}
		}
		out = append(out, s)
	}
	if len(names) == 1 && len(out) == 0 {
		return nil, usage.Errorf("no lab named %q", names[0])
	}
	return out, nil
}

// printLabStatus is the text of lab status.
func printLabStatus(w io.Writer, out []labStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOWNER\tEMULATION\tPATH")
	for _, s := range out {
		owner := "alive"
		switch {
		case s.Corrupt != "":
			fmt.Fprintf(tw, "%s\tCORRUPT STATE (run ovpnperf lab clean %s)\t\t%s\n", s.Name, s.Name, s.Corrupt)
			continue
		case !s.OwnerAlive:
			owner = "DEAD (run ovpnperf lab clean " + s.Name + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, owner, s.Backend, describePath(s.Path))
		if len(s.Hosts) > 0 {
			var hs []string
			for _, h := range s.Hosts {
				hs = append(hs, fmt.Sprintf("%s %s", h.Node, h.Addr))
			}
			fmt.Fprintf(tw, "\t\thosts:\t%s\n", strings.Join(hs, ", "))
		}
		if s.BackendWhy != "" {
			fmt.Fprintf(tw, "\t\tbackend %s: %s\n", s.Backend, s.BackendWhy)
		}
		if s.Ceiling != nil {
			fmt.Fprintf(tw, "\t\t%s\n", s.Ceiling.Summary)
		}
		if s.Emulator != nil {
			b, _ := json.Marshal(s.Emulator)
			fmt.Fprintf(tw, "\t\temulator:\t%s\n", b)
		}
	}
	return tw.Flush()
}

func newLabStatusCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status [NAME]",
		Short: "List labs, their settings, the emulator's counters and its measured ceiling on this host",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, names []string) error {
			for _, n := range names {
				if err := lab.CheckName("lab name", n); err != nil {
					return err
				}
			}
			out, err := labStatuses(lab.Env{}, names)
			if err != nil {
				return err
			}
			if asJSON {
				if out == nil {
					out = []labStatus{}
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return printLabStatus(cmd.OutOrStdout(), out)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newLabExecCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "exec NAME client|router|server|HOST -- COMMAND [ARG...]",
		Short: "Run a command in a lab node (like ip netns exec)",
		Example: `  ovpnperf lab exec branch client -- ping -c 10 198.51.100.2
  ovpnperf lab exec branch server -- iperf3 -s -1`,
		Args: args(cobra.MinimumNArgs(3)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := lab.CheckName("lab name", a[0]); err != nil {
				return err
			}
			node := lab.Node(a[1])
			if node != lab.Client && node != lab.Router && node != lab.Server && lab.CheckHostName(node) != nil {
				return usage.Errorf("node %q: want client, router, server or one of the lab's hosts", a[1])
			}
			l, err := lab.Open(a[0])
			if err != nil {
				return err
			}
			if !l.HasNode(node) {
				return usage.Errorf("node %q: lab %s has no such host (see `ovpnperf lab status %s`)", a[1], a[0], a[0])
			}
			c := l.Command(cmd.Context(), node, a[2:]...)
			// The program's own output, unfiltered (binary, a terminal).
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, printable.Unwrap(cmd.OutOrStdout()), printable.Unwrap(cmd.ErrOrStderr())
			if err := c.Run(); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return exitCode(ee.ExitCode())
				}
				return err
			}
			return nil
		},
	}
}

func newLabCleanCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "clean [NAME...]",
		Short: "Remove labs whose owner process died (SIGKILL, crash); never touches anything else",
		Long: `Remove labs whose owner process died (SIGKILL, crash), or only the named ones.
A lab whose state file is corrupt is reported and left alone unless it is
named: then its namespaces, found by their names, and the processes in them
are removed. Nothing that no lab created is touched.`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, names []string) error {
			if os.Geteuid() != 0 {
				return usage.Errorf("ovpnperf lab clean needs root")
			}
			cleaned, err := lab.Clean(names...)
			for _, n := range cleaned {
				fmt.Fprintf(cmd.OutOrStdout(), "removed orphaned lab %s\n", n)
			}
			if len(cleaned) == 0 && err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "no orphaned labs")
			}
			return err
		},
	}
}

// newLabOwnerCommand is the lab's owner process, which lab.Up starts in the
// router namespace; it is hidden because nobody types it, and a command of
// its own so that `ps` names the lab each owner holds.
func newLabOwnerCommand() *cobra.Command {
	var env lab.Env
	c := &cobra.Command{
		Use:    "owner NAME",
		Short:  "Hold a lab (started by ovpnperf itself, not by hand)",
		Hidden: true,
		Args:   args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			// The owner ends on SIGTERM by itself; main's context must not
			// turn that into an error.
			return env.RunOwner(a[0])
		},
	}
	// Where the lab's creator keeps its state, when not in the host's
	// directory (a test's labs).
	c.Flags().StringVar(&env.Base, "base", "", "the labs' directory")
	return c
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
