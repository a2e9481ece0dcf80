package adminapi

import (
	"context"
	"sync"
	"time"

	"github.com/nomicore/nomicore/clock"
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
	if evicted := c.anchor(ctx, owner, ns); evicted != nil {
		evicted.Release() // outside the lock, like drop, sweep and close
	}
	return l, nil
}

// anchor keeps ns loaded between requests; it returns the lease of an anchor it evicted to
// stay within max, for the caller to release.
func (c *leaseCache) anchor(ctx context.Context, owner, ns string) (evicted *registry.Lease) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if a := c.anchors[ns]; a != nil {
		a.last = now
		return nil
	}
	anchorLease, err := c.reg.Open(ctx, owner, ns) // loaded: no wait
	if err != nil {
		return nil
	}
	if len(c.anchors) >= c.max {
		evicted = c.evictOldestLocked()
	}
	c.anchors[ns] = &anchor{lease: anchorLease, last: now}
	if c.timer == nil {
		c.armLocked()
	}
	return evicted
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

// evictOldestLocked removes the least recently used anchor and returns its lease.
func (c *leaseCache) evictOldestLocked() *registry.Lease {
	var oldest string
	var at time.Time
	for ns, a := range c.anchors {
		if oldest == "" || a.last.Before(at) {
			oldest, at = ns, a.last
		}
	}
	a := c.anchors[oldest]
	if a == nil {
		return nil
	}
	delete(c.anchors, oldest)
	return a.lease
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
