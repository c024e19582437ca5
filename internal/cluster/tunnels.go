package cluster

// `cluster connect --tunnels N`: one client, N tunnels to N distinct
// instances, one multipath route over them (multipath.go).
//
//	dispatcher ──N requests, each excluding the instances already named──▶ u0, u1 …
//	openvpn per tunnel: --remote INSTANCE --dev ovpnperf<ID>t<i> --persist-tun
//	                    --route-noexec --management <dir>/t<i>.mgmt unix
//	every TunnelInterval: management `state` CONNECTED → the tunnel is in
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

	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// TunnelInterval is how often connect checks each tunnel's state.
var TunnelInterval = 250 * time.Millisecond

// ConnectDir holds one directory per `cluster connect --tunnels` run.
var ConnectDir = "/run/ovpnperf/connect"

// TunnelsOptions configure RunTunnels.
type TunnelsOptions struct {
	Assigned []Reply // one per tunnel, distinct instances
	Routes   []netip.Prefix
	Extra    []string // openvpn options (--config …)
	Log      io.Writer
	// Ready, if set, is called once every tunnel was up at least once.
	Ready func(devs []string)
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
// sysctls are as they were.
func RunTunnels(ctx context.Context, o TunnelsOptions) (err error) {
	if err := ProbeNexthops(ctx, ""); err != nil {
		return err
	}
	path, err := exec.LookPath("openvpn")
	if err != nil {
		return fmt.Errorf("openvpn not found (Debian package openvpn): %w", err)
	}
	id := NewID()
	dir := filepath.Join(ConnectDir, id)
	if err := os.MkdirAll(ConnectDir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// L4 hashing, restored on the way out.
	for _, key := range MultipathHashSysctls {
		old, err := readSysctl(ctx, "", key)
		if err != nil {
			return err
		}
		if old != "1" {
			if err := writeSysctl(ctx, "", key, "1"); err != nil {
				return err
			}
			defer func(key, old string) {
				if rerr := writeSysctl(context.Background(), "", key, old); rerr != nil {
					err = errors.Join(err, rerr)
				}
			}(key, old)
		}
	}
	var tuns []*tunnel
	var devs []string
	for i, r := range o.Assigned {
		t := &tunnel{i: i, r: r, dev: fmt.Sprintf("ovpnperf%st%d", id, i), mgmt: filepath.Join(dir, fmt.Sprintf("t%d.mgmt", i))}
		tuns = append(tuns, t)
		devs = append(devs, t.dev)
	}
	mp := &Multipath{Prefixes: o.Routes, Group: connectGroup(id), Devs: devs}
	var wg sync.WaitGroup
	defer func() {
		mp.Remove(context.Background())
		for _, t := range tuns {
			t.stop()
		}
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
		cmd := exec.Command(path, argv...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		pr, pw := io.Pipe()
		cmd.Stdout, cmd.Stderr = pw, pw
		if err := cmd.Start(); err != nil {
			return err
		}
		t.cmd, t.done, t.m = cmd, make(chan struct{}), nil
		wg.Add(2)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				fmt.Fprintf(o.Log, "t%d: %s\n", t.i, sc.Text())
			}
		}()
		go func(done chan struct{}) {
			defer wg.Done()
			_ = cmd.Wait()
			pw.Close()
			close(done)
		}(t.done)
		return nil
	}
	for _, t := range tuns {
		if err := start(t); err != nil {
			return err
		}
		fmt.Fprintf(o.Log, "ovpnperf: tunnel t%d: %s (%s %d %s), dev %s\n", t.i, t.r.Instance, t.r.Remote, t.r.Port, t.r.Proto, t.dev)
	}
	ready := false
	tick := time.NewTicker(TunnelInterval)
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
			if t.up {
				up = append(up, t.i)
			}
		}
		if changed, err := mp.Set(ctx, up); err != nil {
			fmt.Fprintf(o.Log, "ovpnperf: route: %v\n", err)
		} else if changed {
			var names []string
			for _, i := range up {
				names = append(names, fmt.Sprintf("t%d", i))
			}
			fmt.Fprintf(o.Log, "ovpnperf: %s %s via [%s] at %s\n", "route", prefixesString(o.Routes), strings.Join(names, " "), time.Now().UTC().Format("15:04:05.000"))
		}
		if !ready && len(up) == len(tuns) {
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
	t.up = st.Name == "CONNECTED"
}

func (t *tunnel) stop() {
	if t.cmd == nil {
		return
	}
	if t.m != nil {
		t.m.Close()
	}
	select {
	case <-t.done:
		return
	default:
	}
	_ = t.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-t.done:
	case <-time.After(openvpn.StopGrace):
		_ = t.cmd.Process.Kill()
		<-t.done
	}
}

func prefixesString(ps []netip.Prefix) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, ",")
}
