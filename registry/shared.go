package registry

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// SharedLog is the seam to a hub cluster: several hub processes that serve the same
// namespaces as one hub. It is an ordered, replicated log per namespace plus a small
// record of each namespace's meta changes with compare-and-set; the cluster package
// implements it on NATS JetStream. With Config.Shared set, the registry (RoleHub only)
// keeps no document data of its own: a namespace loads from the log's start (a snapshot,
// or the namespace's first document) and every write is a record of the log, applied by
// every process in log order. Config.Catalog is then the cluster's catalog of entries.
type SharedLog interface {
	// OpenLog opens the log of (owner, namespaceID) for this process: where the document
	// starts and how far the log went when it was opened. Records are delivered to host
	// after Follow. A log that cannot be reached in time is persistence.ErrUnavailable.
	OpenLog(ctx context.Context, owner, namespaceID string, host LogHost) (NamespaceLog, error)
	// Healthy reports whether this process can commit records now (a quorum of the cluster
	// is reachable). While it is false the registry refuses writes as degraded
	// (docs/protocol.md#degraded-persistence).
	Healthy() bool
}

// LogHost is the registry's side of one namespace log.
type LogHost interface {
	// Apply takes the records of the next log position, in log order, from one goroutine:
	// one record, or several that one process published together (a batch), which share
	// the position and are applied in their order in one slot. It blocks while the
	// namespace has too many positions waiting for its sequencer (backpressure on the log)
	// and returns false once the namespace has unloaded: the log then stops following.
	Apply(recs ...Record) bool
	// Snapshot returns the document as applied from the log, for compaction.
	Snapshot(ctx context.Context) (LogSnapshot, error)
}

// NamespaceLog is one namespace's log as this process follows it. Every method that waits
// on the network honours ctx and has a deadline of its own.
type NamespaceLog interface {
	// Start is where the document starts: the newest snapshot (or the namespace's first
	// document) and the log position it covers, and the log's head when it was opened.
	Start() LogStart
	// Follow starts delivering the records after Start().Through to the host.
	Follow()
	// Publish appends rec to the log. It never blocks (a full publish queue is an
	// immediate error matching ErrOverloaded) and copies rec.Update. done reports the
	// outcome once, from any goroutine; a failure means the record may or may not be in the
	// log — if it is, every process applies it like any other.
	Publish(rec Record, done func(error)) error
	// Head returns the position of the newest record now.
	Head(ctx context.Context) (uint64, error)
	// Meta reads the cluster-wide record of the namespace's meta changes.
	Meta(ctx context.Context) (MetaState, error)
	// ClaimMeta replaces the meta record prev (as Meta returned it) with next, if nobody
	// replaced it meanwhile (compare-and-set on its revision); else ErrConflict.
	ClaimMeta(ctx context.Context, prev, next MetaState) error
	// ClaimDelete makes the namespace's entry a tombstone (and frees its name) if its meta
	// record is still prev (compare-and-set on its revision); else ErrConflict. From then on
	// the namespace loads nowhere, and its id is never taken again.
	ClaimDelete(ctx context.Context, prev MetaState) error
	// RemoveBefore removes the namespace's records before position seq (the deletion
	// record, which stays for the processes still following the log), its snapshot and
	// its versions.
	RemoveBefore(ctx context.Context, seq uint64) error
	// Close stops following and waits for the log's goroutines of this namespace.
	Close()
}

// LogStart is where a namespace's document starts in the log.
type LogStart struct {
	Doc     []byte // a Yjs update: the snapshot, or the namespace's first document
	Through uint64 // the last log position Doc covers (0: none)
	MetaGen uint64 // the meta generation Doc includes
	Head    uint64 // the newest log position when the log was opened
}

// LogSnapshot is a namespace's document as applied from the log through a position.
type LogSnapshot struct {
	Doc     []byte
	Through uint64
	MetaGen uint64
}

