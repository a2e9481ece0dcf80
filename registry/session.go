package registry

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/nomicore/nomicore/yjs"
)

// Default bounds of a subscription queue (maxQueuedUpdateBytes, maxQueuedUpdateCount of
// docs/protocol.md#limits-and-defaults) and of a session's admitted operations.
const (
	DefaultMaxQueuedUpdateBytes = 4 << 20
	DefaultMaxQueuedUpdateCount = 1024
	DefaultMaxInFlight          = 64
)

// subscription is the bounded queue of applied updates the runtime fans out to one session or
// watcher. Items are the immutable updates of the document observer, one yjs.Shared per
// update shared by every subscription (their consumers' merges read each once). Overflow
// policy (docs/protocol.md#per-namespace; the observer reports it with the cause
// session-fanout-overflow): drop every queued update, signal needs-resync, and queue nothing
// more until the next Diff of the session re-arms it (that diff contains everything
// dropped).
type subscription struct {
	session  bool   // a replication session (fenced by epoch bumps), not a watcher
	peer     string // SessionOptions.Peer
	epoch    uint64 // the epoch a session is bound to
	maxBytes int
	maxCount int
	wake     chan struct{} // cap 1, never blocks the runtime
	notify   func()        // optional extra wake-up; must not block

	mu    sync.Mutex // guards the fields below up to fencedFlag
	items []*yjs.Shared
	// spare is the array the last Poll returned: its consumer is done with it when it polls
	// again, so that poll takes it (emptied) for the next items, and a steady stream of
	// updates does not grow a new slice from nothing after every Poll.
	spare      []*yjs.Shared
	bytes      int
	overflowed bool // dropping until re-armed
	resync     bool // needs-resync not yet reported by Poll
	fenced     *Identity
	failed     bool
	deleted    bool // the namespace was deleted (set before closed)
	closed     bool // the runtime unloaded, or the owner closed it

	fencedFlag atomic.Bool
}

func newSubscription(session bool, epoch uint64, maxBytes, maxCount int, notify func()) *subscription {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxQueuedUpdateBytes
	}
	if maxCount <= 0 {
		maxCount = DefaultMaxQueuedUpdateCount
	}
	return &subscription{
		session:  session,
		epoch:    epoch,
		maxBytes: maxBytes,
		maxCount: maxCount,
		wake:     make(chan struct{}, 1),
		notify:   notify,
	}
}

// push queues one update (runtime goroutine).
func (s *subscription) push(update *yjs.Shared) {
	s.mu.Lock()
	if s.closed || s.overflowed || s.fenced != nil || s.failed {
		s.mu.Unlock()
		return
	}
	n := len(update.Bytes())
	if len(s.items)+1 > s.maxCount || s.bytes+n > s.maxBytes {
		clear(s.items)
		s.items, s.bytes = nil, 0
		s.overflowed, s.resync = true, true
	} else {
		s.items = append(s.items, update)
		s.bytes += n
	}
	s.mu.Unlock()
	s.signal()
}

// rearm resumes queueing after an overflow (runtime goroutine, inside the Diff slot whose
// diff covers everything dropped).
func (s *subscription) rearm() {
	s.mu.Lock()
	s.overflowed = false
	s.mu.Unlock()
}

func (s *subscription) fence(id Identity) {
	s.mu.Lock()
	if s.fenced == nil {
		s.fenced = &id
		clear(s.items)
		s.items, s.bytes = nil, 0
	}
	s.mu.Unlock()
	s.fencedFlag.Store(true)
	s.signal()
}

func (s *subscription) isFenced() bool { return s.fencedFlag.Load() }

func (s *subscription) signalFailed() {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
	s.signal()
}

// signalDeleted marks the subscription deleted and closed.
func (s *subscription) signalDeleted() {
	s.mu.Lock()
	s.deleted = true
	clear(s.items)
	s.items, s.bytes = nil, 0
	s.mu.Unlock()
	s.signalClosed()
}

func (s *subscription) signalClosed() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

func (s *subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if s.notify != nil {
		s.notify()
	}
}

