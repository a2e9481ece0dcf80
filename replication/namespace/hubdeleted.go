package namespace

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// HubDeletedTimeout bounds what the peer does when the hub says a target's namespace was
// deleted: closing the target and deleting the replica.
const HubDeletedTimeout = time.Minute

// hubDeletedStarting, when set (by tests), runs first on the goroutine that removes the target
// and deletes the replica.
var hubDeletedStarting func()

// hubDeleted acts on the hub's NAMESPACE_DELETED for tg (docs/protocol.md#namespace-deletion),
// off the connection goroutine: the target is removed — nothing reopens it —, and the
// local replica deleted, its id kept as a tombstone so that no later bootstrap or write
// brings it back. The replica is kept in an archive (reason delete) unless the peer knows
// that the hub held all of it: its ledger of local writes shows nothing unconfirmed and
// is complete (the target was live in this process; after a restart the ledger starts at
// zero and cannot say). Nothing the peer held that the hub may not have had is lost
// silently. Until the tombstone is written the namespace cannot be added as a target again,
// so nobody sees the target gone and yet the namespace addable.
func (tc *TargetController) hubDeleted(tg *target) {
	tc.mu.Lock()
	if tg.removed || tc.closed {
		tc.mu.Unlock()
		return
	}
	keep := !tg.wasLive || tg.pendingLocked() > 0
	t := Target{NamespaceID: tg.ns.String(), Owner: tg.owner}
	ns := tg.ns
	tc.hubDeleting[ns] = struct{}{}
	tc.wg.Add(1)
	tc.mu.Unlock()
	go func() {
		defer tc.wg.Done()
		defer func() {
			tc.mu.Lock()
			delete(tc.hubDeleting, ns)
			tc.mu.Unlock()
		}()
		if hubDeletedStarting != nil {
			hubDeletedStarting()
		}
		ctx, cancel := context.WithTimeout(context.Background(), HubDeletedTimeout)
		defer cancel()
		err := tc.RemoveTarget(ctx, t.NamespaceID)
		if errors.Is(err, ErrUnknownTarget) {
			return // removed meanwhile by an operator
		}
		var info persistence.ArchiveInfo
		if err == nil {
			info, err = tc.reg.DeleteReplica(ctx, t.Owner, t.NamespaceID, keep)
			if errors.Is(err, registry.ErrNotFound) || errors.Is(err, registry.ErrDeleted) {
				err = nil // never bootstrapped, or deleted already: nothing to keep
			}
		}
		if err != nil {
			tc.log.Warn("the hub deleted a namespace, and deleting its local replica failed", slog.String("namespaceId", t.NamespaceID),
				slog.String("error", err.Error()))
		} else {
			attrs := []any{slog.String("namespaceId", t.NamespaceID), slog.Bool("archived", info.ID != 0)}
			if info.ID != 0 {
				attrs = append(attrs, slog.Uint64("archiveId", info.ID))
			}
			tc.log.Info("the hub deleted a namespace: its target is removed and its local replica deleted", attrs...)
		}
		if tc.onHubDeleted != nil {
			tc.onHubDeleted(t, info, err)
		}
	}()
}
