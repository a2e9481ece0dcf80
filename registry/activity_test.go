package registry

import (
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/persistence"
)

// Activity counts every write of a loaded namespace, stamps the last one with the stage
// clock, measures the document's size in its sequencer when asked and it changed, remembers
// all of it across an unload (the counters go on from there at the next load) and forgets it
// when the replica is archived.
func TestActivity(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEnv(t, RoleHub, Config{Clock: clk, StageClock: clk}, persistence.Options{})
	c, l := e.create(t)
	ns := c.NamespaceID

	a, ok := e.reg.Activity(ns, time.Minute)
	if !ok || !a.Loaded || a.Identity != c.Identity {
		t.Fatalf("activity of a loaded namespace = %+v, %v", a, ok)
	}
	createWrites := a.Writes // the identity written at create, if this load saw it
	if a.DocumentMeasuredAt.IsZero() {
		// The first call queued a measurement; the next one, after it ran, sees it.
		waitFor(t, "the first measurement", func() bool {
			a, _ = e.reg.Activity(ns, time.Minute)
			return !a.DocumentMeasuredAt.IsZero()
		})
	}
	state, err := l.EncodeState(ctxT(t), nil)
	must(t, err)
	if a.DocumentBytes != len(state) {
		t.Fatalf("documentBytes %d, the encoded state has %d", a.DocumentBytes, len(state))
	}

	clk.Advance(time.Second)
	w := newClient(11)
	var sent int
	for i, v := range []string{"a", "bb", "ccc"} {
		u := w.set(t, "notes", v, i)
		sent += len(u)
		_, err := l.WriteLocal(ctxT(t), u)
		must(t, err)
	}
	a, _ = e.reg.Activity(ns, time.Minute)
	if a.Writes != createWrites+3 {
		t.Fatalf("writes %d, want %d", a.Writes, createWrites+3)
	}
	if a.WriteBytes < uint64(sent) {
		t.Fatalf("writeBytes %d < the %d bytes written", a.WriteBytes, sent)
	}
	if !a.LastWrite.Equal(clk.Now()) {
		t.Fatalf("lastWrite %v, want %v", a.LastWrite, clk.Now())
	}
	// Changed, but measured less than a minute ago: no new measurement.
	if a.DocumentBytes != len(state) {
		t.Fatalf("documentBytes %d remeasured too early", a.DocumentBytes)
	}
	clk.Advance(time.Minute)
	e.reg.Activity(ns, time.Minute)
	state, err = l.EncodeState(ctxT(t), nil) // a slot after the measurement
	must(t, err)
	a, _ = e.reg.Activity(ns, time.Minute)
	if a.DocumentBytes != len(state) || !a.DocumentMeasuredAt.Equal(clk.Now()) {
		t.Fatalf("remeasured size %d at %v; want %d at %v", a.DocumentBytes, a.DocumentMeasuredAt, len(state), clk.Now())
	}

	// Unloaded: remembered as it was.
	rt := l.rt
	l.Release()
	<-rt.done
	waitFor(t, "the unload", func() bool { b, _ := e.reg.Activity(ns, time.Minute); return !b.Loaded })
	b, ok := e.reg.Activity(ns, time.Minute)
	if !ok || b.Writes != a.Writes || !b.LastWrite.Equal(a.LastWrite) || b.DocumentBytes != a.DocumentBytes || b.Identity != c.Identity {
		t.Fatalf("after unload %+v, %v; before %+v", b, ok, a)
	}

	// Loaded again: the counters go on.
	l2, err := e.reg.Open(ctxT(t), owner, ns)
	must(t, err)
	_, err = l2.WriteLocal(ctxT(t), w.set(t, "notes", "d", 4))
	must(t, err)
	b, _ = e.reg.Activity(ns, time.Minute)
	if !b.Loaded || b.Writes != a.Writes+1 {
		t.Fatalf("after reload and a write: %+v (before %d writes)", b, a.Writes)
	}
	rt = l2.rt
	l2.Release()
	<-rt.done

	// Archived: forgotten.
	waitFor(t, "the unload", func() bool { b, _ := e.reg.Activity(ns, time.Minute); return !b.Loaded })
	_, err = e.reg.Archive(ctxT(t), owner, ns)
	must(t, err)
	if b, ok := e.reg.Activity(ns, time.Minute); ok {
		t.Fatalf("archived namespace still has activity %+v", b)
	}
	if _, ok := e.reg.Activity("ns-00000000000000000000000000000000", time.Minute); ok {
		t.Fatal("activity for a namespace never seen")
	}
}

// Without a stage clock the sequencer reads no clock: writes are counted, their time is not.
func TestActivityWithoutStageClock(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	c, l := e.create(t)
	before, _ := e.reg.Activity(c.NamespaceID, time.Hour)
	_, err := l.WriteLocal(ctxT(t), newClient(3).set(t, "m", "k", "v"))
	must(t, err)
	a, _ := e.reg.Activity(c.NamespaceID, time.Hour)
	if a.Writes != before.Writes+1 || !a.LastWrite.IsZero() {
		t.Fatalf("activity %+v", a)
	}
}

// The remembered activity is bounded.
func TestPastActivityBounded(t *testing.T) {
	var p pastActivity
	for i := range MaxRememberedActivity + 10 {
		p.keep(Activity{NamespaceID: string(rune('a'+i%26)) + time.Duration(i).String(), Writes: uint64(i)})
	}
	if len(p.byID) != MaxRememberedActivity || len(p.order) != MaxRememberedActivity {
		t.Fatalf("kept %d (order %d), bound %d", len(p.byID), len(p.order), MaxRememberedActivity)
	}
	if _, ok := p.get("a0s"); ok {
		t.Fatal("the oldest was not forgotten")
	}
}
