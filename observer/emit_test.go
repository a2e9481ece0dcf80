package observer_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	o "github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
)

// fakeClock is a manual clock that counts its reads.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	reads atomic.Int64
	panic bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.reads.Add(1)
	if c.panic {
		panic("clock unavailable")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var applied = o.UpdateApplied{NamespaceID: ns, Bytes: 3, Sequence: 1}

func TestS23_4_NoObserverMeansNoEventsAndNoClockReads(t *testing.T) {
	clock := newFakeClock()
	for name, em := range map[string]*o.Emitter{
		"nil emitter":       nil,
		"nil observer":      o.NewEmitter(o.SideHub, nil, clock),
		"empty Multi":       o.NewEmitter(o.SideHub, o.Multi(nil, nil), clock),
		"nil ObserverFunc":  o.NewEmitter(o.SideHub, o.ObserverFunc(nil), clock),
		"Multi of nil func": o.NewEmitter(o.SideHub, o.Multi(o.ObserverFunc(nil)), clock),
	} {
		if em.Enabled() {
			t.Errorf("%s: Enabled() = true", name)
		}
		t0 := em.Now()
		if t0.Present() || em.SinceMs(o.Some(time.Unix(0, 0))).Present() {
			t.Errorf("%s: clock readings must be absent", name)
		}
		em.Emit(applied) // must not panic
	}
	if n := clock.reads.Load(); n != 0 {
		t.Errorf("the clock was read %d times without an observer", n)
	}
}

func TestS23_4_EmitStampsSideAndDeliversSynchronously(t *testing.T) {
	var rec observertest.Recorder
	em := o.NewEmitter(o.SidePeer, &rec, nil)
	if !em.Enabled() || em.Side() != o.SidePeer {
		t.Fatal("an emitter with an observer must be enabled")
	}
	em.Emit(applied)
	em.Emit(nil) // ignored
	got := rec.Events()
	if len(got) != 1 || got[0].Side != o.SidePeer || got[0].Payload != o.Payload(applied) {
		t.Fatalf("recorded %+v", got)
	}
	if (*o.Emitter)(nil).Side() != "" {
		t.Error("a nil emitter has no side")
	}
}

func TestS23_4_PanickingObserverIsIsolated(t *testing.T) {
	calls := 0
	em := o.NewEmitter(o.SideHub, o.ObserverFunc(func(o.Event) { calls++; panic("observer bug") }), nil)
	for range 3 {
		em.Emit(applied) // returns normally every time
	}
	if calls != 3 {
		t.Errorf("observer called %d times, want 3", calls)
	}
	// An error value and a nil panic are swallowed the same way.
	o.NewEmitter(o.SideHub, o.ObserverFunc(func(o.Event) { panic(error(nil)) }), nil).Emit(applied)
	var typedNil *observertest.Recorder
	o.NewEmitter(o.SideHub, typedNil, nil).Emit(applied)
}

func TestS23_4_MultiFansOutInOrderAndIsolates(t *testing.T) {
	var order []string
	obs := func(name string, boom bool) o.Observer {
		return o.ObserverFunc(func(e o.Event) {
			order = append(order, name+":"+string(e.Type()))
			if boom {
				panic(name)
			}
		})
	}
	inner := o.Multi(obs("b", true), obs("c", false))
	m := o.Multi(obs("a", true), nil, inner, obs("d", false))
	o.NewEmitter(o.SideHub, m, nil).Emit(applied)
	want := []string{"a:update-applied", "b:update-applied", "c:update-applied", "d:update-applied"}
	if len(order) != len(want) {
		t.Fatalf("delivered %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("delivered %v, want %v", order, want)
		}
	}
	var rec observertest.Recorder
	if o.Multi(nil, &rec) != o.Observer(&rec) {
		t.Error("Multi of a single observer should return it")
	}
}

func TestS23_4_ClockFolding(t *testing.T) {
	var rec observertest.Recorder
	clock := newFakeClock()
	em := o.NewEmitter(o.SidePeer, &rec, clock)

	t0 := em.Now()
	clock.Advance(1500 * time.Microsecond)
	if got, ok := em.SinceMs(t0).Get(); !ok || got != 1.5 {
		t.Errorf("SinceMs = %v %v, want 1.5", got, ok)
	}
	if em.SinceMs(o.None[time.Time]()).Present() {
		t.Error("latency from an absent start must be absent")
	}
	// A clock that goes backwards broke its contract: absent, never negative.
	later := o.Some(clock.Now().Add(time.Second))
	if em.SinceMs(later).Present() {
		t.Error("a negative latency must be folded to absent")
	}
	// A panicking clock is a missing clock (docs/protocol.md#delivery-and-clocks clock-throw
	// folding).
	clock.panic = true
	if em.Now().Present() || em.SinceMs(t0).Present() || o.SafeNow(clock).Present() {
		t.Error("a panicking clock must yield absent readings")
	}
	// No clock at all: the same.
	noClock := o.NewEmitter(o.SidePeer, &rec, nil)
	if noClock.Now().Present() || o.SafeNow(nil).Present() {
		t.Error("no clock must yield absent readings")
	}
	// Events still go out; only the latency keys are missing.
	noClock.Emit(o.UpdateApplied{NamespaceID: ns, Bytes: 1, Sequence: 1, ApplyLatencyMs: noClock.SinceMs(noClock.Now())})
	last := rec.Events()[len(rec.Events())-1]
	for _, k := range last.Keys() {
		if k == "applyLatencyMs" {
			t.Error("applyLatencyMs rendered without a clock")
		}
	}
}

func TestS23_4_NewStages(t *testing.T) {
	base := time.Unix(50, 0)
	at := func(ms int) o.Opt[time.Time] { return o.Some(base.Add(time.Duration(ms) * time.Millisecond)) }
	got, ok := o.NewStages(at(0), at(2), at(5), at(9), at(10)).Get()
	if !ok || got != (o.Stages{QueueWaitMs: 2, ProtectedCheckMs: 3, LiveApplyMs: 4, DirtyNotifyMs: 1}) {
		t.Errorf("NewStages = %+v %v", got, ok)
	}
	if o.NewStages(at(0), at(2), o.None[time.Time](), at(9), at(10)).Present() {
		t.Error("one missing reading must drop the whole group")
	}
	if o.NewStages(at(0), at(2), at(1), at(9), at(10)).Present() {
		t.Error("out-of-order readings must drop the whole group")
	}
}

func TestNewEmitterRejectsUnknownSide(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewEmitter with side \"edge\" must panic")
		}
	}()
	o.NewEmitter("edge", nil, nil)
}

