package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

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
