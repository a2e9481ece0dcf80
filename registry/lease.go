package registry

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nomicore/nomicore/yjs"
)

// Lease is a hold on a loaded namespace (a lease of docs/protocol.md#terms-and-invariants):
// while any lease of a namespace is held its document stays loaded; the last Release unloads
// it. A lease gives the local API of the namespace (local writes and reads for the admin
// API, the hub's epoch bump and schema replace) and opens replication sessions. Every
// operation is a slot of the namespace's sequencer; the blocking forms wait for their slot
// or ctx (if ctx ends first the operation still runs). A Lease is safe for concurrent use.
type Lease struct {
	reg      *Registry
	rt       *nsRuntime
	released atomic.Bool

	mu       sync.Mutex // guards sessions and watches
	sessions map[*Session]struct{}
	watches  map[*Watch]struct{}
}

// NamespaceID returns the namespace id.
func (l *Lease) NamespaceID() string { return l.rt.ns }

// Owner returns the local owner the namespace belongs to (never on the wire).
func (l *Lease) Owner() string { return l.rt.owner }

// Identity returns the current replication identity.
func (l *Lease) Identity() Identity { return l.rt.identity() }

// Degraded reports whether persistence is degraded for this namespace now (the store's last
// commit failed, or a change of this namespace waits for a snapshot).
func (l *Lease) Degraded() bool {
	return !l.reg.cfg.Catalog.Healthy() || l.rt.unsavedFlag()
}

// Failed reports that the document broke; operations answer INTERNAL_ERROR until every
// lease is released and the namespace is loaded again.
func (l *Lease) Failed() bool { return l.rt.failed.Load() }

// Flushed returns the highest append sequence number of the namespace known to be durable
// (compare with ApplyResult.Seq).
// In a hub cluster every write is applied from the shared log, which delivers only records
// a quorum of the cluster has stored, so it is durable once applied: Flushed is the last
// log position applied, and a write is answered only after that position covers it.
func (l *Lease) Flushed() uint64 {
	if l.rt.sh != nil {
		return l.rt.applied.Load()
	}
	return l.rt.store.docs.Flushed(l.rt.owner, l.rt.ns)
}

// WaitFlushed waits until append seq is durable, or ctx ends. In a hub cluster it waits
// until this node applied the log through position seq (see Flushed).
func (l *Lease) WaitFlushed(ctx context.Context, seq uint64) error {
	if l.rt.sh != nil {
		if l.rt.applied.Load() >= seq {
			return nil
		}
		return l.rt.waitApplied(ctx, seq)
	}
	return l.rt.store.docs.WaitFlushed(ctx, l.rt.owner, l.rt.ns, seq)
}

// SessionInfo describes an open replication session of a namespace.
type SessionInfo struct {
	Peer   string // SessionOptions.Peer
	Epoch  uint64 // the epoch it is bound to
	Fenced bool   // an epoch bump fenced it
}

// Sessions lists the open sessions of the namespace (of every lease), in opening order.
func (l *Lease) Sessions() []SessionInfo {
	var out []SessionInfo
	for _, sub := range l.rt.subscribers() {
		if sub.session {
			out = append(out, SessionInfo{Peer: sub.peer, Epoch: sub.epoch, Fenced: sub.isFenced()})
		}
	}
	return out
}

// Release gives the lease back. The last release of a namespace unloads it in the background
// (admitted slots finish first; Registry.Close waits for it). Sessions and watches opened
// from the lease are closed. Release never waits and is idempotent.
func (l *Lease) Release() {
	if l.released.Swap(true) {
		return
	}
	l.mu.Lock()
	sessions := l.sessions
	watches := l.watches
	l.sessions, l.watches = nil, nil
	l.mu.Unlock()
	for s := range sessions {
		s.Close()
	}
	for w := range watches {
		w.Close()
	}
	l.reg.release(l.rt)
}

func (l *Lease) forgetSession(s *Session) {
	l.mu.Lock()
	delete(l.sessions, s)
	l.mu.Unlock()
}

func (l *Lease) forgetWatch(w *Watch) {
	l.mu.Lock()
	delete(l.watches, w)
	l.mu.Unlock()
}

func (l *Lease) check() error {
	if l.released.Load() {
		return ErrClosed.with("lease released", nil)
	}
	return nil
}

