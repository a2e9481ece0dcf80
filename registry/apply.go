package registry

import (
	"errors"

	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/yjs"
)

// gate is the check at the start of every slot: a broken document refuses everything; a
// fenced session is refused at the start of any later slot.
func (rt *nsRuntime) gate(s *slot) error {
	if rt.failErr != nil {
		return ErrInternal.with("namespace document failed", rt.failErr)
	}
	if rt.deleted.Load() {
		return ErrDeleted.with("", nil)
	}
	if s.sess != nil && s.sess.sub.isFenced() {
		return ErrFenced.with("", nil)
	}
	return nil
}

// degraded reports whether persistence is degraded: the store's last commit failed, or a
// change of this namespace was refused by the store and is not yet saved by a snapshot.
func (rt *nsRuntime) degraded() bool {
	if rt.sh != nil {
		return !rt.reg.cfg.Shared.Healthy()
	}
	return rt.store.degraded()
}

// refuseDegraded is called when a write is refused as degraded. If the store reports a
// failed commit, the saver writes a snapshot as a probe: a failed operation that nothing
// retries (an archive, a compaction) would otherwise leave the store unhealthy — and a hub,
// which then accepts no write, degraded — for good.
func (rt *nsRuntime) refuseDegraded() error {
	if st := rt.store; st != nil {
		if st.saveFailed != nil {
			return ErrDegraded.with("the store cannot save this namespace's changes; it takes writes again once loaded again", st.saveFailed)
		}
		if !st.docs.Healthy() {
			rt.kickSaver()
		}
	}
	return ErrDegraded.with("", nil)
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

// applyKind says who sent an update, which decides the gates apply runs it through.
type applyKind uint8

const (
	applyRemote applyKind = iota // from a replication session
	applyLocal                   // the local write API
)

// apply runs an update through the gates, the protected check, the live apply and the dirty
// notification, in this slot (docs/protocol.md#sending-and-relaying,
// docs/protocol.md#protected-apply).
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

// bumpEpoch is the epoch bump of docs/protocol.md#identity-fencing: one slot, after every
// update admitted before it; the new epoch is written, then every session of the old epoch
// is fenced before any later slot.
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