// MetaState is the cluster-wide record of a namespace's meta changes: the arbiter of
// epoch bumps and schema replacements (compare-and-set on Revision).
type MetaState struct {
	Gen      uint64    // meta changes claimed so far (0 at creation)
	Epoch    uint64    // the replication epoch after them (1 at creation)
	Schema   []byte    // the schema value, lib0-encoded, after them (nil: none)
	Changed  time.Time // when the last change was claimed (the log's clock)
	Revision uint64    // the version of this record, for ClaimMeta
}

// RecordKind says what a log record carries.
type RecordKind uint8

// Record kinds.
const (
	// RecordUpdate is an update admitted on one process: from a peer session (under the
	// session's epoch) or a local write (Epoch 0, never fenced).
	RecordUpdate RecordKind = 1
	// RecordMeta is a meta change claimed with ClaimMeta: the registry's own update of
	// meta (an epoch bump, a schema replacement). It is applied once per generation.
	RecordMeta RecordKind = 2
	// RecordSnapshot is delivered, never published: the log was compacted past what this
	// process had read, so the snapshot covering it comes instead (Seq: the position it
	// covers, Gen: its meta generation, Update: the document). It is applied as trusted as
	// a load.
	RecordSnapshot RecordKind = 3
	// RecordDeleted says the namespace was deleted: published once its entry is a tombstone
	// (NamespaceLog.ClaimDelete) by the process that deleted it. Every process that has the
	// namespace loaded closes it as Delete does (sessions and watches told, writes still
	// waiting refused) and unloads it. It carries no update. It is also the namespace's
	// "deleted" change in a hub cluster's change feed.
	RecordDeleted RecordKind = 4
)

// Record is one entry of a namespace log.
type Record struct {
	Kind RecordKind
	// Seq is the log position (set on delivery, increasing from one position to the next;
	// the records of a batch share theirs).
	Seq uint64
	// Epoch: for an update, the epoch it was admitted under (0: a local write); for a meta
	// change, the epoch after it.
	Epoch uint64
	// Gen is a meta change's generation.
	Gen uint64
	// Token is the publishing registry's number for the record (unique in its process);
	// Local, on delivery, says that this process published it.
	Token uint64
	Local bool
	// Update is the Yjs update.
	Update []byte
}

// Defaults of the cluster mode.
const (
	DefaultSharedApplyTimeout = 25 * time.Second // below the peers' ackTimeout (30 s)
	DefaultSharedLoadTimeout  = 30 * time.Second
	DefaultSharedStaleClaim   = 30 * time.Second
	// maxRecordsWaiting bounds the log positions of one namespace delivered and not yet
	// applied (each one record, or a batch of them).
	maxRecordsWaiting = 256
)

// originCluster marks updates that came from the log and were admitted on another process
// (or by a caller that is gone): they are fanned out to every local session.
var originCluster = &registryOrigin{"cluster"}

// sharedState is a runtime's part in a hub cluster. Owned by the runtime goroutine, except
// the channels.
type sharedState struct {
	log     NamespaceLog
	pending map[uint64]*pendingOp // records this process published and waits to apply, by token
	metaGen uint64                // the meta generation applied
	waiters []appliedWaiter       // callers waiting for the log to be applied through a position
	slots   chan struct{}         // log positions delivered and not yet applied (bounded)
	exited  chan struct{}         // closed when the sequencer goroutine exits
}

type appliedWaiter struct {
	seq  uint64
	done chan struct{}
}

// pendingOp is a record this process published, waiting to come back from the log.
type pendingOp struct {
	origin any // the submitting session, originLocal, or originBump/originSchema
	finish func(ApplyResult, error)
	timer  clock.Timer
}

// logHost is the registry's LogHost of one runtime.
type logHost struct {
	mu sync.Mutex // guards rt until the runtime exists
	rt *nsRuntime
}

func (h *logHost) runtime() *nsRuntime {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rt
}

