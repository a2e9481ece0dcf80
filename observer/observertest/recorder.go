// Package observertest helps tests assert what the replication layers emit. A
// Recorder is an observer.Observer that keeps every event (safe for concurrent
// use); AssertValid and AssertSafe check the recorded events against the
// vocabulary and the safe-field rules of docs/protocol.md#safe-fields (events
// carry no bytes, tokens, owners or free text); Problems and Scan do the same
// for one event; Samples gives a hand-built valid event of every type, as inputs
// for tests of renderings and adapters.
//
//	rec := &observertest.Recorder{}
//	em := observer.NewEmitter(observer.SideHub, rec, clock)
//	… run the layer under test with em …
//	rec.AssertValid(t)
//	rec.AssertSafe(t, token, owner)
package observertest

import (
	"slices"
	"sync"
	"testing"

	"github.com/nomicore/nomicore/observer"
)

// Recorder is an observer.Observer that keeps every event it receives. It is safe
// for concurrent use.
type Recorder struct {
	mu     sync.Mutex // guards events
	events []observer.Event
}

// Observe records e.
func (r *Recorder) Observe(e observer.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of the recorded events in arrival order.
func (r *Recorder) Events() []observer.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// OfType returns the recorded events of type t in arrival order.
func (r *Recorder) OfType(t observer.Type) []observer.Event {
	var out []observer.Event
	for _, e := range r.Events() {
		if e.Type() == t {
			out = append(out, e)
		}
	}
	return out
}

// Count returns how many events of type t were recorded.
func (r *Recorder) Count(t observer.Type) int { return len(r.OfType(t)) }

// Reset forgets every recorded event.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.events = nil
	r.mu.Unlock()
}

// AssertValid fails t for every recorded event whose Validate fails (closed
// vocabularies, side column, grammars, group rules).
func (r *Recorder) AssertValid(t testing.TB) {
	t.Helper()
	for i, e := range r.Events() {
		if err := e.Validate(); err != nil {
			t.Errorf("event %d (%s): %v", i, e.Type(), err)
		}
	}
}

// AssertSafe fails t for every safe-field violation in any recorded event: byte
// payloads, error values or other non-data values anywhere in the event struct,
// any sentinel (a token, owner, schema text, error text the test injected) as a
// substring of any string in the struct or its JSON, a string key without a safe
// grammar, or a value that fails Validate. See Problems.
func (r *Recorder) AssertSafe(t testing.TB, sentinels ...string) {
	t.Helper()
	for i, e := range r.Events() {
		for _, p := range Problems(e, sentinels...) {
			t.Errorf("event %d (%s): %s", i, e.Type(), p)
		}
	}
}
