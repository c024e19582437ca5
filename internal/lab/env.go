package lab

import (
	"path/filepath"

	"github.com/ovpnperf/ovpnperf/internal/emulate"
)

// DefaultBaseDir holds one directory per lab: its state file, emulator
// statistics, OpenVPN configs and keys. /run is a tmpfs: labs do not
// survive a reboot, and neither do their namespaces.
const DefaultBaseDir = "/run/ovpnperf/labs"

// Env is where labs keep what they write on a host. The zero value is the
// host's: DefaultBaseDir and emulate.DefaultCeilingPath. Tests give labs a
// directory of their own, and so never share state with the host's labs or
// with each other.
type Env struct {
	// Base holds one directory per lab; empty means DefaultBaseDir.
	Base string
	// Ceiling is the emulator-ceiling record that lab status and the
	// documents read; empty means emulate.DefaultCeilingPath.
	Ceiling string
	// Owner is the ovpnperf binary that runs the labs' owners (`ovpnperf
	// lab owner NAME`); empty means this executable. A program that is
	// not ovpnperf (a test binary) names one here.
	Owner string
}

// BaseDir is the directory of the labs.
func (e Env) BaseDir() string {
	if e.Base == "" {
		return DefaultBaseDir
	}
	return e.Base
}

// CeilingPath is the emulator-ceiling record.
func (e Env) CeilingPath() string {
	if e.Ceiling == "" {
		return emulate.DefaultCeilingPath
	}
	return e.Ceiling
}

// Dir is the directory of lab name.
func (e Env) Dir(name string) string { return filepath.Join(e.BaseDir(), name) }

// The host's labs, for the commands.

// Open returns a handle on an existing lab of the host's (Env.Open).
func Open(name string) (*Lab, error) { return Env{}.Open(name) }

// Clean tears down the host's labs whose owner is gone (Env.Clean).
func Clean(names ...string) ([]string, error) { return Env{}.Clean(names...) }

// List returns the state of every lab on this host (Env.List).
func List() ([]State, error) { return Env{}.List() }
