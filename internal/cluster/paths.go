package cluster

import (
	"context"
	"path/filepath"

	"github.com/ovpnperf/ovpnperf/internal/hostnet"
)

const (
	// DefaultStateDir holds one directory per cluster (mode 0700): state
	// file, PKI, instance configs, status files, and run/ with the sockets.
	DefaultStateDir = "/run/ovpnperf/cluster"
	// DefaultConnectDir holds one directory per `cluster connect` run: its
	// state file and the routes its tunnels were pushed.
	DefaultConnectDir = "/run/ovpnperf/connect"
)

// Paths is where clusters and connect runs keep their state. The zero
// value is the host's: DefaultStateDir and DefaultConnectDir. Tests give
// their runs directories of their own, and so share nothing with the
// host's runs or with each other.
type Paths struct {
	// State holds the clusters' directories; empty means DefaultStateDir.
	State string
	// Connect holds the connect runs' directories; empty means
	// DefaultConnectDir.
	Connect string
	// Hosts gives the network namespace a run changes ("" the caller's
	// own); nil means the kernel's (hostnet.Open). Unit tests give fakes.
	Hosts func(netns string) hostnet.Host
}

// StateDir is the directory of the clusters.
func (p Paths) StateDir() string {
	if p.State == "" {
		return DefaultStateDir
	}
	return p.State
}

// ConnectDir is the directory of the connect runs.
func (p Paths) ConnectDir() string {
	if p.Connect == "" {
		return DefaultConnectDir
	}
	return p.Connect
}

// Dir returns cluster id's directory.
func (p Paths) Dir(id string) string { return filepath.Join(p.StateDir(), id) }

// ConnectRunDir is connect run id's directory.
func (p Paths) ConnectRunDir(id string) string { return filepath.Join(p.ConnectDir(), id) }

// The host's clusters and connect runs, for the commands: each of these is
// the method of the zero Paths.

// Dir returns cluster id's directory.
func Dir(id string) string { return Paths{}.Dir(id) }

// ControlPath is where serve listens for status and stop.
func ControlPath(id string) string { return Paths{}.ControlPath(id) }

// ConnectRunDir is connect run id's directory.
func ConnectRunDir(id string) string { return Paths{}.ConnectRunDir(id) }

// ReadState reads cluster id's state.
func ReadState(id string) (State, error) { return Paths{}.ReadState(id) }

// ReadConnectState reads connect run id's state.
func ReadConnectState(id string) (ConnectState, error) { return Paths{}.ReadConnectState(id) }

// List returns the ids of the clusters with a state directory.
func List() ([]string, error) { return Paths{}.List() }

// ListConnects returns the ids of the connect runs with a directory.
func ListConnects() ([]string, error) { return Paths{}.ListConnects() }

// Clean removes everything cluster id's journal lists (Paths.Clean).
func Clean(ctx context.Context, id string) error { return Paths{}.Clean(ctx, id) }

// CleanConnect removes what connect run id left (Paths.CleanConnect).
func CleanConnect(ctx context.Context, id string) error { return Paths{}.CleanConnect(ctx, id) }

// CleanDead removes what every killed serve and connect left
// (Paths.CleanDead).
func CleanDead(ctx context.Context) ([]string, error) { return Paths{}.CleanDead(ctx) }

// CleanID removes what cluster id or connect run id left (Paths.CleanID).
func CleanID(ctx context.Context, id string) error { return Paths{}.CleanID(ctx, id) }

// RouteHookFile checks that path is a tunnel's routes file of a connect
// run of the host's. The hook runs as root and writes nothing else; it
// trusts no directory it is told.
func RouteHookFile(path string) error { return Paths{}.RouteHookFile(path) }

// QueryStatus asks a running serve of the host's for its status.
func QueryStatus(ctx context.Context, id string) (*ClusterStatus, error) {
	return Paths{}.QueryStatus(ctx, id)
}

// RequestStop asks a running serve of the host's to drain and stop.
func RequestStop(ctx context.Context, id string) error { return Paths{}.RequestStop(ctx, id) }
