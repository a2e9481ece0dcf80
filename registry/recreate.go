package registry

import (
	"context"
	"errors"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// Recreate (hub) creates namespaceID for owner again from the whole state of a replica of
// it (a Yjs update holding the namespace's identity in meta, as a peer's GET …/update
// gives it), keeping its id and its identity: for a namespace a hub lost — restored from a
// backup taken before it was created — whose peers still hold it. Those peers then
// reconcile with it as with any namespace they replicate: what the state lacks of theirs
// flows back. The namespace is not left loaded.
//
// It fails with ErrExists when the hub has the namespace (active or archived),
// ErrApplyFailed when the state does not apply or holds no identity, and ErrDegraded while
// the store cannot take it.
func (r *Registry) Recreate(ctx context.Context, owner, namespaceID string, state []byte) (Identity, error) {
	if r.cfg.Role != RoleHub {
		return Identity{}, ErrRoleViolation.with("only a hub re-creates namespaces", nil)
	}
	if err := r.checkOpen(); err != nil {
		return Identity{}, err
	}
	if !ValidNamespaceID(namespaceID) {
		return Identity{}, ErrApplyFailed.with("invalid namespace id", nil)
	}
	if r.cfg.Shared != nil && !r.cfg.Shared.Healthy() {
		return Identity{}, ErrDegraded.with("the cluster has no quorum", nil)
	}
	doc := r.newDoc()
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		return Identity{}, ErrApplyFailed.with("the state does not apply", err)
	}
	id, err := readIdentity(doc)
	if err != nil {
		return Identity{}, ErrApplyFailed.with("the state holds no replication identity (meta): it is not a replica's whole state", err)
	}
	snapshot, err := yjs.EncodeStateAsUpdate(doc, nil)
	if err != nil {
		return Identity{}, ErrInternal.with("encoding the document", err)
	}
	unlock, err := r.lock(ctx, namespaceID)
	if err != nil {
		return Identity{}, err
	}
	defer unlock()
	e := persistence.Entry{NamespaceID: namespaceID, Owner: owner, State: persistence.StateActive, CreatedAt: r.cfg.Clock.Now()}
	if err := r.cfg.Catalog.CreateEntry(ctx, e, snapshot); err != nil {
		if errors.Is(err, persistence.ErrExists) {
			return Identity{}, ErrExists.with("", err)
		}
		return Identity{}, storeErr("storing the namespace", err)
	}
	if docs := r.cfg.Documents; docs != nil {
		docs.Release(owner, namespaceID) // CreateEntry leaves it resident; nobody has it open
	}
	return id, nil
}
