package cluster

import (
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
// host's runs or with each other. What finds a run by its id is a method of
// Paths only (the package comment): the commands call the zero value's,
// cluster.Paths{}.Clean(ctx, id).
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