// leaseOp submits fn as a slot of the lease's namespace, after checking the lease is
// still held; done receives fn's result.
func leaseOp[T any](l *Lease, fn func(rt *nsRuntime, sl *slot) (T, error), done func(T, error)) error {
	if err := l.check(); err != nil {
		return err
	}
	return enqueue(l.rt, nil, fn, done)
}

func leaseWait[T any](ctx context.Context, l *Lease, fn func(rt *nsRuntime, sl *slot) (T, error)) (T, error) {
	return wait(ctx, func(done func(T, error)) error { return leaseOp(l, fn, done) })
}

// OpenSessionAsync opens a replication session in one slot: the identity check of
// SessionOptions.Expect, the optional snapshot and state vector, and the start of the
// session's update stream all happen at the same point of the sequence. done runs on the
// sequencer goroutine and must not block; it is not called when OpenSessionAsync returns an
// error. On failure the session is closed and nil.
func (l *Lease) OpenSessionAsync(opts SessionOptions, done func(*Session, SessionStart, error)) error {
	_, err := l.openSession(opts, done)
	return err
}

// openSession starts opening a session and returns it (closing it abandons the opening).
func (l *Lease) openSession(opts SessionOptions, done func(*Session, SessionStart, error)) (*Session, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	maxInFlight := opts.MaxInFlight
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	s := &Session{
		lease:       l,
		rt:          l.rt,
		peer:        opts.Peer,
		readOnly:    opts.ReadOnly,
		maxInFlight: maxInFlight,
		settled:     make(chan struct{}),
		sub:         newSubscription(true, 0, opts.MaxQueuedUpdateBytes, opts.MaxQueuedUpdateCount, opts.Notify),
	}
	s.sub.peer = opts.Peer
	l.mu.Lock()
	if l.sessions == nil {
		if l.released.Load() {
			l.mu.Unlock()
			return nil, ErrClosed.with("lease released", nil)
		}
		l.sessions = make(map[*Session]struct{})
	}
	l.sessions[s] = struct{}{}
	l.mu.Unlock()
	open := func(rt *nsRuntime, _ *slot) (SessionStart, error) {
		if rt.schemaSeen.fatal && rt.reg.cfg.Role == RolePeer {
			return SessionStart{}, ErrSchemaInvalid.with("", nil)
		}
		id := rt.identity()
		if opts.Expect != nil {
			if err := opts.Expect.compare(id); err != nil {
				return SessionStart{}, err
			}
		}
		st := SessionStart{Identity: id}
		if opts.Snapshot {
			b, err := rt.encodeState(nil)
			if err != nil {
				return SessionStart{}, err
			}
			st.Snapshot = b
		}
		if opts.StateVector {
			st.StateVector = rt.doc.EncodeStateVector()
		}
		// Under the session's lock, so that a concurrent Close either comes first (nothing
		// registered) or finds the subscription to remove.
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return SessionStart{}, ErrClosed.with("session closed while opening", nil)
		}
		s.identity = id
		s.sub.epoch = id.Epoch
		rt.addSub(s.sub)
		return st, nil
	}
	err := leaseOp(l, open, func(st SessionStart, err error) {
		if err != nil {
			s.Close()
			done(nil, SessionStart{}, err)
			return
		}
		done(s, st, nil)
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// OpenSession is OpenSessionAsync waiting for the result. If ctx ends first the session is
// closed (the opening slot then registers nothing).
func (l *Lease) OpenSession(ctx context.Context, opts SessionOptions) (*Session, SessionStart, error) {
	type opened struct {
		s   *Session
		st  SessionStart
		err error
	}
	ch := make(chan opened, 1) // the sequencer's send never blocks
	s, err := l.openSession(opts, func(s *Session, st SessionStart, err error) { ch <- opened{s, st, err} })
	if err != nil {
		return nil, SessionStart{}, err
	}
	select {
	case r := <-ch:
		return r.s, r.st, r.err
	case <-ctx.Done():
		s.Close()
		return nil, SessionStart{}, ctx.Err()
	}
}

// Watch subscribes to every update applied from now on (the admin events stream), with the
// given queue bounds (zero: the defaults).
func (l *Lease) Watch(maxQueuedBytes, maxQueuedCount int) (*Watch, error) {
	w := &Watch{lease: l, sub: newSubscription(false, 0, maxQueuedBytes, maxQueuedCount, nil)}
	l.mu.Lock()
	if l.released.Load() {
		l.mu.Unlock()
		return nil, ErrClosed.with("lease released", nil)
	}
	if l.watches == nil {
		l.watches = make(map[*Watch]struct{})
	}
	l.watches[w] = struct{}{}
	l.mu.Unlock()
	l.rt.addSub(w.sub)
	return w, nil
}

// WriteLocalAsync submits a local write (the admin API's POST …/update): the protected check,
// then the live apply and the dirty notification, in one slot. It is refused with
// ErrDegraded while persistence is degraded, on either side. done runs on the
// sequencer goroutine and must not block; it is not called when WriteLocalAsync returns an
// error.
func (l *Lease) WriteLocalAsync(update []byte, done func(ApplyResult, error)) error {
	return l.writeLocal(originLocal, update, done)
}

// WriteLocalExceptAsync is WriteLocalAsync for a writer that relays its own update to its
// audience (the editor endpoint): the update is not fanned out to except, a watch of this
// lease — unless the document held pending structs before the apply, when the transaction
// may carry earlier structs the writer's audience lacks (docs/protocol.md#document-layout),
// and except gets it too.
func (l *Lease) WriteLocalExceptAsync(except *Watch, update []byte, done func(ApplyResult, error)) error {
	return l.writeLocal(&localOrigin{skip: except.sub}, update, done)
}

// writeLocal is the one path of every local write, whoever makes it: on a single hub or a
// peer, apply in one slot (the store's append is the dirty notification); in a hub cluster,
// admitShared — the update is published to the namespace log and done runs once it came
// back from the log (stored on a quorum) and was applied in log order, so that ApplyResult.Seq
// is its log position and Flushed covers it.
func (l *Lease) writeLocal(origin *localOrigin, update []byte, done func(ApplyResult, error)) error {
	if err := l.check(); err != nil {
		return err
	}
	if l.rt.sh != nil {
		return enqueueAsync(l.rt, nil, func(rt *nsRuntime, sl *slot, finish func(ApplyResult, error)) {
			rt.admitShared(sl, update, applyLocal, origin, finish)
		}, done)
	}
	return enqueue(l.rt, nil, func(rt *nsRuntime, sl *slot) (ApplyResult, error) {
		return rt.applyFrom(sl, update, applyLocal, origin)
	}, done)
}

// IncludedAsync reports, in a slot, whether applying update would change nothing (every
// struct and deletion it carries is already in the document; yjs.Included): a reader that
// may not write can tell a sync message that brings nothing new from a refused edit. A
// malformed update is ErrApplyFailed.
func (l *Lease) IncludedAsync(update []byte, done func(bool, error)) error {
	return leaseOp(l, func(rt *nsRuntime, _ *slot) (bool, error) {
		ok, err := yjs.Included(rt.doc, update)
		if err != nil {
			return false, ErrApplyFailed.with("", err)
		}
		return ok, nil
	}, done)
}

// WriteLocal is WriteLocalAsync waiting for the result.
func (l *Lease) WriteLocal(ctx context.Context, update []byte) (ApplyResult, error) {
	return wait(ctx, func(done func(ApplyResult, error)) error { return l.WriteLocalAsync(update, done) })
}

// StateVector returns the encoded state vector of the document.
func (l *Lease) StateVector(ctx context.Context) ([]byte, error) {
	return leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) ([]byte, error) {
		return rt.doc.EncodeStateVector(), nil
	})
}

