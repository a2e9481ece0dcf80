package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// nsRuntime is the runtime of one loaded namespace: its live document and the single write
// sequencer that every apply of the namespace enters (§1). One goroutine — loop — runs the slots in admission order
// (FIFO); it alone touches the document. Slots never wait on the network, a session, a lease
// or the registry; the only waits in the goroutine are at unload, after the last slot.
type nsRuntime struct {
	reg   *Registry
	owner string
	ns    string

	mu       sync.Mutex // guards stopping, exited and queue
	stopping bool
	exited   bool          // the goroutine has run its last slot: nothing more is admitted
	queue    []*slot       // admitted slots, FIFO; bounded by Config.MaxQueuedSlots (full → ErrOverloaded)
	wake     chan struct{} // cap 1: the queue became non-empty, or stopping was set
	done     chan struct{} // closed when the goroutine has exited and the store released the namespace

	refs int // leases; guarded by reg.mu

	ident  atomic.Pointer[Identity]     // the current identity, readable without a slot
	schema atomic.Pointer[ActiveSchema] // the active schema, readable without a slot (nil: none)
	failed atomic.Bool                  // the document broke (an internal apply failure)
	dirty  atomic.Bool                  // saved < unsaved, for readers outside the goroutine

	// sh is the runtime's part in a hub cluster (Config.Shared), nil otherwise; set before
	// the goroutine starts and never replaced.
	sh      *sharedState
	applied atomic.Uint64 // cluster: the last log position applied, for readers outside the goroutine

	subsMu sync.Mutex                      // serialises changes to subs
	subs   atomic.Pointer[[]*subscription] // fan-out targets in registration order (copy on write)
	gone   bool                            // unloaded: new subscriptions start closed; guarded by subsMu

	// Owned by the runtime goroutine.
	doc           *yjs.Doc
	through       uint64 // the last append sequence number of this namespace
	appends       int    // appends since load (or since the last snapshot the registry wrote)
	unsaved       uint64 // generation of changes the store did not accept (backpressure)
	saved         uint64 // the generation the last snapshot covered; degraded while saved < unsaved
	failErr       error
	spare         []*slot // the other queue buffer, reused
	txUpdate      []byte  // set by onUpdate: the update of the last transaction
	changes       uint64  // transactions that changed the document since load (onUpdate)
	full          fullState
	hadPending    bool // the document held pending structs before the apply in progress
	schemaSeen    schemaState
	saverStarted  bool
	saverKick     chan struct{}
	saverCancel   context.CancelFunc
	saverDone     chan struct{}
	saveFailed    error // the saver gave up for this cause (permanentSaveFailure)
	unsubscribeFn func()

	act activity // counters for Registry.Activity
}

// slot is one unit of sequenced work.
type slot struct {
	admitted time.Time // stage-clock reading at admission (zero without a stage clock)
	sess     *Session  // the submitting session, nil for lease and registry work
	run      func(rt *nsRuntime, s *slot)
	fail     func(err error) // settles the slot with err when run cannot (closed, panic)
}

// registryOrigin marks transactions the registry itself makes (meta writes).
type registryOrigin struct{ what string }

var (
	originCreate = &registryOrigin{"create"}
	originBump   = &registryOrigin{"epoch-bump"}
	originSchema = &registryOrigin{"schema"}
)

// localOrigin marks updates of the local write API (Lease.WriteLocal). (Not zero-sized: Go
// may give every zero-sized allocation the same address.) skip, when set, is the watch of
// the writer (Lease.WriteLocalExceptAsync): the update is not fanned out to it.
type localOrigin struct {
	_    byte
	skip *subscription
}

var originLocal = &localOrigin{}

func newRuntime(reg *Registry, owner, ns string, doc *yjs.Doc, through uint64, appends int) (*nsRuntime, error) {
	id, err := readIdentity(doc)
	if err != nil {
		return nil, ErrInternal.with("namespace document has no valid identity", err)
	}
	rt := &nsRuntime{
		reg:     reg,
		owner:   owner,
		ns:      ns,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		doc:     doc,
		through: through,
		appends: appends,
	}
	rt.ident.Store(&id)
	rt.loadSchema()
	rt.unsubscribeFn = doc.OnUpdate(rt.onUpdate)
	return rt, nil
}

