package presence

import (
	"sync"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/yws"
)

// DefaultRelayInterval is the shortest time between two relays of one namespace's awareness
// to other nodes, as the editor endpoint relays to its editors: changes that come faster go
// out together, each client's latest only.
const DefaultRelayInterval = 50 * time.Millisecond

// coalescer gathers the awareness changes of one namespace's local editors and hands them
// to send at most every interval, each client's latest state only (an older one waiting is
// dropped as superseded: latest per client wins). send runs on a timer goroutine, never in
// the caller of add, so add never blocks.
type coalescer struct {
	clk      clock.Clock
	interval time.Duration
	send     func([]yws.AwarenessEntry)
	m        *Metrics

	mu      sync.Mutex // guards the fields below
	pending map[uint64]yws.AwarenessEntry
	last    time.Time
	timer   clock.Timer // set while a send waits
	closed  bool
}

func newCoalescer(clk clock.Clock, interval time.Duration, m *Metrics, send func([]yws.AwarenessEntry)) *coalescer {
	return &coalescer{clk: clk, interval: interval, send: send, m: m, pending: map[uint64]yws.AwarenessEntry{}}
}

// add takes changes; their State is copied (the caller's bytes may be reused).
func (c *coalescer) add(entries []yws.AwarenessEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for _, e := range entries {
		if _, ok := c.pending[e.ClientID]; ok {
			c.m.drop(DropSuperseded, 1)
		}
		e.State = append([]byte(nil), e.State...)
		c.pending[e.ClientID] = e
	}
	if c.timer == nil && len(c.pending) > 0 {
		wait := max(0, c.interval-c.clk.Now().Sub(c.last))
		c.timer = c.clk.AfterFunc(wait, c.flush)
	}
}

// flush sends what waits (the timer).
func (c *coalescer) flush() {
	c.mu.Lock()
	c.timer = nil
	if c.closed || len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	entries := make([]yws.AwarenessEntry, 0, len(c.pending))
	for _, e := range c.pending {
		entries = append(entries, e)
	}
	clear(c.pending)
	c.last = c.clk.Now()
	c.mu.Unlock()
	c.send(entries)
}

// close stops the coalescer and returns what still waited (to send before leaving).
func (c *coalescer) close() []yws.AwarenessEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	out := make([]yws.AwarenessEntry, 0, len(c.pending))
	for _, e := range c.pending {
		out = append(out, e)
	}
	clear(c.pending)
	return out
}