// EncodeState returns Y.encodeStateAsUpdate(doc, sv) (sv empty: the whole document). A
// malformed sv is ErrApplyFailed. The whole document's bytes may be shared with other
// readers of the same unchanged document: never modify them.
func (l *Lease) EncodeState(ctx context.Context, sv []byte) ([]byte, error) {
	return leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) ([]byte, error) {
		return rt.encodeState(sv)
	})
}

// ActiveSchema returns the namespace's active schema: the meta.schema installed when the
// namespace loaded, by the hub's last ReplaceSchema, or by the last re-arm of a peer applying
// its hub's updates. It is false when there is none — no schema set, or the last one was
// invalid. It reads no slot.
func (l *Lease) ActiveSchema() (ActiveSchema, bool) {
	if s := l.rt.schema.Load(); s != nil {
		return *s, true
	}
	return ActiveSchema{}, false
}

// Schema returns meta.schema, if set.
func (l *Lease) Schema(ctx context.Context) (Schema, bool, error) {
	type res struct {
		s  Schema
		ok bool
	}
	r, err := leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (res, error) {
		s, ok := readSchema(rt.doc)
		return res{s, ok}, nil
	})
	return r.s, r.ok, err
}

// BumpEpoch (hub) raises the replication epoch by one in a slot (see nsRuntime.bumpEpoch):
// updates admitted before it complete first; right after the bump every session of the old
// epoch is fenced (Poll().Fenced) and refused at the start of any later slot (ErrFenced).
// Refused on a peer (ErrRoleViolation) and while degraded.
func (l *Lease) BumpEpoch(ctx context.Context) (Identity, error) {
	if l.rt.sh != nil {
		return l.sharedBumpEpoch(ctx, nil)
	}
	return leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (Identity, error) {
		return rt.bumpEpoch()
	})
}

