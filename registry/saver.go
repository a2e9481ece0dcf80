package registry

import (
	"context"
	"errors"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

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