// identity returns the current identity.
func (rt *nsRuntime) identity() Identity { return *rt.ident.Load() }

// submit admits s into the slot queue without blocking.
func (rt *nsRuntime) submit(s *slot) error {
	if sc := rt.reg.cfg.StageClock; sc != nil {
		s.admitted, _ = readClock(sc)
	}
	rt.mu.Lock()
	switch {
	case rt.stopping:
		rt.mu.Unlock()
		return ErrClosed.with("namespace unloaded", nil)
	case len(rt.queue) >= rt.reg.cfg.MaxQueuedSlots:
		rt.mu.Unlock()
		return ErrOverloaded.with("", nil)
	}
	rt.queue = append(rt.queue, s)
	first := len(rt.queue) == 1
	rt.mu.Unlock()
	if first {
		rt.signal()
	}
	return nil
}

// submitInternal admits a slot of the registry's own (a record of the cluster log, the
// settlement of a write waiting for it) until the goroutine exits — while stopping too,
// and outside Config.MaxQueuedSlots: such slots are bounded by their sources (records
// waiting, writes waiting). It reports whether the slot was admitted.
func (rt *nsRuntime) submitInternal(s *slot) bool {
	rt.mu.Lock()
	if rt.exited {
		rt.mu.Unlock()
		return false
	}
	rt.queue = append(rt.queue, s)
	first := len(rt.queue) == 1
	rt.mu.Unlock()
	if first {
		rt.signal()
	}
	return true
}

func (rt *nsRuntime) signal() {
	select {
	case rt.wake <- struct{}{}:
	default:
	}
}

// stop makes the goroutine finish the admitted slots and unload. It does not wait.
func (rt *nsRuntime) stop() {
	rt.mu.Lock()
	rt.stopping = true
	rt.mu.Unlock()
	rt.signal()
}

func (rt *nsRuntime) isStopping() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.stopping
}

func (rt *nsRuntime) start() {
	rt.reg.wg.Add(1)
	go rt.loop()
}

// loop is the sequencer goroutine: it takes the admitted slots in batches (swapping two
// buffers) and runs them in order; once stopping is set, the queue is empty — no slot is
// admitted after stopping but the registry's own — and, in a cluster, no write waits for
// the log any more, it unloads.
func (rt *nsRuntime) loop() {
	defer rt.reg.wg.Done()
	defer rt.unload()
	for {
		rt.mu.Lock()
		batch := rt.queue
		if len(batch) > 0 {
			rt.queue = rt.spare
		} else if rt.stopping && rt.drained() {
			rt.exited = true
			rt.mu.Unlock()
			if rt.sh != nil {
				close(rt.sh.exited)
			}
			return
		}
		rt.mu.Unlock()
		if len(batch) == 0 {
			<-rt.wake
			continue
		}
		for i, s := range batch {
			batch[i] = nil
			rt.runSlot(s)
		}
		if cap(batch) > 1024 {
			batch = nil // let a burst's buffer go
		}
		rt.spare = batch[:0]
	}
}

// drained reports that nothing keeps a stopping runtime: in a cluster, the writes waiting
// for the log (each settles within Config.SharedApplyTimeout), unless the registry's Close
// gave up waiting.
func (rt *nsRuntime) drained() bool {
	return rt.sh == nil || len(rt.sh.pending) == 0 || rt.reg.life.Err() != nil
}

// runSlot runs one slot. A panic breaks the document: the namespace then refuses all work.
func (rt *nsRuntime) runSlot(s *slot) {
	defer func() {
		if p := recover(); p != nil {
			err := ErrInternal.with("sequencer slot panicked", fmt.Errorf("%v", p))
			rt.breakDoc(err)
			s.fail(err)
		}
	}()
	rt.act.slotAdmitted = s.admitted
	s.run(rt, s)
}

// breakDoc marks the document unusable: every later slot fails, and every session is told.
func (rt *nsRuntime) breakDoc(err error) {
	if rt.failErr != nil {
		return
	}
	rt.failErr = err
	rt.failed.Store(true)
	rt.reg.logError("namespace document failed; it is reloaded from the store once released", rt.ns, err)
	for _, sub := range rt.subscribers() {
		sub.signalFailed()
	}
}

