package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ovpnperf/ovpnperf/internal/inputfile"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/ovpnperf/ovpnperf/internal/usage"
)

// A cluster across hosts, with etcd as the membership store:
//
//	host A: cluster serve ──Publisher──┐  puts its keys under one lease,
//	host B: cluster serve ──Publisher──┤  keeps it alive (TTL/3)
//	                                   ▼
//	                          etcd  /ovpnperf/v1/clusters/<cluster>/…
//	                                   │  watch (one per dispatcher)
//	              ┌────────────────────┴───────────────┐
//	   cluster dispatch ──View──▶ Dispatcher    cluster dispatch ──View──▶ Dispatcher
//
// A host that dies stops sending keep-alives; etcd deletes its keys when the
// lease's TTL runs out, and every View sees the deletions on its watch.

// RegistryOptions say how to reach etcd.
type RegistryOptions struct {
	// Endpoints are HOST:PORT of etcd members.
	Endpoints []string
	// CA, Cert, Key: TLS with a client certificate (etcd's
	// --client-cert-auth; with auth enabled etcd takes the certificate's
	// common name as the user). All empty: plain TCP, which Connect
	// accepts only to loopback endpoints or with Insecure.
	CA, Cert, Key string
	// Insecure allows plain TCP to endpoints that are not loopback
	// (--registry-insecure): for a network the operator trusts.
	Insecure bool
}

// CheckTransport refuses plain TCP to an etcd beyond this host unless
// Insecure is set: without TLS anyone on the path reads and forges the
// cluster's membership and assignments (etcd's auth then has no
// certificate to take the user from, and a password would cross in clear).
func (o RegistryOptions) CheckTransport() error {
	if o.CA != "" || o.Cert != "" || o.Key != "" || o.Insecure {
		return nil
	}
	for _, ep := range o.Endpoints {
		h, _, err := net.SplitHostPort(ep)
		if err != nil {
			h = ep
		}
		if !isLoopbackHost(h) {
			return usage.Errorf("--registry etcd://%s without TLS: anyone on the network could read and forge the cluster's members and assignments; "+
				"give --registry-ca, --registry-cert and --registry-key, or --registry-insecure on a network you trust", ep)
		}
	}
	return nil
}

// isLoopbackHost reports whether h is a loopback address or "localhost";
// other names are not looked up (they could resolve anywhere).
func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Unmap().IsLoopback()
}

// ParseRegistry reads --registry etcd://HOST:PORT[,HOST:PORT…].
func ParseRegistry(s string) ([]string, error) {
	rest, ok := strings.CutPrefix(s, "etcd://")
	if !ok {
		return nil, usage.Errorf("--registry %q: use etcd://HOST:PORT[,HOST:PORT…]", s)
	}
	var eps []string
	for _, hp := range strings.Split(rest, ",") {
		h, p, err := net.SplitHostPort(hp)
		if err != nil || !ValidHost(h) || p == "" || strings.Trim(p, "0123456789") != "" {
			return nil, usage.Errorf("--registry %q: %q is not HOST:PORT", s, hp)
		}
		eps = append(eps, hp)
	}
	return eps, nil
}

