package cluster

// `cluster connect --tunnels N`: one client, N tunnels to N distinct
// instances, one multipath route over them (multipath.go).
//
//	dispatcher ──N requests, each excluding the instances already named──▶ u0, u1 …
//	openvpn per tunnel: --remote INSTANCE --dev ovpnperf<ID>t<i> --persist-tun
//	                    --route-noexec --management <dir>/t<i>.mgmt unix
//	every Interval: management `state` CONNECTED → the tunnel is in
//	the route; anything else (RECONNECTING after ping-restart, a process
//	that exited and is restarted) → out of it. persist-tun keeps the device
//	across OpenVPN's own restarts, so the other tunnels' nexthops and flows
//	are never touched.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
	"github.com/ovpnperf/ovpnperf/internal/runner"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// DefaultTunnelInterval is how often connect checks each tunnel's state.
const DefaultTunnelInterval = 250 * time.Millisecond

// TunnelsOptions configure RunTunnels.
type TunnelsOptions struct {
	Assigned []Reply // one per tunnel, distinct instances
	// Routes are spread over the tunnels; empty: the networks the server
	// pushes (pushed.go).
	Routes []netip.Prefix
	Extra  []string // openvpn options (--config …)
	Log    io.Writer
	// Paths is where the run keeps its state; the zero value is the
	// host's.
	Paths Paths
	// Interval is how often each tunnel's state is checked; zero means
	// DefaultTunnelInterval.
	Interval time.Duration
	// Ready, if set, is called once every tunnel was up at least once
	// (and the routes are known).
	Ready func(devs []string)
	// Distinct: the tunnels go to one address that spreads them over the
	// instances (`cluster serve --one-port`); a tunnel is in the route only
	// once it reached an instance no other tunnel in the route has.
	Distinct bool
	// NoHostNAT leaves out the source NAT of the packets this host
	// sends itself (hostnat.go): then they work only on the tunnel whose
	// address they carry, and the namespace has no connection tracking
	// of connect's.
	NoHostNAT bool
	// Program is the ovpnperf binary OpenVPN runs as its route-up hook
	// when Routes is empty (default: this process's executable).
	Program string
}

type tunnel struct {
	i     int
	r     Reply
	dev   string
	mgmt  string
	cmd   *exec.Cmd
	done  chan struct{}
	m     *openvpn.Management
	up    bool
	since time.Time
	rec   Resource // the running openvpn's state-file record
	// routes is the file the route-up hook writes (pushed routes).
	routes string
	// subnet is the tun device's IPv4 network while up: each instance
	// has its own slice of the pool, so it names the instance reached.
	subnet  netip.Prefix
	upSince time.Time
}

// connectGroup is the nexthop group id of a connect run (a range apart
// from the clusters' site groups).
func connectGroup(id string) uint32 {
	var h uint32
	fmt.Sscanf(id, "%x", &h)
	return 0x50000000 | h<<8
}

