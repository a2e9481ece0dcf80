// Package clock is the time seam of Nomicore: protocol logic never calls time.Now,
// time.After or time.AfterFunc directly; it is given a Clock. Production code passes Real();
// tests pass a *Fake and move time by hand.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Reader tells the time. It is all that code which only measures durations needs (the
// chunk assembler's deadlines, the observer's latencies, the registry's stage timings).
type Reader interface {
	// Now returns the current time. Only differences between readings are meaningful.
	Now() time.Time
}

// Clock tells the time and schedules callbacks.
type Clock interface {
	Reader
	// AfterFunc calls f once, after d, in a goroutine of the clock's choosing (a fresh one for
	// Real; the goroutine calling Advance for Fake). f must not block for long; state owners
	// typically post a message to their own goroutine from it.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did so.
	Stop() bool
}

// Real returns the wall clock (monotonic readings) backed by the time package.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a manual clock for tests. Time moves only when Advance or Set is called; due
// callbacks then run synchronously, in deadline order (ties in scheduling order), in the
// calling goroutine. A Fake is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*fakeTimer
	// changed is closed and replaced whenever a timer is scheduled, so tests can wait for a
	// goroutine under test to arm its timer before advancing.
	changed chan struct{}
}

type fakeTimer struct {
	clock   *Fake
	when    time.Time
	seq     uint64
	f       func()
	stopped bool
	fired   bool
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f at Now()+d. A d ≤ 0 runs f at the next Advance (of any length).
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{clock: c, when: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if t.stopped || t.fired {
		return false
	}
	t.stopped = true
	return true
}

// Advance moves the clock forward by d, running every callback that falls due, in order. A
// callback scheduled by another callback runs too if it falls due within the same Advance.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.Set(target)
}

// Set moves the clock to t (never backwards), running due callbacks as Advance does.
func (c *Fake) Set(t time.Time) {
	for {
		c.mu.Lock()
		next := c.nextDueLocked(t)
		if next == nil {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		if next.when.After(c.now) {
			c.now = next.when
		}
		next.fired = true
		c.mu.Unlock()
		next.f()
	}
}

// nextDueLocked removes and returns the earliest live timer due at or before t.
func (c *Fake) nextDueLocked(t time.Time) *fakeTimer {
	live := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.stopped && !tm.fired {
			live = append(live, tm)
		}
	}
	c.timers = live
	if len(live) == 0 {
		return nil
	}
	sort.Slice(live, func(i, j int) bool {
		if !live[i].when.Equal(live[j].when) {
			return live[i].when.Before(live[j].when)
		}
		return live[i].seq < live[j].seq
	})
	if first := live[0]; !first.when.After(t) {
		c.timers = live[1:]
		return first
	}
	return nil
}

// Pending returns the number of scheduled, not yet fired or stopped, callbacks.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tm := range c.timers {
		if !tm.stopped && !tm.fired {
			n++
		}
	}
	return n
}

// WaitForTimers blocks until at least n callbacks are pending or the real-time timeout passes;
// it reports whether n were reached. Tests use it to let a goroutine under test arm its timers
// before they Advance.
func (c *Fake) WaitForTimers(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		pending := 0
		for _, tm := range c.timers {
			if !tm.stopped && !tm.fired {
				pending++
			}
		}
		changed := c.changed
		c.mu.Unlock()
		if pending >= n {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		wait := time.NewTimer(min(left, 10*time.Millisecond))
		select {
		case <-changed:
		case <-wait.C:
		}
		wait.Stop()
	}
}

// Ticker sends on C every d, measured by its clock. A tick the reader has not taken when the
// next one falls due is dropped (C holds at most one), so a slow reader never sees a backlog.
type Ticker struct {
	C <-chan struct{}

	c     chan struct{}
	clock Clock
	d     time.Duration

	mu      sync.Mutex // guards timer, stopped
	timer   Timer
	stopped bool
}

// NewTicker starts a ticker; Stop ends it.
func NewTicker(c Clock, d time.Duration) *Ticker {
	ch := make(chan struct{}, 1)
	t := &Ticker{C: ch, c: ch, clock: c, d: d}
	t.mu.Lock()
	t.timer = c.AfterFunc(d, t.fire)
	t.mu.Unlock()
	return t
}

func (t *Ticker) fire() {
	select {
	case t.c <- struct{}{}:
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.timer = t.clock.AfterFunc(t.d, t.fire)
	}
}

// Stop ends the ticker; no tick is sent after it returns (one may already wait in C).
func (t *Ticker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.timer.Stop()
}