// gate is the check at the start of every slot: a broken document refuses everything; a
// fenced session is refused at the start of any later slot.
func (rt *nsRuntime) gate(s *slot) error {
	if rt.failErr != nil {
		return ErrInternal.with("namespace document failed", rt.failErr)
	}
	if s.sess != nil && s.sess.sub.isFenced() {
		return ErrFenced.with("", nil)
	}
	return nil
}

// onUpdate is the single document observer of the runtime (§10.1): it records the update
// of each transaction and fans it out to the subscriptions as one immutable slice shared by
// all. An update is not echoed to the session it came from — except when the
// document held pending structs before the apply: then the transaction may have integrated
// earlier structs released by it, which the origin may lack (GUIDE §4), so it gets the whole
// transaction update too.
func (rt *nsRuntime) onUpdate(update []byte, origin any) {
	rt.txUpdate = update
	rt.act.wrote(len(update))
	rt.changes++
	if origin == originBump {
		// The bump's sessions are fenced by the slot right after this transaction; only
		// watchers see the update.
		rt.fanOut(update, nil, true)
		return
	}
	var skip *subscription
	switch o := origin.(type) {
	case *Session:
		if !rt.hadPending {
			skip = o.sub
		}
	case *localOrigin:
		if !rt.hadPending {
			skip = o.skip
		}
	}
	rt.fanOut(update, skip, false)
}

func (rt *nsRuntime) fanOut(update []byte, skip *subscription, watchersOnly bool) {
	var shared *yjs.Shared
	for _, sub := range rt.subscribers() {
		if sub == skip || (watchersOnly && sub.session) {
			continue
		}
		if shared == nil {
			shared = yjs.Share(update)
		}
		sub.push(shared)
	}
}

// subscribers returns the current fan-out targets (an immutable slice).
func (rt *nsRuntime) subscribers() []*subscription {
	if p := rt.subs.Load(); p != nil {
		return *p
	}
	return nil
}

func (rt *nsRuntime) addSub(sub *subscription) {
	rt.subsMu.Lock()
	defer rt.subsMu.Unlock()
	if rt.gone {
		sub.signalClosed()
		return
	}
	old := rt.subscribers()
	next := make([]*subscription, len(old), len(old)+1)
	copy(next, old)
	next = append(next, sub)
	rt.subs.Store(&next)
}

func (rt *nsRuntime) removeSub(sub *subscription) {
	rt.subsMu.Lock()
	defer rt.subsMu.Unlock()
	old := rt.subscribers()
	for i, x := range old {
		if x == sub {
			next := make([]*subscription, 0, len(old)-1)
			next = append(next, old[:i]...)
			next = append(next, old[i+1:]...)
			rt.subs.Store(&next)
			return
		}
	}
}

// degraded reports whether persistence is degraded: the store's last commit failed, or a
// change of this namespace was refused by the store and is not yet saved by a snapshot.
func (rt *nsRuntime) degraded() bool {
	if rt.sh != nil {
		return !rt.reg.cfg.Shared.Healthy()
	}
	return !rt.reg.cfg.Store.Healthy() || rt.saved < rt.unsaved
}

// refuseDegraded is called when a write is refused as degraded. If the store reports a
// failed commit, the saver writes a snapshot as a probe: a failed operation that nothing
// retries (an archive, a compaction) would otherwise leave the store unhealthy — and a hub,
// which then accepts no write, degraded — for good.
func (rt *nsRuntime) refuseDegraded() error {
	if rt.saveFailed != nil {
		return ErrDegraded.with("the store cannot save this namespace's changes; it takes writes again once loaded again", rt.saveFailed)
	}
	if rt.sh == nil && !rt.reg.cfg.Store.Healthy() {
		rt.kickSaver()
	}
	return ErrDegraded.with("", nil)
}

// persist is the dirty notification: it hands the change to the store's group
// committer without waiting for disk. When the store refuses it (backpressure), the change
// stays only in memory: the namespace is degraded until the saver has written a snapshot.
func (rt *nsRuntime) persist(update []byte) uint64 {
	seq, err := rt.reg.cfg.Store.Append(rt.owner, rt.ns, update)
	if err != nil {
		rt.unsaved++
		rt.dirty.Store(true)
		rt.kickSaver()
		if !errors.Is(err, persistence.ErrBackpressure) {
			rt.reg.logError("append refused; the namespace is saved by a snapshot later", rt.ns, err)
		}
		return 0
	}
	rt.through = seq
	rt.appends++
	return seq
}

