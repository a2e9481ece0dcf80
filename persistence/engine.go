package persistence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// engine is the write pipeline both stores share. It owns
//   - the residency table: the in-memory state of loaded namespaces (append sequence numbers,
//     durable position, log size), dropped on Release;
//   - the commit queue: a bounded FIFO of appends and of synchronous control operations
//     (snapshot replacement, compaction results, archive/reset), written by one committer
//     goroutine in group-commit transactions;
//   - the compaction goroutine, which reads a log, folds it with the Compactor outside any
//     transaction, and hands the result to the committer as a control operation.
//
// Every write to document data goes through the committer, in queue order, so an archive or a
// snapshot replacement is ordered after the appends made before it. Entries and configuration
// are written in their own transactions by the calling goroutine.
type engine struct {
	be       backend
	opts     Options
	readOnly bool
	healthy  atomic.Bool

	kick          chan struct{} // cap 1: the queue became non-empty, or a batch filled up
	hurry         chan struct{} // cap 1: something began to wait for the queue to commit
	stop          chan struct{} // closed by Close: stop accepting work and drain
	abandon       chan struct{} // closed by Close when its context ends: give up the queue
	committerDone chan struct{}
	compactorDone chan struct{}
	compactCh     chan docKey // namespaces due for compaction; full → the trigger is dropped and fires again on a later commit

	mu        sync.Mutex // guards the fields below
	closed    bool
	res       map[docKey]*resident
	q         []op // the commit queue, oldest first
	qAppends  int  // appends in q (control operations do not count against the bound)
	qBytes    int  // bytes of the appends in q
	waiting   int  // WaitFlushed calls blocked
	abandoned int  // appends Close gave up on

	// life is held for reading by every transaction started outside the committer, and for
	// writing by Close to close the backend after them.
	life      sync.RWMutex
	closeOnce sync.Once
	closeErr  error

	commits, committed, commitErrors, backpressure, compactions atomic.Uint64

	// Owned by the committer goroutine.
	lastErr error
	skip    []bool
}

type docKey struct{ owner, ns string }

// resident is the in-memory state of a loaded namespace. Guarded by engine.mu.
type resident struct {
	key      docKey
	assigned uint64 // last sequence number handed out by Append
	flushed  uint64 // last sequence number known durable
	pending  int    // appends in the queue
	err      error  // why queued appends of this namespace were abandoned
	wait     chan struct{}
	released bool // Release was called; drop once pending is 0
	gone     bool // archived or reset: no more appends

	logCount, logBytes int // durable log since the snapshot, for the compaction trigger
	snapBytes          int // size of the durable snapshot, for the compaction trigger
	compactQueued      bool
	compactFloor       int // after a failed compaction: wait until the log has this many updates
}

type opKind uint8

const (
	opAppend  opKind = iota
	opReplace        // ReplaceSnapshot
	opFold           // a compaction result
	opArchive        // Archive or Reset
)

// op is one element of the commit queue.
type op struct {
	kind opKind
	r    *resident // opAppend
	seq  uint64    // opAppend
	data []byte    // opAppend: the update
	ctl  *control  // other kinds
}

// control is a synchronous operation; its caller waits on done.
type control struct {
	key     docKey
	data    []byte        // opReplace, opFold: the new snapshot
	through uint64        // opReplace, opFold: the snapshot holds appends ≤ through
	expect  uint64        // opFold: SnapshotThrough when the log was read
	reason  ArchiveReason // opArchive

	abandoned atomic.Bool // the caller stopped waiting before it ran

	done         chan struct{}
	err          error
	info         ArchiveInfo
	trimmed      int // log entries dropped
	trimmedBytes int
}

// errStale: a compaction result that no longer applies (the snapshot changed meanwhile).
var errStale = errors.New("persistence: snapshot changed during compaction")