// BumpEpochFrom (hub) is BumpEpoch made only if the namespace's epoch is still expected,
// checked in the same step as the bump: on one process in the bump's slot, in a cluster by
// the compare-and-set that claims it. Of two bumps that expect the same epoch — on one hub
// or on two nodes of a cluster, however they are timed — exactly one is made; the other
// gets ErrChanged (the namespace had moved on when it was checked) or, in a cluster,
// ErrConflict (the other claimed it first), and nothing of it is written.
func (l *Lease) BumpEpochFrom(ctx context.Context, expected uint64) (Identity, error) {
	if l.rt.sh != nil {
		return l.sharedBumpEpoch(ctx, &expected)
	}
	return leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (Identity, error) {
		if err := expectEpoch(rt.identity(), expected); err != nil {
			return Identity{}, err
		}
		return rt.bumpEpoch()
	})
}

// expectEpoch checks an epoch bump's expectation against the identity it would replace.
func expectEpoch(cur Identity, expected uint64) error {
	if cur.Epoch != expected {
		return ErrChanged.with(fmt.Sprintf("the epoch is %d, not %d", cur.Epoch, expected), nil)
	}
	return nil
}

// ReplaceSchemaFrom (hub) is ReplaceSchema made only if the active schema's fingerprint
// is still expectedFingerprint ("": no active schema), checked in the same step as the
// replacement, like BumpEpochFrom: of two replacements that expect the same schema exactly
// one is made, the other gets ErrChanged or ErrConflict and wrote nothing.
func (l *Lease) ReplaceSchemaFrom(ctx context.Context, expectedFingerprint, updatedAt string, definition any) error {
	if l.rt.sh != nil {
		value, enc, err := schemaValueFor(updatedAt, definition)
		if err != nil {
			return err
		}
		return l.sharedReplaceSchema(ctx, &expectedFingerprint, value, enc)
	}
	_, err := leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (struct{}, error) {
		if err := expectSchema(rt.schema.Load(), expectedFingerprint); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, rt.replaceSchema(updatedAt, definition)
	})
	return err
}

// expectSchema checks a schema replacement's expectation against the active schema.
func expectSchema(cur *ActiveSchema, expectedFingerprint string) error {
	got := ""
	if cur != nil {
		got = cur.Fingerprint
	}
	if got != expectedFingerprint {
		return ErrChanged.with(fmt.Sprintf("the active schema is %q, not %q", got, expectedFingerprint), nil)
	}
	return nil
}

// ReplaceSchema (hub) sets meta.schema to {"updatedAt": updatedAt, "definition":
// definition} and makes it the active schema. definition must be a JSON object
// (map[string]any or lib0.Object holding only JSON values), else ErrApplyFailed and nothing
// is written. The update reaches peers like any other; each re-arms it.
func (l *Lease) ReplaceSchema(ctx context.Context, updatedAt string, definition any) error {
	if l.rt.sh != nil {
		value, enc, err := schemaValueFor(updatedAt, definition)
		if err != nil {
			return err
		}
		return l.sharedReplaceSchema(ctx, nil, value, enc)
	}
	_, err := leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (struct{}, error) {
		return struct{}{}, rt.replaceSchema(updatedAt, definition)
	})
	return err
}