// ApplyResult is the outcome of a sequenced apply.
type ApplyResult struct {
	// Changed reports that the live document changed (content integrated or deleted).
	Changed bool
	// Seq is the store's append sequence number of the change (compare with Lease.Flushed),
	// or 0 when nothing needed saving or the store refused the append (then the namespace is
	// degraded until a snapshot saved it).
	Seq uint64
	// Degraded reports that the apply ran while persistence was degraded: a peer applying a
	// hub update to memory only (reported as the degraded-bypass-applied event). It is
	// the slot's own decision, not a later reading.
	Degraded bool
	// Stages are the slot's stage durations; nil unless Config.StageClock is set (and
	// then nil too if a clock reading panicked).
	Stages *Stages
	// Rearm is set when a peer's apply of a hub update changed meta.schema: the schema was
	// re-armed in this slot, after the live apply and before the dirty notification (the
	// namespace layer reports it as a schema-rearm-applied or schema-rearm-failed event).
	Rearm *SchemaRearm
}

// Stages are the stage durations of one apply slot, from one clock: the four-stage split of
// an apply the observer reports (§23.4).
type Stages struct {
	QueueWait      time.Duration // admission → slot start
	ProtectedCheck time.Duration // slot start → live apply start (gates and protected check)
	LiveApply      time.Duration // the live apply (including fan-out)
	DirtyNotify    time.Duration // the dirty notification (Store.Append)
}

// applyKind says who sent an update, which decides the gates apply runs it through.
type applyKind uint8

const (
	applyRemote applyKind = iota // from a replication session
	applyLocal                   // the local write API
)

// apply runs an update through the gates, the protected check, the live apply and the dirty
// notification, in this slot (§10.1, §20).
func (rt *nsRuntime) apply(s *slot, update []byte, kind applyKind) (ApplyResult, error) {
	return rt.applyFrom(s, update, kind, originLocal)
}

// applyFrom is apply with the origin of a local write (originLocal, or one that skips the
// writer's watch).
func (rt *nsRuntime) applyFrom(s *slot, update []byte, kind applyKind, local *localOrigin) (ApplyResult, error) {
	if rt.sh != nil {
		return ApplyResult{}, errSingleProcessPath
	}
	st := newStageTimer(rt.reg.cfg.StageClock, s.admitted)
	st.mark() // slot start
	hub := rt.reg.cfg.Role == RoleHub
	var origin any = local
	if kind == applyRemote {
		origin = s.sess
		if s.sess.readOnly {
			return ApplyResult{}, ErrRoleViolation.with("session may not submit updates", nil)
		}
	}
	// Degraded persistence: a hub refuses peer updates; a peer refuses local writes but
	// applies hub updates in memory. A hub refuses local writes as well: it cannot save them.
	// Both take an update that is already included.
	degraded := rt.degraded()
	if (hub || kind == applyLocal) && degraded {
		// State exchange goes on: an update that brings nothing new — the sync diff of
		// a peer already in step — changes nothing and needs no write, so it is taken.
		if included, err := yjs.Included(rt.doc, update); err != nil || !included {
			return ApplyResult{}, rt.refuseDegraded()
		}
		return ApplyResult{Degraded: true}, nil
	}
	// Protected meta (checkProtected): peer updates on a hub, and local writes on both sides,
	// must not touch meta. Updates a peer receives from its hub are trusted — and may change
	// meta.schema, which is then re-armed (rearmSchema). Whether they touch meta is found at a
	// cost proportional to the update; structs released from pending by the apply may land
	// anywhere, so a transaction that released some counts as touching meta too.
	// The update is decoded once, for the check and the apply.
	parsed, err := parseUpdate(update)
	if err != nil {
		return ApplyResult{}, err
	}
	touched := false
	if hub || kind == applyLocal {
		if err := checkProtectedParsed(rt.doc, parsed); err != nil {
			return ApplyResult{}, err
		}
	} else {
		if touched, err = touchesMetaParsed(rt.doc, parsed); err != nil {
			return ApplyResult{}, err
		}
	}
	st.mark() // live apply start
	changed, hadPending, err := rt.integrate(parsed, origin)
	if err != nil {
		return ApplyResult{}, err
	}
	touched = touched || hadPending
	var rearmed *SchemaRearm
	if changed && touched && !hub {
		// Only a transaction that touched meta can have changed the identity or the schema.
		rt.refreshIdentity()
		rearmed = rt.rearmSchema()
	}
	st.mark() // dirty notification start
	var seq uint64
	if changed || rt.doc.HasPending() {
		// The update as received: it also carries structs left pending, so a restart
		// restores them.
		seq = rt.persist(update)
	}
	st.mark()
	return ApplyResult{Changed: changed, Seq: seq, Degraded: degraded, Stages: st.stages(), Rearm: rearmed}, nil
}

