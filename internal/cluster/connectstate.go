package cluster

// The state of a `cluster connect --tunnels` run: its journal,
// ConnectDir/ID/journal.jsonl (0600, in a 0700 directory), lists everything
// the run changed, each entry written before the change it names:
//
//	sysctl   fib_multipath_hash_policy (IPv4, IPv6) and the value before
//	link     each tun device ovpnperf<ID>t<i>        (before its openvpn starts)
//	nat-chain the nat chain ovpnperf-ID-hostnat of each family (hostnat.go)
//	multipath the nexthop group, its members and the routes over it
//	process  each openvpn (pid and start time, once it runs)
//
// A connect that ends normally or on SIGINT/SIGTERM undoes the list itself.
// One that was killed (SIGKILL, a crash) leaves it to `cluster clean`, which
// stops only the processes whose pid and start time still match, deletes
// only the devices, nexthops and routes listed (a route only where it still
// points at the run's nexthop group) and the run's own nat chains with
// their jumps, and writes back the old sysctl values.
//
// The run also records the network namespace it ran in (connect is usually
// started with `ip netns exec`): its name under /run/netns and its inode, so
// that clean, run from the host, acts in that namespace, and acts nowhere if
// the name now belongs to another namespace.
//
// Connect ids share the 4-hex-digit space of cluster ids (so that a tun
// name fits 15 characters) and never equal a cluster's: `cluster clean ID`
// names one or the other.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
	"github.com/ovpnperf/ovpnperf/internal/journal"
	"github.com/ovpnperf/ovpnperf/internal/netns"
	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// KindLink is a network device a run made or had made (connect's tun
// devices): Name is the device.
const KindLink = "link"

// ConnectState is the state of a `cluster connect --tunnels` run: its
// journal's document and the entries not yet undone.
type ConnectState struct {
	ID         string `json:"id"`
	Pid        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	// The network namespace connect ran in: its name under /run/netns
	// ("" when it had none), its inode (as in /proc/PID/ns/net) and
	// whether it was pid 1's.
	Netns      string     `json:"netns,omitempty"`
	NetnsInode uint64     `json:"netns_inode"`
	HostNetns  bool       `json:"host_netns,omitempty"`
	Resources  []Resource `json:"resources"`
}

// connectStateFile is a connect run's journal.
type connectStateFile = runJournal[ConnectState]

// newConnectRun claims a fresh id (one no cluster and no other connect run
// has), makes its directory and writes the first state: the owner and its
// namespace, nothing changed yet.
func (p Paths) newConnectRun() (*connectStateFile, error) {
	ino, name, host, err := netns.Self()
	if err != nil {
		return nil, err
	}
	ticks, err := startTicks(os.Getpid())
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.ConnectDir(), 0o755); err != nil {
		return nil, err
	}
	for tries := 0; ; tries++ {
		id := NewID()
		if _, err := os.Stat(p.Dir(id)); err == nil {
			continue
		}
		err := os.Mkdir(p.ConnectRunDir(id), 0o700)
		if errors.Is(err, os.ErrExist) && tries < 100 {
			continue
		}
		if err != nil {
			return nil, err
		}
		s, err := createJournal(p.ConnectRunDir(id), id, ConnectState{ID: id, Pid: os.Getpid(), StartTicks: ticks, Netns: name, NetnsInode: ino, HostNetns: host})
		if err != nil {
			os.RemoveAll(p.ConnectRunDir(id))
			return nil, err
		}
		return s, nil
	}
}

// recordHere records r in the namespace the run runs in; call it before
// making r.
func recordHere(s *connectStateFile, r Resource) error {
	r.Netns = s.get().Netns
	return s.record(r)
}

// undoConnectRun undoes what the run's journal lists, newest first, and
// removes the run's directory.
func (p Paths) undoConnectRun(ctx context.Context, s *connectStateFile) error {
	st := s.get()
	st.Resources = s.entries()
	err := p.undoConnect(ctx, st)
	s.j.Close()
	return err
}

// ReadConnectState reads connect run id's state.
func (p Paths) ReadConnectState(id string) (ConnectState, error) {
	var st ConnectState
	rs, err := loadState(p.ConnectRunDir(id), id, &st)
	st.Resources = rs
	if st.ID != id {
		if err == nil {
			err = &journal.DamagedError{Path: p.ConnectRunDir(id), Why: fmt.Sprintf("it names run %q", st.ID)}
		}
		return ConnectState{ID: id}, err
	}
	return st, err
}

// ListConnects returns the ids of the connect runs with a directory.
func (p Paths) ListConnects() ([]string, error) { return listIDs(p.ConnectDir()) }

// Alive reports whether the connect process that wrote st still runs.
func (st ConnectState) Alive() bool { return st.Pid > 0 && alive(st.Pid, st.StartTicks) }

// reachable says whether this process can act in the namespace the run
// made its changes in. Not ok and no error: that namespace is gone (its
// devices, routes and sysctls went with it); a name now held by another
// namespace counts as gone, and that one is not touched.
func (st ConnectState) reachable() (ok bool, err error) {
	if st.Netns != "" {
		ino, found := netns.Inode(st.Netns)
		return found && ino == st.NetnsInode, nil
	}
	self, _, _, err := netns.Self()
	if err != nil {
		return false, err
	}
	if self == st.NetnsInode {
		return true, nil
	}
	return false, fmt.Errorf("connect run %s ran in network namespace net:[%d], which has no name under /run/netns: run `ovpnperf cluster clean %s` inside it (nsenter --net=/proc/PID/ns/net of a process there)", st.ID, st.NetnsInode, st.ID)
}

