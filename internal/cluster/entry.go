package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
)

// Registry key layout, version 1. Everything of one cluster lives under
// one prefix, so that a watch on it sees every change, and the version is
// part of the path, so that a later layout can live beside this one while
// hosts are upgraded one by one:
//
//	/ovpnperf/v1/clusters/<cluster>/hosts/<host>             HostEntry,     host's lease
//	/ovpnperf/v1/clusters/<cluster>/instances/<host>/<name>  InstanceEntry, host's lease
//	/ovpnperf/v1/assigned/<cluster>/<host>/<name>/<id>       "",            a dispatcher's short lease
//
// A host writes its keys under one lease that it keeps alive; when the host
// dies or is cut off from etcd for longer than the lease's TTL, etcd deletes
// them and every watching dispatcher sees the deletion. Assignment records
// live in a tree of their own so that etcd's roles (permissions are key
// ranges) can let dispatchers write them and nothing a host writes.
const (
	RegistryRoot = "/ovpnperf/v1/clusters/"
	AssignedRoot = "/ovpnperf/v1/assigned/"
	// WatchRoot covers both: one watch sees every change.
	WatchRoot = "/ovpnperf/v1/"
)

// EntryVersion is the "v" of the entries this code writes and reads.
const EntryVersion = 1

// MaxEntry bounds an entry's value: larger ones are refused unread.
const MaxEntry = 4096

// nameRE: cluster, host and instance names are path segments of a key.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ValidName reports whether s can be a cluster, host or instance name in a
// registry key.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// ClusterPrefix is the prefix of cluster name's keys.
func ClusterPrefix(name string) string { return RegistryRoot + name + "/" }

func hostKey(cl, host string) string { return ClusterPrefix(cl) + "hosts/" + host }
func instanceKey(cl, host, name string) string {
	return ClusterPrefix(cl) + "instances/" + host + "/" + name
}
func assignedPrefix(cl, host, name string) string {
	return AssignedRoot + cl + "/" + host + "/" + name + "/"
}

// HostEntry is a host's own key: who it is and since when.
type HostEntry struct {
	V         int       `json:"v"`
	Host      string    `json:"host"`
	Advertise string    `json:"advertise"`
	ClusterID string    `json:"cluster_id"` // the local `cluster serve` id on that host
	TTLSec    int64     `json:"ttl_seconds"`
	Started   time.Time `json:"started"`
	Updated   time.Time `json:"updated"`
}

// InstanceEntry is one instance as its host publishes it.
type InstanceEntry struct {
	V           int       `json:"v"`
	Host        string    `json:"host"`
	Name        string    `json:"name"`
	Address     string    `json:"address"`
	Port        uint16    `json:"port"`
	Proto       string    `json:"proto"`
	State       string    `json:"state"`
	Clients     int       `json:"clients"`
	BytesPerSec float64   `json:"bytes_per_sec"`
	Updated     time.Time `json:"updated"`
}

// Entry is a decoded registry key: exactly one of Host and Instance is
// set, or Assigned names the instance an assignment record counts for.
type Entry struct {
	Key      string
	Host     *HostEntry
	Instance *InstanceEntry
	// Assigned is "<host>/<name>" for an assignment record.
	Assigned string
}

var states = map[string]bool{StateStarting: true, StateUp: true, StateRestarting: true, StateDraining: true, StateDown: true}

// OfCluster reports whether key belongs to cluster cl (a view that watches
// WatchRoot ignores other clusters' keys without a word).
func OfCluster(cl, key string) bool {
	return strings.HasPrefix(key, ClusterPrefix(cl)) || strings.HasPrefix(key, AssignedRoot+cl+"/")
}