// refreshIdentity re-reads meta after a trusted update may have changed it (a peer).
func (rt *nsRuntime) refreshIdentity() {
	id, err := readIdentity(rt.doc)
	if err != nil {
		rt.reg.logError("hub update left meta without a valid identity; keeping the previous one", rt.ns, err)
		return
	}
	if id != rt.identity() {
		rt.ident.Store(&id)
	}
}

// errSingleProcessPath refuses a write that reached the single hub's path (apply, the
// registry's own meta write) in a hub cluster, where every write goes through the shared
// log: the cluster's store takes no appends, so the write would be applied here and saved
// nowhere. Every caller chooses the cluster's path, so this is a broken invariant, refused
// to the writer rather than lost.
var errSingleProcessPath = ErrInternal.with("a write took the single hub's path in a hub cluster; it was refused, nothing was applied", nil)

// writeMeta makes a registry transaction on meta and saves its update.
func (rt *nsRuntime) writeMeta(origin any, kv ...any) (uint64, error) {
	if rt.sh != nil {
		return 0, errSingleProcessPath
	}
	rt.txUpdate = nil
	if err := writeMeta(rt.doc, origin, kv...); err != nil {
		e := ErrInternal.with("meta write failed", err)
		rt.breakDoc(e)
		return 0, e
	}
	update := rt.txUpdate
	rt.txUpdate = nil
	if update == nil {
		return 0, nil
	}
	return rt.persist(update), nil
}

// bumpEpoch is the §11 epoch bump: one slot, after every update admitted before it; the new
// epoch is written, then every session of the old epoch is fenced before any later slot.
func (rt *nsRuntime) bumpEpoch() (Identity, error) {
	if rt.reg.cfg.Role != RoleHub {
		return Identity{}, ErrRoleViolation.with("only the hub bumps the epoch", nil)
	}
	if rt.degraded() {
		return Identity{}, rt.refuseDegraded()
	}
	old := rt.identity()
	next := Identity{ReplicationID: old.ReplicationID, Epoch: old.Epoch + 1}
	if !next.Valid() {
		return Identity{}, ErrInternal.with("epoch overflow", nil)
	}
	if _, err := rt.writeMeta(originBump, MetaEpoch, float64(next.Epoch)); err != nil {
		return Identity{}, err
	}
	rt.ident.Store(&next)
	for _, sub := range rt.subscribers() {
		if sub.session && sub.epoch < next.Epoch {
			sub.fence(next)
		}
	}
	return next, nil
}

// replaceSchema writes meta.schema (hub).
func (rt *nsRuntime) replaceSchema(updatedAt string, definition any) error {
	if rt.reg.cfg.Role != RoleHub {
		return ErrRoleViolation.with("only the hub replaces the schema", nil)
	}
	if rt.degraded() {
		return rt.refuseDegraded()
	}
	value, enc, err := schemaValueFor(updatedAt, definition)
	if err != nil {
		return err
	}
	d := lib0.NewDecoder(enc)
	s, _ := parseSchema(d.ReadAny())
	if _, err := rt.writeMeta(originSchema, MetaSchema, value); err != nil {
		return err
	}
	// The document now holds the decoded value (yjs stores a value as its lib0 round trip):
	// s is what reading it back would install.
	rt.schemaSeen = schemaState{present: true, raw: enc}
	rt.schema.Store(s)
	return nil
}

