package registry

import (
	"context"
	"errors"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// storeState is a runtime's part in the document store of this process (Config.Documents:
// a single hub or a peer); a runtime of a hub cluster has a sharedState instead. The store
// takes each change as an append (persist); when it refuses one, the change is unsaved and
// the saver goroutine keeps trying to write a snapshot of the document until the store
// takes it.
type storeState struct {
	docs persistence.Documents
	// noter, when the store keeps a change feed, takes the state vector after the appends
	// and marks the snapshots that save refused changes (persistence.ChangeNoter).
	noter persistence.ChangeNoter

	// Owned by the runtime goroutine.
	// notesLater: the sequencer goroutine runs, and gives the change feed's state vector
	// once for a run of appends (giveNote, when it goes idle or after noteEvery appends)
	// rather than encoding it after each one; before it runs (a registry write while the
	// namespace loads) and once it unloads, each append carries its own.
	notesLater   bool
	noteSeq      uint64 // the last append whose state vector is owed to the store (0: none)
	noteOwed     int    // appends since the last note given
	appends      int    // appends since load (or since the last snapshot the registry wrote)
	unsaved      uint64 // generation of changes the store did not accept (backpressure)
	saved        uint64 // the generation the last snapshot covered; degraded while saved < unsaved
	saverStarted bool
	saverKick    chan struct{}
	saverCancel  context.CancelFunc
	saverDone    chan struct{}
	saveFailed   error // the saver gave up for this cause (permanentSaveFailure)
}

// newStoreState is a runtime's part in docs, loaded with appends updates in its log.
func newStoreState(docs persistence.Documents, appends int) *storeState {
	st := &storeState{docs: docs, appends: appends}
	if n, ok := docs.(persistence.ChangeNoter); ok && n.NotesWanted() {
		st.noter = n
	}
	return st
}

// degraded reports whether the store's last commit failed, or a change the store refused
// is not yet saved by a snapshot.
func (st *storeState) degraded() bool {
	return !st.docs.Healthy() || st.saved < st.unsaved
}

// persist is the dirty notification: it hands the change to the store's group
// committer without waiting for disk. When the store refuses it (backpressure), the change
// stays only in memory: the namespace is degraded until the saver has written a snapshot.
func (rt *nsRuntime) persist(update []byte) uint64 {
	st := rt.store
	var seq uint64
	var err error
	switch {
	case st.noter != nil && st.notesLater:
		seq, err = st.noter.AppendNoteLater(rt.owner, rt.ns, update)
		if err == nil {
			st.noteSeq = seq
			st.noteOwed++
			if st.noteOwed >= noteEvery {
				rt.giveNote()
			}
		}
	case st.noter != nil:
		seq, err = st.noter.AppendNoted(rt.owner, rt.ns, update, rt.doc.EncodeStateVector())
	default:
		seq, err = st.docs.Append(rt.owner, rt.ns, update)
	}
	if err != nil {
		st.unsaved++
		rt.dirty.Store(true)
		rt.kickSaver()
		if !errors.Is(err, persistence.ErrBackpressure) {
			rt.reg.logError("append refused; the namespace is saved by a snapshot later", rt.ns, err)
		}
		return 0
	}
	rt.through = seq
	st.appends++
	return seq
}

// noteEvery bounds the appends whose change-feed state vector is owed (storeState.notesLater)
// while the sequencer stays busy: the store's group commit cannot end a namespace's appends
// with one whose note is owed, so a long busy run would hold them back.
const noteEvery = 64

// giveNote gives the store the state vector after the runtime's last append, if it owes one
// (runtime goroutine only). The sequencer calls it before it waits for work, every noteEvery
// appends, and when it unloads, so the store's committer, which waits for it, never waits
// for long — and never for a runtime that waits on the store.
func (rt *nsRuntime) giveNote() {
	st := rt.store
	if st == nil || st.noteSeq == 0 {
		return
	}
	st.noter.NoteStateVector(rt.owner, rt.ns, st.noteSeq, rt.noteStateVector())
	st.noteSeq, st.noteOwed = 0, 0
}

// noteStateVector is the document's encoded state vector for the change feed; nil when a
// broken document cannot give it (the note must still be given, or the committer waits).
func (rt *nsRuntime) noteStateVector() (sv []byte) {
	defer func() {
		if recover() != nil {
			sv = nil
		}
	}()
	return rt.doc.EncodeStateVector()
}

// writeSnapshot encodes the document and stores it as the snapshot through the last append
// (runtime goroutine only).
func (rt *nsRuntime) writeSnapshot(ctx context.Context) error {
	snap, err := yjs.EncodeStateAsUpdate(rt.doc, nil)
	if err != nil {
		return err
	}
	gen := rt.store.unsaved
	if err := rt.store.replaceSnapshot(ctx, rt.owner, rt.ns, snap, rt.through, gen > rt.store.saved); err != nil {
		return err
	}
	rt.markSaved(gen)
	return nil
}

// replaceSnapshot stores a snapshot; saves says that it holds changes no append holds,
// which a store with a change feed records as a change.
func (st *storeState) replaceSnapshot(ctx context.Context, owner, ns string, snap []byte, through uint64, saves bool) error {
	if saves && st.noter != nil {
		return st.noter.ReplaceSnapshotNoted(ctx, owner, ns, snap, through)
	}
	return st.docs.ReplaceSnapshot(ctx, owner, ns, snap, through)
}

// markSaved records that a snapshot saved every change up to generation gen.
func (rt *nsRuntime) markSaved(gen uint64) {
	st := rt.store
	st.saved = max(st.saved, gen)
	st.appends = 0
	rt.dirty.Store(st.saved < st.unsaved)
}

// unsavedFlag reports (from any goroutine) that changes wait for a snapshot.
func (rt *nsRuntime) unsavedFlag() bool { return rt.dirty.Load() }

// kickSaver asks the saver goroutine to write a snapshot (starting it on first use). Only a
// runtime over the document store has a saver: in a hub cluster the log keeps every write
// and the nodes compact it. Once the saver gave up (a failure trying again cannot cure), it
// is not started again until the namespace reloads.
func (rt *nsRuntime) kickSaver() {
	st := rt.store
	if st == nil || st.saveFailed != nil {
		return
	}
	if !st.saverStarted {
		st.saverStarted = true
		ctx, cancel := context.WithCancel(rt.reg.life)
		st.saverKick = make(chan struct{}, 1)
		st.saverCancel = cancel
		st.saverDone = make(chan struct{})
		go rt.saveLoop(ctx)
	}
	select {
	case st.saverKick <- struct{}{}:
	default:
	}
}

// stopSaver stops the saver goroutine, if it was started, and waits for it.
func (st *storeState) stopSaver() {
	if st.saverStarted {
		st.saverCancel()
		<-st.saverDone
	}
}

// permanentSaveFailure reports a failed snapshot save that trying again cannot cure: the
// store offers no snapshots, is read-only, closed or corrupt,
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
// attempts).
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

// StateEncodings counts the documents' states given to readers — editors' and peers' sync
// answers, bootstrap snapshots, admin reads — since the registry started.
type StateEncodings struct {
	Encoded uint64 // encoded for the reader
	Shared  uint64 // handed out again: the same state for the same state vector, still held by an earlier reader
}

// StateEncodings returns the counts of states encoded and shared.
func (r *Registry) StateEncodings() StateEncodings {
	return StateEncodings{Encoded: r.statesEncoded.Load(), Shared: r.statesShared.Load()}
}

// saveLoop keeps trying to save a namespace whose changes the store refused (a degraded peer
// must keep trying: docs/protocol.md#degraded-persistence), or whose write was refused while
// the store is unhealthy (the snapshot is then the probe that finds the store healthy
// again): it takes a consistent snapshot in a slot, writes it outside the sequencer, and
// retries with backoff on the registry clock until it succeeds or the runtime unloads (which
// then makes a last attempt itself if changes are unsaved). A run of failures is logged once
// when it starts (and again if its cause changes) and once when a save succeeds after it. A
// failure that trying again cannot cure (permanentSaveFailure) is logged once with its cause
// and ends the saver: the namespace stays degraded, refusing writes with that cause, until
// it is loaded again.
func (rt *nsRuntime) saveLoop(ctx context.Context) {
	st := rt.store
	defer close(st.saverDone)
	cfg := rt.reg.cfg
	backoff := cfg.SaveRetryMin
	failures, lastCause := 0, ""
	for {
		select {
		case <-st.saverKick:
		case <-ctx.Done():
			return
		}
		for {
			type snap struct {
				data    []byte
				through uint64
				gen     uint64
				saves   bool // it saves changes the store refused (a change-feed record)
				ok      bool // false: nothing to save
			}
			res := make(chan snap, 1)
			s := &slot{
				run: func(rt *nsRuntime, _ *slot) {
					if rt.failErr != nil || (st.saved >= st.unsaved && st.docs.Healthy()) {
						res <- snap{}
						return
					}
					b, err := yjs.EncodeStateAsUpdate(rt.doc, nil)
					if err != nil {
						res <- snap{}
						return
					}
					res <- snap{b, rt.through, st.unsaved, st.unsaved > st.saved, true}
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
			err := st.replaceSnapshot(ctx, rt.owner, rt.ns, sn.data, sn.through, sn.saves)
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
				rt.submitInternal(&slot{run: func(rt *nsRuntime, _ *slot) { rt.store.saveFailed = err }, fail: func(error) {}})
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