// Poll is what a subscription has for its consumer.
type Poll struct {
	// Updates are the applied updates queued since the last Poll, in sequencer order. They
	// are shared with every other subscriber and must not be modified (yjs.MergeShared
	// merges them reading each once for all); the list itself is valid until the next Poll,
	// which reuses its array.
	Updates []*yjs.Shared
	// NeedsResync reports that updates were dropped because the queue overflowed: the
	// consumer must start a state-vector round; the session's next Diff re-arms the queue.
	// It is reported once.
	NeedsResync bool
	// Fenced is set once an epoch bump fenced the session: the new identity. The
	// session answers every later operation with ErrFenced.
	Fenced *Identity
	// Failed reports that the namespace document broke (INTERNAL_ERROR); close the session
	// and release the lease, the next open reloads it from the store.
	Failed bool
	// Closed reports that the namespace was unloaded (registry shutdown) or the session was
	// closed.
	Closed bool
	// Deleted reports that the namespace was deleted (Registry.Delete, DeleteReplica); Closed
	// is set with it. Close what serves it and release the lease: it will not load again.
	Deleted bool
}

// maxSpareUpdates bounds the array a subscription keeps between polls (a burst's larger one
// is left to the collector).
const maxSpareUpdates = 256

func (s *subscription) poll() Poll {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := Poll{Updates: s.items, NeedsResync: s.resync, Fenced: s.fenced, Failed: s.failed, Closed: s.closed, Deleted: s.deleted}
	next := s.spare
	clear(next) // the updates it held are no longer this queue's to keep alive
	if cap(next) > maxSpareUpdates {
		next = nil
	}
	s.items, s.spare, s.bytes, s.resync = next[:0], s.items, 0, false
	return p
}

// SessionOptions configure a replication session.
type SessionOptions struct {
	// Peer names the remote instance (status and logs only).
	Peer string
	// Expect, when set, is the identity the remote declared (an OPEN_NAMESPACE with a
	// replica, docs/protocol.md#hub-checks): the session opens only if the namespace has
	// exactly this identity, else ErrIDMismatch or ErrEpochMismatch. Checked in the same
	// slot that opens the session.
	Expect *Identity
	// Snapshot asks for a bootstrap snapshot: the whole document encoded in the slot
	// that opens the session, so the update stream starts exactly after it.
	Snapshot bool
	// StateVector asks for the document's state vector, encoded in the opening slot.
	StateVector bool
	// ReadOnly sessions may not submit updates (ErrRoleViolation): a peer granted read only.
	ReadOnly bool
	// MaxQueuedUpdateBytes and MaxQueuedUpdateCount bound the update queue (protocol config
	// maxQueuedUpdateBytes and maxQueuedUpdateCount; zero means the defaults).
	MaxQueuedUpdateBytes int
	MaxQueuedUpdateCount int
	// MaxInFlight bounds the operations admitted and not yet settled (zero: the default,
	// 64). The namespace layer admits at most maxInFlightUpdates updates, plus its sync
	// requests.
	MaxInFlight int
	// Notify, when set, is called on the sequencer goroutine whenever Poll has something new
	// (in addition to the Wake channel), possibly once per update. It must not block and
	// should coalesce: e.g. post one drain to the connection's inbox only when an atomic
	// "drain scheduled" flag was clear, and clear it in the drain before calling Poll.
	Notify func()
}

// SessionStart is what the opening slot produced.
type SessionStart struct {
	Identity    Identity // the identity the session is bound to
	Snapshot    []byte   // with SessionOptions.Snapshot: Y.encodeStateAsUpdate(doc); shared, never modify it
	StateVector []byte   // with SessionOptions.StateVector
}

// Session is a replication session (docs/protocol.md#terms-and-invariants): a trusted duplex
// channel of raw Yjs bytes opened from a Lease. It never exposes the live document.
// Operations are sequencer slots; each comes in a blocking form (waits for its result, or
// ctx) and an asynchronous form whose callback runs on the sequencer goroutine and must not
// block (post the result to your own inbox). The sequencer never waits on a session.
//
// Updates the session applies carry the session as their origin: they are not echoed back
// to it, except as docs/protocol.md#document-layout requires (see Poll). The fan-out of
// other updates is read with Wake and Poll. A Session is safe for concurrent use.
type Session struct {
	lease    *Lease
	rt       *nsRuntime
	sub      *subscription
	peer     string
	readOnly bool
	identity Identity

	maxInFlight int
	mu          sync.Mutex // guards inFlight and closed
	inFlight    int
	closed      bool
	settled     chan struct{}
}

// Identity returns the identity the session was opened with.
func (s *Session) Identity() Identity { return s.identity }

// Peer returns SessionOptions.Peer.
func (s *Session) Peer() string { return s.peer }

// Wake is signalled (capacity 1, never blocking the sequencer) when Poll has something new.
func (s *Session) Wake() <-chan struct{} { return s.sub.wake }

