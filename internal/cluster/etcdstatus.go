package cluster

import (
	"context"
	"fmt"
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// HostStatus is one host in `cluster status --registry`.
type HostStatus struct {
	HostEntry
	// LeaseTTLSeconds is what is left of the host's lease: it is renewed
	// every third of the TTL, so a value near 0 means the host stopped
	// renewing it.
	LeaseTTLSeconds int64           `json:"lease_ttl_seconds"`
	LeaseGranted    int64           `json:"lease_granted_seconds"`
	Instances       []InstanceEntry `json:"instances"`
}

// RegistryStatus is `cluster status --registry --json`.
type RegistryStatus struct {
	Schema   string       `json:"schema"`
	Cluster  string       `json:"cluster"`
	Revision int64        `json:"revision"`
	Hosts    []HostStatus `json:"hosts"`
	// Rejected lists keys whose entries DecodeEntry refused.
	Rejected []string `json:"rejected,omitempty"`
	// Assigned counts the recent assignments recorded by dispatchers, by
	// instance ("<host>/<name>").
	Assigned map[string]int `json:"assigned,omitempty"`
}

// RegistryStatusSchema names the JSON format of RegistryStatus.
const RegistryStatusSchema = "ovpnperf/cluster-registry-status/v1"

// ReadRegistry reads cluster name's keys once, with each host's lease.
func ReadRegistry(ctx context.Context, cli *clientv3.Client, name string) (*RegistryStatus, error) {
	gctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	resp, err := cli.Txn(gctx).Then(
		clientv3.OpGet(ClusterPrefix(name), clientv3.WithPrefix()),
		clientv3.OpGet(AssignedRoot+name+"/", clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, fmt.Errorf("reading the registry at %v: %w (is etcd running and reachable, are the certificates right?)", cli.Endpoints(), err)
	}
	var kvs []*mvccpb.KeyValue
	for _, r := range resp.Responses {
		kvs = append(kvs, r.GetResponseRange().Kvs...)
	}
	st := &RegistryStatus{Schema: RegistryStatusSchema, Cluster: name, Revision: resp.Header.Revision, Hosts: []HostStatus{}}
	byHost := map[string]*HostStatus{}
	var insts []InstanceEntry
	for _, kv := range kvs {
		e, err := DecodeEntry(name, string(kv.Key), kv.Value)
		switch {
		case err != nil:
			st.Rejected = append(st.Rejected, string(kv.Key)+": "+err.Error())
		case e.Host != nil:
			h := &HostStatus{HostEntry: *e.Host, LeaseTTLSeconds: -1}
			if kv.Lease != 0 {
				if tl, err := cli.TimeToLive(gctx, clientv3.LeaseID(kv.Lease)); err == nil {
					h.LeaseTTLSeconds, h.LeaseGranted = tl.TTL, tl.GrantedTTL
				}
			}
			byHost[h.Host] = h
		case e.Instance != nil:
			insts = append(insts, *e.Instance)
		case e.Assigned != "":
			if st.Assigned == nil {
				st.Assigned = map[string]int{}
			}
			st.Assigned[e.Assigned]++
		}
	}
	for _, in := range insts {
		h := byHost[in.Host]
		if h == nil {
			// Instances without their host key: shown under a host
			// with no lease information.
			h = &HostStatus{HostEntry: HostEntry{Host: in.Host}, LeaseTTLSeconds: -1}
			byHost[in.Host] = h
		}
		h.Instances = append(h.Instances, in)
	}
	for _, h := range byHost {
		sort.Slice(h.Instances, func(i, j int) bool { return h.Instances[i].Name < h.Instances[j].Name })
		st.Hosts = append(st.Hosts, *h)
	}
	sort.Slice(st.Hosts, func(i, j int) bool { return st.Hosts[i].Host < st.Hosts[j].Host })
	return st, nil
}
