package persistence

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// wake tells the committer that the queue became non-empty or a batch filled up.
func (e *engine) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// hurryUp tells the committer that something now waits for the queue to commit: a group
// waiting UnawaitedCommitDelay is cut to CommitDelay.
func (e *engine) hurryUp() {
	select {
	case e.hurry <- struct{}{}:
	default:
	}
}

// notifyLocked wakes the waiters of r.
func notifyLocked(r *resident) {
	if r.wait != nil {
		close(r.wait)
		r.wait = nil
	}
}

// control queues c behind every earlier operation and waits for the committer to run it.
func (e *engine) control(ctx context.Context, kind opKind, c *control) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.done = make(chan struct{})
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.q = append(e.q, op{kind: kind, ctl: c})
	e.mu.Unlock()
	e.wake()
	e.hurryUp()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		c.abandoned.Store(true)
		return ctx.Err()
	}
}

// commitLoop is the committer goroutine: it owns every write to document data. It exits
// when Close has been called and the queue is empty (or abandoned).
func (e *engine) commitLoop() {
	defer close(e.committerDone)
	for {
		select {
		case <-e.kick:
		case <-e.stop:
		}
		// Group commit: the first append to an idle queue waits for others to join its
		// transaction (groupDelay), unless a batch fills up or Close starts.
		if e.opts.UnawaitedCommitDelay > 0 && !e.stopping() {
			e.groupDelay()
		}
		if !e.drain() {
			return
		}
		if !e.healthy.Load() && !e.stopping() {
			e.probeUntilHealthy()
		}
		if e.stopping() {
			e.mu.Lock()
			empty := len(e.q) == 0
			e.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

func (e *engine) stopping() bool {
	select {
	case <-e.stop:
		return true
	default:
		return false
	}
}

// groupDelay is the wait of a group commit: UnawaitedCommitDelay while nothing waits for the
// queue to commit — its appends were acknowledged already, so waiting longer costs nothing
// anyone sees and puts more appends in each transaction and fsync — and CommitDelay from
// the start of the wait once something does (WaitFlushed, an operation queued behind the
// appends), unless a batch fills up or Close starts.
func (e *engine) groupDelay() {
	e.mu.Lock()
	n, awaited := e.qAppends, e.waiting > 0
	e.mu.Unlock()
	if n == 0 || n >= e.opts.MaxBatch {
		return
	}
	start := e.opts.Clock.Now()
	delay := e.opts.UnawaitedCommitDelay
	if awaited {
		delay = e.opts.CommitDelay
	}
	fired := make(chan struct{})
	t := e.opts.Clock.AfterFunc(delay, func() { close(fired) })
	defer func() { t.Stop() }()
	for {
		select {
		case <-fired:
			return
		case <-e.stop:
			return
		case <-e.hurry:
			if delay == e.opts.CommitDelay {
				continue
			}
			delay = e.opts.CommitDelay
			left := delay - e.opts.Clock.Now().Sub(start)
			if left <= 0 {
				return
			}
			t.Stop()
			f := make(chan struct{})
			fired = f
			t = e.opts.Clock.AfterFunc(left, func() { close(f) })
		case <-e.kick:
			e.mu.Lock()
			n := e.qAppends
			e.mu.Unlock()
			if n >= e.opts.MaxBatch {
				return
			}
		}
	}
}

// drain commits the queue until it is empty. It returns false when Close abandoned the
// queue.
func (e *engine) drain() bool {
	backoff := e.opts.RetryMin
	for {
		e.mu.Lock()
		batch := e.nextLocked()
		held := e.heldForNote
		e.mu.Unlock()
		if held {
			if !e.awaitNote() {
				e.abandonAll()
				return false
			}
			continue
		}
		e.heldSince = time.Time{}
		if len(batch) == 0 {
			return true
		}
		if !batch[0].batched() {
			e.runControl(batch[0])
			continue
		}
		short := e.cutShort
		if err := e.commitAppends(batch); err != nil {
			select {
			case <-e.abandon:
				e.abandonAll()
				return false
			default:
			}
			if !e.sleep(backoff) {
				e.abandonAll()
				return false
			}
			backoff = min(2*backoff, e.opts.RetryMax)
			continue
		}
		backoff = e.opts.RetryMin
		if short && !e.stopping() {
			// Appends whose note was owed were left behind: they join the next group,
			// after the group's wait, rather than making a transaction (and fsync) of
			// their own now.
			e.groupDelay()
		}
	}
}

// awaitNote waits until a note owed at the head of the queue is given (NoteStateVector
// wakes the committer), Close starts, or MaxNoteWait has passed since the wait began (then
// the next cut is forced). It returns false when Close abandons the queue.
func (e *engine) awaitNote() bool {
	now := e.opts.Clock.Now()
	if e.heldSince.IsZero() {
		e.heldSince = now
	}
	left := MaxNoteWait - now.Sub(e.heldSince)
	if left <= 0 {
		e.forceCut = true
		return true
	}
	fired := make(chan struct{})
	t := e.opts.Clock.AfterFunc(left, func() { close(fired) })
	defer t.Stop()
	select {
	case <-e.kick:
	case <-fired:
		e.forceCut = true
	case <-e.stop:
	case <-e.abandon:
		return false
	}
	return true
}

// nextLocked returns the head of the queue to commit next: a run of appends, or one control
// operation. It also marks, in e.skip, appends whose namespace is gone.
//
// A run holds at most MaxBatch appends, and ends where every namespace's last append in it
// has its change-feed note (AppendNoteLater): the longest such run, or, when there is none
// within MaxBatch, the shortest beyond it. When there is none at all, it returns nothing and
// sets heldForNote (the committer waits for NoteStateVector), unless Close has started or
// the wait was too long (forceCut): then the notes are not waited for.
func (e *engine) nextLocked() []op {
	e.taken = 0
	e.heldForNote = false
	if len(e.q) == 0 {
		return nil
	}
	if !e.q[0].batched() {
		e.taken = 1
		return e.q[:1]
	}
	n := 0
	for n < len(e.q) && n < e.opts.MaxBatch && e.q[n].batched() {
		n++
	}
	e.cutShort = false
	if !e.forceCut && !e.stopping() {
		cut := e.notedCutLocked(n)
		if cut == 0 {
			e.heldForNote = true
			return nil
		}
		e.cutShort = cut < n
		n = cut
	}
	e.forceCut = false
	e.taken = n
	e.skip = e.skip[:0]
	for _, o := range e.q[:n] {
		e.skip = append(e.skip, o.r != nil && o.r.gone)
	}
	return e.q[:n]
}

// notedCutLocked returns the length of the longest run at the head of the queue, at most
// limit long, after which no namespace's last append awaits its note; if there is none, the
// shortest longer run of batched operations; 0 if there is none either.
func (e *engine) notedCutLocked(limit int) int {
	open, cut := 0, 0
	i := 0
	for ; i < len(e.q) && e.q[i].batched(); i++ {
		if i >= limit && cut > 0 {
			break
		}
		o := &e.q[i]
		if o.kind == opAppend && !o.r.gone {
			switch {
			case o.noteLater && !o.r.cutOpen:
				o.r.cutOpen = true
				open++
			case !o.noteLater && o.r.cutOpen:
				o.r.cutOpen = false
				open--
			}
		}
		if open == 0 {
			cut = i + 1
			if i >= limit {
				i++
				break
			}
		}
	}
	for _, o := range e.q[:i] {
		if o.r != nil {
			o.r.cutOpen = false
		}
	}
	return cut
}

// sleep waits d on the clock; false when Close gives up first.
func (e *engine) sleep(d time.Duration) bool {
	fired := make(chan struct{})
	t := e.opts.Clock.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return true
	case <-e.abandon:
		return false
	}
}

// commitAppends writes batch in one transaction and, on success, removes it from the queue
// and reports the new durable positions. On failure the batch stays at the head of the queue.
func (e *engine) commitAppends(batch []op) error {
	missing := make([]bool, len(batch))
	err := e.be.update(func(w writer) error {
		clear(missing)
		for i, o := range batch {
			if o.kind == opConfig {
				if err := writeQueuedConfig(w, o); err != nil {
					return err
				}
				continue
			}
			if e.skip[i] {
				continue
			}
			if err := w.appendUpdate(o.r.key.owner, o.r.key.ns, o.seq, o.data); err != nil {
				if errors.Is(err, ErrNotFound) { // the document was removed under it
					missing[i] = true
					continue
				}
				return err
			}
		}
		if e.feedOn() {
			if err := e.noteChanges(w, batch, missing); err != nil {
				return err
			}
		}
		return e.hook()
	})
	if err != nil {
		e.failed(err)
		return err
	}
	if e.feedOn() {
		e.changesCommitted()
	}
	e.succeeded()
	// Count before any waiter is woken, so Stats never trails what a waiter has seen.
	e.commits.Add(1)
	e.committed.Add(uint64(countAppends(batch)))

	type flushed struct {
		key     docKey
		through uint64
	}
	var report []flushed
	e.mu.Lock()
	bytes := 0
	for i, o := range batch {
		bytes += len(o.data)
		if o.kind == opConfig {
			o.cfg.finish(nil)
			continue
		}
		r := o.r
		r.pending--
		if e.skip[i] || missing[i] {
			r.err = fmt.Errorf("%w: %s/%s was archived or reset", ErrNotFound, r.key.owner, r.key.ns)
		} else {
			r.flushed = o.seq
			r.logCount++
			r.logBytes += len(o.data)
		}
		if i+1 < len(batch) && batch[i+1].r == r {
			continue // report once per run of the same namespace
		}
		notifyLocked(r)
		if !e.skip[i] && !missing[i] {
			report = append(report, flushed{r.key, r.flushed})
		}
		e.maybeCompactLocked(r)
		e.dropIfIdleLocked(r)
	}
	n := len(batch)
	clear(e.q[:n])
	e.q = e.q[n:]
	e.taken = 0
	if len(e.q) == 0 {
		e.q = nil
	}
	e.qAppends -= n
	e.qBytes -= bytes
	e.mu.Unlock()

	if cb := e.opts.OnFlushed; cb != nil {
		for _, f := range report {
			notify(func() { cb(f.key.owner, f.key.ns, f.through) })
		}
	}
	return nil
}

// notify runs a callback of Options; a panic in it is recovered and ignored (as a panicking
// observer's is), so it cannot stop the committer.
func notify(f func()) {
	defer func() { _ = recover() }()
	f()
}

func (e *engine) hook() error {
	if h := e.opts.CommitHook; h != nil {
		return h()
	}
	return nil
}

func (e *engine) failed(err error) {
	e.lastErr = err
	e.lastNoSpace.Store(noSpace(err))
	e.commitErrors.Add(1)
	if e.healthy.Swap(false) && e.opts.OnHealthChange != nil {
		notify(func() { e.opts.OnHealthChange(false, err) })
	}
}

func (e *engine) succeeded() {
	e.lastErr = nil
	e.lastNoSpace.Store(false)
	if !e.healthy.Swap(true) && e.opts.OnHealthChange != nil {
		notify(func() { e.opts.OnHealthChange(true, nil) })
	}
}

// errControlRefused rolls back the transaction of a control operation that failed (c.err).
var errControlRefused = errors.New("persistence: control operation refused")

// runControl runs the control operation at the head of the queue in its own transaction and
// completes it. A failed transaction fails the operation (its caller decides); it is not
// retried.
func (e *engine) runControl(o op) {
	c := o.ctl
	var err error
	if c.abandoned.Load() {
		err = context.Canceled
	} else {
		err = e.be.update(func(w writer) error {
			c.err, c.trimmed, c.trimmedBytes = nil, 0, 0
			switch o.kind {
			case opReplace, opFold:
				c.err = e.writeSnapshot(w, o.kind, c)
			case opArchive:
				c.err = e.writeArchive(w, c)
			case opDelete:
				c.err = e.writeDelete(w, c)
			}
			if c.err != nil {
				// Refused part-way (a missing namespace, a stale fold, a record that could
				// not be written): roll back whatever the operation wrote before it.
				return errControlRefused
			}
			return e.hook()
		})
		if errors.Is(err, errControlRefused) {
			err = nil // the store is fine; c.err says why the operation did nothing
		}
		if err != nil {
			e.failed(err)
		} else {
			e.succeeded()
			e.commits.Add(1)
		}
	}

	e.mu.Lock()
	if err == nil && c.err == nil {
		if r := e.res[c.key]; r != nil {
			switch o.kind {
			case opReplace, opFold:
				r.logCount = max(0, r.logCount-c.trimmed)
				r.logBytes = max(0, r.logBytes-c.trimmedBytes)
				r.snapBytes = len(c.data)
			case opArchive, opDelete:
				r.gone = true
				r.err = fmt.Errorf("%w: %s/%s was archived, reset or deleted", ErrNotFound, c.key.owner, c.key.ns)
				notifyLocked(r)
				e.dropIfIdleLocked(r)
			}
		}
	}
	clear(e.q[:1])
	e.q = e.q[1:]
	e.taken = 0
	if len(e.q) == 0 {
		e.q = nil
	}
	e.mu.Unlock()

	if err != nil {
		c.err = err
	} else if o.kind == opFold && c.err == nil {
		e.compactions.Add(1)
		if cb := e.opts.OnCompacted; cb != nil {
			notify(func() { cb(c.key.owner, c.key.ns, c.through) })
		}
	}
	close(c.done)
}

func (e *engine) writeSnapshot(w writer, kind opKind, c *control) error {
	info, err := w.docInfo(c.key.owner, c.key.ns)
	if err != nil {
		return err
	}
	if !info.HasDoc {
		return fmt.Errorf("%w: no document %s/%s", ErrNotFound, c.key.owner, c.key.ns)
	}
	if kind == opFold && info.SnapshotThrough != c.expect {
		return errStale
	}
	if c.through < info.SnapshotThrough {
		return fmt.Errorf("%w: snapshot through %d is older than the stored one (through %d)", ErrInvalid, c.through, info.SnapshotThrough)
	}
	if err := w.setSnapshot(c.key.owner, c.key.ns, c.data, c.through); err != nil {
		return err
	}
	if c.trimmed, c.trimmedBytes, err = w.trimLog(c.key.owner, c.key.ns, c.through); err != nil {
		return err
	}
	if kind == opReplace && c.noted {
		return e.writeChange(w, Change{Kind: ChangeUpdated, Owner: c.key.owner, NamespaceID: c.key.ns, StateVector: c.sv})
	}
	return nil
}

func (e *engine) writeArchive(w writer, c *control) error {
	ent, err := w.entry(c.key.ns)
	if err != nil {
		return err
	}
	if ent.Owner != c.key.owner {
		return fmt.Errorf("%w: namespace %s of owner %s", ErrNotFound, c.key.ns, c.key.owner)
	}
	if c.reason == ReasonArchive && ent.State == StateArchived {
		return ErrArchived
	}
	info, err := w.archiveDoc(c.key.owner, c.key.ns, ArchiveInfo{NamespaceID: c.key.ns, Reason: c.reason, Entry: ent})
	if err != nil {
		return err
	}
	c.info = info
	if c.reason == ReasonReset {
		if err := dropIndex(w, ent); err != nil {
			return err
		}
		return w.deleteEntry(c.key.ns)
	}
	ent.State = StateArchived
	return w.putEntry(ent)
}

// abandonAll fails every queued operation with ErrClosed (Close gave up).
func (e *engine) abandonAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, o := range e.q {
		if o.kind == opConfig {
			o.cfg.finish(ErrClosed)
			continue
		}
		if o.kind == opAppend {
			e.abandoned++
			o.r.pending--
			o.r.err = ErrClosed
			notifyLocked(o.r)
			continue
		}
		o.ctl.err = ErrClosed
		close(o.ctl.done)
	}
	e.q, e.qAppends, e.qBytes = nil, 0, 0
}

// batched reports whether o is written in the committer's batches of appends (an append, a
// queued configuration value) rather than in a transaction of its own.
func (o op) batched() bool { return o.kind == opAppend || o.kind == opConfig }
