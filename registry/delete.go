package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// Deleting a namespace, and its name and labels.
//
// A delete runs in three steps. First a slot of the namespace's sequencer — after every
// write admitted before it — checks the caller's expectation (the hub's epoch) and marks
// the runtime deleted: every later slot is refused with ErrDeleted, and every session and
// watch is told (Poll.Deleted, then Closed) so that the replication layer ends its peers'
// channels and the editors' rooms close their sockets. Then the runtime is unloaded at once,
// whoever still holds leases (they become unusable, as at Registry.Close), without saving
// anything. Last, under the namespace's lifecycle lock, the catalog turns the entry into a
// tombstone and the document is removed (on a peer, kept in an archive when asked).
// Registry.Open of a tombstone is ErrDeleted; the id is never created or imported again.
//
// Name and labels live in the catalog (indexed, for listing) and, on a hub, in the
// document's meta map (MetaName, MetaLabels), written by the registry like the schema, so
// that they replicate to peers with the namespace.

// Meta keys of a namespace's name and labels (a string; a map of strings). Absent when the
// namespace has none.
const (
	MetaName   = "name"
	MetaLabels = "labels"
)

var (
	originNames  = &registryOrigin{"names"}
	originDelete = &registryOrigin{"delete"}
)

// CreateOptions are the optional parts of a new namespace.
type CreateOptions struct {
	Name   string
	Labels map[string]string
}

// namesMeta is the meta write of a name and labels.
func namesMeta(name string, labels map[string]string) []any {
	l := make(map[string]any, len(labels))
	for k, v := range labels {
		l[k] = v
	}
	return []any{MetaName, name, MetaLabels, l}
}

// Delete (hub) deletes the namespace (owner, namespaceID) everywhere this process keeps it:
// its sessions and watches are told and closed, its document removed, its entry a tombstone.
// expectedEpoch must be the namespace's replication epoch (else ErrChanged, nothing done):
// a delete is never one stray request. A namespace that is missing or another owner's is
// ErrNotFound; one deleted already ErrDeleted.
func (r *Registry) Delete(ctx context.Context, owner, namespaceID string, expectedEpoch uint64) error {
	if r.cfg.Role != RoleHub {
		return ErrRoleViolation.with("only the hub deletes namespaces; a peer deletes its replica when the hub says so", nil)
	}
	if r.cfg.Shared != nil {
		if !r.cfg.Shared.Healthy() {
			return ErrDegraded.with("the cluster has no quorum", nil)
		}
		err := r.deleteShared(ctx, owner, namespaceID, expectedEpoch)
		if f, ok := r.cfg.Shared.(DeleteFinisher); ok && errors.Is(err, ErrDeleted) {
			// Deleted already: by a delete that may have been interrupted after its
			// tombstone. Complete it (nothing to do when it was not), and answer ErrDeleted.
			if ferr := f.FinishDelete(context.WithoutCancel(ctx), owner, namespaceID); ferr != nil && !errors.Is(ferr, persistence.ErrNotFound) {
				r.logError("completing an interrupted delete failed; the next delete of the namespace tries again", namespaceID, ferr)
			}
		}
		return err
	}
	return r.deleteNamespace(ctx, owner, namespaceID, func(id Identity) error { return expectEpoch(id, expectedEpoch) },
		func(ctx context.Context) error {
			return r.cfg.Catalog.DeleteEntry(ctx, owner, namespaceID)
		})
}

// DeleteReplica (peer) deletes the local replica of (owner, namespaceID) because the hub
// deleted the namespace: like Delete, with the document moved under an archive first when
// keepArchive is set (the replica may hold writes the hub never had). It returns the
// archive (zero without keepArchive). A missing replica is ErrNotFound, one deleted
// already ErrDeleted; a peer then remembers the id as deleted all the same.
func (r *Registry) DeleteReplica(ctx context.Context, owner, namespaceID string, keepArchive bool) (persistence.ArchiveInfo, error) {
	docs := r.cfg.Documents
	if docs == nil || r.cfg.Role != RolePeer {
		return persistence.ArchiveInfo{}, ErrRoleViolation.with("only a peer deletes a replica", nil)
	}
	var info persistence.ArchiveInfo
	err := r.deleteNamespace(ctx, owner, namespaceID, nil, func(ctx context.Context) error {
		var err error
		info, err = docs.Delete(ctx, owner, namespaceID, keepArchive)
		return err
	})
	return info, err
}