func newEngine(be backend, opts Options) *engine {
	e := &engine{
		be:       be,
		opts:     opts,
		readOnly: opts.ReadOnly,
		kick:     make(chan struct{}, 1),
		hurry:    make(chan struct{}, 1),
		stop:     make(chan struct{}),
		abandon:  make(chan struct{}),
		res:      make(map[docKey]*resident),
	}
	e.healthy.Store(true)
	if !e.readOnly {
		e.committerDone = make(chan struct{})
		e.compactorDone = make(chan struct{})
		e.compactCh = make(chan docKey, 256)
		go e.commitLoop()
		go e.compactLoop()
	}
	return e
}

func checkName(what, s string) error {
	if s == "" || len(s) > MaxNameBytes || !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s must be 1..%d bytes of UTF-8, got %q", ErrInvalid, what, MaxNameBytes, s)
	}
	return nil
}

func checkKey(owner, ns string) (docKey, error) {
	if err := checkName("owner", owner); err != nil {
		return docKey{}, err
	}
	if err := checkName("namespace id", ns); err != nil {
		return docKey{}, err
	}
	return docKey{owner, ns}, nil
}

// direct runs a transaction on the calling goroutine.
func (e *engine) direct(ctx context.Context, write bool, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if write && e.readOnly {
		return ErrReadOnly
	}
	e.life.RLock()
	defer e.life.RUnlock()
	if e.isClosed() {
		return ErrClosed
	}
	return fn()
}

func (e *engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

func (e *engine) view(ctx context.Context, fn func(r reader) error) error {
	return e.direct(ctx, false, func() error { return e.be.view(fn) })
}

// ---- Entries and configuration ----

func (e *engine) CreateEntry(ctx context.Context, ent Entry, snapshot []byte) error {
	key, err := checkKey(ent.Owner, ent.NamespaceID)
	if err != nil {
		return err
	}
	switch ent.State {
	case 0:
		ent.State = StateActive
	case StateActive:
	default:
		return fmt.Errorf("%w: a new entry must be active, not %v", ErrInvalid, ent.State)
	}
	ent.Meta = cloneMeta(ent.Meta)
	err = e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error {
			if _, err := w.entry(ent.NamespaceID); err == nil {
				return ErrExists
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
			if info, err := w.docInfo(ent.Owner, ent.NamespaceID); err != nil {
				return err
			} else if info.HasDoc {
				return ErrExists
			}
			if err := w.putEntry(ent); err != nil {
				return err
			}
			return w.createDoc(ent.Owner, ent.NamespaceID, snapshot)
		})
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.res[key] = &resident{key: key, snapBytes: len(snapshot)}
	e.mu.Unlock()
	return nil
}

func (e *engine) Entry(ctx context.Context, ns string) (ent Entry, err error) {
	if err := checkName("namespace id", ns); err != nil {
		return Entry{}, err
	}
	err = e.view(ctx, func(r reader) error {
		ent, err = r.entry(ns)
		return err
	})
	return ent, err
}

func (e *engine) Entries(ctx context.Context, owner string) (list []Entry, err error) {
	if owner != "" {
		if err := checkName("owner", owner); err != nil {
			return nil, err
		}
	}
	err = e.view(ctx, func(r reader) error {
		list, err = r.entries(owner)
		return err
	})
	return list, err
}

func (e *engine) PutConfig(ctx context.Context, key string, value []byte) error {
	if err := checkName("config key", key); err != nil {
		return err
	}
	return e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error { return w.putConfig(key, value) })
	})
}

func (e *engine) Config(ctx context.Context, key string) (value []byte, err error) {
	if err := checkName("config key", key); err != nil {
		return nil, err
	}
	err = e.view(ctx, func(r reader) error {
		value, err = r.config(key)
		return err
	})
	return value, err
}

func (e *engine) DeleteConfig(ctx context.Context, key string) error {
	if err := checkName("config key", key); err != nil {
		return err
	}
	return e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error { return w.deleteConfig(key) })
	})
}

