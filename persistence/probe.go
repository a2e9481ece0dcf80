package persistence

import "fmt"

// Probing an unhealthy store. A failed commit of appends is tried again by the committer
// until it succeeds, which makes the store healthy again. Other failures are not retried:
// an operation whose caller waits for its result (a snapshot replacement, an archive, a
// compaction result) and a write of the calling goroutine (an entry, a configuration value)
// fail once, and the store would stay unhealthy — a hub refusing every write — until some
// later write happened to succeed. So while the store is unhealthy and has nothing queued,
// the committer writes a probe (a record written and removed in one transaction, which
// changes nothing but needs pages like any write) with the same backoff, until one
// commits. After a failure for lack of space the probe first asks the filesystem for room
// (probeMinFree): a small probe fits in pages the store freed earlier even on a full disk,
// and would turn the store healthy while the writes it takes still cannot grow the file.

// probeUntilHealthy runs on the committer goroutine after the queue drained. It returns
// once the store is healthy, once something is queued (the committer's own retries take
// over), or when Close starts.
func (e *engine) probeUntilHealthy() {
	backoff := e.opts.RetryMin
	for !e.healthy.Load() {
		e.mu.Lock()
		queued := len(e.q) > 0
		e.mu.Unlock()
		if queued || e.stopping() {
			return
		}
		err := e.roomAfterNoSpace()
		if err == nil {
			err = e.be.update(func(w writer) error {
				if err := w.probe(); err != nil {
					return err
				}
				return e.hook()
			})
		}
		if err == nil {
			e.succeeded()
			return
		}
		e.failed(err)
		fired := make(chan struct{})
		t := e.opts.Clock.AfterFunc(backoff, func() { close(fired) })
		select {
		case <-fired:
		case <-e.kick:
			t.Stop()
			e.wake() // for commitLoop, which drains what was queued
			return
		case <-e.stop:
			t.Stop()
			return
		}
		backoff = min(2*backoff, e.opts.RetryMax)
	}
}

// probeMinFree is the room a filesystem must have before a probe follows a failure for lack
// of space.
const probeMinFree = 1 << 20

// spaceReporter is a backend that can tell how much room its filesystem has.
type spaceReporter interface {
	// free returns the bytes this process may still write to the filesystem holding the
	// store (ok false when it cannot tell).
	free() (bytes int64, ok bool)
}

// roomAfterNoSpace returns a NoSpaceError while the last failure was for lack of space and
// the filesystem still has less than probeMinFree bytes free.
func (e *engine) roomAfterNoSpace() error {
	if !e.lastNoSpace.Load() {
		return nil
	}
	sr, ok := e.be.(spaceReporter)
	if !ok {
		return nil
	}
	if n, ok := sr.free(); ok && n < probeMinFree {
		return &NoSpaceError{Path: e.path(), Err: fmt.Errorf("%d bytes free, waiting for at least %d", n, probeMinFree)}
	}
	return nil
}

// path names the store file in errors ("" for a memory store).
func (e *engine) path() string {
	if b, ok := e.be.(*boltBackend); ok {
		return b.path
	}
	return ""
}

// writeFailed records a failed write of the calling goroutine (direct): a write that failed
// for lack of space makes the store unhealthy, and the committer probes it until a write
// commits again.
func (e *engine) writeFailed(err error) {
	if !noSpace(err) {
		return
	}
	e.lastNoSpace.Store(true)
	e.commitErrors.Add(1)
	if e.healthy.Swap(false) && e.opts.OnHealthChange != nil {
		notify(func() { e.opts.OnHealthChange(false, err) })
	}
	e.wake()
}