// deleteNamespace runs the three steps of a delete; check, when set, runs in the marking
// slot against the current identity; remove is the catalog's part.
func (r *Registry) deleteNamespace(ctx context.Context, owner, ns string, check func(Identity) error, remove func(context.Context) error) error {
	if !ValidNamespaceID(ns) {
		return ErrNotFound.with("", nil)
	}
	l, err := r.Open(ctx, owner, ns)
	if err != nil {
		return err
	}
	rt := l.rt
	_, err = leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (struct{}, error) {
		if rt.deleted.Load() {
			return struct{}{}, ErrDeleted.with("", nil)
		}
		if check != nil {
			if err := check(rt.identity()); err != nil {
				return struct{}{}, err
			}
		}
		rt.deleted.Store(true)
		for _, sub := range rt.subscribers() {
			sub.signalDeleted()
		}
		return struct{}{}, nil
	})
	if err != nil {
		l.Release()
		return err
	}
	unlock, err := r.lock(context.WithoutCancel(ctx), ns)
	if err != nil {
		l.Release()
		return err
	}
	defer unlock()
	r.mu.Lock()
	if r.loaded[ns] == rt {
		delete(r.loaded, ns)
		r.unloading[ns] = rt
		rt.stop()
	}
	r.mu.Unlock()
	l.Release()
	if err := r.waitUnloaded(context.WithoutCancel(ctx), ns); err != nil {
		return err
	}
	r.past.forget(ns)
	// From here on the delete completes whatever the caller's context does: the namespace
	// is already closed everywhere in this process.
	if err := remove(context.WithoutCancel(ctx)); err != nil {
		if errors.Is(err, persistence.ErrNotFound) {
			return ErrDeleted.with("", err)
		}
		return storeErr("deleting the namespace", err)
	}
	return nil
}

// DeleteFinisher is a SharedLog that can complete a delete interrupted after the namespace's
// entry became a tombstone — before its deletion record was published, or before the log
// was purged: the nodes that still have the namespace loaded are told, and the log and
// snapshot removed. Delete calls it when asked to delete a namespace deleted already.
type DeleteFinisher interface {
	FinishDelete(ctx context.Context, owner, namespaceID string) error
}

// deleteShared is Delete in a hub cluster. This process catches up with the namespace's
// log and checks the expected epoch against what it applied and against the cluster's meta
// record; the entry becomes a tombstone by compare-and-set on that record's revision (so an
// epoch bump or another delete racing it on any node makes one of them fail, and nothing
// loads the namespace anywhere after it); then a deletion record is published, which every
// process that has the namespace loaded applies in log order — telling its sessions and
// watches and unloading it (applyLoggedDeleted); once this process applied it, the records
// before it and the snapshot are removed. What stays in the log is the deletion record
// alone, for the processes still reading towards it.
func (r *Registry) deleteShared(ctx context.Context, owner, ns string, expected uint64) error {
	if !ValidNamespaceID(ns) {
		return ErrNotFound.with("", nil)
	}
	l, err := r.Open(ctx, owner, ns)
	if err != nil {
		return err
	}
	defer l.Release()
	rt := l.rt
	ctx, cancel := context.WithTimeout(ctx, r.cfg.SharedApplyTimeout)
	defer cancel()
	head, err := rt.sh.log.Head(ctx)
	if err != nil {
		return sharedErr("reading the log head", err)
	}
	if err := rt.waitApplied(ctx, head); err != nil {
		return sharedErr("catching up with the log", err)
	}
	at, err := leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (Identity, error) {
		if rt.deleted.Load() {
			return Identity{}, ErrDeleted.with("", nil)
		}
		return rt.identity(), nil
	})
	if err != nil {
		return err
	}
	if err := expectEpoch(at, expected); err != nil {
		return err
	}
	cur, err := rt.sh.log.Meta(ctx)
	if err != nil {
		return sharedErr("reading the meta record", err)
	}
	if cur.Epoch != expected {
		return ErrChanged.with(fmt.Sprintf("the epoch is %d, not %d", cur.Epoch, expected), nil)
	}
	if err := rt.sh.log.ClaimDelete(ctx, cur); err != nil {
		if errors.Is(err, persistence.ErrNotFound) {
			return ErrDeleted.with("", err)
		}
		return sharedErr("deleting the namespace", err)
	}
	// From here on the namespace is deleted: it loads nowhere. What follows tells the
	// processes that have it loaded, and frees the log.
	ctx = context.WithoutCancel(ctx)
	type published struct {
		seq uint64
		err error
	}
	ch := make(chan published, 1)
	_, err = leaseWait(ctx, l, func(rt *nsRuntime, _ *slot) (struct{}, error) {
		rt.publish(Record{Kind: RecordDeleted}, &pendingOp{origin: originDelete, finish: func(res ApplyResult, err error) {
			ch <- published{res.Seq, err}
		}})
		return struct{}{}, nil
	})
	var p published
	if err == nil {
		p = <-ch // settles within SharedApplyTimeout
	} else {
		p.err = err
	}
	if p.err != nil {
		r.logError("a deleted namespace could not be closed on the other hub nodes yet; the next delete of it completes this one", ns, p.err)
		return nil
	}
	rctx, rcancel := context.WithTimeout(ctx, r.cfg.SharedApplyTimeout)
	defer rcancel()
	select { // the runtime unloads once it applied the deletion
	case <-rt.done:
	case <-rctx.Done():
	}
	rctx, rcancel = context.WithTimeout(ctx, r.cfg.SharedApplyTimeout)
	defer rcancel()
	if err := rt.sh.log.RemoveBefore(rctx, p.seq); err != nil {
		r.logError("a deleted namespace's log and snapshot could not be removed; the next delete of it removes them", ns, err)
	}
	return nil
}