// schemaValueFor builds the meta.schema value and its lib0 encoding, refusing a schema no
// peer could install: the definition, as the document will hold it, must be a JSON object.
func schemaValueFor(updatedAt string, definition any) (map[string]any, []byte, error) {
	value := map[string]any{"updatedAt": updatedAt, "definition": definition}
	enc := encodeSchemaValue(value)
	if enc == nil {
		return nil, nil, ErrApplyFailed.with("schema is not a JSON value", nil)
	}
	d := lib0.NewDecoder(enc)
	if _, err := parseSchema(d.ReadAny()); err != nil || d.Err() != nil {
		return nil, nil, ErrApplyFailed.with("schema definition is not a JSON object", err)
	}
	return value, enc, nil
}

// fullState is the last encoding of the whole document, held weakly: while anyone still
// holds it (a snapshot on its way to a peer, an admin read) and no transaction changed the
// document since, it is handed out again instead of encoded again — four fresh peers
// bootstrapping a 32 MiB document at once share one snapshot. Runtime goroutine only.
type fullState struct {
	changes uint64 // rt.changes it reflects
	first   weak.Pointer[byte]
	n       int
}

// encodeState returns the document as an update for a remote state vector (nil or empty:
// the whole document). The bytes may be shared with other callers: never modify them.
func (rt *nsRuntime) encodeState(sv []byte) ([]byte, error) {
	// Every change that integrates something is a transaction (onUpdate counts it); structs
	// pending for missing dependencies change the encoding without one, so a document
	// holding some is encoded afresh each time.
	whole := len(sv) == 0 && !rt.doc.HasPending()
	if whole && rt.full.n > 0 && rt.full.changes == rt.changes {
		if p := rt.full.first.Value(); p != nil {
			return unsafe.Slice(p, rt.full.n), nil
		}
	}
	b, err := yjs.EncodeStateAsUpdate(rt.doc, sv)
	if err == nil && whole && len(b) > 0 {
		rt.full = fullState{changes: rt.changes, first: weak.Make(&b[0]), n: len(b)}
	}
	if err != nil {
		var de *yjs.DecodeError
		if errors.As(err, &de) {
			return nil, ErrApplyFailed.with("malformed state vector", err)
		}
		return nil, ErrInternal.with("encode state", err)
	}
	return b, nil
}

// ---- unloading and the saver ----

// unload runs when the goroutine has finished every slot: it writes a fresh snapshot when
// changes are unsaved or the log grew long, detaches the sessions and releases the
// namespace in the store. Only here does the goroutine wait on disk.
func (rt *nsRuntime) unload() {
	rt.stopSaver()
	if rt.sh != nil {
		rt.sharedUnload() // the log keeps the document: nothing to save here
	} else if rt.failErr == nil && (rt.saved < rt.unsaved || rt.reg.snapshotOnUnload(rt.appends)) {
		if err := rt.writeSnapshot(rt.reg.life); err != nil {
			rt.reg.logError("snapshot at unload failed", rt.ns, err)
		}
	}
	rt.unsubscribeFn()
	rt.subsMu.Lock()
	subs := rt.subscribers()
	rt.subs.Store(nil)
	rt.gone = true
	rt.subsMu.Unlock()
	for _, sub := range subs {
		sub.signalClosed()
	}
	rt.reg.cfg.Store.Release(rt.owner, rt.ns)
	rt.reg.unloaded(rt)
	close(rt.done)
}

// writeSnapshot encodes the document and stores it as the snapshot through the last append
// (runtime goroutine only).
func (rt *nsRuntime) writeSnapshot(ctx context.Context) error {
	snap, err := yjs.EncodeStateAsUpdate(rt.doc, nil)
	if err != nil {
		return err
	}
	gen := rt.unsaved
	if err := rt.reg.cfg.Store.ReplaceSnapshot(ctx, rt.owner, rt.ns, snap, rt.through); err != nil {
		return err
	}
	rt.markSaved(gen)
	return nil
}

// markSaved records that a snapshot saved every change up to generation gen.
func (rt *nsRuntime) markSaved(gen uint64) {
	rt.saved = max(rt.saved, gen)
	rt.appends = 0
	rt.dirty.Store(rt.saved < rt.unsaved)
}

// unsavedFlag reports (from any goroutine) that changes wait for a snapshot.
func (rt *nsRuntime) unsavedFlag() bool { return rt.dirty.Load() }