// Apply admits the records of a delivered log position as one slot, waiting while
// maxRecordsWaiting positions are queued.
func (h *logHost) Apply(recs ...Record) bool {
	rt := h.runtime()
	if rt == nil {
		return false
	}
	sh := rt.sh
	select {
	case sh.slots <- struct{}{}:
	case <-sh.exited:
		return false
	}
	var once sync.Once
	release := func() { once.Do(func() { <-sh.slots }) }
	s := &slot{
		run: func(rt *nsRuntime, _ *slot) {
			defer release()
			rt.applyRecords(recs)
		},
		fail: func(error) { release() },
	}
	if !rt.submitInternal(s) {
		release()
		return false
	}
	return true
}

// Snapshot encodes the document as applied, in a slot.
func (h *logHost) Snapshot(ctx context.Context) (LogSnapshot, error) {
	rt := h.runtime()
	if rt == nil {
		return LogSnapshot{}, ErrClosed.with("namespace not loaded", nil)
	}
	ch := make(chan LogSnapshot, 1)
	errc := make(chan error, 1)
	s := &slot{
		run: func(rt *nsRuntime, _ *slot) {
			if rt.failErr != nil {
				errc <- ErrInternal.with("namespace document failed", rt.failErr)
				return
			}
			if rt.deleted.Load() {
				errc <- ErrDeleted.with("", nil)
				return
			}
			b, err := yjs.EncodeStateAsUpdate(rt.doc, nil)
			if err != nil {
				errc <- ErrInternal.with("encoding a snapshot", err)
				return
			}
			ch <- LogSnapshot{Doc: b, Through: rt.through, MetaGen: rt.sh.metaGen}
		},
		fail: func(err error) { errc <- err },
	}
	if !rt.submitInternal(s) {
		return LogSnapshot{}, ErrClosed.with("namespace unloaded", nil)
	}
	select {
	case s := <-ch:
		return s, nil
	case err := <-errc:
		return LogSnapshot{}, err
	case <-ctx.Done():
		return LogSnapshot{}, ctx.Err()
	}
}

// sharedErr classifies an error of the shared log.
func sharedErr(msg string, err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, persistence.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return ErrDegraded.with(msg+": the cluster log is unavailable", err)
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, persistence.ErrNotFound):
		return ErrNotFound.with("", err)
	case errors.Is(err, persistence.ErrClosed):
		return ErrClosed.with("cluster store closed", err)
	}
	return ErrInternal.with(msg, err)
}

// ---- loading ----