// Relabel (hub) changes the name and labels of the namespace (nil fields of change are kept)
// in the catalog, and in the document's meta map, so that they replicate to peers (in a hub
// cluster as a meta change of the log, like a schema replacement). A name the owner already
// gives another namespace is ErrNameTaken.
func (r *Registry) Relabel(ctx context.Context, owner, namespaceID string, change persistence.EntryChange) (persistence.Entry, error) {
	if r.cfg.Role != RoleHub {
		return persistence.Entry{}, ErrRoleViolation.with("only the hub names namespaces", nil)
	}
	l, err := r.Open(ctx, owner, namespaceID)
	if err != nil {
		return persistence.Entry{}, err
	}
	defer l.Release()
	ent, err := r.cfg.Catalog.Relabel(ctx, owner, namespaceID, change)
	if err != nil {
		return persistence.Entry{}, catalogErr("naming the namespace", err)
	}
	if r.cfg.Shared != nil {
		_, err = l.sharedMeta(ctx, func(cur MetaState, _ metaView) (MetaState, []any, error) {
			return cur, namesMeta(ent.Name, ent.Labels), nil
		})
		return ent, err
	}
	_, err = leaseWait(ctx, l, func(rt *nsRuntime, sl *slot) (struct{}, error) {
		if err := rt.gate(sl); err != nil {
			return struct{}{}, err
		}
		_, err := rt.writeMeta(originNames, namesMeta(ent.Name, ent.Labels)...)
		return struct{}{}, err
	})
	return ent, err
}

// CreateWith (hub) is Create with a name and labels: in the catalog (ErrNameTaken when the
// owner already has the name) and in the new document's meta.
func (r *Registry) CreateWith(ctx context.Context, owner string, opts CreateOptions) (Created, error) {
	return r.create(ctx, owner, opts)
}

// catalogErr classifies a catalog failure of names and labels.
func catalogErr(msg string, err error) error {
	switch {
	case errors.Is(err, persistence.ErrNameTaken):
		return ErrNameTaken.with(err.Error(), err)
	case errors.Is(err, persistence.ErrInvalid):
		return ErrInvalid.with(err.Error(), err)
	}
	return storeErr(msg, err)
}

// Names reads the name and labels the document's meta holds (on a peer: as the hub
// replicated them).
func (l *Lease) Names(ctx context.Context) (name string, labels map[string]string, err error) {
	type nl struct {
		name   string
		labels map[string]string
	}
	v, err := leaseWait(ctx, l, func(rt *nsRuntime, sl *slot) (nl, error) {
		if err := rt.gate(sl); err != nil {
			return nl{}, err
		}
		n, ls := readNames(rt.doc)
		return nl{n, ls}, nil
	})
	return v.name, v.labels, err
}

func readNames(doc *yjs.Doc) (string, map[string]string) {
	t, err := doc.Get(MetaRoot, yjs.KindMap)
	if err != nil {
		return "", nil
	}
	m := (*yjs.Map)(t)
	name, _ := m.Get(MetaName)
	s, _ := name.(string)
	var labels map[string]string
	if v, _ := m.Get(MetaLabels); v != nil {
		if o, ok := v.(lib0.Object); ok && len(o) > 0 {
			labels = make(map[string]string, len(o))
			for _, f := range o {
				if str, ok := f.Value.(string); ok {
					labels[f.Key] = str
				}
			}
		}
	}
	return s, labels
}