// Poll takes what the fan-out queued for the session.
func (s *Session) Poll() Poll { return s.sub.poll() }

// admit counts an operation against MaxInFlight.
func (s *Session) admit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed.with("session closed", nil)
	case s.inFlight >= s.maxInFlight:
		return ErrOverloaded.with("too many operations in flight on the session", nil)
	}
	s.inFlight++
	return nil
}

func (s *Session) settle() {
	s.mu.Lock()
	s.inFlight--
	done := s.closed && s.inFlight == 0
	s.mu.Unlock()
	if done {
		s.closeSettled()
	}
}

func (s *Session) closeSettled() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.settled:
	default:
		close(s.settled)
	}
}

// Close stops the session at once: no new operation is admitted and the fan-out stops.
// Operations already admitted still run and settle (applies already admitted complete
// unconditionally: docs/protocol.md#closing-a-namespace); Settled tells when. Close never
// waits and is idempotent.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	done := s.inFlight == 0
	s.mu.Unlock()
	s.rt.removeSub(s.sub)
	s.sub.signalClosed()
	s.lease.forgetSession(s)
	if done {
		s.closeSettled()
	}
}

// Settled is closed once the session is closed and every operation it admitted has settled.
func (s *Session) Settled() <-chan struct{} { return s.settled }

// ApplyAsync submits a remote update (an UPDATE, or the diff of a SYNC_STEP2): in one slot,
// the gates (fenced session, role, degraded hub), the protected check on a hub, the live apply
// with this session as origin, and the dirty notification. done is called once, on the
// sequencer goroutine; when ApplyAsync returns an error (closed, overloaded) it is never
// called. update must not be modified until done is called.
func (s *Session) ApplyAsync(update []byte, done func(ApplyResult, error)) error {
	if s.rt.sh != nil {
		// A hub cluster: done runs once the update came back from the shared log and was
		// applied in log order (or it failed to).
		return sessionOpAsync(s, func(rt *nsRuntime, sl *slot, finish func(ApplyResult, error)) {
			rt.admitShared(sl, update, applyRemote, nil, finish)
		}, done)
	}
	return sessionOp(s, func(rt *nsRuntime, sl *slot) (ApplyResult, error) {
		return rt.apply(sl, update, applyRemote)
	}, done)
}

// Apply is ApplyAsync waiting for the result. If ctx ends first the apply still happens.
func (s *Session) Apply(ctx context.Context, update []byte) (ApplyResult, error) {
	return wait(ctx, func(done func(ApplyResult, error)) error { return s.ApplyAsync(update, done) })
}

// DiffAsync encodes what a remote with state vector sv lacks (what a SYNC_STEP2 carries), in a
// slot; an empty sv gives the whole document. The same slot re-arms the update queue after an
// overflow: the diff covers every update queued or dropped before it.
func (s *Session) DiffAsync(sv []byte, done func([]byte, error)) error {
	return sessionOp(s, func(rt *nsRuntime, _ *slot) ([]byte, error) {
		b, err := rt.encodeState(sv)
		if err == nil {
			s.sub.rearm()
		}
		return b, err
	}, done)
}

// Diff is DiffAsync waiting for the result.
func (s *Session) Diff(ctx context.Context, sv []byte) ([]byte, error) {
	return wait(ctx, func(done func([]byte, error)) error { return s.DiffAsync(sv, done) })
}

// StateVectorAsync encodes the document's state vector (what a SYNC_STEP1 carries) in a slot.
func (s *Session) StateVectorAsync(done func([]byte, error)) error {
	return sessionOp(s, func(rt *nsRuntime, _ *slot) ([]byte, error) {
		return rt.doc.EncodeStateVector(), nil
	}, done)
}

// StateVector is StateVectorAsync waiting for the result.
func (s *Session) StateVector(ctx context.Context) ([]byte, error) {
	return wait(ctx, func(done func([]byte, error)) error { return s.StateVectorAsync(done) })
}

// sessionOp admits fn, which has its result at once, as a slot of the session's runtime;
// the operation counts against MaxInFlight until done has been called.
func sessionOp[T any](s *Session, fn func(rt *nsRuntime, sl *slot) (T, error), done func(T, error)) error {
	return sessionSubmit(s, &asyncOp[T]{slot: slot{sess: s}, syncFn: fn, done: done})
}

