package registry

import (
	"time"

	"github.com/nomicore/nomicore/clock"
)

// Stages are the stage durations of one apply slot, from one clock: the four-stage split of
// an apply the observer reports (docs/protocol.md#delivery-and-clocks).
type Stages struct {
	QueueWait      time.Duration // admission → slot start
	ProtectedCheck time.Duration // slot start → live apply start (gates and protected check)
	LiveApply      time.Duration // the live apply (including fan-out)
	DirtyNotify    time.Duration // the dirty notification (Documents.Append)
}

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