// openShared loads a namespace from the shared log (caller holds the key lock and checked
// the entry): the document from the log's start, then every record up to the head the log
// had when it was opened, so a lease sees at least every write acknowledged before the
// open began anywhere in the cluster.
func (r *Registry) openShared(ctx context.Context, owner, ns string) (*Lease, error) {
	host := &logHost{}
	nl, err := r.cfg.Shared.OpenLog(ctx, owner, ns, host)
	if err != nil {
		return nil, sharedErr("opening the namespace log", err)
	}
	st := nl.Start()
	doc := r.newDoc()
	if err := yjs.ApplyUpdate(doc, st.Doc, nil); err != nil {
		nl.Close()
		return nil, ErrInternal.with("the namespace's stored start does not apply", err)
	}
	rt, err := newRuntime(r, owner, ns, doc, st.Through)
	if err != nil {
		nl.Close()
		return nil, err
	}
	rt.applied.Store(st.Through)
	rt.sh = &sharedState{
		log:     nl,
		pending: make(map[uint64]*pendingOp),
		metaGen: st.MetaGen,
		slots:   make(chan struct{}, maxRecordsWaiting),
		exited:  make(chan struct{}),
	}
	host.mu.Lock()
	host.rt = rt
	host.mu.Unlock()
	rt.start()
	nl.Follow()
	wctx, cancel := context.WithTimeout(ctx, r.cfg.SharedLoadTimeout)
	defer cancel()
	if err := rt.waitApplied(wctx, st.Head); err != nil {
		rt.stop()
		<-rt.done
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrDegraded.with("the namespace log did not catch up in time", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		rt.stop()
		return nil, ErrClosed.with("registry closed", nil)
	}
	rt.refs = 1
	r.loaded[rt.ns] = rt
	return &Lease{reg: r, rt: rt}, nil
}

// waitApplied waits until the runtime applied the log through seq.
func (rt *nsRuntime) waitApplied(ctx context.Context, seq uint64) error {
	done := make(chan struct{})
	s := &slot{
		run: func(rt *nsRuntime, _ *slot) {
			if rt.through >= seq {
				close(done)
				return
			}
			rt.sh.waiters = append(rt.sh.waiters, appliedWaiter{seq, done})
		},
		fail: func(error) {},
	}
	if !rt.submitInternal(s) {
		return ErrClosed.with("namespace unloaded", nil)
	}
	select {
	case <-done:
		return nil
	case <-rt.sh.exited:
		return ErrClosed.with("namespace unloaded", nil)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (rt *nsRuntime) fireWaiters() {
	w := rt.sh.waiters[:0]
	for _, x := range rt.sh.waiters {
		if rt.through >= x.seq {
			close(x.done)
		} else {
			w = append(w, x)
		}
	}
	clear(rt.sh.waiters[len(w):])
	rt.sh.waiters = w
}

// ---- the write path ----

// admitShared is the cluster form of apply: the gates and the protected check
// run in this slot against the live state, then the update is published to the log with
// the epoch it was admitted under. finish runs later, in the slot that applies it from the
// log in log order — or with the error if the log did not take it in time. A local write
// is applied with local as its origin (originLocal, or one that skips the writer's watch);
// a remote one with its session.
func (rt *nsRuntime) admitShared(s *slot, update []byte, kind applyKind, local *localOrigin, finish func(ApplyResult, error)) {
	var origin any = local
	var epoch uint64
	if kind == applyRemote {
		origin = s.sess
		if s.sess.readOnly {
			finish(ApplyResult{}, ErrRoleViolation.with("session may not submit updates", nil))
			return
		}
		epoch = s.sess.sub.epoch
	}
	// What the document already holds is in the log already: nothing to publish. Checked
	// first so that a degraded node still takes a peer's sync diff that brings nothing new
	// (state exchange goes on while degraded).
	included, err := yjs.Included(rt.doc, update)
	if err != nil {
		finish(ApplyResult{}, ErrApplyFailed.with("", err))
		return
	}
	degraded := rt.degraded()
	if included {
		finish(ApplyResult{Degraded: degraded}, nil)
		return
	}
	if degraded {
		finish(ApplyResult{}, ErrDegraded.with("the cluster has no quorum", nil))
		return
	}
	if err := checkProtected(rt.doc, update); err != nil {
		finish(ApplyResult{}, err)
		return
	}
	rt.publish(Record{Kind: RecordUpdate, Epoch: epoch, Update: update}, &pendingOp{origin: origin, finish: finish})
}

// publish sends rec to the log and waits for it to come back (runtime goroutine).
func (rt *nsRuntime) publish(rec Record, p *pendingOp) {
	token := rt.reg.tokens.Add(1)
	rec.Token = token
	rt.sh.pending[token] = p
	err := rt.sh.log.Publish(rec, func(err error) {
		if err != nil {
			rt.submitInternal(&slot{run: func(rt *nsRuntime, _ *slot) {
				rt.failPending(token, sharedErr("publishing to the cluster log", err))
			}, fail: func(error) {}})
		}
	})
	if err != nil {
		delete(rt.sh.pending, token)
		p.finish(ApplyResult{}, sharedErr("publishing to the cluster log", err))
		return
	}
	p.timer = rt.reg.cfg.Clock.AfterFunc(rt.reg.cfg.SharedApplyTimeout, func() {
		rt.submitInternal(&slot{run: func(rt *nsRuntime, _ *slot) {
			rt.failPending(token, ErrDegraded.with("the write did not come back from the cluster log in time", nil))
		}, fail: func(error) {}})
	})
}

// failPending settles a published record that will not be waited for any longer. If it
// reaches the log after all, every process applies it as any other record.
func (rt *nsRuntime) failPending(token uint64, err error) {
	p := rt.sh.pending[token]
	if p == nil {
		return
	}
	delete(rt.sh.pending, token)
	if p.timer != nil {
		p.timer.Stop()
	}
	p.finish(ApplyResult{}, err)
}

// applyRecords applies the records of one log position (every process, in log order).
// Every decision depends only on the log before it, so every process decides the same: an
// update admitted under an epoch older than the current one is refused (docs/protocol.md#identity-fencing), one that
// touches meta is refused (docs/protocol.md#protected-apply), a meta change is applied once per generation. The records
// of a batch are decided one after the other, each on the state the ones before it left.
func (rt *nsRuntime) applyRecords(recs []Record) {
	if len(recs) == 0 || recs[0].Seq <= rt.through {
		return // delivered again after the log reconnected
	}
	rt.through = recs[0].Seq
	rt.applied.Store(recs[0].Seq)
	for _, rec := range recs {
		rt.applyRecord(rec)
	}
	rt.fireWaiters()
}

// applyRecord applies one record of the position being applied, settling the caller that
// waits for it on this process.
func (rt *nsRuntime) applyRecord(rec Record) {
	var p *pendingOp
	if rec.Local {
		if p = rt.sh.pending[rec.Token]; p != nil {
			delete(rt.sh.pending, rec.Token)
			if p.timer != nil {
				p.timer.Stop()
			}
		}
	}
	var res ApplyResult
	var err error
	switch {
	case rt.deleted.Load():
		err = ErrDeleted.with("", nil) // a record after the deletion: nothing applies any more
	case rec.Kind == RecordDeleted:
		rt.applyLoggedDeleted()
	case rec.Kind == RecordUpdate:
		res, err = rt.applyLoggedUpdate(rec, p)
	case rec.Kind == RecordMeta:
		err = rt.applyLoggedMeta(rec)
	case rec.Kind == RecordSnapshot:
		err = rt.applyLoggedSnapshot(rec)
	default:
		err = ErrInternal.with("unknown record kind in the cluster log", nil)
	}
	res.Seq = rt.through
	if err != nil && p == nil && !errors.Is(err, ErrFenced) {
		if rt.reg.cfg.Logger != nil {
			rt.reg.cfg.Logger.Debug("a record of the cluster log was refused", "namespaceId", rt.ns, "code", string(CodeOf(err)))
		}
	}
	if p != nil {
		p.finish(res, err)
	}
}

func (rt *nsRuntime) applyLoggedUpdate(rec Record, p *pendingOp) (ApplyResult, error) {
	if rt.failErr != nil {
		return ApplyResult{}, ErrInternal.with("namespace document failed", rt.failErr)
	}
	if rec.Epoch != 0 && rec.Epoch < rt.identity().Epoch {
		return ApplyResult{}, ErrFenced.with("", nil)
	}
	// The check of admission again, on the state at this log position. Not the part about
	// the live document's own client id: no process writes with it in a cluster, and that
	// id differs from process to process.
	parsed, err := parseUpdate(rec.Update)
	if err != nil {
		return ApplyResult{}, err
	}
	if touched, err := touchesMetaParsed(rt.doc, parsed); err != nil {
		return ApplyResult{}, err
	} else if touched {
		return ApplyResult{}, ErrProtected.with("update touches meta", nil)
	}
	var origin any = originCluster
	if p != nil {
		origin = p.origin
	}
	changed, _, err := rt.integrate(parsed, origin)
	if err != nil {
		return ApplyResult{}, err
	}
	return ApplyResult{Changed: changed}, nil
}

// applyLoggedDeleted closes the namespace on this process because it was deleted (on this
// process or another): every session and watch is told (Poll.Deleted: peers get
// NAMESPACE_DELETED, editors 4404), every write still waiting for the log is refused, and
// the runtime unloads whoever still holds leases, as Delete does on a single hub.
func (rt *nsRuntime) applyLoggedDeleted() {
	rt.deleted.Store(true)
	for _, sub := range rt.subscribers() {
		sub.signalDeleted()
	}
	for token, p := range rt.sh.pending {
		delete(rt.sh.pending, token)
		if p.timer != nil {
			p.timer.Stop()
		}
		p.finish(ApplyResult{}, ErrDeleted.with("", nil))
	}
	r := rt.reg
	r.mu.Lock()
	if r.loaded[rt.ns] == rt {
		delete(r.loaded, rt.ns)
		r.unloading[rt.ns] = rt
		rt.stop()
	}
	r.mu.Unlock()
	r.logInfo("the namespace was deleted; closed on this node", rt.ns)
}

// errMetaMadeAlready: a meta record of a generation applied before (a change completed
// again by another process). The claim of a generation is unique, so every copy of it
// carries the same change.
var errMetaMadeAlready = ErrConflict.with("this meta change was made already", nil)

// applyLoggedMeta applies a meta change of the log, once per generation: a later copy of a
// generation (a change completed again after its claimer failed) is ignored everywhere.
// An epoch change fences every session of an older epoch before any later slot.
func (rt *nsRuntime) applyLoggedMeta(rec Record) error {
	if rt.failErr != nil {
		return ErrInternal.with("namespace document failed", rt.failErr)
	}
	if rec.Gen <= rt.sh.metaGen {
		return errMetaMadeAlready
	}
	rt.sh.metaGen = rec.Gen
	old := rt.identity()
	var origin any = originSchema
	if rec.Epoch > old.Epoch {
		origin = originBump
	}
	rt.txUpdate = nil
	if err := yjs.ApplyUpdate(rt.doc, rec.Update, origin); err != nil {
		e := ErrInternal.with("meta change does not apply", err)
		rt.breakDoc(e)
		return e
	}
	rt.txUpdate = nil
	rt.afterMetaChange(old)
	if rt.identity().Epoch != max(rec.Epoch, old.Epoch) {
		rt.reg.logError("a meta change's epoch differs from its record", rt.ns, nil)
	}
	return nil
}

// applyLoggedSnapshot applies a snapshot that stands for records this process could not
// read any more (compacted away): its content merges into the document like a load, its
// meta (identity, schema, generation) is taken over, and a newer epoch fences as a meta
// change does.
func (rt *nsRuntime) applyLoggedSnapshot(rec Record) error {
	if rt.failErr != nil {
		return ErrInternal.with("namespace document failed", rt.failErr)
	}
	old := rt.identity()
	rt.txUpdate = nil
	if err := yjs.ApplyUpdate(rt.doc, rec.Update, originCluster); err != nil {
		e := ErrInternal.with("snapshot does not apply", err)
		rt.breakDoc(e)
		return e
	}
	rt.txUpdate = nil
	rt.sh.metaGen = max(rt.sh.metaGen, rec.Gen)
	rt.afterMetaChange(old)
	return nil
}

// afterMetaChange re-reads identity and schema after a meta change was applied and fences
// every session of an older epoch (docs/protocol.md#identity-fencing).
func (rt *nsRuntime) afterMetaChange(old Identity) {
	if id, err := readIdentity(rt.doc); err != nil {
		rt.reg.logError("a meta change left no valid identity; keeping the previous one", rt.ns, err)
	} else {
		rt.ident.Store(&id)
	}
	rt.loadSchema()
	next := rt.identity()
	if next.Epoch > old.Epoch {
		for _, sub := range rt.subscribers() {
			if sub.session && sub.epoch < next.Epoch {
				sub.fence(next)
			}
		}
	}
}

// ---- meta changes: epoch bump and schema replace ----

// metaView is what a process has applied of a namespace's meta changes: the generation,
// and the identity and active schema after it.
type metaView struct {
	gen    uint64
	id     Identity
	schema *ActiveSchema
}

// sharedMeta runs a meta change in a cluster (caller's goroutine, never a slot): catch up
// with the log; read what this process applied of the meta changes, then the cluster's meta
// record. A generation claimed and not applied here is in progress on another process
// (ErrConflict), or — once older than Config.SharedStaleClaim — completed here from the
// record and answered ErrConflict too. Otherwise this process holds the state the record
// describes, and next prepares the change from it (and checks the caller's expectation
// against it); the change is claimed with compare-and-set on the record's revision — so
// nothing changed between the check and the claim, and the loser of a race gets
// ErrConflict and wrote nothing — then published, and waited for until applied here.
func (l *Lease) sharedMeta(ctx context.Context, next func(cur MetaState, at metaView) (MetaState, []any, error)) (Identity, error) {
	if err := l.check(); err != nil {
		return Identity{}, err
	}
	rt := l.rt
	cfg := l.reg.cfg
	if !cfg.Shared.Healthy() {
		return Identity{}, ErrDegraded.with("the cluster has no quorum", nil)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.SharedApplyTimeout)
	defer cancel()
	head, err := rt.sh.log.Head(ctx)
	if err != nil {
		return Identity{}, sharedErr("reading the log head", err)
	}
	if err := rt.waitApplied(ctx, head); err != nil {
		return Identity{}, sharedErr("catching up with the log", err)
	}
	// What this process applied is read before the cluster's record: every generation
	// applied here was claimed before, so the record read after it is never behind it.
	at, err := leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (metaView, error) {
		return metaView{rt.sh.metaGen, rt.identity(), rt.schema.Load()}, nil
	})
	if err != nil {
		return Identity{}, err
	}
	cur, err := rt.sh.log.Meta(ctx)
	if err != nil {
		return Identity{}, sharedErr("reading the meta record", err)
	}
	switch {
	case cur.Gen < at.gen:
		return Identity{}, ErrInternal.with("the cluster's meta record is behind its log", nil)
	case cur.Gen > at.gen:
		if cfg.Clock.Now().Sub(cur.Changed) < cfg.SharedStaleClaim {
			return Identity{}, ErrConflict.with("another hub node is changing this namespace's identity or schema; retry", nil)
		}
		kv := []any{MetaEpoch, float64(cur.Epoch)}
		if len(cur.Schema) > 0 {
			d := lib0.NewDecoder(cur.Schema)
			v := d.ReadAny()
			if d.Finish() != nil {
				return Identity{}, ErrInternal.with("the cluster's meta record holds a malformed schema", d.Err())
			}
			kv = append(kv, MetaSchema, v)
		}
		if _, err := l.publishMeta(ctx, cur.Gen, cur.Epoch, kv); err != nil {
			return Identity{}, err
		}
		return Identity{}, ErrConflict.with("an earlier change of this namespace, interrupted on another node, was completed first; retry", nil)
	}
	want, kv, err := next(cur, at)
	if err != nil {
		return Identity{}, err
	}
	want.Gen = cur.Gen + 1
	update, err := l.prepareMeta(ctx, kv)
	if err != nil {
		return Identity{}, err
	}
	if err := rt.sh.log.ClaimMeta(ctx, cur, want); err != nil {
		return Identity{}, sharedErr("claiming the change", err)
	}
	return l.publishPrepared(ctx, want.Gen, want.Epoch, update)
}

// prepareMeta builds the update of a meta change from the live state, in a slot: the
// registry's meta write on a copy of the document (a fresh client id, so the copy's
// writes never collide with anyone's), without touching the live document.
func (l *Lease) prepareMeta(ctx context.Context, kv []any) ([]byte, error) {
	return leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) ([]byte, error) {
		snap, err := yjs.EncodeStateAsUpdate(rt.doc, nil)
		if err != nil {
			return nil, ErrInternal.with("copying the document", err)
		}
		scratch := rt.reg.newDoc()
		if err := yjs.ApplyUpdate(scratch, snap, nil); err != nil {
			return nil, ErrInternal.with("copying the document", err)
		}
		var update []byte
		unsubscribe := scratch.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
		defer unsubscribe()
		if err := writeMeta(scratch, originBump, kv...); err != nil {
			return nil, ErrInternal.with("meta write failed", err)
		}
		return update, nil
	})
}