// RunTunnels runs the tunnels until ctx ends, keeping the route over those
// that are up; on return the route, the processes, the devices and the
// sysctls are as they were. Everything it changes is recorded first in the
// run's state file (connectstate.go), so that `cluster clean` undoes what a
// killed run left.
func RunTunnels(ctx context.Context, o TunnelsOptions) (err error) {
	p := o.Paths
	if o.Interval == 0 {
		o.Interval = DefaultTunnelInterval
	}
	// Connect changes the namespace it runs in.
	h := p.host("")
	if err := ProbeNexthops(ctx, h); err != nil {
		return err
	}
	path, err := runner.Path("openvpn")
	if err != nil {
		return err
	}
	if err := checkRoutesFree(ctx, h, o.Routes); err != nil {
		return err
	}
	pushed := len(o.Routes) == 0
	if pushed && o.Program == "" {
		if o.Program, err = os.Executable(); err != nil {
			return fmt.Errorf("finding own executable for the route-up hook: %w", err)
		}
	}
	if pushed && p.ConnectDir() != DefaultConnectDir {
		// The hook runs as root and trusts no directory it is told.
		return fmt.Errorf("the route-up hook writes only under %s, not %s: give --route CIDR", DefaultConnectDir, p.ConnectDir())
	}
	if pushed && strings.ContainsAny(o.Program+p.ConnectDir(), " \t\n\"'\\") {
		// OpenVPN splits --route-up's command at blanks.
		return fmt.Errorf("the route-up hook %s %s: a path with blanks or quotes cannot be passed to OpenVPN; give --route CIDR", o.Program, p.ConnectDir())
	}
	st, err := p.newConnectRun()
	if err != nil {
		return err
	}
	id := st.get().ID
	dir := p.ConnectRunDir(id)
	defer func() {
		if uerr := p.undoConnectRun(context.Background(), st); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	fmt.Fprintf(o.Log, "ovpnperf: connect run %s, state in %s\n", id, st.j.Path())
	// L4 hashing, restored on the way out.
	for _, key := range MultipathHashSysctls() {
		old, err := h.Sysctl(ctx, key)
		if err != nil {
			return err
		}
		if old != "1" {
			if err := recordHere(st, Resource{Kind: KindSysctl, Name: key, Detail: old, Set: "1"}); err != nil {
				return err
			}
			if _, err := h.SetSysctl(ctx, key, "1"); err != nil {
				return err
			}
		}
	}
	var tuns []*tunnel
	var devs []string
	for i, r := range o.Assigned {
		t := &tunnel{i: i, r: r, dev: fmt.Sprintf("ovpnperf%st%d", id, i), mgmt: filepath.Join(dir, fmt.Sprintf("t%d.mgmt", i)),
			routes: filepath.Join(dir, fmt.Sprintf("t%d.routes", i))}
		tuns = append(tuns, t)
		devs = append(devs, t.dev)
		if err := recordHere(st, Resource{Kind: KindLink, Name: t.dev}); err != nil {
			return err
		}
	}
	// Source NAT of this host's own packets (hostnat.go), a chain per
	// family, each recorded before it is made.
	var nat *hostNAT
	natErr := "" // the last error of nat.sync, said once
	if !o.NoHostNAT {
		nat = &hostNAT{h: h, chain: hostNATChain(id), cur: map[hostnet.Family]string{}}
		for _, f := range natFamilies {
			if err := ProbeNAT(ctx, h, f); err != nil {
				fmt.Fprintf(o.Log, "ovpnperf: no %s source NAT here (%v): the %s packets this host sends itself get through only on the tunnel whose address they carry; a site's packets are not affected\n",
					f, strings.ReplaceAll(err.Error(), "\n", " "), f)
				continue
			}
			if err := recordHere(st, Resource{Kind: KindNATChain, Name: nat.chain, Detail: f.String()}); err != nil {
				return err
			}
			if err := nat.create(ctx, f); err != nil {
				return err
			}
		}
	}
	// One multipath route per address family (a route takes nexthops of
	// its own family), recorded before it is made.
	var mps []*Multipath
	install := func(routes []netip.Prefix) error {
		var v4, v6 []netip.Prefix
		for _, p := range routes {
			if p.Addr().Is4() {
				v4 = append(v4, p)
			} else {
				v6 = append(v6, p)
			}
		}
		for k, ps := range [][]netip.Prefix{v4, v6} {
			if len(ps) == 0 {
				continue
			}
			mp := &Multipath{Host: h, Prefixes: ps, Group: connectGroup(id) + uint32(k)*0x80, Devs: devs, V6: k == 1}
			if err := recordHere(st, mp.Resource()); err != nil {
				return err
			}
			mps = append(mps, mp)
		}
		return nil
	}
	if !pushed {
		if err := install(o.Routes); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer func() {
		// The tunnels stop together (each may take openvpn.StopGrace),
		// then undo (above) removes the route, what is left of the
		// devices and the sysctls.
		var sg sync.WaitGroup
		for _, t := range tuns {
			sg.Add(1)
			go func() { defer sg.Done(); t.stop() }()
		}
		sg.Wait()
		wg.Wait()
	}()
	start := func(t *tunnel) error {
		p := t.r.Proto
		if p == openvpn.TCP {
			p = "tcp-client"
		}
		argv := []string{"--remote", t.r.Remote, fmt.Sprint(t.r.Port), p}
		argv = append(argv, o.Extra...)
		// After the user's options, so that these win.
		argv = append(argv, "--dev", t.dev, "--dev-type", "tun", "--persist-tun", "--route-noexec", "--management", t.mgmt, "unix")
		if o.Distinct {
			// Each tunnel from its own source port: the one-port rules
			// see a new flow.
			argv = append(argv, "--nobind")
		}
		if pushed {
			os.Remove(t.routes)
			argv = append(argv, "--script-security", "2", "--route-up", o.Program+" cluster route-hook "+t.routes)
		}
		cmd := exec.Command(path, argv...)
		// If connect dies, so do its openvpns (and their devices);
		// what a crash leaves anyway, clean removes.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		pr, pw := io.Pipe()
		cmd.Stdout, cmd.Stderr = pw, pw
		if err := cmd.Start(); err != nil {
			return err
		}
		// Recorded once it runs (a pid exists only then); until then
		// the device's record and Pdeathsig cover it.
		ticks, _ := startTicks(cmd.Process.Pid)
		t.rec = Resource{Kind: KindProcess, Name: fmt.Sprintf("openvpn t%d", t.i), Pid: cmd.Process.Pid, StartTicks: ticks, Argv: cmd.Args}
		recErr := recordHere(st, t.rec)
		t.cmd, t.done, t.m = cmd, make(chan struct{}), nil
		wg.Add(2)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				fmt.Fprintf(o.Log, "t%d: %s\n", t.i, sc.Text())
			}
		}()
		go func(done chan struct{}, rec Resource) {
			defer wg.Done()
			_ = cmd.Wait()
			pw.Close()
			_ = st.forgetProcess(rec.Name, rec.Pid)
			close(done)
		}(t.done, t.rec)
		return recErr
	}
	for _, t := range tuns {
		if err := start(t); err != nil {
			return err
		}
		fmt.Fprintf(o.Log, "ovpnperf: tunnel t%d: %s (%s %d %s), dev %s\n", t.i, t.r.Instance, t.r.Remote, t.r.Port, t.r.Proto, t.dev)
	}
	ready := false
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		var up []int
		for _, t := range tuns {
			t.check(ctx)
			if t.exited() {
				// OpenVPN gave up (or was killed): start it again.
				if time.Since(t.since) > time.Second {
					fmt.Fprintf(o.Log, "ovpnperf: tunnel t%d: openvpn exited; starting it again\n", t.i)
					if err := start(t); err != nil {
						return err
					}
					t.since = time.Now()
				}
			}
			if !t.up {
				t.subnet = netip.Prefix{}
			}
		}
		if o.Distinct {
			distinctInstances(ctx, h, o.Log, tuns, o.Interval)
		}
		for _, t := range tuns {
			if t.up && (!o.Distinct || t.subnet.IsValid()) {
				up = append(up, t.i)
			}
		}
		if pushed && mps == nil {
			if err := installPushed(ctx, h, o.Log, tuns, install); err != nil {
				return err
			}
		}
		if nat != nil {
			// Before the route takes a tunnel, its rules are in place.
			a4, a6 := tunAddrs(ctx, h, devs)
			if changed, err := nat.sync(ctx, devs, a4, a6); err != nil {
				if err.Error() != natErr {
					fmt.Fprintf(o.Log, "ovpnperf: host nat: %v\n", err)
				}
				natErr = err.Error()
			} else if changed {
				natErr = ""
				fmt.Fprintf(o.Log, "ovpnperf: host nat (%s): [%s]\n", nat.chain, nat.describe())
			}
		}
		for _, mp := range mps {
			if changed, err := mp.Set(ctx, up); err != nil {
				fmt.Fprintf(o.Log, "ovpnperf: route: %v\n", err)
			} else if changed {
				var names []string
				for _, i := range up {
					names = append(names, fmt.Sprintf("t%d", i))
				}
				fmt.Fprintf(o.Log, "ovpnperf: %s %s via [%s] at %s\n", "route", prefixesString(mp.Prefixes), strings.Join(names, " "), time.Now().UTC().Format("15:04:05.000"))
			}
		}
		if !ready && len(up) == len(tuns) && mps != nil {
			ready = true
			if o.Ready != nil {
				o.Ready(devs)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// installPushed installs the routes the first tunnel that is up was
// pushed, once its route-up hook has written them; prefixes this
// namespace routes already are left out, with a line saying so.
func installPushed(ctx context.Context, h hostnet.Host, log io.Writer, tuns []*tunnel, install func([]netip.Prefix) error) error {
	for _, t := range tuns {
		if !t.up {
			continue
		}
		rs, err := readRouteFile(t.routes)
		if err != nil {
			return err
		}
		if rs == nil {
			continue // the hook has not run yet
		}
		var free []netip.Prefix
		for _, p := range rs {
			if err := checkRoutesFree(ctx, h, []netip.Prefix{p}); err != nil {
				fmt.Fprintf(log, "ovpnperf: pushed route %s left out: %v\n", p, err)
				continue
			}
			free = append(free, p)
		}
		if len(free) == 0 {
			return usage.Errorf("tunnel t%d: the server pushed no route this host can take (pushed: [%s]); give --route CIDR", t.i, prefixesString(rs))
		}
		fmt.Fprintf(log, "ovpnperf: routes pushed to t%d: %s\n", t.i, prefixesString(rs))
		return install(free)
	}
	return nil
}

// checkRoutesFree refuses a prefix this namespace already routes: connect
// replaces no route it did not make. (A route a killed connect left is
// one; `cluster clean` removes it.)
// Equivalent to: ip route show exact PREFIX
func checkRoutesFree(ctx context.Context, h hostnet.Host, ps []netip.Prefix) error {
	for _, p := range ps {
		rs, err := hostnet.RoutesTo(ctx, h, p)
		if err != nil {
			return err
		}
		if len(rs) > 0 {
			var s []string
			for _, r := range rs {
				s = append(s, r.String())
			}
			return usage.Errorf("route %s: this host routes it already (%s); connect replaces no route it did not make: remove it, or run `ovpnperf cluster clean` if a killed connect left it", p, strings.Join(s, "; "))
		}
	}
	return nil
}

// distinctInstances learns which instance each tunnel that is up reached,
// by the pool slice its device got (each instance has its own), and ends
// the openvpn of a tunnel that shares one with another: it starts again
// from a new source port, which the one-port rules treat as a new flow (the
// next instance in turn, or another hash). Of two tunnels on one instance
// the one that came up first is ended: the instance (without duplicate-cn)
// dropped its session when the second one, with the same certificate,
// connected, though its client still says CONNECTED. Two seen up in the
// same check (interval) are both ended: which one the instance kept
// is not known here, and keeping the dropped one would leave a tunnel in
// the route that carries nothing until its keepalive gives up.
//
// Equivalent to: ip -o -4 addr show dev TUN
func distinctInstances(ctx context.Context, h hostnet.Host, log io.Writer, tuns []*tunnel, interval time.Duration) {
	for _, t := range tuns {
		if !t.up || t.subnet.IsValid() {
			continue
		}
		as, err := h.LinkAddrs(ctx, t.dev)
		if err != nil {
			continue
		}
		for _, a := range as {
			if a.Addr().Is4() {
				t.subnet = a.Masked()
			}
		}
	}
	end := func(t *tunnel) {
		t.up, t.subnet = false, netip.Prefix{}
		_ = t.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, t := range tuns {
		for _, o := range tuns {
			if o == t || !t.up || !o.up || !t.subnet.IsValid() || o.subnet != t.subnet {
				continue
			}
			switch d := o.upSince.Sub(t.upSince); {
			case d > interval:
				// t came up a check or more before o: the instance
				// dropped t's session when o's arrived. End it.
				fmt.Fprintf(log, "ovpnperf: tunnels t%d and t%d reached one instance (pool slice %s): t%d reconnects from another source port\n", t.i, o.i, t.subnet, t.i)
				end(t)
			case d >= -interval:
				// Both were seen up in one check: which session the
				// instance kept (the later one) is not known here, and
				// ending the wrong one would leave a tunnel in the route
				// whose session the instance dropped, until its
				// keepalive gives up. Both reconnect.
				fmt.Fprintf(log, "ovpnperf: tunnels t%d and t%d reached one instance (pool slice %s) within one check: both reconnect from other source ports\n", t.i, o.i, t.subnet)
				end(t)
				end(o)
			}
		}
	}
}

func (t *tunnel) exited() bool {
	select {
	case <-t.done:
		if t.m != nil {
			t.m.Close()
			t.m = nil
		}
		t.up = false
		return true
	default:
		return false
	}
}

// check asks the tunnel's OpenVPN for its state.
func (t *tunnel) check(ctx context.Context) {
	if t.exited() {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if t.m == nil {
		m, err := openvpn.DialManagement(cctx, t.mgmt)
		if err != nil {
			t.up = false
			return
		}
		t.m = m
	}
	st, err := t.m.State(cctx)
	if err != nil {
		t.m.Close()
		t.m = nil
		t.up = false
		return
	}
	was := t.up
	t.up = st.Name == "CONNECTED"
	if t.up && !was {
		t.upSince = time.Now()
	}
}

func (t *tunnel) stop() {
	if t.cmd == nil {
		return
	}
	if t.m != nil {
		t.m.Close()
	}
	runner.Stop(t.cmd.Process, t.done, openvpn.StopGrace)
}

func prefixesString(ps []netip.Prefix) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, ",")
}
