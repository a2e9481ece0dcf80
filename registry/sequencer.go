package registry

import (
	"fmt"
	"time"
)

// slot is one unit of sequenced work.
type slot struct {
	admitted time.Time // stage-clock reading at admission (zero without a stage clock)
	sess     *Session  // the submitting session, nil for lease and registry work
	run      func(rt *nsRuntime, s *slot)
	fail     func(err error) // settles the slot with err when run cannot (closed, panic)
	// op, when set, is the slot's work instead of run and fail: an operation that holds
	// its slot (asyncOp), so that the slot and its work are one allocation.
	op slotOp
}

// slotOp is the work of a slot that is part of its operation (slot.op).
type slotOp interface {
	runSlot(rt *nsRuntime, s *slot)
	failSlot(err error)
}

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
	if st := rt.store; st != nil && st.noter != nil {
		st.notesLater = true
	}
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
			rt.giveNote() // the store's committer may be waiting for it
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
			if s.op != nil {
				s.op.failSlot(err)
			} else {
				s.fail(err)
			}
		}
	}()
	rt.act.slotAdmitted = s.admitted
	if s.op != nil {
		s.op.runSlot(rt, s)
		return
	}
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
