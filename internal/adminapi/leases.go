package adminapi

import (
	"context"
	"sync"
	"time"

	"github.com/nomicore/nomicore/internal/clock"
	"github.com/nomicore/nomicore/registry"
)

// Defaults of the lease cache.
const (
	DefaultLeaseIdle       = 30 * time.Second
	DefaultMaxCachedLeases = 1024
)

// leaseCache keeps the namespaces the admin API used recently loaded, so a stream of local
// writes to a namespace no peer holds does not load and unload its document for every
// request: after a request, one extra lease per namespace (an anchor) stays for LeaseIdle;
// at most MaxCachedLeases anchors are kept (the least recently used goes first). Anchors are
// dropped before a reset (the registry refuses one while the namespace is loaded), when a
// document broke (it reloads only once every lease is gone), and at Close.
type leaseCache struct {
	reg   *registry.Registry
	clock clock.Clock
	idle  time.Duration
	max   int

	mu      sync.Mutex
	anchors map[string]*anchor // by namespace id
	timer   clock.Timer
	closed  bool
}

type anchor struct {
	lease *registry.Lease
	last  time.Time
}

func newLeaseCache(reg *registry.Registry, clk clock.Clock, idle time.Duration, max int) *leaseCache {
	return &leaseCache{reg: reg, clock: clk, idle: idle, max: max, anchors: map[string]*anchor{}}
}

// open returns a lease for one request; release it when done.
func (c *leaseCache) open(ctx context.Context, owner, ns string) (*registry.Lease, error) {
	l, err := c.reg.Open(ctx, owner, ns)
	if err != nil || c.idle <= 0 {
		return l, err
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return l, nil
	}
	if a := c.anchors[ns]; a != nil {
		a.last = now
		return l, nil
	}
	anchorLease, err := c.reg.Open(ctx, owner, ns) // loaded: no wait
	if err != nil {
		return l, nil
	}
	if len(c.anchors) >= c.max {
		c.evictOldestLocked()
	}
	c.anchors[ns] = &anchor{lease: anchorLease, last: now}
	if c.timer == nil {
		c.armLocked()
	}
	return l, nil
}

// done is called with a request's lease before it is released: a broken document loses its
// anchor, so that it can reload.
func (c *leaseCache) done(ns string, l *registry.Lease) {
	if l.Failed() {
		c.drop(ns)
	}
}

// drop releases ns's anchor.
func (c *leaseCache) drop(ns string) {
	c.mu.Lock()
	a := c.anchors[ns]
	delete(c.anchors, ns)
	c.mu.Unlock()
	if a != nil {
		a.lease.Release()
	}
}

func (c *leaseCache) evictOldestLocked() {
	var oldest string
	var at time.Time
	for ns, a := range c.anchors {
		if oldest == "" || a.last.Before(at) {
			oldest, at = ns, a.last
		}
	}
	if a := c.anchors[oldest]; a != nil {
		delete(c.anchors, oldest)
		a.lease.Release()
	}
}

func (c *leaseCache) armLocked() {
	c.timer = c.clock.AfterFunc(c.idle/2, c.sweep)
}

// sweep releases the anchors idle for LeaseIdle; it re-arms while anchors remain.
func (c *leaseCache) sweep() {
	now := c.clock.Now()
	var idle []*registry.Lease
	c.mu.Lock()
	for ns, a := range c.anchors {
		if now.Sub(a.last) >= c.idle {
			idle = append(idle, a.lease)
			delete(c.anchors, ns)
		}
	}
	c.timer = nil
	if len(c.anchors) > 0 && !c.closed {
		c.armLocked()
	}
	c.mu.Unlock()
	for _, l := range idle {
		l.Release()
	}
}

// close releases every anchor (before the registry closes).
func (c *leaseCache) close() {
	c.mu.Lock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	all := c.anchors
	c.anchors = map[string]*anchor{}
	c.mu.Unlock()
	for _, a := range all {
		a.lease.Release()
	}
}

// cached reports how many anchors are held (tests).
func (c *leaseCache) cached() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.anchors)
}