// TestS23_4_ConcurrentEmit drives one observer chain from many goroutines, as the
// connection goroutines of a hub do; run with -race.
func TestS23_4_ConcurrentEmit(t *testing.T) {
	var rec observertest.Recorder
	var count atomic.Int64
	em := o.NewEmitter(o.SideHub, o.Multi(&rec, o.ObserverFunc(func(o.Event) { count.Add(1) })), newFakeClock())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				t0 := em.Now()
				em.Emit(o.UpdateApplied{NamespaceID: ns, Bytes: g, Sequence: uint32(i + 1), ApplyLatencyMs: em.SinceMs(t0)})
			}
		})
	}
	wg.Wait()
	if got := len(rec.Events()); got != 1600 || count.Load() != 1600 {
		t.Errorf("recorded %d and counted %d events, want 1600", got, count.Load())
	}
}

func BenchmarkEmitDisabled(b *testing.B) {
	em := o.NewEmitter(o.SideHub, nil, newFakeClock())
	b.ReportAllocs()
	for b.Loop() {
		if em.Enabled() {
			em.Emit(o.UpdateApplied{NamespaceID: ns, Bytes: 1, Sequence: 1, ApplyLatencyMs: em.SinceMs(em.Now())})
		}
	}
}

func BenchmarkEmitEnabled(b *testing.B) {
	em := o.NewEmitter(o.SideHub, o.ObserverFunc(func(o.Event) {}), newFakeClock())
	b.ReportAllocs()
	for b.Loop() {
		if em.Enabled() {
			em.Emit(o.UpdateApplied{NamespaceID: ns, Bytes: 1, Sequence: 1, ApplyLatencyMs: em.SinceMs(em.Now())})
		}
	}
}