// publishMeta prepares and publishes a meta change.
func (l *Lease) publishMeta(ctx context.Context, gen, epoch uint64, kv []any) (Identity, error) {
	update, err := l.prepareMeta(ctx, kv)
	if err != nil {
		return Identity{}, err
	}
	return l.publishPrepared(ctx, gen, epoch, update)
}

// publishPrepared publishes the meta change of generation gen and waits until it is applied
// here. The change this process claimed may reach the log first as another process's
// completion of it (its claim looked interrupted): that copy carries the same change, so
// the change counts as made; the identity returned is the one it set.
func (l *Lease) publishPrepared(ctx context.Context, gen, epoch uint64, update []byte) (Identity, error) {
	type result struct {
		id  Identity
		err error
	}
	ch := make(chan result, 1)
	_, err := leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (struct{}, error) {
		rt.publish(Record{Kind: RecordMeta, Gen: gen, Epoch: epoch, Update: update}, &pendingOp{
			origin: originBump,
			finish: func(_ ApplyResult, err error) {
				id := rt.identity()
				if errors.Is(err, errMetaMadeAlready) {
					id.Epoch, err = epoch, nil
				}
				ch <- result{id, err}
			},
		})
		return struct{}{}, nil
	})
	if err != nil {
		return Identity{}, err
	}
	select {
	case r := <-ch:
		return r.id, r.err
	case <-ctx.Done():
		return Identity{}, ErrDegraded.with("the change did not come back from the cluster log in time", ctx.Err())
	}
}