// Connect opens an etcd client. It does not wait for etcd: a dispatcher
// started while etcd is down starts with an empty, stale view.
func (o RegistryOptions) Connect() (*clientv3.Client, error) {
	if err := o.CheckTransport(); err != nil {
		return nil, err
	}
	cfg := clientv3.Config{Endpoints: o.Endpoints, DialTimeout: 3 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		// gRPC's default reconnect backoff grows to minutes: after etcd
		// was away for a while a host would come back long after etcd
		// did, and its lease (restored by etcd with a fresh TTL) would
		// run out meanwhile. Retry every 2 s at most.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second})}}
	if o.CA != "" || o.Cert != "" || o.Key != "" {
		if o.CA == "" || o.Cert == "" || o.Key == "" {
			return nil, usage.Errorf("give --registry-ca, --registry-cert and --registry-key together")
		}
		cert, err := loadKeyPair(o.Cert, o.Key)
		if err != nil {
			return nil, fmt.Errorf("registry client certificate: %w", err)
		}
		pem, err := inputfile.ReadFile(context.Background(), o.CA, inputfile.Key)
		if err != nil {
			return nil, fmt.Errorf("registry CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no CA certificate", o.CA)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return clientv3.New(cfg)
}

// opTimeout bounds one etcd request, so that an unreachable etcd shows as
// an error quickly instead of a hang.
const opTimeout = 2 * time.Second

// Publisher writes one host's instances to the registry under a lease it
// keeps alive.
type Publisher struct {
	Client    *clientv3.Client
	Cluster   string // registry cluster name
	Host      string // this host's name in the registry
	Advertise string // where clients reach this host's instances
	ClusterID string // the local cluster id
	TTL       time.Duration
	// Every is how often load is republished (default 1 s).
	Every  time.Duration
	Source func() []InstanceStatus
	Log    *slog.Logger

	mu      sync.Mutex
	lease   clientv3.LeaseID
	started time.Time
	last    map[string]InstanceEntry // what was last written, by key
	lastAt  time.Time
}

// Run registers the host and keeps its entries current until ctx ends. A
// lease that is lost (etcd unreachable for longer than the TTL) is granted
// anew and every key written again.
func (p *Publisher) Run(ctx context.Context) {
	if p.Every <= 0 {
		p.Every = time.Second
	}
	p.started = time.Now()
	for ctx.Err() == nil {
		lease, ka, err := p.register(ctx)
		if err != nil {
			p.Log.Warn("registry: registering failed; retrying", "err", err)
			sleepCtx(ctx, time.Second)
			continue
		}
		p.Log.Info("registry: registered", "host", p.Host, "lease", fmt.Sprintf("%x", int64(lease)), "ttl", p.TTL)
		tick := time.NewTicker(p.Every)
	loop:
		for {
			select {
			case <-ctx.Done():
				tick.Stop()
				return
			case _, ok := <-ka:
				if !ok {
					p.Log.Warn("registry: lease lost (etcd unreachable longer than the TTL?); registering again", "host", p.Host)
					break loop
				}
			case <-tick.C:
				if err := p.publish(ctx, false); err != nil {
					p.Log.Warn("registry: publishing failed", "err", err)
				}
			}
		}
		tick.Stop()
	}
}

func (p *Publisher) register(ctx context.Context) (clientv3.LeaseID, <-chan *clientv3.LeaseKeepAliveResponse, error) {
	gctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	ttl := int64((p.TTL + time.Second - 1) / time.Second)
	g, err := p.Client.Grant(gctx, ttl)
	if err != nil {
		return 0, nil, err
	}
	ka, err := p.Client.KeepAlive(ctx, g.ID)
	if err != nil {
		return 0, nil, err
	}
	p.mu.Lock()
	p.lease = g.ID
	p.last = nil
	p.mu.Unlock()
	if err := p.publish(ctx, true); err != nil {
		return 0, nil, err
	}
	return g.ID, ka, nil
}

// Publish writes the instances' current state now (serve calls it after
// Drain, so that dispatchers see "draining" before the instances stop).
func (p *Publisher) Publish(ctx context.Context) error { return p.publish(ctx, true) }

// publish writes the entries that changed (all with force, and all every
// 10 s so that "updated" shows the host alive to a reader), in one
// transaction.
func (p *Publisher) publish(ctx context.Context, force bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lease == 0 {
		return errors.New("not registered")
	}
	now := time.Now().UTC()
	if time.Since(p.lastAt) > 10*time.Second {
		force = true
	}
	var ops []clientv3.Op
	if force {
		h := HostEntry{V: EntryVersion, Host: p.Host, Advertise: p.Advertise, ClusterID: p.ClusterID, TTLSec: int64(p.TTL / time.Second), Started: p.started.UTC(), Updated: now}
		b, _ := json.Marshal(h)
		ops = append(ops, clientv3.OpPut(hostKey(p.Cluster, p.Host), string(b), clientv3.WithLease(p.lease)))
	}
	next := map[string]InstanceEntry{}
	for _, s := range p.Source() {
		e := InstanceEntry{V: EntryVersion, Host: p.Host, Name: s.Name, Address: p.Advertise, Port: s.Port, Proto: s.Proto, State: s.State, Clients: s.Clients, BytesPerSec: s.BytesPerSec}
		k := instanceKey(p.Cluster, p.Host, s.Name)
		next[k] = e
		if old, ok := p.last[k]; ok && !force && old == e {
			continue
		}
		e.Updated = now
		b, _ := json.Marshal(e)
		ops = append(ops, clientv3.OpPut(k, string(b), clientv3.WithLease(p.lease)))
	}
	if len(ops) == 0 {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := p.Client.Txn(tctx).Then(ops...).Commit(); err != nil {
		return err
	}
	p.last = next
	if force {
		p.lastAt = time.Now()
	}
	return nil
}

// Close revokes the lease: etcd deletes the host's keys at once, and the
// dispatchers stop naming its instances without waiting for the TTL.
func (p *Publisher) Close() error {
	p.mu.Lock()
	lease := p.lease
	p.lease = 0
	p.mu.Unlock()
	if lease == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err := p.Client.Revoke(ctx, lease)
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// View is a dispatcher's cached copy of one cluster's registry, kept by a
// watch. It is a Registry. When etcd cannot be reached it keeps its last
// copy and says it is stale; once etcd answers again it lists everything
// anew (keys that expired meanwhile are gone from the list) and watches
// from the revision of that list.
type View struct {
	Client  *clientv3.Client
	Cluster string
	Log     *slog.Logger
	// Probe is how often the view checks that etcd answers (default 1 s).
	// A watch alone does not say that the server went away: the client
	// retries quietly.
	Probe time.Duration

	mu        sync.Mutex
	inst      map[string]InstanceEntry // by key
	hosts     map[string]hostRecord    // by key
	assigned  map[string]string        // record key → "<host>/<name>"
	rev       int64
	stale     bool
	contact   time.Time // last answer from etcd
	lists     int       // how many times the view was (re)listed
	rejected  int       // entries refused by DecodeEntry
	changed   chan struct{}
	recLease  clientv3.LeaseID
	recLeaseT time.Time
}

type hostRecord struct {
	HostEntry
	Lease int64
}

// NewView returns a view; Run fills it.
func NewView(cli *clientv3.Client, clusterName string, log *slog.Logger) *View {
	return &View{Client: cli, Cluster: clusterName, Log: log, stale: true, changed: make(chan struct{})}
}

// Run keeps the view until ctx ends.
func (v *View) Run(ctx context.Context) {
	if v.Probe <= 0 {
		v.Probe = time.Second
	}
	for ctx.Err() == nil {
		rev, err := v.list(ctx)
		if err != nil {
			v.markStale(err)
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		v.watch(ctx, rev)
	}
}

func (v *View) list(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	// Two gets in one transaction: one revision for both trees.
	tresp, err := v.Client.Txn(lctx).Then(
		clientv3.OpGet(ClusterPrefix(v.Cluster), clientv3.WithPrefix()),
		clientv3.OpGet(AssignedRoot+v.Cluster+"/", clientv3.WithPrefix())).Commit()
	if err != nil {
		return 0, err
	}
	resp := tresp
	inst := map[string]InstanceEntry{}
	hosts := map[string]hostRecord{}
	assigned := map[string]string{}
	var kvs []*mvccpb.KeyValue
	for _, r := range tresp.Responses {
		kvs = append(kvs, r.GetResponseRange().Kvs...)
	}
	for _, kv := range kvs {
		v.apply(inst, hosts, assigned, string(kv.Key), kv.Value, kv.Lease)
	}
	v.mu.Lock()
	wasStale := v.stale
	v.inst, v.hosts, v.assigned = inst, hosts, assigned
	v.rev = resp.Header.Revision
	v.stale = false
	v.contact = time.Now()
	v.lists++
	v.notifyLocked()
	v.mu.Unlock()
	if wasStale {
		v.Log.Info("registry: view current", "revision", resp.Header.Revision, "instances", len(inst), "hosts", len(hosts))
	}
	return resp.Header.Revision, nil
}

// apply decodes one key into the maps (a refused entry is dropped, with a
// log line, and the key's earlier value with it).
func (v *View) apply(inst map[string]InstanceEntry, hosts map[string]hostRecord, assigned map[string]string, key string, value []byte, lease int64) {
	delete(inst, key)
	delete(hosts, key)
	delete(assigned, key)
	e, err := DecodeEntry(v.Cluster, key, value)
	if err != nil {
		v.mu.Lock()
		v.rejected++
		v.mu.Unlock()
		v.Log.Warn("registry: ignoring entry", "key", truncate(key, 200), "err", err)
		return
	}
	switch {
	case e.Instance != nil:
		inst[key] = *e.Instance
	case e.Host != nil:
		hosts[key] = hostRecord{HostEntry: *e.Host, Lease: lease}
	case e.Assigned != "":
		assigned[key] = e.Assigned
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func (v *View) watch(ctx context.Context, rev int64) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := v.Client.Watch(wctx, WatchRoot, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	probe := time.NewTicker(v.Probe)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil {
				err := errors.New("watch closed")
				if ok {
					err = resp.Err()
				}
				v.markStale(err)
				return
			}
			for _, ev := range resp.Events {
				v.applyEvent(ev)
			}
			v.mu.Lock()
			if resp.Header.Revision > v.rev {
				v.rev = resp.Header.Revision
			}
			v.contact = time.Now()
			v.notifyLocked()
			v.mu.Unlock()
		case <-probe.C:
			pctx, pcancel := context.WithTimeout(ctx, v.Probe)
			_, err := v.Client.Get(pctx, hostKey(v.Cluster, "probe"), clientv3.WithCountOnly())
			pcancel()
			if err != nil {
				// Re-list once etcd answers again: the watch may
				// have missed deletions of expired leases.
				v.markStale(err)
				return
			}
			v.mu.Lock()
			v.contact = time.Now()
			v.mu.Unlock()
		}
	}
}

// applyEvent applies one watch event to the shared maps.
func (v *View) applyEvent(ev *clientv3.Event) {
	k := string(ev.Kv.Key)
	if !OfCluster(v.Cluster, k) {
		return
	}
	var e Entry
	var err error
	if ev.Type != clientv3.EventTypeDelete {
		e, err = DecodeEntry(v.Cluster, k, ev.Kv.Value)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.inst, k)
	delete(v.hosts, k)
	delete(v.assigned, k)
	if err != nil {
		v.rejected++
		v.Log.Warn("registry: ignoring entry", "key", truncate(k, 200), "err", err)
		return
	}
	switch {
	case e.Instance != nil:
		v.inst[k] = *e.Instance
	case e.Host != nil:
		v.hosts[k] = hostRecord{HostEntry: *e.Host, Lease: ev.Kv.Lease}
	case e.Assigned != "":
		v.assigned[k] = e.Assigned
	}
}

func (v *View) markStale(err error) {
	v.mu.Lock()
	was := v.stale
	v.stale = true
	v.mu.Unlock()
	if !was {
		v.Log.Warn("registry: etcd unreachable; assigning from the last view, marked stale", "err", err)
	}
}

func (v *View) notifyLocked() {
	close(v.changed)
	v.changed = make(chan struct{})
}

// Instances lists the instances of the view, with the assignments that
// dispatchers recorded for each (Endpoint.Assigned).
func (v *View) Instances() []Endpoint {
	v.mu.Lock()
	defer v.mu.Unlock()
	count := map[string]int{}
	for _, name := range v.assigned {
		count[name]++
	}
	var out []Endpoint
	for _, in := range v.inst {
		e := in.Endpoint()
		e.Assigned = count[e.Name]
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ViewStatus is what a dispatcher says about its view.
type ViewStatus struct {
	Stale bool `json:"stale"`
	// AgeSeconds is the time since etcd last answered.
	AgeSeconds float64 `json:"view_age_seconds"`
	Revision   int64   `json:"revision"`
	Lists      int     `json:"lists"`
	Rejected   int     `json:"rejected_entries"`
	Hosts      int     `json:"hosts"`
}

// Status reports the view's freshness.
func (v *View) Status() ViewStatus {
	v.mu.Lock()
	defer v.mu.Unlock()
	age := -1.0
	if !v.contact.IsZero() {
		age = time.Since(v.contact).Seconds()
	}
	return ViewStatus{Stale: v.stale, AgeSeconds: age, Revision: v.rev, Lists: v.lists, Rejected: v.rejected, Hosts: len(v.hosts)}
}

// syncTimeout bounds how long an assignment waits for the view to catch up.
const syncTimeout = 300 * time.Millisecond

// Sync waits (up to syncTimeout) until the view holds every change of the
// cluster's keys that etcd has now, so that an assignment recorded by
// another dispatcher a moment ago is counted. It does nothing while the
// view is stale: assignments go on from the last view.
func (v *View) Sync(ctx context.Context) {
	v.mu.Lock()
	stale := v.stale
	v.mu.Unlock()
	if stale {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	// The newest modification under the watched tree: a revision of a key
	// outside it would never arrive on this view's watch.
	resp, err := v.Client.Get(ctx, WatchRoot, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) == 0 {
		return
	}
	want := resp.Kvs[0].ModRevision
	for {
		v.mu.Lock()
		got, ch := v.rev, v.changed
		v.mu.Unlock()
		if got >= want {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// Record writes an assignment of instance name ("<host>/<name>") to etcd
// under a lease of PendingWindow, for every dispatcher's least-loaded count.
// A failure (etcd down) is not an error of the assignment.
func (v *View) Record(ctx context.Context, name string) {
	v.mu.Lock()
	stale := v.stale
	v.mu.Unlock()
	if stale {
		return
	}
	host, inst, ok := strings.Cut(name, "/")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	// One lease per second of assignments, not one per assignment: a
	// record lives PendingWindow to PendingWindow+1 s.
	v.mu.Lock()
	lease := v.recLease
	if lease == 0 || time.Since(v.recLeaseT) > time.Second {
		v.mu.Unlock()
		ttl := int64((PendingWindow+time.Second-1)/time.Second) + 1
		g, err := v.Client.Grant(ctx, ttl)
		if err != nil {
			return
		}
		lease = g.ID
		v.mu.Lock()
		v.recLease, v.recLeaseT = lease, time.Now()
	}
	v.mu.Unlock()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	if _, err := v.Client.Put(ctx, assignedPrefix(v.Cluster, host, inst)+hex.EncodeToString(b), "", clientv3.WithLease(lease)); err != nil {
		v.Log.Debug("registry: recording assignment failed", "err", err)
	}
}

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