func (e *engine) ConfigKeys(ctx context.Context, prefix string) (keys []string, err error) {
	err = e.view(ctx, func(r reader) error {
		keys, err = r.configKeys(prefix)
		return err
	})
	return keys, err
}

// ---- Documents ----

func (e *engine) Load(ctx context.Context, owner, ns string) (Doc, error) {
	key, err := checkKey(owner, ns)
	if err != nil {
		return Doc{}, err
	}
	// Appends still queued are collected before the read: each one is then either in the
	// read (committed meanwhile) or in this list.
	e.mu.Lock()
	var queued []op
	if r := e.res[key]; r != nil && !r.gone {
		queued = e.queuedLocked(r)
	}
	e.mu.Unlock()

	var doc Doc
	err = e.view(ctx, func(r reader) error {
		doc, err = r.doc(owner, ns)
		return err
	})
	if err != nil {
		return Doc{}, err
	}
	durable := len(doc.Updates)
	for _, o := range queued {
		if o.seq <= doc.Through {
			continue
		}
		if o.seq != doc.Through+1 {
			return Doc{}, fmt.Errorf("persistence: load %s/%s: queued append %d does not follow %d", owner, ns, o.seq, doc.Through)
		}
		doc.Updates = append(doc.Updates, append([]byte(nil), o.data...))
		doc.Through = o.seq
	}
	if e.readOnly {
		return doc, nil
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return Doc{}, ErrClosed
	}
	r := e.res[key]
	if r == nil || r.gone {
		r = &resident{key: key, assigned: doc.Through, flushed: doc.Through, logCount: durable, snapBytes: len(doc.Snapshot)}
		for _, u := range doc.Updates[:durable] {
			r.logBytes += len(u)
		}
		e.res[key] = r
	}
	r.released = false
	e.maybeCompactLocked(r)
	return doc, nil
}

// queuedLocked returns copies of the queued appends of r, oldest first.
func (e *engine) queuedLocked(r *resident) []op {
	var out []op
	if r.pending == 0 {
		return nil
	}
	for _, o := range e.q {
		if o.kind == opAppend && o.r == r {
			out = append(out, o)
		}
	}
	return out
}

func (e *engine) Append(owner, ns string, update []byte) (uint64, error) {
	data := append(make([]byte, 0, len(update)), update...)
	key := docKey{owner, ns}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return 0, ErrClosed
	}
	if e.readOnly {
		e.mu.Unlock()
		return 0, ErrReadOnly
	}
	r := e.res[key]
	if r == nil || r.gone {
		e.mu.Unlock()
		return 0, ErrNotLoaded
	}
	if e.qAppends >= e.opts.MaxQueuedAppends || (e.qAppends > 0 && e.qBytes+len(data) > e.opts.MaxQueuedBytes) {
		e.mu.Unlock()
		e.backpressure.Add(1)
		return 0, ErrBackpressure
	}
	r.assigned++
	r.pending++
	seq := r.assigned
	e.q = append(e.q, op{kind: opAppend, r: r, seq: seq, data: data})
	e.qAppends++
	e.qBytes += len(data)
	wake := e.qAppends == 1 || e.qAppends == e.opts.MaxBatch
	e.mu.Unlock()
	if wake {
		e.wake()
	}
	return seq, nil
}

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

func (e *engine) Flushed(owner, ns string) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.res[docKey{owner, ns}]; r != nil {
		return r.flushed
	}
	return 0
}