// undoConnect removes what st lists, newest first: processes by pid and
// start time, then routes and nexthops, devices, sysctls; then the run's
// directory. Missing resources are not errors (CNI DEL semantics).
func (p Paths) undoConnect(ctx context.Context, st ConnectState) error {
	ok, reachErr := st.reachable()
	var errs []error
	if reachErr != nil {
		errs = append(errs, reachErr)
	}
	actions := p.undoActions(st.ID, p.ConnectRunDir(st.ID))
	if !ok {
		// Only the processes: the rest went with the namespace, or
		// waits for a clean inside it.
		actions = map[string]journal.Action{KindProcess: actions[KindProcess]}
		for _, k := range []string{KindSysctl, KindLink, KindNATChain, KindMultipath, KindChain, KindSysfs} {
			actions[k] = journal.Nothing
		}
	}
	errs = append(errs, undoErrors(st.ID, journal.Undo(ctx, st.Resources, actions))...)
	if reachErr != nil {
		// What could not be undone stays listed, for a clean run in the
		// right namespace.
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(p.ConnectRunDir(st.ID)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CleanConnect removes what connect run id left. A connect that still runs
// is left alone (as `lab clean` leaves a live lab): it undoes its own
// changes when it ends, and a unit's `cluster clean ID` must not end a
// connect that happens to hold that id.
func (p Paths) CleanConnect(ctx context.Context, id string) error {
	if !idRE.MatchString(id) {
		return usage.Errorf("connect run id %q: want 4 hex digits (see `ls %s`)", id, p.ConnectDir())
	}
	st, err := p.ReadConnectState(id)
	if errors.Is(err, os.ErrNotExist) {
		// Claimed but never written (killed at once): nothing was changed.
		return os.RemoveAll(p.ConnectRunDir(id))
	}
	if err != nil {
		return fmt.Errorf("%w; left alone", err)
	}
	if st.Alive() {
		return usage.Errorf("connect run %s is alive (pid %d): end it with Ctrl-C or `kill -TERM %d`, and it undoes its changes itself", id, st.Pid, st.Pid)
	}
	return p.undoConnect(ctx, st)
}

// removeLink deletes a device a run listed, if it is still there (its
// openvpn may have taken it along when it exited).
// Equivalent to: ip link del DEV
func removeLink(ctx context.Context, h hostnet.Host, r Resource) error {
	if !ValidDevName(r.Name) {
		return fmt.Errorf("state file: link %q: not a device name; left alone", r.Name)
	}
	if err := h.LinkDel(ctx, r.Name); err != nil && !hostnet.IsNotExist(err) {
		return err
	}
	return nil
}

// CleanDead removes what every killed `cluster serve` and `cluster
// connect` left, and returns their ids. Runs whose process still runs are
// left alone, and so is a directory without a state file younger than 10 s
// (a run that is starting).
func (p Paths) CleanDead(ctx context.Context) ([]string, error) {
	var cleaned []string
	var errs []error
	young := func(dir string) bool {
		info, err := os.Stat(dir)
		return err == nil && time.Since(info.ModTime()) < 10*time.Second
	}
	ids, err := p.List()
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		st, err := p.ReadState(id)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if young(p.Dir(id)) {
				continue
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("cluster %s: %w; left alone: remove it with `ovpnperf cluster clean %s`", id, err, id))
			continue
		default:
			if t, ok := servePidTicks(st); ok && alive(st.ServePid, t) {
				continue
			}
		}
		if err := p.Clean(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", id, err))
			continue
		}
		cleaned = append(cleaned, id)
	}
	if ids, err = p.ListConnects(); err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		st, err := p.ReadConnectState(id)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if young(p.ConnectRunDir(id)) {
				continue
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("connect run %s: %w; left alone", id, err))
			continue
		case st.Alive():
			continue
		}
		if err := p.CleanConnect(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("connect run %s: %w", id, err))
			continue
		}
		cleaned = append(cleaned, id)
	}
	return cleaned, errors.Join(errs...)
}

// CleanID removes what cluster id or connect run id left (ids of the two
// never coincide; if a directory of each exists, both are cleaned).
func (p Paths) CleanID(ctx context.Context, id string) error {
	if !idRE.MatchString(id) {
		return usage.Errorf("cluster id %q: want 4 hex digits (see `ovpnperf cluster status`)", id)
	}
	_, cerr := os.Stat(p.ConnectRunDir(id))
	_, serr := os.Stat(p.Dir(id))
	var errs []error
	if cerr == nil {
		errs = append(errs, p.CleanConnect(ctx, id))
	}
	if serr == nil || cerr != nil {
		// The cluster as before (nothing there is not an error).
		errs = append(errs, p.Clean(ctx, id))
	}
	return errors.Join(errs...)
}

func (p Paths) connectRunExists(id string) bool {
	_, err := os.Stat(p.ConnectRunDir(id))
	return err == nil
}
