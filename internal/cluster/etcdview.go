package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

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