func (e *engine) WaitFlushed(ctx context.Context, owner, ns string, seq uint64) error {
	e.mu.Lock()
	r := e.res[docKey{owner, ns}]
	e.mu.Unlock()
	if r == nil {
		return ErrNotLoaded
	}
	for {
		e.mu.Lock()
		switch {
		case seq <= r.flushed:
			e.mu.Unlock()
			return nil
		case seq > r.assigned:
			e.mu.Unlock()
			return fmt.Errorf("%w: append %d of %s/%s was not made", ErrInvalid, seq, owner, ns)
		case r.err != nil: // appends are abandoned in order: every later one failed too
			err := r.err
			e.mu.Unlock()
			return err
		}
		if r.wait == nil {
			r.wait = make(chan struct{})
		}
		w := r.wait
		e.waiting++
		e.mu.Unlock()
		e.hurryUp()
		var err error
		select {
		case <-w:
		case <-ctx.Done():
			err = ctx.Err()
		}
		e.mu.Lock()
		e.waiting--
		e.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// notifyLocked wakes the waiters of r.
func notifyLocked(r *resident) {
	if r.wait != nil {
		close(r.wait)
		r.wait = nil
	}
}

func (e *engine) Release(owner, ns string) {
	key := docKey{owner, ns}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.res[key]; r != nil {
		r.released = true
		e.dropIfIdleLocked(r)
	}
}

// dropIfIdleLocked forgets r once nothing refers to it any more.
func (e *engine) dropIfIdleLocked(r *resident) {
	if (r.released || r.gone) && r.pending == 0 && e.res[r.key] == r {
		delete(e.res, r.key)
	}
}

func (e *engine) ReplaceSnapshot(ctx context.Context, owner, ns string, snapshot []byte, through uint64) error {
	key, err := checkKey(owner, ns)
	if err != nil {
		return err
	}
	if e.readOnly {
		return ErrReadOnly
	}
	e.mu.Lock()
	r := e.res[key]
	var assigned uint64
	if r != nil && !r.gone {
		assigned = r.assigned
	}
	e.mu.Unlock()
	if r == nil || r.gone {
		return ErrNotLoaded
	}
	if through > assigned {
		return fmt.Errorf("%w: snapshot through %d, but %s/%s has only %d appends", ErrInvalid, through, owner, ns, assigned)
	}
	c := &control{key: key, data: append([]byte(nil), snapshot...), through: through}
	return e.control(ctx, opReplace, c)
}

func (e *engine) Archive(ctx context.Context, owner, ns string) (ArchiveInfo, error) {
	return e.archive(ctx, owner, ns, ReasonArchive)
}

func (e *engine) Reset(ctx context.Context, owner, ns string) (ArchiveInfo, error) {
	return e.archive(ctx, owner, ns, ReasonReset)
}

func (e *engine) archive(ctx context.Context, owner, ns string, reason ArchiveReason) (ArchiveInfo, error) {
	key, err := checkKey(owner, ns)
	if err != nil {
		return ArchiveInfo{}, err
	}
	if e.readOnly {
		return ArchiveInfo{}, ErrReadOnly
	}
	c := &control{key: key, reason: reason}
	if err := e.control(ctx, opArchive, c); err != nil {
		return ArchiveInfo{}, err
	}
	return c.info, nil
}

func (e *engine) Archives(ctx context.Context, ns string) (list []ArchiveInfo, err error) {
	if ns != "" {
		if err := checkName("namespace id", ns); err != nil {
			return nil, err
		}
	}
	err = e.view(ctx, func(r reader) error {
		list, err = r.archives(ns)
		return err
	})
	return list, err
}

func (e *engine) LoadArchive(ctx context.Context, ns string, id uint64) (doc Doc, err error) {
	if err := checkName("namespace id", ns); err != nil {
		return Doc{}, err
	}
	err = e.view(ctx, func(r reader) error {
		doc, err = r.archive(ns, id)
		return err
	})
	return doc, err
}

// Docs lists every stored document with its size (for operators: nmcr store ls).
func (e *engine) Docs(ctx context.Context) (list []DocInfo, err error) {
	err = e.view(ctx, func(r reader) error {
		list, err = r.docs()
		return err
	})
	return list, err
}

// DocInfo gives the size of the stored document of (owner, ns) without reading it.
func (e *engine) DocInfo(ctx context.Context, owner, ns string) (info DocInfo, err error) {
	if _, err := checkKey(owner, ns); err != nil {
		return DocInfo{}, err
	}
	err = e.view(ctx, func(r reader) error {
		info, err = r.docInfo(owner, ns)
		return err
	})
	return info, err
}

func (e *engine) Healthy() bool { return e.healthy.Load() }

func (e *engine) Stats() Stats {
	e.mu.Lock()
	s := Stats{Resident: len(e.res), Queued: e.qAppends, QueuedBytes: e.qBytes}
	e.mu.Unlock()
	s.Commits = e.commits.Load()
	s.Committed = e.committed.Load()
	s.CommitErrors = e.commitErrors.Load()
	s.Backpressure = e.backpressure.Load()
	s.Compactions = e.compactions.Load()
	return s
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

// Close implements Store.Close.
func (e *engine) Close(ctx context.Context) error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		close(e.stop)
		var errs []error
		if !e.readOnly {
			select {
			case <-e.committerDone:
			case <-ctx.Done():
				close(e.abandon)
				<-e.committerDone
			}
			<-e.compactorDone
			e.mu.Lock()
			n := e.abandoned
			e.mu.Unlock()
			if n > 0 {
				cause := e.lastErr
				if cause == nil {
					cause = ctx.Err()
				}
				errs = append(errs, fmt.Errorf("persistence: close: %d queued appends were not committed: %w", n, cause))
			}
		}
		e.life.Lock()
		errs = append(errs, e.be.close())
		e.life.Unlock()
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// ---- The committer ----

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
		e.mu.Unlock()
		if len(batch) == 0 {
			return true
		}
		if batch[0].kind != opAppend {
			e.runControl(batch[0])
			continue
		}
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
	}
}

// nextLocked returns the head of the queue to commit next: a run of at most MaxBatch appends,
// or one control operation. It also marks, in e.skip, appends whose namespace is gone.
func (e *engine) nextLocked() []op {
	if len(e.q) == 0 {
		return nil
	}
	if e.q[0].kind != opAppend {
		return e.q[:1]
	}
	n := 0
	for n < len(e.q) && n < e.opts.MaxBatch && e.q[n].kind == opAppend {
		n++
	}
	e.skip = e.skip[:0]
	for _, o := range e.q[:n] {
		e.skip = append(e.skip, o.r.gone)
	}
	return e.q[:n]
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
		return e.hook()
	})
	if err != nil {
		e.failed(err)
		return err
	}
	e.succeeded()
	// Count before any waiter is woken, so Stats never trails what a waiter has seen.
	e.commits.Add(1)
	e.committed.Add(uint64(len(batch)))

	type flushed struct {
		key     docKey
		through uint64
	}
	var report []flushed
	e.mu.Lock()
	bytes := 0
	for i, o := range batch {
		r := o.r
		bytes += len(o.data)
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
	e.commitErrors.Add(1)
	if e.healthy.Swap(false) && e.opts.OnHealthChange != nil {
		notify(func() { e.opts.OnHealthChange(false, err) })
	}
}

func (e *engine) succeeded() {
	e.lastErr = nil
	if !e.healthy.Swap(true) && e.opts.OnHealthChange != nil {
		notify(func() { e.opts.OnHealthChange(true, nil) })
	}
}

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
			}
			if c.err != nil {
				return nil // nothing was written
			}
			return e.hook()
		})
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
			case opArchive:
				r.gone = true
				r.err = fmt.Errorf("%w: %s/%s was archived or reset", ErrNotFound, c.key.owner, c.key.ns)
				notifyLocked(r)
				e.dropIfIdleLocked(r)
			}
		}
	}
	clear(e.q[:1])
	e.q = e.q[1:]
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
	c.trimmed, c.trimmedBytes, err = w.trimLog(c.key.owner, c.key.ns, c.through)
	return err
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

func cloneMeta(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