// DecodeEntry reads the value at key of cluster cl. Anyone who can write
// to the registry (or a bug, or a newer version) can put anything there,
// and what is read becomes a dispatcher's answer and then openvpn's
// arguments, so it is strict: unknown fields, a wrong version, a name that
// does not match its key, an address that is no host name or address, a
// port 0, an unknown proto or state, negative load are refused. It never
// panics (FuzzDecodeEntry).
func DecodeEntry(cl, key string, value []byte) (Entry, error) {
	e := Entry{Key: key}
	pre := ClusterPrefix(cl)
	var parts []string
	switch {
	case strings.HasPrefix(key, pre):
		parts = strings.Split(key[len(pre):], "/")
	case strings.HasPrefix(key, AssignedRoot+cl+"/"):
		parts = append([]string{"assigned"}, strings.Split(key[len(AssignedRoot+cl+"/"):], "/")...)
	default:
		return e, fmt.Errorf("key %q is not under %s", key, pre)
	}
	for _, p := range parts[1:] {
		if !ValidName(p) {
			return e, fmt.Errorf("key %q: segment %q is not a name", key, p)
		}
	}
	switch {
	case parts[0] == "hosts" && len(parts) == 2:
		var h HostEntry
		if err := strictJSON(value, &h); err != nil {
			return e, err
		}
		if h.V != EntryVersion {
			return e, fmt.Errorf("entry version %d, want %d", h.V, EntryVersion)
		}
		if h.Host != parts[1] {
			return e, fmt.Errorf("host %q under key of host %q", h.Host, parts[1])
		}
		if !ValidHost(h.Advertise) {
			return e, fmt.Errorf("advertise %q is not a host name or address", h.Advertise)
		}
		if h.TTLSec < 0 {
			return e, errors.New("negative ttl")
		}
		e.Host = &h
	case parts[0] == "instances" && len(parts) == 3:
		var in InstanceEntry
		if err := strictJSON(value, &in); err != nil {
			return e, err
		}
		if in.V != EntryVersion {
			return e, fmt.Errorf("entry version %d, want %d", in.V, EntryVersion)
		}
		if in.Host != parts[1] || in.Name != parts[2] {
			return e, fmt.Errorf("instance %s/%s under key %s/%s", in.Host, in.Name, parts[1], parts[2])
		}
		if !ValidHost(in.Address) {
			return e, fmt.Errorf("address %q is not a host name or address", in.Address)
		}
		if in.Port == 0 {
			return e, errors.New("port 0")
		}
		if in.Proto != "udp" && in.Proto != "tcp" {
			return e, fmt.Errorf("proto %q is not udp or tcp", in.Proto)
		}
		if !states[in.State] {
			return e, fmt.Errorf("state %q unknown", in.State)
		}
		if in.Clients < 0 || in.BytesPerSec < 0 || math.IsNaN(in.BytesPerSec) || math.IsInf(in.BytesPerSec, 0) {
			return e, errors.New("negative or invalid load")
		}
		e.Instance = &in
	case parts[0] == "assigned" && len(parts) == 4:
		// The value carries nothing: the key's existence under a short
		// lease is the record.
		if len(value) > 64 {
			return e, errors.New("assignment record too long")
		}
		e.Assigned = parts[1] + "/" + parts[2]
	default:
		return e, fmt.Errorf("key %q is not a v1 host, instance or assignment key", key)
	}
	return e, nil
}

func strictJSON(value []byte, v any) error {
	if len(value) > MaxEntry {
		return fmt.Errorf("entry of %d bytes, more than %d", len(value), MaxEntry)
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed entry: %v", err)
	}
	if dec.More() {
		return errors.New("malformed entry: trailing data")
	}
	return nil
}

// Endpoint is the instance as a dispatcher sees it; its name is
// "<host>/<name>", unique across the cluster.
func (in *InstanceEntry) Endpoint() Endpoint {
	return Endpoint{Name: in.Host + "/" + in.Name, Host: in.Address, Port: in.Port, Proto: in.Proto, State: in.State, Clients: in.Clients, BytesPerSec: in.BytesPerSec}
}
