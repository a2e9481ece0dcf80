package namespace

import (
	"fmt"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// This file is what the peer knows of its local writes (the admin API's and its editors'):
// whether a write may be taken at all — one that could never reach the hub is refused at the
// door — and how many bytes of those taken the hub has not confirmed yet.
//
// The count is a ledger per target: written is every byte of local writes that changed the
// replica, confirmed the part the hub is known to hold. Confirmation comes from the
// namespace layer's own evidence, never from a guess:
//
//   - a sync round: every local write counted when the round started was applied before
//     the peer computed its diff, so the hub's SYNC_APPLIED of that diff confirms them;
//   - an UPDATE_ACK of the oldest update in flight: each pull of the session's fan-out reads
//     the count first, so every write counted by then is in the updates that pull queued or
//     earlier ones — unless an update was lost since (a dropped queue, a given-up window),
//     after which acknowledgements confirm nothing until the next round;
//   - an idle live channel (nothing queued, in flight or waiting to be pulled, no loss):
//     everything counted has been acknowledged.
//
// Writes are counted after they applied, so a count never runs ahead of the document: the
// ledger may report a write a little longer than needed, never a write too early.
//
// With a LocalWriteLedger (TargetControllerOptions.Ledger) the counts outlive the process:
// each change of a target's count is handed to it, in order, and the next start begins
// with the counts it kept as written and unconfirmed — the first round with the hub
// confirms them, as it carries whatever the hub lacks. Without one they live in memory and
// a restart starts them at zero.

// WriteRefusal is why the peer refuses a local write.
type WriteRefusal string

const (
	// RefusedConflicted: the replica is conflicted with the hub
	// (docs/protocol.md#identity-fencing); only a reset brings it back, and a reset archives
	// it.
	RefusedConflicted WriteRefusal = "conflicted"
	// RefusedFailed: replication failed for a cause an operator must remove (a size cap, a
	// grant, a missing namespace, a protocol violation); the write would wait behind it.
	RefusedFailed WriteRefusal = "failed"
	// RefusedSchema: the replicated schema failed to install and replication stopped.
	RefusedSchema WriteRefusal = "schema"
	// RefusedTooLarge: the update is larger than the connection to the hub can carry in one
	// live update (a v1 hub, without chunked transfers: maxUpdateBytes).
	RefusedTooLarge WriteRefusal = "too-large"
)

// WriteRefusedError is a local write the peer refuses: it could never replicate.
type WriteRefusedError struct {
	Reason WriteRefusal
	State  observer.ChannelState
	// Code is the error code that failed the target (RefusedFailed).
	Code string
	// Size and Limit are the update's size and the largest the connection carries
	// (RefusedTooLarge).
	Size, Limit int
	// Chunked reports whether the connection the limit comes from sends chunked transfers.
	Chunked bool
}

func (e *WriteRefusedError) Error() string {
	switch e.Reason {
	case RefusedConflicted:
		return "the replica is conflicted with the hub: a write here would never replicate; reset the replica first"
	case RefusedFailed:
		return fmt.Sprintf("replication of this namespace failed with %s and waits for an operator: a write here would not replicate", e.Code)
	case RefusedSchema:
		return "the schema the hub replicated for this namespace is not valid and replication stopped: fix it on the hub, then reset the replica"
	}
	if e.Chunked {
		return fmt.Sprintf("the update is %d bytes; the connection to the hub carries at most %d bytes in one update", e.Size, e.Limit)
	}
	return fmt.Sprintf("the update is %d bytes; the connection to the hub carries at most %d bytes in one update "+
		"(the hub runs the v1 generation, without chunked transfers): split the write, or run the hub with --generation v2", e.Size, e.Limit)
}

// AdmitLocalWrite says whether a local write of n bytes to a target may be taken now: nil,
// or a *WriteRefusedError. A write to a target that replicates, or will once its connection
// or its automatic retry comes back, is taken (offline writes are a feature; the ledger
// counts them); one that could never replicate is refused — a conflicted replica, a failure
// an operator must act on, an update larger than the last connection to the hub could
// carry. A namespace that is not a target is the caller's business (nil).
func (tc *TargetController) AdmitLocalWrite(namespaceID string, n int) error {
	ns, err := protocol.ParseNamespaceID(namespaceID)
	if err != nil {
		return nil
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tg := tc.targets[ns]
	if tg == nil {
		return nil
	}
	switch {
	case tg.conflicted || tg.state == observer.ChannelConflicted:
		return &WriteRefusedError{Reason: RefusedConflicted, State: observer.ChannelConflicted}
	case tg.schemaFailed:
		return &WriteRefusedError{Reason: RefusedSchema, State: tg.state}
	case tg.state == observer.ChannelFailed && tg.failure != nil && tg.failure.Recovery != RecoveryAutomatic:
		return &WriteRefusedError{Reason: RefusedFailed, State: tg.state, Code: tg.failure.Code}
	case tc.liveCap > 0 && n > tc.liveCap:
		return &WriteRefusedError{Reason: RefusedTooLarge, State: tg.state, Size: n, Limit: tc.liveCap, Chunked: tc.liveChunked}
	}
	return nil
}

// LocalWriteApplied counts a local write of n bytes that changed a target's replica: not
// replicated until the hub confirms it. Call it once the write has applied (after
// registry.Lease.WriteLocal returned, or in its callback) and only when it changed the
// document. It never blocks for long.
func (tc *TargetController) LocalWriteApplied(namespaceID string, n int) {
	ns, err := protocol.ParseNamespaceID(namespaceID)
	if err != nil || n <= 0 {
		return
	}
	tc.mu.Lock()
	tg, pc := tc.targets[ns], tc.conn
	if tg != nil {
		tg.written.Add(int64(n))
		tc.recordLocked(namespaceID, tg.pendingLocked())
	}
	tc.mu.Unlock()
	if tg != nil && pc != nil && tg.idleCheck.CompareAndSwap(false, true) {
		// The write's update may already have been acknowledged: look once the connection
		// gets to it.
		if !pc.s.Post(func() { tg.idleCheck.Store(false); pc.checkIdle(tg) }) {
			tg.idleCheck.Store(false)
		}
	}
}

// Unreplicated returns the bytes of local writes the hub has not confirmed yet, over every
// target, and how many targets have some.
func (tc *TargetController) Unreplicated() (bytes int64, targets int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, tg := range tc.targets {
		if p := tg.pendingLocked(); p > 0 {
			bytes += p
			targets++
		}
	}
	return bytes, targets
}

// Stranded is Unreplicated for the targets whose replication is not running now — failed,
// conflicted, closed, disconnected or waiting to open —, whose local writes wait for a
// connection, a retry or an operator; the writes of the others are being carried.
func (tc *TargetController) Stranded() (bytes int64, targets int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, tg := range tc.targets {
		switch tg.state {
		case observer.ChannelOpening, observer.ChannelBootstrapping, observer.ChannelReconciling, observer.ChannelLive,
			observer.ChannelNeedsResync, observer.ChannelClosing:
			continue
		}
		if p := tg.pendingLocked(); p > 0 {
			bytes += p
			targets++
		}
	}
	return bytes, targets
}

// pendingLocked is the target's local write bytes not confirmed. tc.mu held.
func (tg *target) pendingLocked() int64 { return tg.written.Load() - tg.confirmed }

// confirmLocal records that the hub holds every local write counted up to mark.
func (tc *TargetController) confirmLocal(tg *target, mark int64) {
	tc.mu.Lock()
	if mark > tg.confirmed {
		tg.confirmed = mark
		if !tg.removed {
			tc.recordLocked(tg.ns.String(), tg.pendingLocked())
		}
	}
	tc.mu.Unlock()
}

// LocalWriteLedger keeps the peer's counts of local write bytes the hub has not confirmed
// across restarts (TargetControllerOptions.Ledger).
type LocalWriteLedger interface {
	// Record is told a target's count each time it changes (0 once the hub confirmed
	// everything, or when the target is removed or reset), in the order of the changes: it
	// is called with the controller's lock held, and must neither block nor call back.
	Record(namespaceID string, unreplicated int64)
}

// recordLocked hands a target's count to the ledger; tc.mu held.
func (tc *TargetController) recordLocked(namespaceID string, unreplicated int64) {
	if tc.ledger != nil {
		tc.ledger.Record(namespaceID, max(unreplicated, 0))
	}
}

// checkIdle confirms a target's local writes when its live channel has nothing of them left
// to send or to be acknowledged.
func (pc *peerConn) checkIdle(tg *target) {
	if c := pc.channels[tg.ns]; c != nil && c.target == tg {
		c.confirmIfIdle()
	}
}

// localMark reads the count of the target's local writes (see lastMark).
func (c *peerChannel) localMark() int64 { return c.target.written.Load() }

// confirmLocal confirms the target's local writes counted up to mark.
func (c *peerChannel) confirmLocal(mark int64) { c.pc.tc.confirmLocal(c.target, mark) }