// sharedBumpEpoch is BumpEpoch (expected nil) or BumpEpochFrom in a cluster.
func (l *Lease) sharedBumpEpoch(ctx context.Context, expected *uint64) (Identity, error) {
	return l.sharedMeta(ctx, func(cur MetaState, at metaView) (MetaState, []any, error) {
		if expected != nil {
			if err := expectEpoch(at.id, *expected); err != nil {
				return MetaState{}, nil, err
			}
		}
		next := Identity{ReplicationID: at.id.ReplicationID, Epoch: at.id.Epoch + 1}
		if !next.Valid() {
			return MetaState{}, nil, ErrInternal.with("epoch overflow", nil)
		}
		want := cur
		want.Epoch = next.Epoch
		return want, []any{MetaEpoch, float64(next.Epoch)}, nil
	})
}

// sharedReplaceSchema is ReplaceSchema (expected nil) or ReplaceSchemaFrom in a cluster;
// value is checked by the caller.
func (l *Lease) sharedReplaceSchema(ctx context.Context, expected *string, value map[string]any, enc []byte) error {
	_, err := l.sharedMeta(ctx, func(cur MetaState, at metaView) (MetaState, []any, error) {
		if expected != nil {
			if err := expectSchema(at.schema, *expected); err != nil {
				return MetaState{}, nil, err
			}
		}
		want := cur
		want.Schema = enc
		return want, []any{MetaSchema, value}, nil
	})
	return err
}

// ---- unloading ----

// sharedUnload ends the runtime's part in the cluster (runtime goroutine, after the last
// slot): what still waits for the log is answered ErrClosed, then the log stops.
func (rt *nsRuntime) sharedUnload() {
	for token, p := range rt.sh.pending {
		delete(rt.sh.pending, token)
		if p.timer != nil {
			p.timer.Stop()
		}
		p.finish(ApplyResult{}, ErrClosed.with("namespace unloaded before its write came back from the cluster log", nil))
	}
	rt.sh.waiters = nil
	rt.sh.log.Close()
}