// sessionOpAsync admits fn as a slot of the session's runtime; the operation counts
// against MaxInFlight until fn's finish is called.
func sessionOpAsync[T any](s *Session, fn func(rt *nsRuntime, sl *slot, finish func(T, error)), done func(T, error)) error {
	return sessionSubmit(s, &asyncOp[T]{slot: slot{sess: s}, fn: fn, done: done})
}

// sessionSubmit admits o for the session: it settles the session's count once o is done.
func sessionSubmit[T any](s *Session, o *asyncOp[T]) error {
	if err := s.admit(); err != nil {
		return err
	}
	o.settles = true
	if err := submitOp(s.rt, o); err != nil {
		s.settle()
		return err
	}
	return nil
}

// enqueue submits fn as a slot; done is called exactly once with its result. The slot
// starts with the gate (broken document, fenced session).
func enqueue[T any](rt *nsRuntime, sess *Session, fn func(rt *nsRuntime, sl *slot) (T, error), done func(T, error)) error {
	return submitOp(rt, &asyncOp[T]{slot: slot{sess: sess}, syncFn: fn, done: done})
}

// enqueueAsync submits fn as a slot that settles later: fn gets finish, which it (or
// whatever it hands finish to) calls once; done is called exactly once with the result —
// with the error instead when the gate refuses the slot, the slot panics or cannot run.
func enqueueAsync[T any](rt *nsRuntime, sess *Session, fn func(rt *nsRuntime, sl *slot, finish func(T, error)), done func(T, error)) error {
	return submitOp(rt, &asyncOp[T]{slot: slot{sess: sess}, fn: fn, done: done})
}

// asyncOp is a slot together with its operation and the operation's settlement, in one
// allocation (an apply is one per update a hub receives): the work is syncFn, whose result
// is there at once, or fn, which hands it to finish later; done is called exactly once.
type asyncOp[T any] struct {
	slot
	syncFn  func(rt *nsRuntime, sl *slot) (T, error)
	fn      func(rt *nsRuntime, sl *slot, finish func(T, error))
	done    func(T, error)
	settles bool        // the operation counts against slot.sess's MaxInFlight: settle it after done
	settled atomic.Bool // finish ran (it may be called from another goroutine, and again on a panic)
}

// submitOp admits o's slot into rt's queue.
func submitOp[T any](rt *nsRuntime, o *asyncOp[T]) error {
	o.op = o
	return rt.submit(&o.slot)
}

// runSlot implements slotOp: the gate, then the operation.
func (o *asyncOp[T]) runSlot(rt *nsRuntime, sl *slot) {
	if err := rt.gate(sl); err != nil {
		var zero T
		o.finish(zero, err)
		return
	}
	if o.syncFn != nil {
		o.finish(o.syncFn(rt, sl))
		return
	}
	o.fn(rt, sl, o.finish)
}

// failSlot implements slotOp.
func (o *asyncOp[T]) failSlot(err error) {
	var zero T
	o.finish(zero, err)
}

// finish calls done with the result, once.
func (o *asyncOp[T]) finish(v T, err error) {
	if o.settled.Swap(true) {
		return
	}
	if o.settles {
		defer o.sess.settle()
	}
	callSafely(func() { o.done(v, err) })
}

// callSafely runs a caller's callback; a panic in it is recovered and ignored so it cannot
// break the sequencer (the observer isolation of
// docs/protocol.md#implementation-conventions).
func callSafely(f func()) {
	defer func() { _ = recover() }()
	f()
}

// wait runs an asynchronous operation and waits for its result or ctx.
func wait[T any](ctx context.Context, start func(done func(T, error)) error) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1) // the sequencer's send never blocks
	if err := start(func(v T, err error) { ch <- result{v, err} }); err != nil {
		var zero T
		return zero, err
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Watch is a read-only subscription to every update applied to a namespace (the admin
// events stream, README.md#admin-api): registry meta writes included, never fenced. It is
// safe for concurrent use.
type Watch struct {
	lease *Lease
	sub   *subscription
	once  sync.Once
}

// Wake is signalled when Poll has something new.
func (w *Watch) Wake() <-chan struct{} { return w.sub.wake }

// Poll takes the queued updates. After NeedsResync the watch has missed updates and queues
// nothing more: close it and start again from the document's state.
func (w *Watch) Poll() Poll { return w.sub.poll() }

// Close ends the watch. Idempotent.
func (w *Watch) Close() {
	w.once.Do(func() {
		w.lease.rt.removeSub(w.sub)
		w.sub.signalClosed()
		w.lease.forgetWatch(w)
	})
}
