package ws

import "testing"

func closedNow(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A counter's zero channel is closed at zero, open while something is counted, closed when
// the count comes back to zero — also for a waiter that took it before — and open again
// when the count goes up again.
func TestCounterZeroFollowsTheCount(t *testing.T) {
	var w counter
	if !closedNow(w.zero()) {
		t.Fatal("zero open at zero")
	}
	end := w.begin()
	w.add()
	waiter := w.zero()
	if closedNow(waiter) || closedNow(w.zero()) {
		t.Fatal("zero closed while two are counted")
	}
	end()
	end() // idempotent
	if closedNow(waiter) {
		t.Fatal("zero closed while one is counted")
	}
	w.done()
	if !closedNow(waiter) || !closedNow(w.zero()) {
		t.Fatal("zero open at zero")
	}
	w.add()
	if closedNow(w.zero()) {
		t.Fatal("zero closed after the count went up again")
	}
	w.done()
	if !closedNow(w.zero()) {
		t.Fatal("zero open at zero")
	}
}
