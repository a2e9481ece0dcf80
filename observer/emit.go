package observer

import (
	"time"

	"github.com/nomicore/nomicore/clock"
)

// Observer receives events. Delivery is synchronous, on the goroutine of the
// layer that emitted; an observer used by a hub or peer is called from many
// connection goroutines at once and must be safe for concurrent use. A panicking
// observer is recovered and ignored: observation never changes protocol state.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Multi fans each event out to every non-nil observer in order, each isolated
// from the others' panics. It returns nil when there is none, so an Emitter built
// on it stays disabled.
func Multi(observers ...Observer) Observer {
	var m multi
	for _, o := range observers {
		switch o := o.(type) {
		case nil:
		case multi:
			m = append(m, o...)
		default:
			if !isNilFunc(o) {
				m = append(m, o)
			}
		}
	}
	switch len(m) {
	case 0:
		return nil
	case 1:
		return m[0]
	}
	return m
}

type multi []Observer

func (m multi) Observe(e Event) {
	for _, o := range m {
		deliver(o, e)
	}
}

func isNilFunc(o Observer) bool {
	f, ok := o.(ObserverFunc)
	return ok && f == nil
}

// deliver calls o.Observe(e) and swallows any panic, silently: a broken observer
// must not break the layer that reports to it.
func deliver(o Observer, e Event) {
	defer func() { _ = recover() }()
	o.Observe(e)
}

// Emitter is how a replication layer reports events, by the delivery rules of
// docs/protocol.md#delivery-and-clocks. It is immutable and safe for concurrent
// use; a nil *Emitter is valid and disabled. With no observer there are no
// events, no state read for an event and no clock read, provided the layer
// guards construction:
//
//	if em.Enabled() {
//		em.Emit(observer.UpdateApplied{NamespaceID: ns, Bytes: n, Sequence: seq,
//			ApplyLatencyMs: em.SinceMs(t0)})
//	}
//
// where t0 := em.Now() was taken when the apply was admitted.
type Emitter struct {
	side  Side
	obs   Observer
	clock clock.Reader
}

// NewEmitter returns an emitter that stamps side on every event and delivers to
// obs (nil: disabled), measuring latencies with clock (nil: latency fields
// absent). It panics if side is neither SideHub nor SidePeer — a wiring bug.
func NewEmitter(side Side, obs Observer, clock clock.Reader) *Emitter {
	if !side.Valid() {
		panic("observer: NewEmitter: side must be hub or peer, got " + string(side))
	}
	if obs != nil && isNilFunc(obs) {
		obs = nil
	}
	return &Emitter{side: side, obs: obs, clock: clock}
}

// Side is the side this emitter stamps.
func (em *Emitter) Side() Side {
	if em == nil {
		return ""
	}
	return em.side
}

// Enabled reports whether an observer is attached. Guard event construction and
// any state read done only for an event with it.
func (em *Emitter) Enabled() bool { return em != nil && em.obs != nil }

// Emit delivers p, stamped with the emitter's side, synchronously to the
// observer; a panic in the observer is recovered and ignored. Emit does nothing
// when the emitter is disabled. Call it after the decision the event reports has
// taken effect.
func (em *Emitter) Emit(p Payload) {
	if !em.Enabled() || p == nil {
		return
	}
	deliver(em.obs, Event{Side: em.side, Payload: p})
}

// Now reads the clock for a later latency field. It is absent — and the clock is
// not called — when the emitter is disabled or has no clock, and absent when the
// clock panics (a failing clock is a missing clock).
func (em *Emitter) Now() Opt[time.Time] {
	if !em.Enabled() {
		return None[time.Time]()
	}
	return SafeNow(em.clock)
}

// SinceMs is the latency in milliseconds from start to a fresh clock reading,
// absent when start is absent or the reading is (see Now and ElapsedMs).
func (em *Emitter) SinceMs(start Opt[time.Time]) Opt[float64] {
	s, ok := start.Get()
	if !ok {
		return None[float64]()
	}
	end, ok := em.Now().Get()
	if !ok {
		return None[float64]()
	}
	return ElapsedMs(s, end)
}

// SafeNow reads c, folding a nil clock or a panic into absent. The registry uses
// it for its stage clock.
func SafeNow(c clock.Reader) (t Opt[time.Time]) {
	if c == nil {
		return None[time.Time]()
	}
	defer func() {
		if recover() != nil {
			t = None[time.Time]()
		}
	}()
	return Some(c.Now())
}

// ElapsedMs is end − start in milliseconds. A negative difference means the clock
// broke its monotonic contract; it is folded to absent like a throwing clock, so
// a present latency is always ≥ 0 (docs/protocol.md#delivery-and-clocks).
func ElapsedMs(start, end time.Time) Opt[float64] {
	d := end.Sub(start)
	if d < 0 {
		return None[float64]()
	}
	return Some(float64(d) / float64(time.Millisecond))
}

// NewStages builds the four-stage group (Stages) from the five stage-clock
// readings of one sequencer slot: admission, slot start, apply start, dirty start
// and dirty done. It is present only when all five readings are present and in
// order — all four durations or none.
func NewStages(admission, slotStart, applyStart, dirtyStart, dirtyDone Opt[time.Time]) Opt[Stages] {
	var ts [5]time.Time
	for i, o := range []Opt[time.Time]{admission, slotStart, applyStart, dirtyStart, dirtyDone} {
		t, ok := o.Get()
		if !ok {
			return None[Stages]()
		}
		ts[i] = t
	}
	var ms [4]float64
	for i := range ms {
		d, ok := ElapsedMs(ts[i], ts[i+1]).Get()
		if !ok {
			return None[Stages]()
		}
		ms[i] = d
	}
	return Some(Stages{QueueWaitMs: ms[0], ProtectedCheckMs: ms[1], LiveApplyMs: ms[2], DirtyNotifyMs: ms[3]})
}
