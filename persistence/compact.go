package persistence

import (
	"context"
	"errors"
	"fmt"
)

// maybeCompactLocked queues r for background compaction when its durable log passed a
// threshold and holds at least 1/CompactSnapshotRatio of the snapshot's bytes. It never blocks: when the compaction queue is full the trigger is dropped and fires
// again on the namespace's next commit.
func (e *engine) maybeCompactLocked(r *resident) {
	if e.opts.Compactor == nil || r.compactQueued || r.gone || r.logCount == 0 || r.logCount < r.compactFloor {
		return
	}
	due := (e.opts.CompactAfterCount > 0 && r.logCount >= e.opts.CompactAfterCount) ||
		(e.opts.CompactAfterBytes > 0 && r.logBytes >= e.opts.CompactAfterBytes)
	if ratio := e.opts.CompactSnapshotRatio; !due || (ratio > 0 && ratio*r.logBytes < r.snapBytes) {
		return
	}
	select {
	case e.compactCh <- r.key:
		r.compactQueued = true
	default:
	}
}

// compactLoop is the compaction goroutine. It exits when Close starts; a compaction under
// way finishes first (its result then reaches the committer, or fails with ErrClosed).
func (e *engine) compactLoop() {
	defer close(e.compactorDone)
	for {
		select {
		case <-e.stop:
			return
		case key := <-e.compactCh:
			err := e.compact(context.Background(), key)
			if err != nil && !errors.Is(err, ErrClosed) && e.opts.OnCompactionError != nil {
				notify(func() { e.opts.OnCompactionError(key.owner, key.ns, err) })
			}
			e.mu.Lock()
			if r := e.res[key]; r != nil {
				r.compactQueued = false
				r.compactFloor = 0
				if err != nil { // do not retry on every commit: wait until the log doubled
					r.compactFloor = 2*r.logCount + 1
				}
			}
			e.mu.Unlock()
		}
	}
}

func (e *engine) Compact(ctx context.Context, owner, ns string) error {
	key, err := checkKey(owner, ns)
	if err != nil {
		return err
	}
	if e.readOnly {
		return ErrReadOnly
	}
	if e.isClosed() {
		return ErrClosed
	}
	return e.compact(ctx, key)
}

// compact folds the durable log of key into its snapshot: it reads the document in a read
// transaction, runs the Compactor outside any transaction, and hands the result to the
// committer, which writes the new snapshot and drops the folded log entries in one
// transaction — unless the snapshot changed meanwhile. Appends made during the fold stay in
// the log. A crash leaves either the old snapshot and log or the new snapshot and the rest of
// the log.
func (e *engine) compact(ctx context.Context, key docKey) error {
	if e.opts.Compactor == nil {
		return ErrNoCompactor
	}
	// Another compaction or a snapshot replacement may win the race to the committer; then
	// fold again what is left, a few times at most.
	for range 4 {
		if err := e.compactOnce(ctx, key); !errors.Is(err, errStale) {
			return err
		}
	}
	return nil
}

func (e *engine) compactOnce(ctx context.Context, key docKey) error {
	var doc Doc
	err := e.view(ctx, func(r reader) (err error) {
		doc, err = r.doc(key.owner, key.ns)
		return err
	})
	if err != nil {
		return err
	}
	if len(doc.Updates) == 0 {
		return nil
	}
	snap, err := runCompactor(e.opts.Compactor, doc.Snapshot, doc.Updates)
	if err != nil {
		return fmt.Errorf("persistence: compact %s/%s: %w", key.owner, key.ns, err)
	}
	c := &control{key: key, data: snap, through: doc.Through, expect: doc.SnapshotThrough}
	return e.control(ctx, opFold, c)
}

// runCompactor calls fn, turning a panic into an error.
func runCompactor(fn Compactor, snapshot []byte, updates [][]byte) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("compactor panicked: %v", p)
		}
	}()
	return fn(snapshot, updates)
}