// kickSaver asks the saver goroutine to write a snapshot (starting it on first use). In a
// hub cluster there is no saver: the log keeps every write and the nodes compact it, and
// the cluster's store takes no snapshot from the registry. Once the saver gave up (a
// failure trying again cannot cure), it is not started again until the namespace reloads.
func (rt *nsRuntime) kickSaver() {
	if rt.sh != nil || rt.saveFailed != nil {
		return
	}
	if !rt.saverStarted {
		rt.saverStarted = true
		ctx, cancel := context.WithCancel(rt.reg.life)
		rt.saverKick = make(chan struct{}, 1)
		rt.saverCancel = cancel
		rt.saverDone = make(chan struct{})
		go rt.saveLoop(ctx)
	}
	select {
	case rt.saverKick <- struct{}{}:
	default:
	}
}

func (rt *nsRuntime) stopSaver() {
	if rt.saverStarted {
		rt.saverCancel()
		<-rt.saverDone
	}
}

// permanentSaveFailure reports a failed snapshot save that trying again cannot cure: the
// store offers no snapshots (a hub cluster's store), is read-only, closed or corrupt,
// refuses the snapshot as invalid, or no longer holds the namespace. Anything else — a
// failing disk, a full commit queue, a store that cannot answer now — may pass.
func permanentSaveFailure(err error) bool {
	for _, kind := range []error{persistence.ErrUnsupported, persistence.ErrReadOnly, persistence.ErrClosed,
		persistence.ErrCorrupt, persistence.ErrInvalid, persistence.ErrNotLoaded, persistence.ErrNotFound,
		persistence.ErrArchived} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// SaveFailures counts the snapshot saves that failed since the registry started (the saver's
// attempts, §20).
type SaveFailures struct {
	// Transient failures were tried again (with backoff, until the store takes the
	// snapshot or the namespace unloads).
	Transient uint64
	// Permanent failures cannot be cured by trying again (see the log line for the cause):
	// the saver stopped; the namespace keeps its unsaved changes in memory only and refuses
	// writes until it is loaded again.
	Permanent uint64
}

// SaveFailures returns the counts of failed snapshot saves.
func (r *Registry) SaveFailures() SaveFailures {
	return SaveFailures{Transient: r.saveTransient.Load(), Permanent: r.savePermanent.Load()}
}

// saveLoop keeps trying to save a namespace whose changes the store refused (a degraded peer
// must keep trying, §20), or whose write was refused while the store is unhealthy (the
// snapshot is then the probe that finds the store healthy again): it takes a consistent
// snapshot in a slot, writes it outside the sequencer, and retries with backoff on the
// registry clock until it succeeds or the runtime unloads (which then makes a last attempt
// itself if changes are unsaved). A run of failures is logged once when it starts (and again
// if its cause changes) and once when a save succeeds after it. A failure that trying again
// cannot cure (permanentSaveFailure) is logged once with its cause and ends the saver: the
// namespace stays degraded, refusing writes with that cause, until it is loaded again.
func (rt *nsRuntime) saveLoop(ctx context.Context) {
	defer close(rt.saverDone)
	cfg := rt.reg.cfg
	backoff := cfg.SaveRetryMin
	failures, lastCause := 0, ""
	for {
		select {
		case <-rt.saverKick:
		case <-ctx.Done():
			return
		}
		for {
			type snap struct {
				data    []byte
				through uint64
				gen     uint64
				ok      bool // false: nothing to save
			}
			res := make(chan snap, 1)
			s := &slot{
				run: func(rt *nsRuntime, _ *slot) {
					if rt.failErr != nil || (rt.saved >= rt.unsaved && cfg.Store.Healthy()) {
						res <- snap{}
						return
					}
					b, err := yjs.EncodeStateAsUpdate(rt.doc, nil)
					if err != nil {
						res <- snap{}
						return
					}
					res <- snap{b, rt.through, rt.unsaved, true}
				},
				fail: func(error) { res <- snap{} },
			}
			if rt.submit(s) != nil {
				return
			}
			var sn snap
			select {
			case sn = <-res:
			case <-ctx.Done():
				return
			}
			if !sn.ok {
				break
			}
			err := cfg.Store.ReplaceSnapshot(ctx, rt.owner, rt.ns, sn.data, sn.through)
			if err == nil {
				backoff = cfg.SaveRetryMin
				if failures > 0 {
					rt.reg.logInfo("the namespace's snapshot was saved after failed attempts", rt.ns, "failedAttempts", failures)
					failures, lastCause = 0, ""
				}
				done := &slot{
					run:  func(rt *nsRuntime, _ *slot) { rt.markSaved(sn.gen) },
					fail: func(error) {},
				}
				if rt.submit(done) != nil {
					return
				}
				break
			}
			if ctx.Err() != nil {
				return
			}
			if permanentSaveFailure(err) {
				// Recorded in the sequence, then logged, then counted: whoever sees the
				// count finds the line, and a write admitted after it the refusal.
				rt.submitInternal(&slot{run: func(rt *nsRuntime, _ *slot) { rt.saveFailed = err }, fail: func(error) {}})
				rt.reg.logError("saving the namespace failed, and trying again cannot help: it is not retried. "+
					"Its unsaved changes are kept in memory only and it refuses writes until it is loaded again; "+
					"remove the cause below, then restart the node", rt.ns, err)
				rt.reg.savePermanent.Add(1)
				return
			}
			failures++
			if cause := err.Error(); cause != lastCause {
				lastCause = cause
				rt.reg.logError("saving the namespace failed; the node tries again (with growing pauses, up to "+
					cfg.SaveRetryMax.String()+") until the store takes it, and says when it did", rt.ns, err)
			}
			rt.reg.saveTransient.Add(1)
			fired := make(chan struct{})
			t := cfg.Clock.AfterFunc(backoff, func() { close(fired) })
			select {
			case <-fired:
			case <-ctx.Done():
				t.Stop()
				return
			}
			backoff = min(2*backoff, cfg.SaveRetryMax)
		}
	}
}

// ---- stage timings ----

// stageTimer reads the stage clock at the stage boundaries (Stages); without a clock it reads
// nothing.
type stageTimer struct {
	c     clock.Reader
	marks [5]time.Time
	n     int
	bad   bool
}

func newStageTimer(c clock.Reader, admitted time.Time) *stageTimer {
	if c == nil {
		return nil
	}
	st := &stageTimer{c: c}
	st.marks[0] = admitted
	st.n = 1
	st.bad = admitted.IsZero()
	return st
}

func (st *stageTimer) mark() {
	if st == nil || st.n >= len(st.marks) {
		return
	}
	t, ok := readClock(st.c)
	if !ok {
		st.bad = true
	}
	st.marks[st.n] = t
	st.n++
}

func (st *stageTimer) stages() *Stages {
	if st == nil || st.bad || st.n != len(st.marks) {
		return nil
	}
	d := func(i int) time.Duration { return max(0, st.marks[i+1].Sub(st.marks[i])) }
	return &Stages{QueueWait: d(0), ProtectedCheck: d(1), LiveApply: d(2), DirtyNotify: d(3)}
}

// readClock reads c; a clock that panics counts as absent, so a broken clock costs the
// timings of one slot, never the slot.
func readClock(c clock.Reader) (t time.Time, ok bool) {
	defer func() {
		if recover() != nil {
			t, ok = time.Time{}, false
		}
	}()
	return c.Now(), true
}

// integrate applies a parsed live update to the document in one transaction and reports
// whether the document changed and whether it held pending structs before (which the
// update may have completed). A malformed update is ErrApplyFailed; any other failure
// breaks the document (ErrInternal). The hub's own path and a cluster node's path apply
// through it alike.
func (rt *nsRuntime) integrate(parsed *yjs.ParsedUpdate, origin any) (changed, hadPending bool, err error) {
	hadPending = rt.doc.HasPending()
	rt.hadPending = hadPending
	rt.txUpdate = nil
	err = yjs.ApplyParsed(rt.doc, parsed, origin)
	rt.hadPending = false
	if err != nil {
		var de *yjs.DecodeError
		if errors.As(err, &de) {
			return false, hadPending, ErrApplyFailed.with("", err)
		}
		e := ErrInternal.with("live apply failed", err)
		rt.breakDoc(e)
		return false, hadPending, e
	}
	changed = rt.txUpdate != nil
	rt.txUpdate = nil
	return changed, hadPending, nil
}
